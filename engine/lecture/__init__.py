"""The worked examples of the lecture material, each computed live by engine code.

One function per example; its inputs are the knobs a presenter turns, its result (a frozen dataclass or a
plain dict of numbers) is what the Lecture page shows. Nothing here is a typed-in answer: the numbers come
from the engine's own layers, model, parameter counter and budgets.
"""
from engine.lecture.attention import (flexible_heads, mask_order, rope_score_grid, rope_scores, softcap_curve,
                                      zloss)
from engine.lecture.blocks import norm_comparison, serial_vs_parallel
from engine.lecture.ffn import activation_values, dense_activation_table, gating_match
from engine.lecture.latent import latent_cache, mla_sizes
from engine.lecture.moe import store_vs_compute
from engine.lecture.sizes import depth_vs_width, kv_cache_variants, microgpt_table
from engine.lecture.state import fixed_state
from engine.lecture.tying import absent_token_gradient, handout_tying, shared_vs_clone, tying_savings

__all__ = ["absent_token_gradient", "activation_values", "dense_activation_table", "depth_vs_width", "fixed_state",
           "flexible_heads",
           "gating_match", "handout_tying", "kv_cache_variants", "latent_cache", "mask_order", "microgpt_table",
           "mla_sizes", "norm_comparison", "rope_score_grid", "rope_scores", "serial_vs_parallel", "shared_vs_clone", "softcap_curve", "store_vs_compute",
           "tying_savings", "zloss"]
