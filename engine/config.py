"""ModelConfig: every architecture knob, declared once (longer than 300 lines: the declarations are the one
source of truth for every field, so they stay together).

Each field carries its declaration (group, help text, allowed values or range) in the dataclass metadata;
validation, YAML, the CLI and the UI editor are all derived from these declarations.
The defaults describe GPT-2 small, so `ModelConfig()` is a real, recognisable model.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from engine.layers import ffn as _ffn
from engine.layers import norm as _norm
from engine.limits import MAX_INT, MAX_LAYERS, InputError, RefusedYAML, yaml_load
from engine.validation import ConfigError, FieldSpec, field_problem, parse_bool, shown

__all__ = ["ConfigError", "DENSE_FFNS", "FIELDS", "FieldSpec", "GATED_FFNS", "GROUPS", "ModelConfig", "coerce",
           "field_names", "parse_bool"]

GROUPS = ("sizes", "attention", "position", "ffn", "moe", "normalization", "block", "output")
ROPE_SCALINGS = ("none", "linear", "dynamic", "llama3", "yarn", "longrope")
DENSE_FFNS, GATED_FFNS = _ffn.DENSE_FFNS, _ffn.GATED_FFNS   # the FFN family's tables name the choices
ROUTERS = ("softmax_topk", "topk_softmax", "sigmoid")


def _decl(default: Any, group: str, help: str, *, choices: tuple | None = None, lo: float | None = None,
          hi: float | None = None, lo_open: bool = False, hi_open: bool = False, null: str | None = None) -> Any:
    """Declare a field: default, UI group, help text, allowed values (choices or [lo, hi] range; *_open
    excludes the bound) and, for optional fields, what null means. A list-valued field (typed tuple[T, ...])
    applies choices and range to each item."""
    meta = dict(group=group, help=help, choices=choices, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open, null=null)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ModelConfig:
    name: str = _decl("gpt2", "sizes", "A label for this configuration.")
    vocab_size: int = _decl(50257, "sizes", "How many different tokens the model can read and predict.", lo=1)
    context_length: int = _decl(1024, "sizes", "The longest sequence of tokens the model is built for.", lo=1)
    d_model: int = _decl(768, "sizes", "Width of the residual stream: numbers per token between blocks.", lo=1)
    n_layers: int = _decl(12, "sizes", "Depth: how many transformer blocks are stacked.", lo=1)

    n_heads: int = _decl(12, "attention", "Number of query heads in every attention layer.", lo=1)
    n_kv_heads: int | None = _decl(None, "attention", "Key/value heads shared by groups of query heads: "
                                   "equal to n_heads is MHA, 1 is MQA, in between is GQA.", lo=1,
                                   null="same as n_heads (MHA)")
    head_dim: int | None = _decl(None, "attention", "Width of each head; heads times head_dim may differ from "
                                 "d_model.", lo=1, null="d_model // n_heads")
    attn_window: int | None = _decl(None, "attention", "Sliding window: a query sees only keys within the last "
                                    "this-many positions, itself included.", lo=1, null="full causal attention")
    global_every: int | None = _decl(None, "attention", "With a window, every k-th layer (k, 2k, ... counting "
                                     "from 1) still uses full attention; ignored without a window or with "
                                     "layer_types.", lo=1, null="every layer uses the window")
    qk_norm: bool = _decl(False, "attention", "Normalize each head's queries and keys before the dot product.")
    # per-layer patterns and the score scale (Gemma-2/3, real configs of today)
    layer_types: tuple[str, ...] | None = _decl(None, "attention", "Attention of each layer in order, full or "
                                                "sliding (the window attn_window); overrides global_every.",
                                                choices=("full", "sliding"), null="the global_every rule")
    attn_scale: float | None = _decl(None, "attention", "Multiplier of q.k before the softmax (Gemma: "
                                     "query_pre_attn_scalar^-0.5).", lo=0, lo_open=True, null="1/sqrt(head_dim)")
    attn_softcap: float | None = _decl(None, "attention", "Squash attention scores smoothly into (-c, c) with "
                                       "c*tanh(s/c), before the causal mask.", lo=0, lo_open=True, null="no cap")
    qkv_bias: bool = _decl(False, "attention", "Biases on the query, key and value projections only (Qwen2).")
    attn_sinks: bool = _decl(False, "attention", "A learned logit per head joins the softmax as one more key that "
                             "takes probability but adds no value, so a head can attend to nothing (gpt-oss).")
    qk_norm_scope: str = _decl("head", "attention", "With qk_norm: one gain per head dimension shared by all "
                               "heads (Qwen3), or one norm over all heads at once (OLMoE).",
                               choices=("head", "all_heads"))

    # ---- multi-head latent attention (engine/layers/mla.py); kv_lora_rank null keeps MHA/GQA/MQA ----
    kv_lora_rank: int | None = _decl(None, "attention", "MLA (DeepSeek-V2/V3): keys and values are rebuilt from "
                                     "one latent of this width per token, which is all the cache holds (with "
                                     "the shared rotary key).", lo=1, null="standard attention (MHA/GQA/MQA)")
    q_lora_rank: int | None = _decl(None, "attention", "MLA: queries pass through a latent of this width "
                                    "(down-projection, RMSNorm, up-projection).", lo=1,
                                    null="a full query projection")
    qk_rope_head_dim: int = _decl(64, "attention", "MLA: rotary part of each query/key head; the rotary key is "
                                  "one head shared by all query heads.", lo=2)
    qk_nope_head_dim: int = _decl(128, "attention", "MLA: non-rotary part of each query/key head, rebuilt "
                                  "from the latent.", lo=1)
    v_head_dim: int = _decl(128, "attention", "MLA: width of each value head.", lo=1)
    mla_rope_interleave: bool = _decl(True, "attention", "MLA: the rotary dimensions rotate in adjacent pairs "
                                      "(x0, x1), (x2, x3), ... as DeepSeek's weights expect, instead of halves.")

    position: str = _decl("learned", "position", "How the model knows token order: a learned table, fixed "
                          "sinusoids added to the input, rotary embedding of queries and keys, a linear "
                          "penalty on attention scores growing with distance (alibi), or nothing.",
                          choices=("learned", "sinusoidal", "rope", "alibi", "none"))
    rope_base: float = _decl(10000.0, "position", "RoPE base theta: larger means slower rotation, longer reach.",
                             lo=1, lo_open=True)
    rope_fraction: float = _decl(1.0, "position", "Share of each head's dimensions that rotate (partial RoPE).",
                                 lo=0, hi=1, lo_open=True)
    rope_local_base: float | None = _decl(None, "position", "Sliding-window layers use plain RoPE with this base "
                                          "(Gemma-3: 10,000 locally, 1,000,000 globally).", lo=1, lo_open=True,
                                          null="the same RoPE in every layer")
    nope_layers: tuple[int, ...] | None = _decl(None, "position", "Layers (counting from 1) that skip RoPE and "
                                                "see no positions at all (NoPE).", lo=1, null="RoPE in every layer")
    # RoPE scaling (context extension), as transformers' rope_parameters; see engine/layers/position.py
    rope_scaling: str = _decl("none", "position", "Stretch RoPE beyond its training context: linear divides every "
                              "frequency, dynamic raises theta once the sequence is longer, llama3 and yarn slow "
                              "only the low frequencies, longrope multiplies each by its own factor.",
                              choices=ROPE_SCALINGS)
    rope_factor: float = _decl(1.0, "position", "Scaling factor s: the context is stretched s times (linear, "
                               "dynamic, llama3, yarn; longrope uses it for its attention correction).",
                               lo=0, lo_open=True)
    rope_original_context: int | None = _decl(None, "position", "Context length of pretraining, before "
                                              "scaling (llama3, yarn, longrope).", lo=1, null="context_length")
    rope_low_freq_factor: float = _decl(1.0, "position", "llama3: wavelengths above original context / this "
                                        "are divided by the factor.", lo=0, lo_open=True)
    rope_high_freq_factor: float = _decl(4.0, "position", "llama3: wavelengths below original context / this "
                                         "stay unscaled; in between is a smooth blend.", lo=0, lo_open=True)
    rope_beta_fast: float = _decl(32.0, "position", "yarn: dimensions rotating more than this often over the "
                                  "original context keep their frequency.", lo=0, lo_open=True)
    rope_beta_slow: float = _decl(1.0, "position", "yarn: dimensions rotating fewer times than this are fully "
                                  "interpolated (divided by the factor).", lo=0, lo_open=True)
    rope_truncate: bool = _decl(True, "position", "yarn: round the blend's dimension range to whole dimensions.")
    rope_attention_factor: float | None = _decl(None, "position", "yarn and longrope multiply cos and sin by "
                                                "this, sharpening attention at long range.", lo=0, lo_open=True,
                                                null="from rope_factor: yarn 0.1*ln(s)+1, longrope "
                                                     "sqrt(1+ln(s)/ln(original context))")
    rope_mscale_all_dim: float | None = _decl(None, "position", "yarn with MLA (DeepSeek's mscale_all_dim m): "
                                              "the softmax scale is also multiplied by (0.1*m*ln(s)+1)^2, "
                                              "s = rope_factor; ignored without MLA or without yarn.", lo=0,
                                              lo_open=True, null="no softmax correction")
    rope_short_factor: tuple[float, ...] | None = _decl(None, "position", "longrope: per-frequency divisors "
                                                        "(rotary_dim/2 numbers) within the original context.",
                                                        lo=0, lo_open=True, null="not longrope")
    rope_long_factor: tuple[float, ...] | None = _decl(None, "position", "longrope: per-frequency divisors "
                                                       "once the sequence is longer than the original context.",
                                                       lo=0, lo_open=True, null="not longrope")

    ffn: str = _decl("gelu_tanh", "ffn", "Feed-forward type: one activation between two matrices (dense) or "
                     "an activation gating a second projection (gated, three matrices).",
                     choices=DENSE_FFNS + GATED_FFNS)
    d_ff: int | None = _decl(None, "ffn", "Hidden width of the feed-forward network.", lo=1,
                             null="4*d_model dense, 8/3*d_model gated (rounded up to ffn_multiple_of)")
    swiglu_limit: float = _decl(7.0, "ffn", "swiglu_clamped: the gate is clipped from above at this value and the "
                                "up projection to [-limit, limit] (gpt-oss: 7).", lo=0, lo_open=True)
    swiglu_alpha: float = _decl(1.702, "ffn", "swiglu_clamped: slope of the gate's sigmoid, g*sigmoid(alpha*g) "
                                "(gpt-oss: 1.702).", lo=0, lo_open=True)
    ffn_multiple_of: int = _decl(256, "ffn", "The automatic gated width is rounded up to a multiple of this.",
                                 lo=1)

    # ---- mixture of experts (engine/layers/moe.py); n_experts null keeps every FFN dense ----
    n_experts: int | None = _decl(None, "moe", "Routed experts E in each MoE layer: FFNs of which a router picks "
                                  "experts_per_token for every token.", lo=1, null="dense FFN in every layer")
    experts_per_token: int = _decl(2, "moe", "k: routed experts each token uses (k <= n_experts).", lo=1)
    expert_d_ff: int | None = _decl(None, "moe", "Hidden width of one routed expert (same FFN type as `ffn`).",
                                    lo=1, null="the dense FFN width")
    n_shared_experts: int | None = _decl(None, "moe", "Always-on experts every token passes through besides the routed "
                                  "ones (Qwen2-MoE, DeepSeek); built as one FFN of n_shared_experts times "
                                  "shared_d_ff.", lo=1, null="no shared expert")
    shared_d_ff: int | None = _decl(None, "moe", "Hidden width of one shared expert.", lo=1,
                                    null="expert_d_ff")
    shared_expert_gate: bool = _decl(False, "moe", "Scale the shared experts' output by sigmoid(x w), "
                                     "one learned vector w (Qwen2-MoE).")
    moe_first_dense: int | None = _decl(None, "moe", "The first this-many layers keep a dense FFN (DeepSeek "
                                        "first_k_dense_replace).", lo=1, null="no leading dense layers")
    moe_every: int = _decl(1, "moe", "Only layers k, 2k, ... (counting from 1) are MoE; the others stay dense "
                           "(Qwen decoder_sparse_step).", lo=1)
    router: str = _decl("softmax_topk", "moe", "softmax_topk: softmax over all experts, keep the k largest "
                         "(Mixtral, Qwen, OLMoE); topk_softmax: keep the k largest logits, softmax over them; "
                         "sigmoid: independent sigmoid scores (DeepSeek-V3).", choices=ROUTERS)
    router_renorm: bool = _decl(True, "moe", "Rescale the k kept weights to sum to 1 (Mixtral, Qwen3-MoE; off "
                                "in Qwen1.5-MoE and OLMoE). topk_softmax sums to 1 anyway.")
    router_selection_bias: bool = _decl(False, "moe", "A per-expert bias added to the scores only to choose "
                                        "experts, not to weight them (DeepSeek-V3 load balancing without aux loss).")
    router_groups: int = _decl(1, "moe", "Group-limited selection: experts split into this many groups "
                               "(must divide n_experts); 1 means no groups.", lo=1)
    router_group_topk: int = _decl(1, "moe", "With groups: tokens choose experts only inside this many best "
                                   "groups (scored by router_group_score).", lo=1)
    router_group_score: str = _decl("top2_sum", "moe", "With groups: a group's score is the sum of its two best "
                                    "expert scores (DeepSeek-V3) or its best one (DeepSeek-V2).",
                                    choices=("top2_sum", "max"))
    routed_scale: float = _decl(1.0, "moe", "Multiply the routed experts' weights by this factor "
                                "(DeepSeek-V3 routed_scaling_factor 2.5).", lo=0, lo_open=True)
    expert_bias: bool = _decl(False, "moe", "Biases on the router and on every expert projection (gpt-oss).")
    aux_loss_coef: float = _decl(0.01, "moe", "Training: weight of the load-balancing loss "
                                 "E * sum_i f_i P_i (Switch / Mixtral), added to the language-model loss.", lo=0)
    z_loss_coef: float = _decl(0.0, "moe", "Training: weight of the router z-loss mean(logsumexp(logits)^2) "
                               "(ST-MoE), which keeps router logits small.", lo=0)

    norm: str = _decl("layernorm", "normalization", "LayerNorm subtracts the mean and divides by the standard "
                      "deviation; RMSNorm only divides by the root mean square.", choices=tuple(_norm.NORMS))
    norm_eps: float = _decl(1e-5, "normalization", "Small number added inside the square root for stability.",
                            lo=0, lo_open=True)
    norm_bias: bool | None = _decl(None, "normalization", "LayerNorm's learned shift (beta); RMSNorm has none.",
                                   null="follow the norm: on for layernorm, off for rmsnorm")
    norm_affine: bool = _decl(True, "normalization", "Learned per-channel gain after normalizing; off gives a "
                              "parameter-free norm.")
    embed_norm: bool = _decl(False, "normalization", "Normalize right after the embeddings (microgpt, BLOOM).")
    norm_placement: str = _decl("pre", "normalization", "pre: x + F(N(x)); post: N(x + F(x)); sandwich: "
                                "x + N2(F(N1(x))); post_branch: x + N(F(x)), the branch output normalized "
                                "(OLMo-2).", choices=("pre", "post", "sandwich", "post_branch"))
    final_norm: bool = _decl(True, "normalization", "A norm on the last hidden state, before the output head.")

    block: str = _decl("serial", "block", "serial: attention then FFN; parallel: both read the same input and "
                       "their outputs are added.", choices=("serial", "parallel"))
    parallel_shared_norm: bool = _decl(False, "block", "One norm feeds both branches of a parallel block; ignored for serial blocks.")
    bias: bool = _decl(True, "block", "Biases on every linear layer in attention and FFN.")
    dropout: float = _decl(0.0, "block", "Share of activations zeroed at random during training.", lo=0, hi=1,
                           hi_open=True)

    tie_embeddings: bool = _decl(True, "output", "The output head reuses the token-embedding matrix.")
    embed_scale: bool = _decl(False, "output", "Multiply token embeddings by sqrt(d_model) (Gemma).")
    logit_softcap: float | None = _decl(None, "output", "Squash output logits smoothly into (-c, c) with "
                                        "c*tanh(z/c).", lo=0, lo_open=True, null="no cap")
    # output-head features of phi and cohere (issue #13)
    head_bias: bool = _decl(False, "output", "A learned bias per vocabulary entry on the output head (Phi-1/2); "
                            "not shared with a tied embedding.")
    logit_scale: float = _decl(1.0, "output", "Multiply the output logits by this factor, before any soft cap "
                               "(Cohere: 0.0625).", lo=0, lo_open=True)
    mtp_depth: int | None = _decl(None, "output", "Multi-token prediction (DeepSeek-V3): this many extra "
                                  "modules, each predicting one token further with two norms, a 2*d_model -> "
                                  "d_model projection and one more block, sharing the embedding and output head. "
                                  "Used in training and for speculative decoding: counted apart from the total, "
                                  "not built.", lo=1, null="no multi-token-prediction modules")

    def __post_init__(self) -> None:
        for spec in FIELDS.values():   # a list given for a list field is kept as a tuple (the config is frozen)
            if spec.item is not None and isinstance(value := getattr(self, spec.name), list):
                object.__setattr__(self, spec.name, tuple(value))
        problems = _problems(self)
        if problems:
            raise ConfigError(problems)

    # ---- derived values ------------------------------------------------------------------------------------
    @property
    def mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def qk_head_dim(self) -> int:
        """MLA: width of each query/key head, the non-rotary part followed by the rotary part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_width(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def attn_width(self) -> int:
        """A = n_heads * head_width: the width of the concatenated heads (may differ from d_model)."""
        return self.n_heads * self.head_width

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_width

    @property
    def rotary_dim(self) -> int:
        if self.position != "rope":
            return 0
        return self.qk_rope_head_dim if self.mla else int(round(self.head_width * self.rope_fraction))

    def layer_rope(self, i: int) -> str | None:
        """Layer i's (0-based) RoPE: 'global', 'local' (rope_local_base on a window layer) or None (no RoPE)."""
        if self.position != "rope" or (self.nope_layers and i + 1 in self.nope_layers):
            return None
        local = self.rope_local_base is not None and self.layer_window(i) is not None
        return "local" if local else "global"

    @property
    def layer_ropes(self) -> list[str | None]:
        """layer_rope of every layer, in order."""
        return [self.layer_rope(i) for i in range(self.n_layers)]

    @property
    def gated(self) -> bool:
        return self.ffn in GATED_FFNS

    @property
    def ffn_width(self) -> int:
        """Resolved d_ff: explicit, else 4*d_model dense or 8/3*d_model gated rounded up to ffn_multiple_of."""
        if self.d_ff is not None:
            return self.d_ff
        if not self.gated:
            return 4 * self.d_model
        m = self.ffn_multiple_of
        return m * math.ceil(8 * self.d_model / 3 / m)

    @property
    def expert_width(self) -> int:
        return self.ffn_width if self.expert_d_ff is None else self.expert_d_ff

    @property
    def shared_width(self) -> int:
        """Hidden width of the one FFN that holds all shared experts (0 without shared experts)."""
        return (self.n_shared_experts or 0) * (self.expert_width if self.shared_d_ff is None else self.shared_d_ff)

    @property
    def moe_layers(self) -> list[bool]:
        """Per layer (0-based list): a mixture of experts (True) or a dense FFN."""
        if self.n_experts is None:
            return [False] * self.n_layers
        return [i >= (self.moe_first_dense or 0) and (i + 1) % self.moe_every == 0 for i in range(self.n_layers)]

    def layer_window(self, i: int) -> int | None:
        """Layer i's (0-based) sliding window, or None for full attention (constant time: the budgets ask per
        layer, and 100,000 layers must not cost 100,000 lists)."""
        if self.attn_window is None:
            return None
        if self.layer_types is not None:
            return self.attn_window if self.layer_types[i] == "sliding" else None
        k = self.global_every
        return None if k and (i + 1) % k == 0 else self.attn_window

    @property
    def layer_windows(self) -> list[int | None]:
        """Per layer (0-based list): the sliding window, or None for full attention."""
        return [self.layer_window(i) for i in range(self.n_layers)]

    @property
    def attention_kind(self) -> str:
        if self.mla:
            return "MLA"
        return "MHA" if self.kv_heads == self.n_heads else "MQA" if self.kv_heads == 1 else f"GQA-{self.kv_heads}"

    # ---- conversions ----------------------------------------------------------------------------------------
    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain values (list fields as lists), ready for YAML, JSON and the URL."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: "ModelConfig | None" = None) -> "ModelConfig":
        """Build from a mapping (missing keys keep `base`'s or the default); every problem reported at once."""
        if not isinstance(data, dict):
            raise ConfigError([f"config: expected a mapping of field: value, got {type(data).__name__}"])
        names = field_names()
        problems, bad = [], set()
        values = dict((base or cls()).to_dict())
        for key, raw in data.items():
            if key not in names:
                near = difflib.get_close_matches(str(key), names, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                problems.append(f"unknown key `{key}`{hint}")
                continue
            try:
                values[key] = coerce(key, raw)
            except ValueError as e:
                problems.append(str(e))
                values[key], bad = raw, bad | {key}  # still invalid: rules tying it to other fields are skipped
        try:
            cfg = cls(**values)
        except ConfigError as e:
            problems += [p for p in e.problems if p.split(":", 1)[0] not in bad]
        if problems:
            raise ConfigError(problems)
        return cfg

    def to_yaml(self) -> str:
        return yaml.dump(self.to_dict(), Dumper=_FlatDumper, sort_keys=False, width=1 << 20)

    @classmethod
    def from_yaml(cls, text: str) -> "ModelConfig":
        try:
            data = yaml_load(text)
        except InputError as e:
            raise ConfigError([str(e)]) from None
        except yaml.YAMLError as e:
            where = getattr(e, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            if isinstance(e, RefusedYAML):
                raise ConfigError([f"yaml: {e.problem}{at}"]) from None
            if isinstance(e, yaml.constructor.ConstructorError):  # e.g. !!python/object: never constructed
                raise ConfigError([f"yaml: {e.problem}{at}; only plain values are allowed "
                                   f"(numbers, strings, true/false, null)"]) from None
            what = ", ".join(s for s in (getattr(e, "context", None), getattr(e, "problem", None)) if s) or e
            raise ConfigError([f"yaml: not valid YAML{at}: {what}"]) from None
        if data is None:
            raise ConfigError(["yaml: the document is empty; expected a mapping such as `d_model: 768`"])
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else f"the single value {data!r}"
            raise ConfigError([f"yaml: expected a mapping of field: value such as `d_model: 768`, got {kind}"])
        return cls.from_dict(data)


class _FlatDumper(yaml.SafeDumper):
    """One line per field: list fields as flow lists ([1.0, 2.0]), never wrapped."""


_FlatDumper.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


# ---- declarations as data ----------------------------------------------------------------------------------
def _spec(f: dataclasses.Field) -> FieldSpec:
    hint = typing.get_type_hints(ModelConfig)[f.name]
    args = typing.get_args(hint)
    optional = isinstance(hint, types.UnionType) and type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else hint
    item = typing.get_args(base)[0] if typing.get_origin(base) is tuple else None
    return FieldSpec(name=f.name, type=tuple if item else base, optional=optional, default=f.default, item=item,
                     **f.metadata)


FIELDS: dict[str, FieldSpec] = {f.name: _spec(f) for f in dataclasses.fields(ModelConfig)}


def field_names() -> list[str]:
    return list(FIELDS)


def coerce(name: str, raw: Any) -> Any:
    """Convert a raw value (YAML scalar, CLI or URL string) to the field's type, or raise ValueError."""
    spec = FIELDS[name]
    bad = ValueError(f"{name}: {'null' if raw is None else shown(raw)} is not {spec.allowed()}")
    if spec.item is not None:
        return _coerce_list(spec, raw, bad)
    return _coerce_scalar(spec, raw, bad)


def _coerce_scalar(spec: FieldSpec, raw: Any, bad: ValueError) -> Any:
    if raw is None or (spec.type is not str and isinstance(raw, str)
                       and raw.strip().lower() in ("null", "none", "~", "")):
        if spec.optional:
            return None
        raise bad
    if spec.type is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and (value := parse_bool(raw)) is not None:
            return value
        raise bad
    if spec.type is int:
        if isinstance(raw, bool):
            raise bad
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if isinstance(raw, str):  # exact: "123456789012345678901" or "1e30" must not pass through a float
            try:
                value = Decimal(raw.replace("_", "").replace(",", "").strip())
            except InvalidOperation:
                raise bad from None
            if value.is_finite() and value.adjusted() < 4300 and value == value.to_integral_value():
                return int(value)
        raise bad
    if spec.type is float:
        if isinstance(raw, bool):
            raise bad
        try:
            value = float(raw)
        except (TypeError, ValueError, OverflowError):
            raise bad from None
        if not math.isfinite(value):
            raise bad
        return value
    if not isinstance(raw, str):
        raise bad
    return raw


def _big(n: int) -> str:
    return f"{n:,}" if n < 10**30 else f"a {len(str(n)):,}-digit number"


def _bounds(c: ModelConfig, bad: set[str]) -> list[str]:
    """engine/limits.py's bounds, the same for app and CLI: integers a browser or JSON holds exactly, and a depth
    whose layer-by-layer budgets stay interactive. Fields that fail here are added to `bad`."""
    problems = []
    for spec in FIELDS.values():
        value = getattr(c, spec.name)
        if spec.name not in bad and spec.type is int and isinstance(value, int) and value > MAX_INT:
            problems.append(f"{spec.name}: {_big(value)} is more than {MAX_INT:,} "
                            f"(2^53 - 1, the largest integer a browser or JSON holds exactly)")
            bad.add(spec.name)
    if "n_layers" not in bad and c.n_layers > MAX_LAYERS:
        problems.append(f"n_layers: {c.n_layers:,} is more than this app computes interactively (at most "
                        f"{MAX_LAYERS:,}: the budgets are summed layer by layer)")
        bad.add("n_layers")
    return problems


def _coerce_list(spec: FieldSpec, raw: Any, bad: ValueError) -> tuple | None:
    """A list field from a YAML list or a 'a, b, c' string (brackets allowed, as a URL or CLI value)."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("null", "none", "~", "")):
        if spec.optional:
            return None
        raise bad
    if isinstance(raw, str):
        raw = raw.strip().strip("[]").split(",")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise bad
    one = dataclasses.replace(spec, type=spec.item, item=None, optional=False)
    return tuple(_coerce_scalar(one, x.strip() if isinstance(x, str) else x, bad) for x in raw)


def _problems(c: ModelConfig) -> list[str]:
    """Every problem with the config: single-field checks, then each rule tying fields together whose
    fields are individually valid."""
    problems, bad = [], set()
    for spec in FIELDS.values():
        if p := field_problem(spec, getattr(c, spec.name)):
            problems.append(p)
            bad.add(spec.name)

    def ok(*names: str) -> bool:
        return not bad.intersection(names)

    problems += _bounds(c, bad)
    if ok("n_heads", "n_kv_heads") and c.n_kv_heads is not None and c.n_heads % c.n_kv_heads:
        problems.append(f"n_kv_heads: {c.n_kv_heads} does not divide n_heads={c.n_heads}")
    if ok("head_dim", "d_model", "n_heads") and c.head_dim is None and c.d_model < c.n_heads:
        problems.append(f"head_dim: d_model={c.d_model} // n_heads={c.n_heads} is 0; set head_dim or use fewer heads")
    elif ok("position", "head_dim", "d_model", "n_heads", "rope_fraction") and c.position == "rope" and not c.mla:
        rot = c.head_width * c.rope_fraction
        if abs(rot - round(rot)) > 1e-9 or round(rot) % 2 or round(rot) == 0:
            problems.append(f"head_dim: rope needs an even rotary width (head_dim*rope_fraction), "
                            f"got {c.head_width}*{c.rope_fraction:g} = {rot:g}")
    problems += _mla_problems(c, ok)
    problems += _moe_problems(c, ok)
    if ok("norm", "norm_bias") and not _norm.NORMS[c.norm].has_bias and c.norm_bias:
        problems.append(f"norm_bias: {c.norm} has no bias; set norm_bias: false")
    problems += _rope_problems(c, ok)
    if ok("layer_types", "n_layers") and c.layer_types is not None and len(c.layer_types) != c.n_layers:
        problems.append(f"layer_types: {len(c.layer_types)} entries for n_layers={c.n_layers}")
    if ok("nope_layers", "n_layers") and c.nope_layers and max(c.nope_layers) > c.n_layers:
        problems.append(f"nope_layers: layer {max(c.nope_layers)} does not exist (n_layers={c.n_layers})")
    if ok("position", "context_length") and c.position == "learned" and c.context_length > 1 << 24:
        problems.append(f"context_length: {c.context_length} is too long for a learned position table "
                        f"(at most 16,777,216)")
    return problems


def _rope_problems(c: ModelConfig, ok: typing.Callable[..., bool]) -> list[str]:
    """Rules of the RoPE scaling fields (checked only with position = rope and that scaling type)."""
    if c.position != "rope" or not ok("position", "rope_scaling", "head_dim", "rope_fraction"):
        return []
    problems = []
    if c.rope_scaling == "dynamic" and c.rotary_dim < 4:   # the new base has the exponent r / (r - 2)
        problems.append(f"rope_scaling: dynamic needs a rotary width of at least 4, got {c.rotary_dim}")
    if c.rope_scaling == "llama3" and ok("rope_low_freq_factor", "rope_high_freq_factor") \
            and c.rope_high_freq_factor <= c.rope_low_freq_factor:
        problems.append(f"rope_high_freq_factor: {c.rope_high_freq_factor:g} must be greater than "
                        f"rope_low_freq_factor={c.rope_low_freq_factor:g}")
    if c.rope_scaling == "longrope":
        half = c.rotary_dim // 2
        for name in ("rope_short_factor", "rope_long_factor"):
            value = getattr(c, name)
            if ok(name) and (value is None or len(value) != half):
                got = "null" if value is None else f"{len(value)} numbers"
                problems.append(f"{name}: longrope needs rotary_dim/2 = {half} numbers, got {got}")
    return problems


def _moe_problems(c: ModelConfig, ok) -> list[str]:
    """Rules tying the mixture-of-experts fields together (only when n_experts is set)."""
    if c.n_experts is None or not ok("n_experts"):
        return []
    E, out = c.n_experts, []
    if ok("experts_per_token") and c.experts_per_token > E:
        out.append(f"experts_per_token: {c.experts_per_token} is more than n_experts={E}")
    if ok("router_groups") and E % c.router_groups:
        out.append(f"router_groups: {c.router_groups} does not divide n_experts={E}")
    elif ok("router_groups", "router_group_topk", "experts_per_token"):
        if c.router_group_topk > c.router_groups:
            out.append(f"router_group_topk: {c.router_group_topk} is more than router_groups={c.router_groups}")
        elif c.router_groups > 1 and c.experts_per_token > c.router_group_topk * (E // c.router_groups):
            out.append(f"experts_per_token: {c.experts_per_token} is more than the {c.router_group_topk} chosen "
                       f"groups hold ({c.router_group_topk} * {E // c.router_groups} experts)")
        elif c.router_groups > 1 and c.router_group_score == "top2_sum" and E // c.router_groups < 2:
            out.append(f"router_groups: {c.router_groups} groups of {E // c.router_groups} expert; a group "
                       f"score sums its two best experts, so a group needs at least 2")
    if ok("shared_expert_gate", "n_shared_experts") and c.shared_expert_gate and not c.n_shared_experts:
        out.append("shared_expert_gate: there is no shared expert to gate; set n_shared_experts >= 1")
    if ok("moe_first_dense", "moe_every", "n_layers") and not any(c.moe_layers):
        out.append(f"moe_first_dense: with moe_every={c.moe_every} no layer of n_layers={c.n_layers} is MoE")
    return out


def _mla_problems(c: ModelConfig, ok) -> list[str]:
    """MLA (kv_lora_rank set) as DeepSeek defines it: rotary positions on a decoupled key, every query head
    with its own keys and values rebuilt from the latent, full causal attention."""
    if c.kv_lora_rank is None or not ok("kv_lora_rank"):
        return []
    out = []
    need = {"position": ("rope", c.position == "rope"), "n_kv_heads": ("null", c.n_kv_heads is None),
            "head_dim": ("null", c.head_dim is None), "rope_fraction": ("1", c.rope_fraction == 1.0),
            "attn_window": ("null", c.attn_window is None), "qk_norm": ("false", not c.qk_norm),
            "attn_softcap": ("null", c.attn_softcap is None), "nope_layers": ("null", c.nope_layers is None),
            "attn_sinks": ("false", not c.attn_sinks)}
    for name, (want, holds) in need.items():
        if ok(name) and not holds:
            out.append(f"{name}: MLA (kv_lora_rank set) needs {name}: {want}, got {shown(getattr(c, name))}")
    if ok("qk_rope_head_dim") and c.qk_rope_head_dim % 2:
        out.append(f"qk_rope_head_dim: rotary dimensions rotate in pairs; {c.qk_rope_head_dim} is odd")
    return out
