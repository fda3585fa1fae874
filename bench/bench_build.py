"""Sizing a 70B model without memory: build Llama-3-70B on the meta device (goal < 1 s) and count its parameters
in closed form (goal < 1 ms), each against Hugging Face transformers' LlamaForCausalLM measured in the same run."""
from __future__ import annotations

import time

import torch

from bench import median_seconds
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.model import build_model
from engine.presets import get_preset

BUILDS, COUNTS = 7, 20


def llama_config(cfg: ModelConfig):
    """The equivalent transformers LlamaConfig (imported here: transformers is a dev-only peer)."""
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.ffn_width,
                       num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                       num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_width,
                       max_position_embeddings=cfg.context_length, rms_norm_eps=cfg.norm_eps,
                       rope_theta=cfg.rope_base, tie_word_embeddings=cfg.tie_embeddings)


def hf_build(hf_cfg):
    from transformers import LlamaForCausalLM
    with torch.device("meta"):
        return LlamaForCausalLM(hf_cfg)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<58}{value:>12}  {note}".rstrip())


def main() -> None:
    cfg = get_preset("llama-3-70b").config
    first = seconds(lambda: build_model(cfg, "meta"))
    ours = median_seconds(lambda: build_model(cfg, "meta"), BUILDS)
    n = sum(p.numel() for p in build_model(cfg, "meta").parameters())
    closed = median_seconds(lambda: count_params(cfg), COUNTS, number=100)
    assert count_params(cfg).total == n
    print(f"Llama-3-70B, {n:,} parameters, torch {torch.__version__}")
    row("engine build_model(device='meta'), first in this run", f"{first:.3f} s")
    row(f"engine build_model(device='meta'), median of {BUILDS}", f"{ours:.3f} s",
        f"goal < 1 s: {'met' if ours < 1 else 'MISSED'}")
    row(f"engine count_params (closed form), median of {COUNTS}x100", f"{closed * 1e6:.1f} us",
        f"goal < 1 ms: {'met' if closed < 1e-3 else 'MISSED'}")
    try:
        import transformers
        hf_cfg = llama_config(cfg)
    except ImportError:
        print("  peer: transformers is not installed (pip install -r requirements-dev.txt); no ratio")
        return
    peer_first = seconds(lambda: hf_build(hf_cfg))
    peer = median_seconds(lambda: hf_build(hf_cfg), BUILDS)
    hf_n = sum(p.numel() for p in hf_build(hf_cfg).parameters())
    peer_name = f"transformers {transformers.__version__} LlamaForCausalLM on meta"
    row(f"{peer_name}, first", f"{peer_first:.3f} s")
    row(f"{peer_name}, median of {BUILDS}", f"{peer:.3f} s",
        f"{hf_n:,} parameters{', same' if hf_n == n else ', DIFFERENT'}")
    row("build time ratio, transformers / engine", f"{peer / ours:.2f}x")
    row("count time ratio, transformers build + sum / closed form", f"{peer / closed:,.0f}x")
