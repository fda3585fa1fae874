"""DeepSeek-V3.2 (deepseek_v32) and GLM-5 (glm_moe_dsa): DeepSeek-V3 plus DeepSeek Sparse Attention, read as
transformers 5.24 builds them; Kimi K2 (kimi_k2), which is DeepSeek-V3 under another name; DeepSeek-V4
(deepseek_v4), refused field by field.

DSA (engine/layers/indexer.py): every layer's MLA attends only to the index_topk keys its lightning indexer
(index_n_heads heads of index_head_dim) keeps. transformers' DSA attention always rotates adjacent pairs
(rope_interleave is not read); the indexer rotates halves in deepseek_v32 and adjacent pairs in glm_moe_dsa
(whatever indexer_rope_interleave says). GLM-5.2's indexer_types marks "shared" layers that reuse the previous
full layer's choice; without it transformers derives it from index_topk_pattern, or from index_topk_freq and
index_skip_topk_offset (every layer full by default). mlp_layer_types, when given, decides which layers are MoE.
The latent norms keep eps 1e-6 whatever rms_norm_eps is (GLM-5: 1e-5), read as mla_norm_eps.
"""
from __future__ import annotations

from typing import Any

from engine.interop.hf_deepseek import _deepseek_v3
from engine.interop.hf_defaults import DEFAULTS
from engine.interop.hf_reader import _Reader

# transformers 5.24 DeepseekV32Config defaults (DeepSeek-V3.2-Exp's sizes)
DEFAULTS["deepseek_v32"] = dict(
    DEFAULTS["deepseek_v3"], max_position_embeddings=163840, index_topk=2048, index_head_dim=128, index_n_heads=64,
    mlp_bias=False, num_nextn_predict_layers=None)
# transformers 5.24 GlmMoeDsaConfig defaults (GLM-5's sizes)
DEFAULTS["glm_moe_dsa"] = dict(
    DEFAULTS["deepseek_v32"], vocab_size=154880, hidden_size=6144, intermediate_size=12288, num_hidden_layers=78,
    num_attention_heads=64, q_lora_rank=2048, v_head_dim=256, qk_nope_head_dim=192, n_group=1, topk_group=1,
    max_position_embeddings=202752, rms_norm_eps=1e-5, index_n_heads=32)
# Kimi K2's remote code is DeepSeek-V3's (architectures DeepseekV3ForCausalLM); transformers' Kimi-K2.5 reads a
# kimi_k2 text config as deepseek_v3 (configuration_kimi_k25.py), so do we, with DeepSeek-V3's defaults
DEFAULTS["kimi_k2"] = DEFAULTS["deepseek_v3"]
# DeepSeek-V4: transformers builds it, with parts we do not (each refused by its key below)
DEFAULTS["deepseek_v4"] = dict(hc_mult=4, o_groups=8, scoring_func="sqrtsoftplus", num_hidden_layers=43)


def _mlp_layer_types(r: _Reader) -> None:
    """mlp_layer_types (dense..., sparse...) decides the MoE layers; as first_k_dense_replace for _experts."""
    types = r.nullable("mlp_layer_types")
    if types is None:
        return
    n = r("num_hidden_layers")
    dense = next((i for i, t in enumerate(types) if t != "dense"), len(types))
    if len(types) != n or types != ["dense"] * dense + ["sparse"] * (n - dense):
        r.bad("mlp_layer_types", types, f"{n} entries, the dense layers first, then the sparse (MoE) ones")
        return
    if r.d.get("first_k_dense_replace") not in (None, dense):
        r.ignore("first_k_dense_replace", "mlp_layer_types decides which layers are MoE")
    r.d = {**r.d, "first_k_dense_replace": dense}


def _indexer_types(r: _Reader, n: int) -> tuple[str, ...] | None:
    """glm_moe_dsa's per-layer indexer: indexer_types, else index_topk_pattern, else index_topk_freq with
    index_skip_topk_offset (transformers' rule); None when every layer runs its own."""
    types = r.nullable("indexer_types")
    pattern = r.nullable("index_topk_pattern")
    freq, offset = max(r("index_topk_freq", 1), 1), r("index_skip_topk_offset", 2)
    key, written = "indexer_types", types   # refused as the file wrote it
    if types is None and pattern is not None:
        key, written = "index_topk_pattern", pattern
        types = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern] if isinstance(pattern, str) else pattern
    elif types is None:
        types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    if len(types) != n or set(types) - {"full", "shared"} or types[0] != "full":
        r.bad(key, written, f"{n} entries of full / shared (F / S), the first full")
        return None
    return None if set(types) == {"full"} else tuple(types)


def _dsa(r: _Reader) -> dict[str, Any]:
    _mlp_layer_types(r)
    base = _deepseek_v3(r)
    n = base["n_layers"]
    if not base["mla_rope_interleave"]:
        r.bad("rope_interleave", False, "transformers' sparse-attention MLA always rotates adjacent pairs")
    if r.d.get("layer_types") is not None and set(r("layer_types")) != {"indexed_attention"}:
        r.bad("layer_types", r.d["layer_types"], "every layer is indexed (sparse) attention")
    r.read.add("layer_types")
    base.update(index_topk=r("index_topk"), index_n_heads=r("index_n_heads"), index_head_dim=r("index_head_dim"),
                index_rope_interleave=r.family == "glm_moe_dsa")
    if r.family == "glm_moe_dsa":
        base["indexer_types"] = _indexer_types(r, n)
        if r.d.get("indexer_rope_interleave") is False:
            r.bad("indexer_rope_interleave", False, "transformers' GLM-MoE-DSA indexer always rotates adjacent pairs")
        r.read.add("indexer_rope_interleave")
        for key, why in (("index_share_for_mtp_iteration", "how the multi-token-prediction module reuses the "
                                                            "indexer, which is not built"),
                         ("moe_router_dtype", "the router's precision (transformers' runs in fp32 regardless)")):
            if key in r.d:
                r.ignore(key, why)
    return base


def _kimi_k2(r: _Reader) -> dict[str, Any]:
    r.ignore("model_type", "kimi_k2 is DeepSeek-V3 under another name (its remote code is DeepseekV3ForCausalLM); "
                           "read as deepseek_v3, as transformers' Kimi-K2.5 reads its kimi_k2 text config")
    return _deepseek_v3(r)


_V4_PARTS = {   # key -> what DeepSeek-V4 builds there that our blocks do not
    "hc_mult": "manifold-constrained hyper-connections: hc_mult residual streams mixed by Sinkhorn-normalised "
               "matrices around every block; our blocks keep one residual stream",
    "layer_types": "compressed sparse / heavily compressed attention: a learned compressor of the keys (rate "
                   "4 or 128) before the indexer, and a sliding window beside it",
    "mlp_layer_types": "hash-routed MoE layers (experts picked by a fixed table of token ids)",
    "o_groups": "a grouped low-rank output projection (o_groups groups through o_lora_rank)",
    "scoring_func": "router scores sqrt(softplus(logits)); ours are softmax or sigmoid",
}


def _deepseek_v4(r: _Reader) -> dict[str, Any]:
    """Refused: every DeepSeek-V4 block has hyper-connections and compressed attention (transformers builds them
    always), neither of which we build; each part is named by its key."""
    for key, why in _V4_PARTS.items():
        r.bad(key, r.d.get(key, DEFAULTS["deepseek_v4"].get(key, "transformers' default")), why)
    r.read.update(r.d)   # the refusals above say why; no key is "unknown"
    return {}


READERS = {"deepseek_v32": _dsa, "glm_moe_dsa": _dsa, "kimi_k2": _kimi_k2, "deepseek_v4": _deepseek_v4}
BUILT_AS = {"kimi_k2": "deepseek_v3"}   # the transformers model type that builds a renamed config
NOT_FAMILIES = ("kimi_k2", "deepseek_v4")   # read, but not families we build under that name (an alias, a refusal)
