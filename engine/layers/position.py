"""Position information: sinusoidal tables (added to the input) and rotary embedding (applied to q and k).

Learned positions are a plain nn.Embedding in the model; "none" adds nothing.
RoPE uses the rotate-half pairing (dimension i pairs with i + r/2, as in GPT-NeoX and Hugging Face Llama)
and rotates only the first `rotary_dim` dimensions of each head (partial rotary).
"""
from __future__ import annotations

import math

import torch

from engine.config import ModelConfig
from engine.runtime import DTYPE_BYTES


def sinusoidal_table(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """[T] positions -> [T, dim]: sin on even, cos on odd channels, wavelengths 2pi .. 10000*2pi."""
    half = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    freq = torch.exp(-math.log(10000.0) * half / dim)
    angles = positions.float()[:, None] * freq[None, :]
    table = torch.zeros(len(positions), dim, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


def rope_tables(positions: torch.Tensor, rotary_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape [T, rotary_dim], each frequency repeated for both halves (rotate-half layout)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, device=positions.device, dtype=torch.float32)
                               / rotary_dim))
    angles = positions.float()[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first cos.shape[-1] dims of x [B, H, T, hd]; the rest pass through."""
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    a, b = rot[..., : r // 2], rot[..., r // 2:]
    rotated = rot * cos.to(x.dtype) + torch.cat([-b, a], dim=-1) * sin.to(x.dtype)
    return torch.cat([rotated, rest], dim=-1) if rest.shape[-1] else rotated


def position_params(cfg: ModelConfig) -> int:
    """Learned positions are a context_length x d_model table; the other kinds have no parameters."""
    return cfg.context_length * cfg.d_model if cfg.position == "learned" else 0


def seq_problem(cfg: ModelConfig, seq: int) -> str | None:
    """A learned table has context_length rows: a longer sequence has no position to read."""
    if cfg.position == "learned" and seq > cfg.context_length:
        return f"seq: {seq} exceeds context_length={cfg.context_length} (learned positions have no row for it)"
    return None


def rope_saved_bytes(cfg: ModelConfig, T: int, e: int) -> tuple[int, int]:
    """(shared, per layer) bytes of rotary tables autograd saves: in fp32 the cos and sin tables [T, rotary_dim]
    are computed once and shared by all layers; other dtypes cast them per call (4 tables per layer)."""
    if cfg.position != "rope":
        return 0, 0
    fp32 = DTYPE_BYTES["fp32"]
    return (2 * T * cfg.rotary_dim * fp32, 0) if e == fp32 else (0, 4 * T * cfg.rotary_dim * e)
