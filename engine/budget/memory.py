"""Memory budget of one training step and of inference: every term with the formula that produced it.

P = unique parameters (count_params), B = batch, T = sequence, e = bytes per element of `dtype`.
Training state (bytes per parameter, by precision policy; optimizer states: AdamW 2, SGD-momentum 1, SGD 0):
  policy       weights  grads  master  each optimizer state
  fp32            4       4      0       4
  bf16            2       2      0       2
  mixed-bf16      2       2      4       4      (AdamW: 2 + 2 + 4 + 8 = 16 bytes/param)
  mixed-fp16      2       2      4       4
Activations (what autograd saves for forward + cross-entropy) and the KV cache use `dtype`; see
engine/budget/activations.py for the per-op derivation. KV cache = 2 * sum over layers of min(T, window_l) * B *
kv_heads * head_dim * e over the attention layers only (each layer's term: engine/layers/attention.py kv_bytes);
MLA holds its latent and rotary key instead (engine/layers/mla.py), and with sparse attention each indexer layer
its indexer key per token too (engine/layers/indexer.py: FP8 with its scales, 132 B a token at width 128, or in
the cache dtype; index_key_layers).
A recurrent layer (engine/layers/mixers.py) holds a fixed state per sequence instead: its convolution window and
its recurrent state, whose bytes depend on the engine holding them (engine/layers/kinds.py CONVENTIONS:
transformers, vLLM, llama.cpp, each with the source line it follows); this engine's own cache is vLLM's.
Inference total = P * e + KV cache at B, T + state (vLLM's convention).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from engine.budget.activations import RECOMPUTE, activation_estimate
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.layers.attention import ATTENTION_IMPLS
from engine.layers.indexer import INDEX_KEY_FORMATS
from engine.layers.kinds import CONVENTIONS, OURS, LayerSpec
from engine.layers.mixers import layer_groups, spec_mixers
from engine.layers.span import cache_keep
from engine.layers.mla import mla_kv_bytes
from engine.runtime import DTYPE_BYTES
from engine.validation import choice_problem, int_problem, require, size_problems

POLICIES = ("fp32", "bf16", "mixed-bf16", "mixed-fp16")
OPTIMIZERS = ("adamw", "sgd-momentum", "sgd")
KV_KINDS = ("latent", "expanded")   # MLA's cache as held, or the per-head keys and values it stands for

# policy -> the dtype its activations and KV cache are held in (the low-precision compute dtype)
POLICY_DTYPE = {"fp32": "fp32", "bf16": "bf16", "mixed-bf16": "bf16", "mixed-fp16": "fp16"}
# policy -> (weight bytes, grad bytes, master-copy bytes, bytes per optimizer state) per parameter
_POLICY_BYTES = {"fp32": (4, 4, 0, 4), "bf16": (2, 2, 0, 2), "mixed-bf16": (2, 2, 4, 4), "mixed-fp16": (2, 2, 4, 4)}
_OPTIMIZER_STATES = {"adamw": 2, "sgd-momentum": 1, "sgd": 0}
_STATE_NAMES = {"adamw": "first and second moments", "sgd-momentum": "momentum buffer", "sgd": "no state"}


@dataclass(frozen=True)
class MemoryBudget:
    weights_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    master_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    train_total_bytes: int
    infer_total_bytes: int
    activations_per_layer: list[int]     # saved bytes of each block (recompute applied)
    logits_bytes: int                    # final norm, head input, (soft-capped) log-probs, targets
    embedding_bytes: int                 # token ids, embedding norm/dropout, rotary tables
    formulas: dict[str, str] = field(default_factory=dict)
    kv_cache_expanded_bytes: int | None = None   # MLA: the per-head K/V a plain cache would hold instead
    state_bytes: int = 0                 # recurrent layers' fixed state at batch B (this engine's: vLLM's convention)
    states: dict[str, dict] = field(default_factory=dict)   # convention -> conv, recurrent, total bytes, source
    kv_cache_index_bytes: int | None = None      # sparse attention: the indexer keys' part of kv_cache_bytes

    def as_dict(self) -> dict:
        return asdict(self)


def output_logits_bytes(cfg: ModelConfig, batch: int, seq: int, dtype: str) -> int:
    """The [B, T, V] logits a forward pass returns, in `dtype` (inference keeps them; no autograd)."""
    return batch * seq * cfg.vocab_size * DTYPE_BYTES[dtype]


def pure_policy(dtype: str) -> str:
    """The policy of a plain `model.to(dtype)` run: weights, grads and optimizer state all in `dtype`, no fp32
    master copy (fp16 has the same byte counts as bf16)."""
    return "fp32" if dtype == "fp32" else "bf16"


def kv_cache_layers(cfg: ModelConfig, batch: int, tokens: int) -> list[tuple[int, int]]:
    """What each layer caches for `batch` sequences after `tokens` positions, one entry per layer: (values held,
    values per cached vector). The one path every KV figure takes (this module's bytes, the planner's per-GPU and
    quantized caches, the serving answers of engine/plan/serve.py): each layer's mixers say what they hold (a
    window layer only the last `window` tokens, a chunked layer its chunk, an MLA layer the latent and the shared
    rotary key, a recurrent mixer nothing: its state is state_bytes). Keys held in a format of their own (DSA's
    indexer keys) are beside it, in index_key_layers, and every KV figure adds them."""
    width = cfg.kv_lora_rank + cfg.qk_rope_head_dim if cfg.mla else cfg.head_width
    return [(sum(m.kv_bytes(cfg, spec, batch, tokens, 1) for m in spec_mixers(spec)), width)
            for spec in cfg.layer_specs]


def index_key_layers(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16",
                     index_keys: str = "fp8") -> list[int]:
    """Bytes of each layer's sparse-attention indexer keys after `tokens` positions (every token: the indexer
    scores the whole context), one entry per layer: "fp8" as DeepSeek's kernels hold them (132 B a token at
    width 128, whatever the cache dtype), "dtype" in the cache's dtype (as transformers holds them); 0 for a
    layer without its own indexer."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("index_keys", index_keys, INDEX_KEY_FORMATS),
            int_problem("batch", batch), int_problem("tokens", tokens, lo=0))   # a cache's fixed part: 0 tokens
    return [sum(m.index_key_bytes(cfg, spec, batch, tokens, DTYPE_BYTES[dtype], index_keys)
                for m in spec_mixers(spec)) for spec in cfg.layer_specs]


def kv_cache_bytes(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16", kind: str = "latent",
                   index_keys: str = "fp8") -> int:
    """Keys and values of every layer after `tokens` positions; window layers hold only the last `window`.
    MLA holds the latent and the shared rotary key (kind "latent") or, for comparison, the expanded per-head
    keys and values (kind "expanded"); with sparse attention, plus index_key_cache_bytes."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("kind", kind, KV_KINDS),
            choice_problem("index_keys", index_keys, INDEX_KEY_FORMATS), int_problem("batch", batch),
            int_problem("tokens", tokens))
    index = index_key_cache_bytes(cfg, batch, tokens, dtype, index_keys)
    if cfg.mla and kind == "expanded":
        layers = sum(n for spec, n in layer_groups(cfg) if spec.attention)
        return layers * mla_kv_bytes(cfg, batch, tokens, DTYPE_BYTES[dtype], kind) + index
    return sum(values for values, _ in kv_cache_layers(cfg, batch, tokens)) * DTYPE_BYTES[dtype] + index


def attention_windows(cfg: ModelConfig) -> list[int | None]:
    """The window (None: full) of every layer that has softmax attention, in order."""
    return [spec.window for spec in cfg.layer_specs if spec.attention]


def index_key_cache_bytes(cfg: ModelConfig, batch: int, tokens: int, dtype: str = "bf16",
                          index_keys: str = "fp8") -> int:
    """Sparse attention's indexer keys, every token of every layer running an indexer: "fp8" as DeepSeek's
    kernels hold them (132 B a token at width 128), "dtype" in the cache's dtype (as transformers holds them);
    0 without sparse attention."""
    return sum(index_key_layers(cfg, batch, tokens, dtype, index_keys))


def _index_formula(cfg: ModelConfig, batch: int, tokens: int) -> str:
    own = sum(n for spec, n in layer_groups(cfg) if spec.index == "full")
    return (f"{own} indexer layers * T={tokens} * B={batch} * (index_head_dim="
            f"{cfg.index_head_dim} FP8 bytes + 4 B fp32 scale per 128 of them) (the lightning indexer's key per "
            f"token, as DeepSeek's kernels cache it)")


def _kv_formula(cfg: ModelConfig, batch: int, tokens: int, e: int) -> str:
    windows = attention_windows(cfg)
    of = "" if len(windows) == cfg.n_layers else f" (the {len(windows)} attention layers of {cfg.n_layers})"
    if cfg.mla:
        index = f" + {_index_formula(cfg, batch, tokens)}" if cfg.sparse_attention else ""
        return (f"L={len(windows)}{of} * T={tokens} * B={batch} * (kv_lora_rank={cfg.kv_lora_rank} + "
                f"qk_rope_head_dim={cfg.qk_rope_head_dim}) * {e} B (MLA caches the latent and one shared "
                f"rotary key per token){index}")
    keeps = Counter(cache_keep(w) for w in windows)   # attention layers by the most keys they keep
    held = " + ".join(f"{n}*{tokens}" if keep is None else f"{n}*min({tokens}, {keep})"
                      for keep, n in sorted(keeps.items(), key=lambda kv: kv[0] or 0))
    return (f"2 (K and V) * ({held}) layer-tokens{of} * B={batch} * kv_heads={cfg.kv_heads} * "
            f"head_dim={cfg.head_width} * {e} B")


def state_bytes(cfg: ModelConfig, batch: int, dtype: str = "bf16", convention: str = OURS) -> dict[str, int]:
    """Bytes of the recurrent layers' fixed state for `batch` sequences, as `convention` holds it: 'conv' (the
    short convolution's window) and 'recurrent' (e.g. Gated DeltaNet's S per value head); 0 and 0 without
    recurrent layers. Independent of the context length."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("convention", convention, CONVENTIONS),
            int_problem("batch", batch))
    out = {"conv": 0, "recurrent": 0}
    for spec, n in layer_groups(cfg):
        for part, count in layer_state_bytes(cfg, spec, batch, dtype, convention).items():
            out[part] += n * count
    return out


def layer_state_bytes(cfg: ModelConfig, spec: LayerSpec, batch: int, dtype: str,
                      convention: str = OURS) -> dict[str, int]:
    """One layer's state ('conv', 'recurrent' bytes) for `batch` sequences as `convention` holds it."""
    c = CONVENTIONS[convention]
    out = {"conv": 0, "recurrent": 0}
    dtypes = {"conv": c.conv_dtype, "recurrent": c.recurrent_dtype}
    for m in spec_mixers(spec):
        for part, count in m.state_elements(cfg, c.conv_positions).items():
            want = dtypes[part]
            resolved = {"model": dtype, "state": m.state_dtype(cfg) or dtype,
                        "family": m.transformers_state_dtype or dtype}.get(want, want)
            out[part] += batch * count * DTYPE_BYTES[resolved]
    return out


def state_conventions(cfg: ModelConfig, batch: int, dtype: str = "bf16") -> dict[str, dict]:
    """state_bytes under every named convention, with its total and the source line it follows."""
    out = {}
    for name, c in CONVENTIONS.items():
        parts = state_bytes(cfg, batch, dtype, name)
        out[name] = {**parts, "total": parts["conv"] + parts["recurrent"], "source": c.source}
    return out


def memory_budget(cfg: ModelConfig, batch: int, seq: int, dtype: str = "bf16", policy: str = "mixed-bf16",
                  optimizer: str = "adamw", recompute: str = "none", attention: str = "sdpa") -> MemoryBudget:
    """All memory terms for training at (batch, seq) and for inference holding a KV cache of seq tokens (and the
    recurrent layers' state)."""
    require(choice_problem("dtype", dtype, DTYPE_BYTES), choice_problem("policy", policy, POLICIES),
            choice_problem("optimizer", optimizer, OPTIMIZERS), choice_problem("recompute", recompute, RECOMPUTE),
            choice_problem("attention", attention, ATTENTION_IMPLS), *size_problems(batch, seq))
    P = count_params(cfg).total
    e = DTYPE_BYTES[dtype]
    wb, gb, mb, sb = _POLICY_BYTES[policy]
    states = _OPTIMIZER_STATES[optimizer]
    act = activation_estimate(cfg, batch, seq, dtype, attention, recompute)
    kv = kv_cache_bytes(cfg, batch, seq, dtype)
    conventions = state_conventions(cfg, batch, dtype)
    state = conventions[OURS]["total"]
    weights, grads, master, opt = P * wb, P * gb, P * mb, P * states * sb
    train = weights + grads + opt + master + act.total
    infer = P * e + kv + state
    formulas = {
        "weights_bytes": f"P={P:,} params * {wb} B ({policy} weights)"
                         + (" (P is the total: every expert is stored, though a token uses only k)"
                            if cfg.n_experts is not None else ""),
        "grads_bytes": f"P * {gb} B (gradients in the weights' precision)",
        "optimizer_bytes": f"P * {states} state{'' if states == 1 else 's'} ({_STATE_NAMES[optimizer]}) * {sb} B",
        "master_bytes": (f"P * {mb} B (fp32 master copy of the low-precision weights)" if mb
                         else "0: the weights themselves are updated (no master copy)"),
        "activations_bytes": act.formula,
        "kv_cache_bytes": _kv_formula(cfg, batch, seq, e),
        "train_total_bytes": "weights + grads + optimizer + master + activations",
        "infer_total_bytes": f"P * {e} B ({dtype} weights) + KV cache at B={batch}, T={seq}"
                             + (" + recurrent state" if state else ""),
        "state_bytes": ("B * per recurrent layer (conv window + recurrent state), whatever T; this engine keeps "
                        "K-1 conv inputs and the state in state_dtype, as vLLM does" if state
                        else "0: no recurrent layer"),
    }
    expanded = kv_cache_bytes(cfg, batch, seq, dtype, "expanded") if cfg.mla else None
    index = index_key_cache_bytes(cfg, batch, seq, dtype) if cfg.mla and cfg.sparse_attention else None
    if cfg.mla:
        formulas["kv_cache_expanded_bytes"] = (
            f"L={len(attention_windows(cfg))} * T={seq} * B={batch} * n_heads={cfg.n_heads} * (qk_head_dim={cfg.qk_head_dim} "
            f"+ v_head_dim={cfg.v_head_dim}) * {e} B (per-head keys and values rebuilt from the latent)"
            + (" + the indexer keys" if index is not None else ""))
    if index is not None:
        formulas["kv_cache_index_bytes"] = _index_formula(cfg, batch, seq)
    return MemoryBudget(weights_bytes=weights, grads_bytes=grads, optimizer_bytes=opt, master_bytes=master,
                        activations_bytes=act.total, kv_cache_bytes=kv, train_total_bytes=train,
                        infer_total_bytes=infer, activations_per_layer=act.per_layer, logits_bytes=act.head,
                        embedding_bytes=act.embedding, formulas=formulas, kv_cache_expanded_bytes=expanded,
                        state_bytes=state, states=conventions, kv_cache_index_bytes=index)
