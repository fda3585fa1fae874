"""Embedding tying: one shared Parameter (not a copy), what it saves, and how an absent token still learns."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.budget.memory import DTYPE_BYTES
from engine.budget.params import count_params
from engine.config import ModelConfig
from engine.model import build_model
from engine.presets import get_preset
from engine.validation import choice_problem, int_problem, require


class _TinyLM(nn.Module):
    """Embedding lookup straight into the output head: the smallest model with both roles of the table."""

    def __init__(self, vocab: int, dim: int, share: bool, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        # shared: the very same Parameter object; clone: equal values in a second, independent Parameter
        self.head.weight = self.emb.weight if share else nn.Parameter(self.emb.weight.detach().clone())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(idx))


@dataclass(frozen=True)
class SharingResult:
    unique_params: int        # sum(p.numel() for p in model.parameters()): a shared Parameter counts once
    same_object: bool         # head.weight is emb.weight
    equal_before: bool        # the two tables hold equal values at the start
    max_diff_after: float     # max |E - W_head| after one SGD step: 0 when shared, > 0 for a clone


def _sharing(vocab: int, dim: int, share: bool, seed: int) -> SharingResult:
    model = _TinyLM(vocab, dim, share, seed)
    equal = bool(torch.equal(model.emb.weight, model.head.weight))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    idx = torch.arange(vocab)
    F.cross_entropy(model(idx), idx.roll(1)).backward()
    opt.step()
    with torch.no_grad():
        diff = float((model.emb.weight - model.head.weight).abs().max())
    return SharingResult(unique_params=sum(p.numel() for p in model.parameters()),
                         same_object=model.head.weight is model.emb.weight, equal_before=equal, max_diff_after=diff)


def shared_vs_clone(vocab: int = 5, dim: int = 3, seed: int = 0) -> dict[str, SharingResult]:
    """{'shared': ..., 'clone': ...}: at V=5, D=3 the shared table has 15 unique parameters, the detached clone
    30; both start equal, only the clone drifts apart after one optimizer step."""
    require(int_problem("vocab", vocab), int_problem("dim", dim))
    return {"shared": _sharing(vocab, dim, True, seed), "clone": _sharing(vocab, dim, False, seed)}


def handout_tying(preset: str = "nanogpt-handout") -> dict[str, dict[str, int]]:
    """The handout's tiny nanoGPT config counted tied and untied, in closed form and on the meta-built model:
    1,872 vs 1,932 (the difference is V*D = 60)."""
    base = get_preset(preset).config
    out = {}
    for label, tie in (("tied", True), ("untied", False)):
        cfg = base.replace(tie_embeddings=tie)
        built = build_model(cfg, device="meta")
        out[label] = {"closed_form": count_params(cfg).total,
                      "built": sum(p.numel() for p in built.parameters())}
    return out


@dataclass(frozen=True)
class AbsentTokenGrad:
    tokens: list[int]
    target: int
    tied: bool
    probs: list[float]            # softmax at the last position
    hidden: list[float]           # h: the final hidden state the head reads
    absent: list[int]             # rows neither in the input nor the target
    head_grad: list[list[float]]  # d loss / d W_head, one row per vocabulary item
    expected: list[list[float]]   # p_j * h for the absent rows (in `absent` order)
    max_error: float              # max |head_grad[j] - p_j h| over absent rows
    embedding_absent_grad: float  # largest |grad| on an absent row of the *input* table (0 unless tied)


def absent_token_gradient(tokens: tuple[int, ...] = (0, 2), target: int = 1, tied: bool = True,
                          preset: str = "nanogpt-handout", seed: int = 0) -> AbsentTokenGrad:
    """One prediction with the engine's model: every absent, non-target vocabulary row j of the output head
    gets gradient p_j * h (softmax probability times the hidden state). With tying that row *is* the
    embedding row, so a token never seen in the input still updates its embedding."""
    cfg = get_preset(preset).config.replace(tie_embeddings=tied)
    V = cfg.vocab_size
    bad = [t for t in (*tokens, target) if not 0 <= t < V]
    if bad or not tokens:
        raise ValueError(f"tokens/target: need 1..{cfg.context_length} ids in [0, {V - 1}], got {list(tokens)}"
                         f" -> {target}")
    if len(tokens) > cfg.context_length:
        raise ValueError(f"tokens: {len(tokens)} exceeds context_length={cfg.context_length}")
    model = build_model(cfg, dtype=torch.float64, seed=seed)
    seen = {}
    model.head.register_forward_hook(lambda m, inp, out: seen.update(h=inp[0]))
    logits = model(torch.tensor([tokens]))[0, -1]
    F.cross_entropy(logits[None], torch.tensor([target])).backward()
    p, h = torch.softmax(logits.detach(), 0), seen["h"][0, -1].detach()
    absent = [j for j in range(V) if j not in tokens and j != target]
    grad = model.head.weight.grad
    expected = torch.stack([p[j] * h for j in absent]) if absent else torch.zeros(0, cfg.d_model)
    err = float((grad[absent] - expected).abs().max()) if absent else 0.0
    emb_grad = model.tok_emb.weight.grad
    emb_absent = float(emb_grad[absent].abs().max()) if absent and emb_grad is not None else 0.0
    return AbsentTokenGrad(tokens=list(tokens), target=target, tied=tied, probs=p.tolist(), hidden=h.tolist(),
                           absent=absent, head_grad=grad.tolist(), expected=expected.tolist(), max_error=err,
                           embedding_absent_grad=emb_absent)


@dataclass(frozen=True)
class TyingSavings:
    vocab: int
    dim: int
    params: int                  # untied minus tied count_params: V*D, the matrix tying removes
    weight_bytes: int            # at the weight dtype
    training_bytes: int          # weight + gradient (both weight dtype) + two fp32 Adam moments
    master_bytes: int            # an fp32 master copy on top
    bytes_per_param_training: int


def tying_savings(vocab: int = 32000, dim: int = 768, weight_dtype: str = "bf16") -> TyingSavings:
    """Untied embedding + head hold 2VD parameters, tied VD: at V=32,000, D=768 tying saves 24,576,000
    parameters, 46.875 MiB of bf16 weights, 281.25 MiB at 12 bytes/param (2 weight + 2 grad + 8 Adam), and
    93.75 MiB more if an fp32 master copy is kept."""
    require(choice_problem("weight_dtype", weight_dtype, DTYPE_BYTES), int_problem("vocab", vocab),
            int_problem("dim", dim))
    base = ModelConfig(name="tying-demo", vocab_size=vocab, d_model=dim, n_heads=1, n_layers=1)
    n = count_params(base.replace(tie_embeddings=False)).total - count_params(base.replace(tie_embeddings=True)).total
    w = DTYPE_BYTES[weight_dtype]
    per_param = w + w + 2 * DTYPE_BYTES["fp32"]
    return TyingSavings(vocab=vocab, dim=dim, params=n, weight_bytes=n * w, training_bytes=n * per_param,
                        master_bytes=n * DTYPE_BYTES["fp32"], bytes_per_param_training=per_param)
