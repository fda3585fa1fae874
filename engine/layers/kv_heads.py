"""The MHA / GQA / MQA alternatives of a config: which key/value head counts the pages, the lecture and the small
training version offer beside the config's own."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.config import ModelConfig


def kv_head_choices(n_heads: int, own: int | None = None, min_group: int = 4) -> dict[str, int]:
    """The MHA / GQA / MQA alternatives for `n_heads` query heads, as kind -> key/value heads: MHA n_heads;
    one GQA: `own` when it is a GQA count, else the most key/value heads that each still serve at least
    `min_group` query heads (32 heads -> GQA-8, 12 -> GQA-3, 4 -> none); MQA 1 (absent with one head)."""
    out = {"MHA": n_heads}
    g = own if own is not None and 1 < own < n_heads else max(
        (k for k in range(2, n_heads // min_group + 1) if n_heads % k == 0), default=None)
    if g is not None:
        out[f"GQA-{g}"] = g
    if n_heads > 1:
        out["MQA"] = 1
    return out


def attention_variants(cfg: ModelConfig) -> dict[str, ModelConfig]:
    """The same config as MHA, one GQA (kv_head_choices) and MQA: fewer key/value heads mean a smaller cache
    to hold and to read at every decode step. For an MLA config, the same model with plain attention."""
    if cfg.mla:   # plain attention beside MLA: same heads, each v_head_dim wide (keys and values alike)
        cfg = cfg.replace(kv_lora_rank=None, head_dim=cfg.v_head_dim, index_topk=None)
    return {kind: cfg.replace(n_kv_heads=None if k == cfg.n_heads else k)
            for kind, k in kv_head_choices(cfg.n_heads, cfg.kv_heads).items()}
