"""The layer kinds: which token mixer and which FFN each layer has, and the registry of mixer kinds.

`layer_types` names each layer's mixer: softmax attention, full, sliding or chunked ("full", "sliding",
"chunked"; MLA when kv_lora_rank is set), a recurrent mixer ("gdn", ...), "none" (an FFN-only layer, as Nemotron-H's MLP layers), or
attention and a recurrent mixer side by side ("full+mamba2": Falcon-H1, outputs added). `ffn_types` names each
layer's FFN: "dense", "moe" or "none" (a mixer-only layer, as Nemotron-H's Mamba layers). Left null, every layer
is attention and the MoE rule (n_experts, moe_every, moe_first_dense) picks dense or MoE, as before: a model with
one kind everywhere is unchanged. Every published layout is two lists: Qwen3-Next's 3:1 (gdn x3, full), Jamba's
periods and offsets (expanded by its importer), Nemotron-H's one-mixer-per-layer, Granite 4.0-H's MoE after every
mixer.

Adding a mixer kind: a module with its nn.Module, its `Knobs` (declared fields) and a `Mixer` subclass holding its
closed forms (engine/layers/kinds.py), one entry in MIXERS below and its Knobs in engine/config.py FAMILIES.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from engine.layers.attention import (Attention, attention_matmul_params, attention_params, attention_saved_bytes,
                                     kv_bytes, score_flops)
from engine.layers.gdn import GDNMixer
from engine.layers.indexer import index_key_bytes, index_score_flops, indexer_matmul_params, indexer_params
from engine.layers.kda import KDAMixer
from engine.layers.lightning import LightningMixer
from engine.layers.kinds import FFN_KINDS, LayerSpec, Mixer
from engine.layers.mamba1 import Mamba1Mixer
from engine.layers.mamba2 import Mamba2Mixer
from engine.layers.mla import MLA, mla_kv_bytes, mla_matmul_params, mla_params, mla_saved_bytes
from engine.layers.span import Chunk, keys_seen, query_key_pairs
from engine.validation import Knobs, declare, per_layer_problem

if TYPE_CHECKING:
    from engine.config import ModelConfig


class AttentionMixer(Mixer):
    """Softmax attention, as engine/layers/attention.py (MHA/GQA/MQA, windows) and mla.py (MLA) compute it; with
    sparse attention (DSA, engine/layers/indexer.py: spec.index) MLA attends to at most index_topk keys a query,
    and a layer running its own lightning indexer scores every visible key, without gradients."""
    name, label, words, attr = "attention", "softmax attention", ("full", "sliding", "chunked"), "attn"
    components = ("attention_q", "attention_k", "attention_v", "attention_o", "attention_gate", "qk_norm",
                  "attention_sinks", "indexer")

    def build(self, cfg, spec):
        return MLA(cfg, spec.index == "full") if cfg.mla else Attention(cfg, spec.window, spec.temperature)

    def params(self, cfg, spec):
        if not cfg.mla:
            return attention_params(cfg)
        return {**mla_params(cfg), **({"indexer": indexer_params(cfg)} if spec.index == "full" else {})}

    def matmul_params(self, cfg, spec):   # the indexer's projections are in no_grad_flops, not here
        return mla_matmul_params(cfg) if cfg.mla else attention_matmul_params(cfg)

    @staticmethod
    def _keys(cfg, spec):
        """The most keys one query attends to: its window, or with sparse attention index_topk."""
        return cfg.index_topk if spec.index else spec.window

    def _scores(self, cfg, spec, batch, seq, causal):
        return score_flops(cfg, batch, query_key_pairs(seq, self._keys(cfg, spec), causal))

    def forward_flops(self, cfg, spec, batch, seq, causal):
        return self._scores(cfg, spec, batch, seq, causal) + self.no_grad_flops(cfg, spec, batch, seq, causal)

    def backward_flops(self, cfg, spec, batch, seq, causal):
        return 2 * self._scores(cfg, spec, batch, seq, causal)

    def no_grad_flops(self, cfg, spec, batch, seq, causal):
        """The lightning indexer: its projections for every token, a score for every visible key (not only the
        top-k): 2*(rq*H_I*D_I + d*D_I + d*H_I) a token plus 2*H_I*(D_I + 1) a query-key pair."""
        if spec.index != "full":
            return 0
        return (2 * indexer_matmul_params(cfg) * batch * seq
                + index_score_flops(cfg, batch, query_key_pairs(seq, None, causal)))

    def decode_flops(self, cfg, spec, batch, context):
        scores = score_flops(cfg, batch, keys_seen(context, self._keys(cfg, spec)))
        if spec.index != "full":
            return scores
        return scores + 2 * indexer_matmul_params(cfg) * batch + index_score_flops(cfg, batch,
                                                                                   keys_seen(context, None))

    def kv_bytes(self, cfg, spec, batch, tokens, e):
        return mla_kv_bytes(cfg, batch, tokens, e) if cfg.mla else kv_bytes(cfg, batch, tokens, spec.window, e)

    def index_key_bytes(self, cfg, spec, batch, tokens, e, key_format):
        return index_key_bytes(cfg, batch, tokens, e, key_format) if spec.index == "full" else 0

    def saved_bytes(self, cfg, spec, B, T, e, impl, add):
        if cfg.mla:
            mla_saved_bytes(cfg, B, T, e, impl, add)
        else:
            attention_saved_bytes(cfg, B, T, e, spec.window, impl, add, spec.rope is not None,
                                  spec.temperature)


# The registry: kind -> its Mixer. A new kind is one line here (and its Knobs in engine/config.py FAMILIES).
MIXERS: dict[str, Mixer] = {m.name: m for m in (AttentionMixer(), GDNMixer(), KDAMixer(), LightningMixer(),
                                                 Mamba2Mixer(), Mamba1Mixer())}
WORDS: dict[str, str] = {w: m.name for m in MIXERS.values() for w in m.words}   # layer_types word -> kind
RECURRENT_WORDS = tuple(w for w, kind in WORDS.items() if MIXERS[kind].recurrent)
# attention beside a recurrent mixer in one layer, outputs added (Falcon-H1: attention and Mamba-2)
PARALLEL = tuple(f"{a}+{r}" for a in AttentionMixer.words for r in RECURRENT_WORDS)
LAYER_TYPES = tuple(WORDS) + ("none",) + PARALLEL
STATE_DTYPES = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class LayerKnobs(Knobs):
    """What each layer holds: its mixer and its FFN, and the dtype recurrent states are kept in."""
    layer_types: tuple[str, ...] | None = declare(
        None, "layers", "Mixer of each layer in order: softmax attention, full, sliding (the window attn_window) "
        "or chunked (blocks of attn_chunk, Llama 4); "
        "a recurrent mixer (gdn: Gated DeltaNet; kda: Kimi Delta Attention; lightning: MiniMax's lightning "
        "attention); none (an FFN-only layer); or attention+recurrent side by side, "
        "their outputs added. Overrides global_every.", choices=LAYER_TYPES,
        null="full attention in every layer (with a window: the global_every rule)")
    ffn_types: tuple[str, ...] | None = declare(
        None, "layers", "FFN of each layer in order: dense, moe (needs n_experts) or none (a mixer-only layer).",
        choices=FFN_KINDS, null="the MoE rule: n_experts, moe_every and moe_first_dense")
    state_dtype: str | None = declare(
        None, "layers", "The dtype a recurrent mixer's state is kept in between decode steps (vLLM's "
        "mamba_ssm_cache_dtype; Qwen3.5's mamba_ssm_dtype float32). Computation is always fp32.",
        choices=STATE_DTYPES, null="the model's dtype")

    def layer_mixers(self, i: int) -> tuple[str, ...]:
        """Layer i's (0-based) mixer kinds: () for none, two for attention+recurrent."""
        if self.layer_types is None:
            return ("attention",)
        word = self.layer_types[i]
        return () if word == "none" else tuple(WORDS[w] for w in word.split("+"))

    def layer_ffn(self, i: int) -> str:
        """Layer i's FFN: 'dense', 'moe' or 'none'."""
        if self.ffn_types is not None:
            return self.ffn_types[i]
        return "moe" if self.moe_layer(i) else "dense"

    def layer_spec(self, i: int) -> LayerSpec:
        mixers = self.layer_mixers(i)
        window = self.layer_window(i) if "attention" in mixers else None
        attention = "attention" in mixers
        depth = i if any(MIXERS[k].per_layer for k in mixers) else None   # only where a module depends on it
        index = ("full" if self.layer_indexer(i) else "shared") if attention and self.mla and \
            self.sparse_attention else None
        return LayerSpec(mixers, self.layer_ffn(i), window, self.layer_rope(i),
                         attention and self.layer_temperature(i), depth, index)

    @property
    def layer_specs(self) -> tuple[LayerSpec, ...]:
        return _layer_specs(self)

    def uses(self, kind: str) -> bool:
        """Whether some layer has this mixer kind."""
        if self.layer_types is None:
            return kind == "attention"
        return any(WORDS[w] == kind for word in set(self.layer_types) if word != "none" for w in word.split("+"))

    @property
    def hybrid(self) -> bool:
        """Some layer is not softmax attention followed by an FFN: a recurrent mixer, or no mixer, or no FFN."""
        return any(s.mixers != ("attention",) or s.ffn == "none" for s, _ in layer_groups(self))

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """One entry per layer; every layer has a mixer or an FFN; a parallel block has both everywhere; MoE
        layers need experts."""
        out = []
        for name in ("layer_types", "ffn_types"):
            if ok(name, "n_layers") and (problem := per_layer_problem(name, getattr(c, name), c.n_layers)):
                out.append(problem)
        if not ok("layer_types", "ffn_types", "n_layers") or any(p.startswith(("layer_types:", "ffn_types:"))
                                                                 for p in out):
            return out
        empty = [i + 1 for i in range(c.n_layers) if not c.layer_mixers(i) and c.layer_ffn(i) == "none"]
        if empty:
            out.append(f"layer_types: layer {empty[0]} has no mixer and ffn_types gives it no FFN either")
        if ok("block") and c.block == "parallel":
            lone = [i + 1 for i in range(c.n_layers) if not c.layer_mixers(i) or c.layer_ffn(i) == "none"]
            if lone:
                out.append(f"block: parallel needs a mixer and an FFN in every layer; layer {lone[0]} lacks one "
                           f"(use block: serial)")
        if ok("n_experts") and c.ffn_types is not None and "moe" in c.ffn_types and c.n_experts is None:
            out.append(f"ffn_types: layer {c.ffn_types.index('moe') + 1} is moe but n_experts is null")
        return out


# A config is frozen, so its layers are derived once: every budget asks for them, and a page at MAX_LAYERS
# (100,000 layers) asked dozens of times, a second each.
@lru_cache(maxsize=16)
def _layer_specs(cfg: ModelConfig) -> tuple[LayerSpec, ...]:
    return tuple(cfg.layer_spec(i) for i in range(cfg.n_layers))


@lru_cache(maxsize=16)
def _layer_groups(cfg: ModelConfig) -> tuple[tuple[LayerSpec, int], ...]:
    return tuple(Counter(_layer_specs(cfg)).items())


def layer_groups(cfg: ModelConfig) -> list[tuple[LayerSpec, int]]:
    """The distinct layers of cfg with how many of each, in order of first appearance: budgets sum each once."""
    return list(_layer_groups(cfg))


def spec_label(spec: LayerSpec) -> str:
    """A layer kind in words: 'Gated DeltaNet + MoE', 'softmax attention (sliding) + dense FFN', 'dense FFN only'."""
    mixers = " beside ".join(MIXERS[k].label + _span_word(k, spec)
                             for k in spec.mixers)
    ffn = {"dense": "dense FFN", "moe": "MoE", "none": ""}[spec.ffn]
    if not mixers:
        return f"{ffn} only"
    return f"{mixers} + {ffn}" if ffn else f"{mixers}, no FFN"


def _span_word(kind: str, spec: LayerSpec) -> str:
    if kind != "attention" or spec.window is None:
        return ""
    return " (chunked)" if isinstance(spec.window, Chunk) else " (sliding)"


def layer_kinds(cfg: ModelConfig) -> list[tuple[str, int]]:
    """How many layers of each kind, in words (spec_label), in order of first appearance."""
    counts: Counter[str] = Counter()
    for spec, n in layer_groups(cfg):
        counts[spec_label(spec)] += n
    return list(counts.items())


def spec_mixers(spec: LayerSpec) -> list[Mixer]:
    return [MIXERS[kind] for kind in spec.mixers]


def mixer_components() -> tuple[str, ...]:
    """Every parameter component a registered kind reports, attention's first."""
    return tuple(c for m in MIXERS.values() for c in m.components)
