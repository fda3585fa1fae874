"""Attention examples: RoPE's relative scores, z-loss, soft-capping and the mask order, flexible head widths."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.layers.position import apply_rope, rope_tables
from engine.model import build_model
from engine.validation import int_problem, number_problem, require


def _rotate(vec: tuple[float, float], angles: torch.Tensor) -> torch.Tensor:
    """The engine's RoPE on one coordinate pair: rotary_dim 2 has the single frequency base**0 = 1 rad per
    position unit, so positions given in radians rotate by exactly those angles. -> [len(angles), 2]."""
    cos, sin = rope_tables(angles, 2, base=10000.0)
    x = torch.tensor(vec, dtype=torch.float32).expand(1, 1, len(angles), 2)
    return apply_rope(x, cos, sin)[0, 0]


@dataclass(frozen=True)
class RopeScore:
    i: int                 # query position
    j: int                 # key position
    score: float           # <R(i theta) q, R(j theta) k>
    relative_deg: float    # (j - i) * theta in degrees: the only thing the score depends on


def rope_scores(theta_deg: float = 30.0, pairs: tuple[tuple[int, int], ...] = ((0, 1), (2, 3)),
                q: tuple[float, float] = (1.0, 0.0), k: tuple[float, float] = (1.0, 0.0)) -> list[RopeScore]:
    """Query-key scores after rotating q at position i and k at position j by theta per position.
    With q = k = (1, 0) and theta = 30 deg, positions (0, 1) and (2, 3) both give cos 30 deg = 0.8660."""
    theta = math.radians(theta_deg)
    out = []
    for i, j in pairs:
        qi = _rotate(q, torch.tensor([i * theta]))[0]
        kj = _rotate(k, torch.tensor([j * theta]))[0]
        out.append(RopeScore(i=i, j=j, score=float(qi @ kj), relative_deg=(j - i) * theta_deg))
    return out


def rope_score_grid(theta_deg: float = 30.0, n: int = 8, q: tuple[float, float] = (1.0, 0.0),
                    k: tuple[float, float] = (1.0, 0.0)) -> list[list[float]]:
    """[n query positions][n key positions] of scores: constant along each diagonal (fixed j - i)."""
    require(int_problem("n", n))
    angles = torch.arange(n, dtype=torch.float32) * math.radians(theta_deg)
    return (_rotate(q, angles) @ _rotate(k, angles).T).tolist()


@dataclass(frozen=True)
class ZLoss:
    logits: list[float]
    probs: list[float]
    log_z: float        # log sum exp(z), computed stably
    z_loss: float       # coeff * log_z**2


def zloss(logits: tuple[float, ...] = (0.0, 0.0), coeff: float = 1e-4) -> ZLoss:
    """Shifting every logit by the same amount keeps the probabilities and moves log Z: (0, 0) and (10, 10)
    both give (0.5, 0.5) but log Z 0.6931 vs 10.6931. The z-loss coeff*(log Z)^2 tells them apart."""
    if len(logits) < 1:
        raise ValueError("logits: need at least one value")
    require(number_problem("coeff", coeff))
    z = torch.tensor(logits, dtype=torch.float64)
    log_z = float(torch.logsumexp(z, 0))
    return ZLoss(logits=z.tolist(), probs=torch.softmax(z, 0).tolist(), log_z=log_z, z_loss=coeff * log_z ** 2)


def softcap_curve(cap: float = 30.0, lo: float = -100.0, hi: float = 100.0, n: int = 201) -> dict[str, list[float]]:
    """c*tanh(z/c) and its slope 1 - tanh^2(z/c): bounded in (-c, c), nearly identity for |z| << c,
    vanishing gradient for |z| >> c."""
    require(number_problem("cap", cap, strict=True))
    if not hi > lo or n < 2:
        raise ValueError(f"softcap range: need hi > lo and n >= 2, got lo={lo}, hi={hi}, n={n}")
    z = torch.linspace(lo, hi, n, dtype=torch.float64)
    t = torch.tanh(z / cap)
    return {"z": z.tolist(), "capped": (cap * t).tolist(), "slope": (1 - t * t).tolist()}


@dataclass(frozen=True)
class MaskOrder:
    scores: list[float]
    masked: list[bool]
    cap: float
    cap_then_mask: list[float]    # probabilities: masked keys get exactly 0
    mask_then_cap: list[float]    # probabilities: tanh turned -inf into -cap, so masked keys leak weight
    engine_future_weight: float   # the engine's soft-capped attention: largest probability on a future key


def _engine_future_weight(cap: float) -> float:
    cfg = ModelConfig(name="softcap-demo", vocab_size=8, context_length=4, d_model=8, n_layers=1, n_heads=2,
                      attn_softcap=cap)
    model = build_model(cfg, seed=0)
    model.set_attention("explicit", keep_probs=True)
    with torch.no_grad():
        model(torch.arange(4).view(1, 4))
    probs = model.blocks[0].attn.probs[0]
    return float(probs.triu(diagonal=1).max())


def mask_order(scores: tuple[float, ...] = (2.0, 1.0, 3.0), masked: tuple[bool, ...] = (False, False, True),
               cap: float = 5.0) -> MaskOrder:
    """Why the causal mask goes after soft-capping: c*tanh(-inf/c) = -c is finite, so a key masked before the
    cap gets a non-zero probability. Also checks the engine's attention, which caps first, then masks."""
    if len(scores) != len(masked):
        raise ValueError(f"masked: {len(masked)} flags for {len(scores)} scores; give one per score")
    if all(masked):
        raise ValueError("masked: at least one key must stay visible")
    require(number_problem("cap", cap, strict=True))
    s = torch.tensor(scores, dtype=torch.float64)
    m = torch.tensor(masked)
    first = (cap * torch.tanh(s / cap)).masked_fill(m, -math.inf)
    late = cap * torch.tanh(s.masked_fill(m, -math.inf) / cap)
    return MaskOrder(scores=s.tolist(), masked=list(masked), cap=cap,
                     cap_then_mask=torch.softmax(first, 0).tolist(), mask_then_cap=torch.softmax(late, 0).tolist(),
                     engine_future_weight=_engine_future_weight(cap))


@dataclass(frozen=True)
class FlexibleHeads:
    d_model: int
    n_heads: int
    head_dim: int
    attn_width: int                   # A = H * d_h
    divides: bool                     # whether D % H == 0 (the usual A = D convention needs it)
    q_proj_shape: tuple[int, int]     # [A, D] as stored by nn.Linear
    o_proj_shape: tuple[int, int]     # [D, A]: maps the heads back to the residual width
    projection_params: int            # 4*D*A bias-free q, k, v, o (MHA)
    square_projection_params: int     # 4*D*D: what A = D would give
    logits_shape: tuple[int, ...]
    finite: bool


def flexible_heads(d_model: int = 10, n_heads: int = 3, head_dim: int = 4, tokens: int = 5,
                   seed: int = 0) -> FlexibleHeads:
    """Head count need not divide the width: D=10, H=3, d_h=4 builds and runs, with A = 12."""
    cfg = ModelConfig(name="flexible-heads", vocab_size=16, context_length=max(tokens, 1), d_model=d_model,
                      n_layers=1, n_heads=n_heads, head_dim=head_dim, bias=False)
    model = build_model(cfg, seed=seed)
    idx = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits = model(idx)
    attn = model.blocks[0].attn
    proj = sum(p.numel() for m in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj) for p in m.parameters())
    return FlexibleHeads(d_model=d_model, n_heads=n_heads, head_dim=head_dim, attn_width=cfg.attn_width,
                         divides=d_model % n_heads == 0, q_proj_shape=tuple(attn.q_proj.weight.shape),
                         o_proj_shape=tuple(attn.o_proj.weight.shape), projection_params=proj,
                         square_projection_params=4 * d_model * d_model, logits_shape=tuple(logits.shape),
                         finite=bool(torch.isfinite(logits).all()))
