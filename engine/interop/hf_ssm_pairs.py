"""State-dict module pairs of the state-space hybrid families (engine/interop/hf_ssm.py reads their configs).

Our Mamba modules keep transformers' own names (in_proj, conv1d, dt_bias, A_log, D, norm, out_proj; x_proj and
dt_proj for Mamba-1), so every mixer tensor is a copy; Jamba's dt/B/C norms are `*_layernorm` there. A layer
with one branch (Nemotron-H) has one norm: our norm1 before a mixer, norm2 before an FFN.
Codecs (engine/interop/weights.py): halves for stacked gate|up experts [E, 2f, d], rows_halves for Granite's
fused shared MLP input_linear [2s, d] (gate rows, then up rows).
"""
from __future__ import annotations

from engine.config import ModelConfig
from engine.interop.pair import Pair

_JAMBA_NORMS = {"dt_layernorm": "dt_norm", "b_layernorm": "b_norm", "c_layernorm": "c_norm"}


def _mamba(h: str, o: str, kind: str, norm: bool = True) -> list[Pair]:
    """One Mamba-2 or Mamba-1 mixer: HF prefix h, ours o; norm: Mamba-2's gated norm is there."""
    modules = ["in_proj", "conv1d", "out_proj"] + ((["norm"] if norm else []) if kind == "mamba2"
                                                   else ["x_proj", "dt_proj"])
    pairs = [Pair(h + m, (o + m,), "copy") for m in modules]
    raw = ("A_log", "D", "dt_bias") if kind == "mamba2" else ("A_log", "D")
    pairs += [Pair(h + p, (o + p,), "copy", raw=True) for p in raw]
    if kind == "mamba1":
        pairs += [Pair(h + k, (o + v,), "copy") for k, v in _JAMBA_NORMS.items()]
    return pairs


def _attention(h: str, o: str) -> list[Pair]:
    return [Pair(f"{h}{x}_proj", (f"{o}{x}_proj",), "copy") for x in "qkvo"]


def _gated_mlp(h: str, o: str) -> list[Pair]:
    return [Pair(f"{h}{x}_proj", (f"{o}{x}",), "copy") for x in ("gate", "up", "down")]


def _stacked_experts(h: str, o: str) -> list[Pair]:
    """Experts as transformers 5 stacks them: gate_up_proj [E, 2f, d] (gate rows first), down_proj [E, d, f]."""
    return [Pair(h + "gate_up_proj", (o + "gate", o + "up"), "halves", raw=True),
            Pair(h + "down_proj", (o + "down",), "copy", raw=True)]


def _nemotron_h(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embeddings", ("tok_emb",), "copy"), Pair("model.norm_f", ("final_norm",), "copy")]
    for i, spec in enumerate(cfg.layer_specs):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs.append(Pair(h + "norm", (o + ("norm1" if spec.mixers else "norm2"),), "copy"))
        if spec.mixers == ("mamba2",):
            pairs += _mamba(h + "mixer.", o + "mamba.", "mamba2")
        elif spec.mixers:
            pairs += _attention(h + "mixer.", o + "attn.")
        elif spec.ffn == "dense":
            pairs += [Pair(f"{h}mixer.{x}_proj", (f"{o}ffn.{x}",), "copy") for x in ("up", "down")]
        else:
            m, f = h + "mixer.", o + "ffn."
            pairs += [Pair(m + "gate", (f + "router",), "copy"),
                      Pair(m + "gate.e_score_correction_bias", (f + "router.selection_bias",), "copy", raw=True),
                      Pair(m + "experts.up_proj", (f + "experts.up",), "copy", raw=True),
                      Pair(m + "experts.down_proj", (f + "experts.down",), "copy", raw=True)]
            pairs += [Pair(f"{m}shared_experts.{x}_proj", (f"{f}shared.{x}",), "copy") for x in ("up", "down")]
    return pairs


def _layered(cfg: ModelConfig, family: str) -> list[Pair]:
    """Bamba, Granite-4.0-H, Falcon-H1 and Jamba: input_layernorm, the mixer(s), a second norm, the FFN."""
    final = "model.norm" if family == "granitemoehybrid" else "model.final_layernorm"
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair(final, ("final_norm",), "copy")]
    second = "post_attention_layernorm" if family == "granitemoehybrid" else "pre_ff_layernorm"
    for i, spec in enumerate(cfg.layer_specs):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(h + "input_layernorm", (o + "norm1",), "copy"), Pair(h + second, (o + "norm2",), "copy")]
        if "attention" in spec.mixers:
            pairs += _attention(h + "self_attn.", o + "attn.")
        for kind in ("mamba2", "mamba1"):
            if kind in spec.mixers:
                pairs += _mamba(h + "mamba.", o + "mamba.", kind, cfg.ssm_gate != "gate")
        if family == "granitemoehybrid":
            shared = o + ("ffn.shared." if spec.ffn == "moe" else "ffn.")
            pairs += [Pair(h + "shared_mlp.input_linear", (shared + "gate", shared + "up"), "rows_halves"),
                      Pair(h + "shared_mlp.output_linear", (shared + "down",), "copy")]
            if spec.ffn == "moe":
                pairs.append(Pair(h + "block_sparse_moe.router", (o + "ffn.router",), "copy"))
                pairs += _stacked_experts(h + "block_sparse_moe.experts.", o + "ffn.experts.")
        elif spec.ffn == "moe":   # Jamba
            pairs += [Pair(h + "feed_forward.router", (o + "ffn.router",), "copy")]
            pairs += _stacked_experts(h + "feed_forward.experts.", o + "ffn.experts.")
        else:
            pairs += _gated_mlp(h + "feed_forward.", o + "ffn.")
    return pairs


def ssm_pairs(cfg: ModelConfig, family: str) -> list[Pair]:
    return _nemotron_h(cfg) if family == "nemotron_h" else _layered(cfg, family)
