"""A short, honest training run: AdamW, warmup + cosine, clipping, z-loss, per-step diagnostics.

Runs are cancellable (a threading.Event), report each step through a callback, stop with status
"diverged" when the loss or gradient stops being finite (or blows far above where it started), and keep
the curve so far. The same function runs under torchrun (see ddp.py).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from engine.config import ConfigError, ModelConfig
from engine.guard import check_fits
from engine.limits import MAX_INT
from engine.measure.rounds import summarize
from engine.model import DecoderLM, build_model
from engine.runtime import resolve_device
from engine.train.data import Dataset, get_batch, load_data
from engine.train.ddp import SINGLE, DistInfo
from engine.train.sharding import MODES, clip_grad_norm, data_slice, parallelize
from engine.validation import int_problem

DIVERGE_FACTOR = 3.0  # a train loss this many times the initial loss counts as diverged


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings; the model comes from a ModelConfig (vocab and context set from the data)."""
    steps: int = 150
    batch: int = 32
    seq: int = 16
    lr: float = 3e-3
    min_lr_ratio: float = 0.1    # the cosine's floor, lr * min_lr_ratio, reached at step `steps` (see lr_at)
    warmup: int = 10
    weight_decay: float = 0.1
    grad_clip: float = 1.0       # 0 turns clipping off
    z_loss: float = 0.0          # coefficient of mean(log Z)^2 (PaLM uses 1e-4)
    dropout: float = 0.0
    seed: int = 0
    eval_every: int = 25
    eval_batches: int = 4
    samples: int = 8
    data: str = "names"
    parallel: str = "ddp"        # under torchrun: ddp, fsdp (FSDP2, ZeRO-3) or tp (tensor parallel)

    def __post_init__(self) -> None:
        p = []
        for name, lo in (("steps", 1), ("batch", 1), ("seq", 2), ("warmup", 0), ("eval_every", 1),
                         ("eval_batches", 1), ("samples", 0), ("seed", 0)):
            if problem := int_problem(name, getattr(self, name), lo):
                p.append(problem)
            elif getattr(self, name) > MAX_INT:
                p.append(f"{name}: the value is more than {MAX_INT:,} (2^53 - 1)")
        for name, lo, hi in (("lr", 0, math.inf), ("min_lr_ratio", 0, 1), ("weight_decay", 0, math.inf),
                             ("grad_clip", 0, math.inf), ("z_loss", 0, math.inf), ("dropout", 0, 0.999)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi) \
                    or not math.isfinite(v) or (name == "lr" and v == 0):
                rng = "a finite number > 0" if name == "lr" else (
                    f"a finite number >= {lo}" if hi == math.inf else f"a number in [{lo}, {hi}]")
                p.append(f"{name}: {v!r} is not {rng}")
        if self.parallel not in MODES:
            p.append(f"parallel: {self.parallel!r} is not one of {', '.join(MODES)}")
        if p:
            raise ConfigError(p)

    def check_data(self, data: Dataset) -> None:
        """ConfigError naming seq when either split of `data` is too short for windows of seq + 1 tokens."""
        shortest = min(len(data.train), len(data.val))
        if shortest <= self.seq + 1:
            most = shortest - 2
            fix = f"use seq <= {most:,}" if most >= 2 else "use a longer text"
            raise ConfigError([f"seq: {self.seq:,} needs more than {self.seq + 1:,} tokens in each split, but "
                               f"the {data.name} data's {'train' if len(data.train) == shortest else 'val'} split has "
                               f"{shortest:,}; {fix}"])

    def replace(self, **kw) -> "TrainConfig":
        return TrainConfig(**{**asdict(self), **kw})


@dataclass
class StepRecord:
    step: int
    train_loss: float
    lr: float
    grad_norm: float
    tokens_per_s: float
    max_logit: float
    log_z: float
    val_loss: float | None = None
    aux_loss: float | None = None              # MoE: load-balancing loss (mean over MoE layers)
    router_z_loss: float | None = None         # MoE: router z-loss (mean over MoE layers)
    expert_load: list[list[int]] | None = None  # MoE: tokens per expert, one row per MoE layer


STEP_FIELDS = tuple(f.name for f in fields(StepRecord))


@dataclass
class RunResult:
    status: str                       # finished | stopped | diverged
    message: str
    records: list[StepRecord]
    model_config: ModelConfig
    params: int
    initial_loss: float | None = None  # val loss before the first update
    final_loss: float | None = None    # val loss after the last update
    tokens_per_s: float = 0.0          # median over the training steps (step_throughput)
    tokens_per_s_spread: float = 0.0   # IQR / median of the per-step tokens/s; > NOISY_SPREAD: noisy
    samples: list[str] = field(default_factory=list)
    run_id: int | None = None


def step_throughput(records: Sequence[StepRecord]) -> tuple[float, float]:
    """(median tokens/s over the steps, IQR / median). The median, not total tokens / total seconds: a few steps
    slowed by another process (or the first step's allocations) would dominate a mean and make an A/B ratio say
    more about the machine than the models; the spread says how far to trust the difference (as on Latency)."""
    if not records:
        return 0.0, 0.0
    rates = summarize([r.tokens_per_s for r in records])   # Latency's median and IQR, here of rates
    return rates.median_s, rates.spread


def model_for(cfg: ModelConfig, data: Dataset, tc: TrainConfig) -> ModelConfig:
    """The model trained: vocab from the data, context = the training sequence length, the run's dropout."""
    return cfg.replace(vocab_size=data.vocab_size, context_length=tc.seq, dropout=tc.dropout)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup over `warmup` steps, then cosine decay over steps warmup..steps (nanoGPT's schedule with
    lr_decay_iters = steps): it reaches lr * min_lr_ratio at step `steps`, one past the last step trained."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    span = max(1, tc.steps - tc.warmup)
    progress = min(1.0, (step - tc.warmup) / span)
    return tc.lr * (tc.min_lr_ratio + (1 - tc.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _optimizer(model: DecoderLM, tc: TrainConfig) -> torch.optim.AdamW:
    """Weight decay on matrices (embeddings included, as nanoGPT); none on norm gains and biases."""
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay},
                              {"params": rest, "weight_decay": 0.0}], lr=tc.lr, betas=(0.9, 0.95))


@torch.no_grad()
def _evaluate(model: DecoderLM, batches: list[tuple[torch.Tensor, torch.Tensor]], info: DistInfo) -> float:
    model.eval()
    losses = [F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten()) for x, y in batches]
    model.train()
    return float(info.mean(torch.stack(losses).mean()))


@torch.no_grad()
def sample(model: DecoderLM, data: Dataset, n: int, max_new: int = 24, temperature: float = 0.8,
           seed: int = 0) -> list[str]:
    """Names: n documents, each from BOS until the next BOS. Other data: n continuations of one val token."""
    if n == 0:
        return []
    model.eval()
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    first = 0 if data.name == "names" else int(data.val[0])
    idx = torch.full((n, 1), first, dtype=torch.long, device=device)
    ctx = model.cfg.context_length
    for i in range(max_new if data.name == "names" else 8 * max_new):
        logits = model(idx[:, -ctx:])[:, -1].float() / temperature
        if i == 0 and data.name == "names":
            logits[:, 0] = -math.inf      # no empty names
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)
        idx = torch.cat([idx, nxt], dim=1)
    model.train()
    out = []
    for row in idx.tolist():
        ids = row[1:]
        if data.name == "names":
            ids = ids[:ids.index(0)] if 0 in ids else ids
        else:
            ids = row
        out.append(data.decode(ids))
    return out


def train(cfg: ModelConfig, tc: TrainConfig, data: Dataset | None = None, *, device: str = "auto",
          on_step: Callable[[StepRecord], None] | None = None, stop: threading.Event | None = None,
          store=None, info: DistInfo = SINGLE) -> RunResult:
    """Train `cfg` (resized to the data) for tc.steps steps. `store` (a RunStore) gets every step as it
    happens; `on_step` sees each record (for live charts); setting `stop` ends the run after the current step."""
    data = data or load_data(tc.data, seed=tc.seed)
    rank, world = data_slice(info, tc.parallel)
    if tc.batch % world:
        raise ConfigError([f"batch: {tc.batch} must be divisible by the number of processes ({world})"])
    tc.check_data(data)
    dev = resolve_device(device)
    if dev.type == "cuda" and info.world > 1:
        dev = torch.device("cuda", info.local_rank)
    mcfg = model_for(cfg, data, tc)
    check_fits(mcfg, dev, tc.batch // world, tc.seq, "fp32", training=True)   # this rank's share of the batch
    torch.manual_seed(tc.seed)
    model = build_model(mcfg, device=dev, seed=tc.seed)
    model.train()
    net = parallelize(model, info, tc.parallel)
    sharded = tc.parallel != "ddp" and info.world > 1   # parameters are DTensor shards
    opt = _optimizer(model, tc)
    n_params = sum(p.numel() for p in model.parameters())
    gen, val_gen = torch.Generator().manual_seed(tc.seed), torch.Generator().manual_seed(tc.seed + 1)
    val_batches = [tuple(t.to(dev) for t in get_batch(data.val, tc.batch, tc.seq, val_gen, rank, world))
                   for _ in range(tc.eval_batches)]
    result = RunResult("finished", "", [], mcfg, n_params)
    result.initial_loss = _evaluate(model, val_batches, info)
    if store is not None and info.main:
        result.run_id = store.create_run(mcfg, tc, data.name, n_params, dev.type, info.world,
                                         initial_loss=result.initial_loss)
    for step in range(1, tc.steps + 1):
        if stop is not None and stop.is_set():
            result.status, result.message = "stopped", f"stopped by the user after {step - 1} steps"
            break
        lr = lr_at(step - 1, tc)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = (t.to(dev) for t in get_batch(data.train, tc.batch, tc.seq, gen, rank, world))
        t0 = time.perf_counter()
        logits = net(x).float()
        ce = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        log_z = torch.logsumexp(logits, dim=-1)
        loss = ce + tc.z_loss * log_z.pow(2).mean() if tc.z_loss else ce
        moe = model.moe_losses()   # MoE: aux_loss_coef * balance + z_loss_coef * router z-loss
        if moe:
            loss = loss + moe["regularizer"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = (torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip or math.inf)
                     if not sharded else clip_grad_norm(list(model.parameters()), tc.grad_clip or math.inf))
        stats = info.mean(torch.stack([ce.detach(), log_z.detach().mean()]))
        max_logit = float(info.max(logits.detach().max()))
        train_loss, gn = float(stats[0]), float(grad_norm)
        limit = DIVERGE_FACTOR * result.initial_loss
        if not (math.isfinite(train_loss) and math.isfinite(gn)) or train_loss > limit:
            what = "is not finite" if not math.isfinite(train_loss) else (
                f"rose above {DIVERGE_FACTOR:g}x the initial loss" if math.isfinite(gn) else "gradient is not finite")
            result.status = "diverged"
            result.message = (f"diverged at step {step}: training loss {train_loss:.4g} {what} "
                              f"(grad norm {gn:.4g}, lr {lr:.3g}); the curve up to step {step - 1} is kept. "
                              f"Try a smaller lr, a warmup, clipping or z-loss.")
            break
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        rec = StepRecord(step, train_loss, lr, gn, tc.batch * tc.seq / dt, max_logit, float(stats[1]))
        if moe:
            rec.aux_loss, rec.router_z_loss = float(moe["aux_loss"].detach()), float(moe["z_loss"].detach())
            rec.expert_load = [m.load.tolist() for m in model.moe_layers()]
        if step % tc.eval_every == 0 or step == tc.steps:
            rec.val_loss = _evaluate(model, val_batches, info)
        result.records.append(rec)
        if info.main:
            if store is not None:
                store.add_step(result.run_id, rec)
            if on_step is not None:
                on_step(rec)
    result.tokens_per_s, result.tokens_per_s_spread = step_throughput(result.records)
    if result.status != "diverged":
        last = result.records[-1] if result.records else None
        result.final_loss = last.val_loss if last and last.val_loss is not None else _evaluate(
            model, val_batches, info)
        if last is not None and last.val_loss is None:   # stopped between evaluations: the last step gets it
            last.val_loss = result.final_loss
            if store is not None and info.main:
                store.add_step(result.run_id, last)
        if info.main or sharded:   # sharded: every rank takes part in each forward
            result.samples = sample(model, data, tc.samples, seed=tc.seed)
        if result.status == "finished":
            result.message = (f"{len(result.records)} steps: val loss {result.initial_loss:.3f} -> "
                              f"{result.final_loss:.3f} at {result.tokens_per_s:,.0f} tokens/s (median step)")
    if store is not None and info.main:
        store.finish_run(result)
    return result
