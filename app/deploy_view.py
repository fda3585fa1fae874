"""The Deploy page's settings: one dataclass, its URL params (only what differs from the defaults), the engine
calls, and the chart data of the serving answers, so a copied link reproduces the plan."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from engine.budget.devices import DEVICE_PROFILES
from engine.budget.memory import POLICIES, RECOMPUTE
from engine.config import ModelConfig
from engine.plan import GPUS, MODES, Layout, Plan, Serving, Setup, plan, smallest_layout
from engine.plan.finetune import METHODS
from engine.plan.quant import KV_QUANTS, WEIGHT_QUANTS
from engine.plan.serve import ENGINES, capacity, memory_at
from engine.plan.speed import speed
from engine.validation import parse_bool

GiB = 2**30
QLORA_QUANT = "nf4-dq"        # what QLoRA stores its base in when no other quantization is chosen


@dataclass(frozen=True)
class DeploySpec:
    gpu: str = "h100-80gb"
    gpus: int = 8
    tp: int = 1
    pp: int = 1
    zero: int = 3
    ep: int = 1
    sp: bool = False
    mode: str = "train"
    policy: str = "mixed-bf16"
    recompute: str = "full"
    finetune: str = "full"
    lora_rank: int = 16
    quant: str = "none"
    kv_quant: str = "none"
    seq: int = 0                 # 0: the config's context_length
    micro_batch: int = 1         # training: sequences per micro-batch; inference: concurrent sequences
    mfu: float = 0.4
    tokens: int = 0              # training tokens; 0: Chinchilla for full training, none for a fine-tune
    price: float = 2.0
    currency: str = "USD"
    engine: str = "auto"         # auto: llama.cpp for gguf: weights, else vLLM
    request: int = 0             # N of "concurrent requests of N tokens"; 0: the context
    efficiency: float = 0.75     # share of memory bandwidth decode reaches
    compute_eff: float = 0.5     # share of peak FLOP/s prefill reaches
    utilization: float = 0.0     # 0: the engine's default (vLLM 0.9, llama.cpp 1.0)
    activation_gib: float = -1.0  # -1: modelled
    non_torch_gib: float = 1.0


URL_KEYS = tuple(f.name for f in fields(DeploySpec))
_DEFAULT = DeploySpec()
_TYPES = {f.name: type(getattr(_DEFAULT, f.name)) for f in fields(DeploySpec)}
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "text"}
CHOICES = {"gpu": tuple(GPUS), "mode": MODES, "policy": POLICIES, "recompute": RECOMPUTE, "finetune": METHODS,
           "quant": WEIGHT_QUANTS, "kv_quant": KV_QUANTS, "zero": (0, 1, 2, 3), "engine": ("auto",) + ENGINES}


def spec_from_params(params: dict[str, str]) -> tuple[DeploySpec, list[str]]:
    """(spec, problems) from URL params; a value of the wrong type is reported, named, and dropped."""
    values, problems = {}, []
    for key in URL_KEYS:
        if key not in params:
            continue
        raw, kind = params[key], _TYPES[key]
        try:
            if kind is bool:
                value = parse_bool(raw)
                if value is None:
                    raise ValueError
            else:
                value = kind(raw)
        except ValueError:
            problems.append(f"{key}: {raw!r} is not {_KINDS[kind]}")
            continue
        if key in CHOICES and value not in CHOICES[key]:
            problems.append(f"{key}: {raw!r} is not one of {', '.join(map(str, CHOICES[key]))}")
            continue
        values[key] = value
    return replace(_DEFAULT, **values), problems


def spec_to_params(spec: DeploySpec) -> dict[str, str]:
    return {k: (("true" if v else "false") if isinstance(v, bool) else str(v))
            for k, v in asdict(spec).items() if v != getattr(_DEFAULT, k)}


def shown_quant(spec: DeploySpec) -> str:
    """The weight storage the plan applies: QLoRA's 4-bit base when no other is chosen."""
    return QLORA_QUANT if spec.finetune == "qlora" and spec.mode == "train" and spec.quant == "none" else spec.quant


def setup_of(cfg: ModelConfig, spec: DeploySpec) -> Setup:
    train = spec.mode == "train"
    return Setup(mode=spec.mode, policy=spec.policy, recompute=spec.recompute, micro_batch=spec.micro_batch,
                 seq=spec.seq or cfg.context_length, finetune=spec.finetune if train else "full",
                 lora_rank=spec.lora_rank, quant=shown_quant(spec), kv_quant=spec.kv_quant)


def serving_of(spec: DeploySpec) -> Serving:
    return Serving(engine=None if spec.engine == "auto" else spec.engine, utilization=spec.utilization or None,
                   activation_bytes=None if spec.activation_gib < 0 else round(spec.activation_gib * GiB),
                   non_torch_bytes=round(spec.non_torch_gib * GiB))


def layout_of(spec: DeploySpec) -> Layout:
    return Layout(spec.gpus, spec.tp, spec.pp, spec.zero if spec.mode == "train" else 0, spec.sp, spec.ep)


def run(cfg: ModelConfig, spec: DeploySpec) -> Plan:
    """The plan, or ValueError naming every impossible setting."""
    return plan(cfg, spec.gpu, layout_of(spec), setup_of(cfg, spec), spec.tokens or None, spec.mfu, spec.price,
                spec.currency, serving_of(spec), spec.request or None, spec.efficiency, spec.compute_eff)


def smallest(cfg: ModelConfig, spec: DeploySpec) -> Plan | None:
    return smallest_layout(cfg, spec.gpu, setup_of(cfg, spec))


def context_points(cfg: ModelConfig, top: int) -> list[int]:
    """Context lengths for the memory chart: powers of two from 1,024 up to `top`, and `top` itself."""
    out = [2**k for k in range(10, max(11, math.ceil(math.log2(top))))]
    return sorted({t for t in out if t < top} | {top})


def context_curve(cfg: ModelConfig, spec: DeploySpec) -> tuple[list[int], list[int], dict[str, int]]:
    """(contexts, bytes per GPU for one sequence of each, {GPU: memory the engine may use}): the memory-vs-
    context chart. The curve's points cross each GPU's line at that GPU's longest context."""
    s, sv, lay = setup_of(cfg, spec), serving_of(spec), layout_of(spec)
    share = sv.resolved(cfg, s.quant).utilization
    tokens = context_points(cfg, cfg.context_length)
    need = [memory_at(cfg, lay, s, sv, t) for t in tokens]
    lines = {p.name: int(p.memory_bytes * share) for p in DEVICE_PROFILES.values() if p.key}
    return tokens, need, lines


def speed_curve(cfg: ModelConfig, spec: DeploySpec) -> tuple[list[int], list[float], list[float], int]:
    """(batch sizes, tokens/s per user, tokens/s in all, the largest batch whose KV fits) at the page's
    context: the decode chart."""
    s, lay = setup_of(cfg, spec), layout_of(spec)
    dev = DEVICE_PROFILES[GPUS[spec.gpu]]
    cap = capacity(cfg, dev.memory_bytes, lay, s, serving_of(spec), s.seq)
    fit = math.floor(cap.max_concurrency)
    batches = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= max(2 * fit, 8)]
    rows = [speed(cfg, dev, lay, s, b, s.seq, spec.efficiency, spec.compute_eff) for b in batches]
    return batches, [r.per_user for r in rows], [r.total for r in rows], fit
