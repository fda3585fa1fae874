"""What every token mixer provides, and how one layer is described.

A layer is a `LayerSpec`: its mixers (none, one, or two side by side whose outputs add, as Falcon-H1's attention
and Mamba-2), its FFN kind (dense, moe or none), its attention window and its RoPE table. A mixer kind is a
`Mixer` subclass living in its own module beside its nn.Module (engine/layers/gdn.py, ...); engine/layers/mixers.py
registers it. The methods are the kind's closed forms, each held against its module in its tests; budgets add them
up layer by layer and never look inside a kind.

A recurrent mixer keeps a fixed state per sequence instead of a KV cache. How many bytes that is depends on who
holds it; `CONVENTIONS` names the engines' choices (the positions of the short convolution's window and the
dtypes), each with the source line it follows, and `Mixer.state_elements` gives the shapes they share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from torch import nn

from engine.layers.span import Span

if TYPE_CHECKING:
    from engine.config import ModelConfig

FFN_KINDS = ("dense", "moe", "none")


@dataclass(frozen=True)
class LayerSpec:
    mixers: tuple[str, ...]        # registered mixer kinds (engine/layers/mixers.py MIXERS); () for none
    ffn: str                       # "dense", "moe" or "none"
    window: Span = None            # attention: its span (engine/layers/span.py), None for full
    rope: str | None = None        # attention: "global", "local" or None (no rotary table)
    temperature: bool = False      # attention: queries scaled by the long-context temperature (Llama 4)
    layer: int | None = None       # the layer's index, for a kind whose module depends on it (Mixer.per_layer)
    index: str | None = None       # sparse attention (DSA): "full" runs its own lightning indexer, "shared"
                                   # reuses the previous indexer layer's choice; None: dense attention

    @property
    def attention(self) -> bool:
        return "attention" in self.mixers


class Mixer:
    """One token-mixer kind. `words` are the layer_types entries that select it; `attr` names its module in a
    Block (its state-dict prefix); `components` the parameter components it reports (engine.budget.params)."""
    name = ""
    label = ""
    words: tuple[str, ...] = ()
    attr = ""
    components: tuple[str, ...] = ()
    recurrent = False              # a fixed state per sequence instead of a KV cache
    per_layer = False              # its module depends on the layer's depth (lightning's decay): LayerSpec.layer
    transformers_state_dtype: str | None = None   # the dtype transformers' cache keeps the state in (None: the model's)

    def summary(self, cfg: ModelConfig) -> list[str]:
        """Lines describing this kind's layer in cfg, for diagrams and tables (its name, its sizes)."""
        return [self.label]

    def build(self, cfg: ModelConfig, spec: LayerSpec) -> nn.Module:
        """The module: forward(x [B, T, d], pos, rope, cache: LayerKV | None) -> [B, T, d]."""
        raise NotImplementedError

    def params(self, cfg: ModelConfig, spec: LayerSpec) -> dict[str, int]:
        raise NotImplementedError

    def matmul_params(self, cfg: ModelConfig, spec: LayerSpec) -> int:
        """Weights multiplied once per token (2 FLOPs each per token, forward)."""
        raise NotImplementedError

    def forward_flops(self, cfg: ModelConfig, spec: LayerSpec, batch: int, seq: int, causal: bool) -> int:
        """Products beyond the weights in one training/prefill forward (attention scores, a recurrence)."""
        raise NotImplementedError

    def backward_flops(self, cfg: ModelConfig, spec: LayerSpec, batch: int, seq: int, causal: bool) -> int:
        """Backward of those products (each kind states its own: 2x for a gradient of each operand, more where
        the forward is recomputed)."""
        raise NotImplementedError

    def no_grad_flops(self, cfg: ModelConfig, spec: LayerSpec, batch: int, seq: int, causal: bool) -> int:
        """The part of forward_flops that runs without gradients (DSA's lightning indexer): no backward."""
        return 0

    def decode_flops(self, cfg: ModelConfig, spec: LayerSpec, batch: int, context: int) -> int:
        """Products beyond the weights of one decode step after `context` tokens."""
        raise NotImplementedError

    def kv_bytes(self, cfg: ModelConfig, spec: LayerSpec, batch: int, tokens: int, e: int) -> int:
        """Per-token cache after `tokens` positions (0 for a recurrent kind)."""
        return 0

    def index_key_bytes(self, cfg: ModelConfig, spec: LayerSpec, batch: int, tokens: int, e: int,
                        key_format: str) -> int:
        """Bytes of keys cached beside the KV in a format of their own after `tokens` positions (DSA's lightning
        indexer keys: FP8 with scales, or the cache dtype e); 0 for a kind without them."""
        return 0

    def state_elements(self, cfg: ModelConfig, conv_positions: Callable[[int], int]) -> dict[str, int]:
        """Per sequence, elements of the state: 'conv' (the window, positions from the kernel K by the
        convention) and 'recurrent'. Empty for a kind without state."""
        return {}

    def state_dtype(self, cfg: ModelConfig) -> str | None:
        """The dtype vLLM's cache (and this engine's) keeps the recurrent state in: the config's state_dtype
        unless the kind fixes one (None: the model's)."""
        return cfg.state_dtype

    def saved_bytes(self, cfg: ModelConfig, spec: LayerSpec, B: int, T: int, e: int, impl: str,
                    add: Callable[[str, int], None]) -> None:
        """Bytes autograd keeps for backward, by term, excluding the module's input (the block counts it)."""
        raise NotImplementedError


@dataclass(frozen=True)
class StateConvention:
    """How an engine holds a recurrent mixer's state: the conv window's positions from the kernel K, and the
    dtypes ('model' is the model's, 'state' the config's state_dtype, 'family' what the kind says for
    transformers)."""
    name: str
    conv_positions: Callable[[int], int]
    conv_dtype: str
    recurrent_dtype: str
    source: str


CONVENTIONS: dict[str, StateConvention] = {c.name: c for c in (
    StateConvention(
        "transformers", lambda K: K, "model", "family",
        "transformers cache_utils.py LinearAttentionLayer.update_conv_state keeps the last conv_kernel_size (K) "
        "inputs in the model's dtype; the recurrent state is the tensor the layer returns (Gated DeltaNet's "
        "torch_chunk_gated_delta_rule computes and returns it in fp32)"),
    StateConvention(
        "vllm", lambda K: K - 1, "model", "state",
        "vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator: conv state "
        "(conv_kernel_size - 1, conv_dim) in mamba_cache_dtype (auto: the model's); temporal state in "
        "mamba_ssm_cache_dtype (auto: the conv dtype; Qwen3.5 sets it from the config's mamba_ssm_dtype); "
        "MambaStateDtypeCalculator.kda_state_dtype keeps KDA's recurrent state in fp32 always"),
    StateConvention(
        "llama.cpp", lambda K: K - 1, "fp32", "fp32",
        "llama.cpp src/llama-hparams.cpp n_embd_r() = (ssm_d_conv - 1) * conv channels, n_embd_s() = the "
        "recurrent state; src/llama-model.cpp create_memory: recurrent_type_r = recurrent_type_s = "
        "GGML_TYPE_F32"),
)}
OURS = "vllm"   # this engine's decode cache keeps K-1 inputs and the state in state_dtype, as vLLM does
