"""State-dict conversion between our DecoderLM and transformers checkpoints, family by family.
(longer than 300 lines: every codec and the family dispatch stay together, so a round trip reads in one place.)

A family is a list of module pairs (HF module, our module(s), codec); `.weight` and `.bias` are mapped
wherever our module has them. Every codec is an exact rearrangement, so HF -> ours -> HF returns the same
tensors (Gemma's norm offset up to float rounding of (1 + w) - 1):
  copy      the same tensor
  t         GPT-2's Conv1D stores weights as [in, out]: transposed
  offset    Gemma's RMSNorm multiplies by (1 + w): our gain is 1 + w
  concat_t  GPT-2's fused c_attn: [q | k | v] along the output dim, Conv1D-transposed
  rows_*    Phi-3's fused nn.Linear outputs: qkv_proj rows [q | k | v], gate_up_proj rows [gate | up]
  halves    MoE experts' fused gate_up_proj [E, 2f, d]: gate rows, then up rows (engine/interop/hf_moe.py)
  rows_halves  Granite's fused shared MLP input_linear [2s, d]: gate rows, then up rows (hf_ssm_pairs.py)
  interleaved  gpt-oss's gate_up_proj [E, d, 2f] (bias [E, 2f]): gate even, up odd columns; experts_t [E, f, d]
  halves_t  Llama 4's gate_up_proj [E, d, 2f]: gate columns, then up columns
  row       ERNIE's selection bias [1, E] as our [E]
  grouped   NeoX / Falcon fused query_key_value, GPTBigCode c_attn: output rows as [kv_heads, group + 2, head_dim],
            each group's query heads followed by its key and value head (NeoX: [heads, 3, head_dim]; one kv head:
            [q..., k, v])
"""
from __future__ import annotations

import torch

from engine.config import ModelConfig
from engine.interop.pair import Pair
from engine.interop.rope_order import rope_half_to_interleaved, rope_interleaved_to_half
from engine.model import build_model

Tensor = torch.Tensor


def _phi3(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), "copy")]
    for i in range(cfg.n_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(h + "self_attn.qkv_proj", tuple(f"{o}attn.{x}_proj" for x in "qkv"), "rows_qkv"),
                  Pair(h + "self_attn.o_proj", (o + "attn.o_proj",), "copy"),
                  Pair(h + "mlp.gate_up_proj", (o + "ffn.gate", o + "ffn.up"), "rows_gate_up"),
                  Pair(h + "mlp.down_proj", (o + "ffn.down",), "copy"),
                  Pair(h + "input_layernorm", (o + "norm1",), "copy"),
                  Pair(h + "post_attention_layernorm", (o + "norm2",), "copy")]
    return pairs


def _phi(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.final_layernorm", ("final_norm",), "copy")]
    for i in range(cfg.n_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "qkv"]
        pairs += [Pair(h + "self_attn.dense", (o + "attn.o_proj",), "copy"),
                  Pair(h + "mlp.fc1", (o + "ffn.up",), "copy"), Pair(h + "mlp.fc2", (o + "ffn.down",), "copy"),
                  Pair(h + "input_layernorm", (o + "norm1",), "copy")]
    return pairs


def _mpt(cfg: ModelConfig) -> list[Pair]:
    pairs = [Pair("transformer.wte", ("tok_emb",), "copy"), Pair("transformer.norm_f", ("final_norm",), "copy")]
    for i in range(cfg.n_layers):
        h, o = f"transformer.blocks.{i}.", f"blocks.{i}."
        pairs += [Pair(h + "attn.Wqkv", tuple(f"{o}attn.{x}_proj" for x in "qkv"), "rows_qkv"),
                  Pair(h + "attn.out_proj", (o + "attn.o_proj",), "copy"),
                  Pair(h + "ffn.up_proj", (o + "ffn.up",), "copy"), Pair(h + "ffn.down_proj", (o + "ffn.down",), "copy"),
                  Pair(h + "norm_1", (o + "norm1",), "copy"), Pair(h + "norm_2", (o + "norm2",), "copy")]
    return pairs


def _llama_like(cfg: ModelConfig, family: str) -> list[Pair]:
    """Llama's names, with each family's norms; Cohere and ERNIE rotate pairs (2i, 2i+1)."""
    norm = "offset" if family in ("gemma", "gemma2", "gemma3_text") else "copy"
    pairs = [Pair("model.embed_tokens", ("tok_emb",), "copy"), Pair("model.norm", ("final_norm",), norm)]
    for i in range(cfg.n_layers):
        h, o = f"model.layers.{i}.", f"blocks.{i}."
        rope = "rope_pairs_" if family in ("cohere", "ernie4_5") else ""
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), f"{rope}{x}" if rope else "copy")
                  for x in "qk"]
        pairs += [Pair(f"{h}self_attn.{x}_proj", (f"{o}attn.{x}_proj",), "copy") for x in "vo"]
        pairs += [Pair(f"{h}self_attn.{x}_norm", (f"{o}attn.{x}_norm",), norm) for x in "qk" if cfg.qk_norm]
        if family == "starcoder2":
            pairs += [Pair(f"{h}mlp.c_fc", (f"{o}ffn.up",), "copy"), Pair(f"{h}mlp.c_proj", (f"{o}ffn.down",), "copy")]
        else:
            pairs += [Pair(f"{h}mlp.{x}_proj", (f"{o}ffn.{x}",), "copy") for x in ("gate", "up", "down")]
        norms = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}
        if cfg.block == "parallel":   # StableLM's and Cohere's parallel residual: one norm feeds both branches
            norms = {"input_layernorm": "norm1"}
        if family in ("olmo2", "olmo3", "exaone4"):   # norms on the branch outputs only
            norms = {"post_attention_layernorm": "post_attn_norm", "post_feedforward_layernorm": "post_ffn_norm"}
        if family in ("gemma2", "gemma3_text"):
            norms = {"input_layernorm": "norm1", "post_attention_layernorm": "post_attn_norm",
                     "pre_feedforward_layernorm": "norm2", "post_feedforward_layernorm": "post_ffn_norm"}
        pairs += [Pair(h + k, (o + v,), norm) for k, v in norms.items()]
    return pairs


def _gpt2(cfg: ModelConfig, bigcode: bool = False) -> list[Pair]:
    """GPT-2's Conv1D layers ([in, out]); GPTBigCode has the same names on nn.Linear layers, its fused c_attn
    grouped: [heads, 3, head_dim], or with one kv head (multi_query) [q | k | v]."""
    lin, qkv = ("copy", "grouped") if bigcode else ("t", "concat_t")
    pairs = [Pair("transformer.wte", ("tok_emb",), "copy"), Pair("transformer.wpe", ("pos_emb",), "copy"),
             Pair("transformer.ln_f", ("final_norm",), "copy")]
    for i in range(cfg.n_layers):
        h, o = f"transformer.h.{i}.", f"blocks.{i}."
        pairs += [Pair(h + "ln_1", (o + "norm1",), "copy"), Pair(h + "ln_2", (o + "norm2",), "copy"),
                  Pair(h + "attn.c_attn", tuple(f"{o}attn.{x}_proj" for x in "qkv"), qkv),
                  Pair(h + "attn.c_proj", (o + "attn.o_proj",), lin),
                  Pair(h + "mlp.c_fc", (o + "ffn.up",), lin), Pair(h + "mlp.c_proj", (o + "ffn.down",), lin)]
    return pairs


def _fused(cfg: ModelConfig, base: str, names: dict[str, str]) -> list[Pair]:
    """NeoX and Falcon: fused query_key_value, separate dense output, two-matrix MLP."""
    pairs = []
    for i in range(cfg.n_layers):
        h, o = f"{base}.{i}.", f"blocks.{i}."
        pairs += [Pair(h + names["qkv"], tuple(f"{o}attn.{x}_proj" for x in "qkv"), "grouped"),
                  Pair(h + names["out"], (o + "attn.o_proj",), "copy"),
                  Pair(h + "mlp.dense_h_to_4h", (o + "ffn.up",), "copy"),
                  Pair(h + "mlp.dense_4h_to_h", (o + "ffn.down",), "copy")]
        pairs += [Pair(h + k, (o + v,), "copy") for k, v in names["norms"].items()]
    return pairs


def _gpt_neox(cfg: ModelConfig) -> list[Pair]:
    norms = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}
    return [Pair("gpt_neox.embed_in", ("tok_emb",), "copy"),
            Pair("gpt_neox.final_layer_norm", ("final_norm",), "copy")] + _fused(
        cfg, "gpt_neox.layers", dict(qkv="attention.query_key_value", out="attention.dense", norms=norms))


def _falcon(cfg: ModelConfig) -> list[Pair]:
    if cfg.block == "serial":
        norms = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}
    elif cfg.parallel_shared_norm:
        norms = {"input_layernorm": "norm1"}
    else:
        norms = {"ln_attn": "norm1", "ln_mlp": "norm2"}
    return [Pair("transformer.word_embeddings", ("tok_emb",), "copy"),
            Pair("transformer.ln_f", ("final_norm",), "copy")] + _fused(
        cfg, "transformer.h", dict(qkv="self_attention.query_key_value", out="self_attention.dense", norms=norms))


def _bloom(cfg: ModelConfig) -> list[Pair]:
    norms = {"input_layernorm": "norm1", "post_attention_layernorm": "norm2"}
    return [Pair("transformer.word_embeddings", ("tok_emb",), "copy"),
            Pair("transformer.word_embeddings_layernorm", ("emb_norm",), "copy"),
            Pair("transformer.ln_f", ("final_norm",), "copy")] + _fused(
        cfg, "transformer.h", dict(qkv="self_attention.query_key_value", out="self_attention.dense", norms=norms))


def pairs_for(cfg: ModelConfig, family: str) -> list[Pair]:
    from engine.interop.hf_moe import READERS, moe_pairs
    from engine.interop.hf_deepseek import deepseek_pairs
    from engine.interop.hf_gpt_oss import gpt_oss_pairs
    from engine.interop.hf_ssm import READERS as SSM_READERS
    from engine.interop.hf_ssm_pairs import ssm_pairs
    from engine.interop.hf_llama4 import llama4_pairs
    from engine.interop.hf_recent_moe import READERS as RECENT_MOE, recent_moe_pairs
    from engine.interop.hf_qwen_hybrid import CODECS, qwen_hybrid_pairs, WRITERS as QWEN_HYBRID
    from engine.interop import hf_kimi, hf_minimax
    _CODECS.update(CODECS, **hf_kimi.CODECS, **hf_minimax.CODECS)
    if family in SSM_READERS:
        pairs = ssm_pairs(cfg, family)
    elif family in QWEN_HYBRID:
        pairs = qwen_hybrid_pairs(cfg, family)
    elif family == "kimi_linear":
        pairs = hf_kimi.kimi_pairs(cfg)
    elif family == "minimax":
        pairs = hf_minimax.minimax_pairs(cfg)
    elif family in RECENT_MOE and family != "qwen3_vl_moe_text":
        pairs = recent_moe_pairs(cfg, family)
    elif family == "llama4_text":
        pairs = llama4_pairs(cfg)
    elif family in READERS or family == "qwen3_vl_moe_text":
        pairs = moe_pairs(cfg, family)
    elif family == "gpt_oss":
        pairs = gpt_oss_pairs(cfg)
    elif family in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "kimi_k2"):
        pairs = deepseek_pairs(cfg)
    elif family == "bloom":
        pairs = _bloom(cfg)
    elif family == "phi3":
        pairs = _phi3(cfg)
    elif family == "mpt":
        pairs = _mpt(cfg)
    elif family == "phi":
        pairs = _phi(cfg)
    elif family == "gpt_bigcode":
        pairs = _gpt2(cfg, bigcode=True)
    elif family == "gpt2":
        pairs = _gpt2(cfg)
    elif family == "gpt_neox":
        pairs = _gpt_neox(cfg)
    elif family == "falcon":
        pairs = _falcon(cfg)
    else:
        pairs = _llama_like(cfg, family)
    untied = not cfg.tie_embeddings or cfg.head_bias   # a head bias is never tied (the weight then is)
    return pairs + [Pair("lm_head", ("head",), "copy")] if untied else pairs


# ---- codecs: HF tensor <-> our tensor(s) --------------------------------------------------------------------
# a family module's own codecs: name -> (split HF -> ours, join ours -> HF), registered by pairs_for
_CODECS: dict[str, tuple] = {}


def _qkv_sizes(cfg: ModelConfig) -> list[int]:
    return [cfg.attn_width, cfg.kv_width, cfg.kv_width]


# nn.Linear outputs stacked along rows: Phi-3's qkv_proj [q | k | v] and gate_up_proj [gate | up]
_ROWS = {"rows_qkv": _qkv_sizes, "rows_gate_up": lambda cfg: [cfg.ffn_width, cfg.ffn_width]}


def _rope_heads(codec: str, cfg: ModelConfig) -> tuple[int, int]:
    """(heads, rotary dims) of a q or k projection whose RoPE pairs dimensions 2i and 2i+1."""
    return (cfg.n_heads if codec.endswith("q") else cfg.kv_heads), round(cfg.head_width * cfg.rope_fraction)


def _split(codec: str, t: Tensor, cfg: ModelConfig) -> list[Tensor]:
    if codec == "copy":
        return [t]
    if codec in _CODECS:
        return _CODECS[codec][0](t, cfg)
    if codec.startswith("rope_pairs_"):
        return [rope_interleaved_to_half(t, *_rope_heads(codec, cfg))]
    if codec == "t":   # t() leaves a 1-D bias as it is
        return [t.t().contiguous()]
    if codec == "offset":
        return [t + 1]
    if codec == "halves":
        return [x.contiguous() for x in t.chunk(2, dim=1)]
    if codec == "halves_t":
        return [x.transpose(1, 2).contiguous() for x in t.chunk(2, dim=2)]
    if codec == "row":
        return [t.reshape(-1)]
    if codec == "rows_halves":
        return [x.contiguous() for x in t.chunk(2, dim=0)]
    if codec in ("interleaved", "experts_t"):   # gpt-oss stores [E, in, out]; a bias [E, 2f] is only split
        parts = (t[..., ::2], t[..., 1::2]) if codec == "interleaved" else (t,)
        return [(x.transpose(1, 2) if x.ndim == 3 else x).contiguous() for x in parts]
    if codec == "concat_t":
        return [x.contiguous() for x in torch.split(t.t(), _qkv_sizes(cfg))]
    if codec in _ROWS:
        return [x.contiguous() for x in torch.split(t, _ROWS[codec](cfg))]
    if codec != "grouped":
        raise ValueError(f"{codec}: not a weight codec")
    kv, hd = cfg.kv_heads, cfg.head_width
    g = cfg.n_heads // kv
    x = t.reshape(kv, g + 2, hd, *t.shape[1:])
    return [x[:, :g].reshape(kv * g * hd, *t.shape[1:]), x[:, g].reshape(kv * hd, *t.shape[1:]),
            x[:, g + 1].reshape(kv * hd, *t.shape[1:])]


def _join(codec: str, ts: list[Tensor], cfg: ModelConfig) -> Tensor:
    if codec == "copy":
        return ts[0]
    if codec in _CODECS:
        return _CODECS[codec][1](ts, cfg)
    if codec.startswith("rope_pairs_"):
        return rope_half_to_interleaved(ts[0], *_rope_heads(codec, cfg))
    if codec == "t":
        return ts[0].t().contiguous()
    if codec == "offset":
        return ts[0] - 1
    if codec in _ROWS or codec == "rows_halves":
        return torch.cat(ts)
    if codec == "halves":
        return torch.cat(ts, dim=1)
    if codec == "halves_t":
        return torch.cat([x.transpose(1, 2) for x in ts], dim=2).contiguous()
    if codec == "row":
        return ts[0].reshape(1, -1)
    if codec in ("interleaved", "experts_t"):
        cols = [x.transpose(1, 2) if x.ndim == 3 else x for x in ts]
        return (torch.stack(cols, dim=-1).flatten(-2) if codec == "interleaved" else cols[0]).contiguous()
    if codec == "concat_t":
        return torch.cat(ts).t().contiguous()
    if codec != "grouped":
        raise ValueError(f"{codec}: not a weight codec")
    kv, hd = cfg.kv_heads, cfg.head_width
    rest = ts[0].shape[1:]
    q, k, v = ts[0].reshape(kv, -1, hd, *rest), ts[1].reshape(kv, 1, hd, *rest), ts[2].reshape(kv, 1, hd, *rest)
    return torch.cat([q, k, v], dim=1).reshape(-1, *rest)


def _suffixes(p: Pair) -> tuple[str, ...]:
    return ("",) if p.raw else (".weight", ".bias")


def _our_keys(cfg: ModelConfig) -> list[str]:
    return list(build_model(cfg, device="meta").state_dict())


def hf_to_ours(cfg: ModelConfig, family: str, hf_sd: dict[str, Tensor]) -> dict[str, Tensor]:
    """An HF causal-LM state dict -> ours; every HF tensor must be used (a tied head may be listed twice)."""
    ours_expected, out, used = set(_our_keys(cfg)), {}, set()
    for p in pairs_for(cfg, family):
        for suffix in _suffixes(p):
            keys = [o + suffix for o in p.ours]
            if keys[0] not in ours_expected:
                continue
            hf_key = p.hf + suffix
            if hf_key not in hf_sd:
                raise KeyError(f"{hf_key}: missing from the {family} state dict")
            out.update(zip(keys, _split(p.codec, hf_sd[hf_key], cfg)))
            used.add(hf_key)
    if cfg.tie_embeddings:
        out["head.weight"] = out["tok_emb.weight"]
        used.add("lm_head.weight")
    if unused := sorted(set(hf_sd) - used):
        raise KeyError(f"{family} tensors with no place in our model: {', '.join(unused[:5])}")
    return out


def ours_to_hf(cfg: ModelConfig, family: str, our_sd: dict[str, Tensor]) -> dict[str, Tensor]:
    """Our state dict -> the HF family's (a tied head is listed under both names, as transformers does)."""
    out = {}
    for p in pairs_for(cfg, family):
        for suffix in _suffixes(p):
            keys = [o + suffix for o in p.ours]
            if keys[0] in our_sd:
                out[p.hf + suffix] = _join(p.codec, [our_sd[k] for k in keys], cfg)
    if cfg.tie_embeddings:
        out["lm_head.weight"] = our_sd["tok_emb.weight"]
    return out
