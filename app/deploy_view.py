"""The Deploy page's settings: one dataclass, its URL params (only what differs from the defaults) and the
engine call, so a copied link reproduces the plan."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from engine.budget.memory import POLICIES, RECOMPUTE
from engine.config import ModelConfig
from engine.plan import GPUS, MODES, Layout, Plan, Setup, plan, smallest_layout
from engine.plan.finetune import METHODS
from engine.plan.quant import KV_QUANTS, WEIGHT_QUANTS
from engine.validation import parse_bool


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
    micro_batch: int = 1
    mfu: float = 0.4
    price: float = 2.0


URL_KEYS = tuple(f.name for f in fields(DeploySpec))
_DEFAULT = DeploySpec()
_TYPES = {f.name: type(getattr(_DEFAULT, f.name)) for f in fields(DeploySpec)}
_KINDS = {bool: "true or false", int: "an integer", float: "a number"}
CHOICES = {"gpu": tuple(GPUS), "mode": MODES, "policy": POLICIES, "recompute": RECOMPUTE, "finetune": METHODS,
           "quant": WEIGHT_QUANTS, "kv_quant": KV_QUANTS, "zero": (0, 1, 2, 3)}   # the page's select boxes


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


def setup_of(cfg: ModelConfig, spec: DeploySpec) -> Setup:
    return Setup(mode=spec.mode, policy=spec.policy, recompute=spec.recompute, micro_batch=spec.micro_batch,
                 seq=spec.seq or cfg.context_length, finetune=spec.finetune, lora_rank=spec.lora_rank,
                 quant=spec.quant, kv_quant=spec.kv_quant)


def run(cfg: ModelConfig, spec: DeploySpec) -> Plan:
    """The plan, or ValueError naming every impossible setting."""
    return plan(cfg, spec.gpu, Layout(spec.gpus, spec.tp, spec.pp, spec.zero, spec.sp, spec.ep),
                setup_of(cfg, spec), mfu=spec.mfu, price=spec.price)


def smallest(cfg: ModelConfig, spec: DeploySpec) -> Plan | None:
    return smallest_layout(cfg, spec.gpu, setup_of(cfg, spec))
