"""Position information: sinusoidal tables (added to the input) and rotary embedding (applied to q and k).

Learned positions are a plain nn.Embedding in the model; "none" adds nothing.
RoPE uses the rotate-half pairing (dimension i pairs with i + r/2, as in GPT-NeoX and Hugging Face Llama)
and rotates only the first `rotary_dim` dimensions of each head (partial rotary).
"""
from __future__ import annotations

import math

import torch


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
