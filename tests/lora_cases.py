"""Small configs for the LoRA tests (tests/test_lora_peft.py, tests/test_lora_names.py): name -> (config, the
targets peft wraps, rank): dense MHA with a dense FFN, GQA, and a gated FFN."""
from __future__ import annotations

from engine.config import ModelConfig

LLAMA = dict(norm="rmsnorm", norm_bias=False, bias=False, position="rope", tie_embeddings=False)
CASES = {
    "dense-mha": (ModelConfig(name="dense", vocab_size=50, context_length=16, d_model=32, n_layers=3, n_heads=4),
                  ("o", "up", "down"), 8),
    "gqa": (ModelConfig(name="gqa", vocab_size=50, context_length=16, d_model=48, n_layers=2, n_heads=6,
                        n_kv_heads=2, ffn="swiglu", d_ff=80, **LLAMA), ("q", "k", "v", "o"), 4),
    "gated-ffn": (ModelConfig(name="gated", vocab_size=50, context_length=16, d_model=32, n_layers=2, n_heads=4,
                              n_kv_heads=4, ffn="swiglu", d_ff=96, **LLAMA),
                  ("q", "k", "v", "o", "gate", "up", "down"), 16),
}
