"""Every choice an engine function of the budgets, the planner or training takes (a dtype, an attention
implementation, a precision policy, a state convention...), found by walking engine.budget, engine.plan and
engine.train at runtime, so a new function or option cannot slip by:

- its string default is one of the choices the engine offers for it (a default off its own table would refuse the
  call a user makes without the option, or price something no user can ask for);
- leaving the option out answers exactly as spelling that default out (every function below is called both ways);
- a value off the choices is refused with a ValueError whose message is the option's own name and its choices, as
  the CLI and the pages print it ("dtype: 'Nonsense' is not one of fp32, bf16, ...");
- a call with several bad arguments names every one of them in one message (the user fixes them at once).

The tables are the engine's own (imported), the mapping option name -> table is kept here by hand."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import engine.budget
import engine.plan
import engine.train
from engine.budget.activations import RECOMPUTE
from engine.budget.devices import DEVICE_PROFILES, GPUS
from engine.budget.memory import KV_KINDS, OPTIMIZERS, POLICIES
from engine.layers.attention import ATTENTION_IMPLS
from engine.layers.indexer import INDEX_KEY_FORMATS
from engine.layers.kinds import CONVENTIONS
from engine.plan import MODES as PLAN_MODES, Layout, Setup
from engine.plan.finetune import METHODS, TARGETS
from engine.plan.quant import KEEP_CHOICES, KV_QUANTS, WEIGHT_QUANTS
from engine.presets import get_preset
from engine.runtime import DTYPE_BYTES
from engine.train.data import SOURCES
from engine.train.sharding import MODES as PARALLEL_MODES
from engine.validation import choice_problem

# option name -> the engine's table of its choices
CHOICES = {
    "dtype": DTYPE_BYTES, "impl": ATTENTION_IMPLS, "attention": ATTENTION_IMPLS, "recompute": RECOMPUTE,
    "index_keys": INDEX_KEY_FORMATS, "kind": KV_KINDS, "convention": CONVENTIONS, "policy": POLICIES,
    "optimizer": OPTIMIZERS, "device": DEVICE_PROFILES, "gpu": GPUS, "mode": PLAN_MODES, "finetune": METHODS,
    "quant": WEIGHT_QUANTS, "kv_quant": KV_QUANTS, "lora_targets": TARGETS, "targets": TARGETS,
    "quantize_also": KEEP_CHOICES, "data": SOURCES, "parallel": PARALLEL_MODES,
}
# the same name meaning another table in one place
OWN_TABLE = {"parallelize.mode": PARALLEL_MODES, "data_slice.mode": PARALLEL_MODES}
# string options that are not a choice from a table, and why
NOT_A_CHOICE = {
    "load_text.name": "the dataset's label, any text (a file's name)",
    "cost.currency": "the label of the price the caller states", "plan.currency": "the same label",
    "Plan.currency": "the same label",
    "DeviceProfile.source": "a profile's citation", "DeviceProfile.key": "a profile's planner id",
    "DeviceProfile.match": "a profile's device-name substring",
    "MeasuredCPU.source": "the same citation", "MeasuredCPU.key": "the same id", "MeasuredCPU.match": "the same",
    "train.device": "a torch device: auto, cpu, cuda or cuda:N (engine.runtime.resolve_device)",
    "run_estimate_s.device": "the torch device type the runs are timed on",
    "RunStore.create_run.data": "the data as the user named it: a source or a file",
    "RunStore.create_run.device": "the torch device the run trained on",
}


def _modules():
    for pkg in (engine.budget, engine.plan, engine.train):
        yield pkg
        for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
            yield importlib.import_module(m.name)


def _public(name: str) -> bool:
    """Not private, and not one of mutmut's copies (x_fn__mutmut_3, xǁClassǁmethod__mutmut_orig) that sit beside
    each function while a mutation run imports its rewritten modules."""
    return not name.startswith("_") and "__mutmut" not in name


def _callables():
    """(qualified name, function or method) of every public function and public method defined in the modules."""
    for mod in _modules():
        for name, obj in vars(mod).items():
            if not _public(name) or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                yield name, obj
            elif inspect.isclass(obj):
                for attr, meth in vars(obj).items():
                    if inspect.isfunction(meth) and _public(attr):
                        yield f"{name}.{attr}", meth


def _is_str(annotation) -> bool:
    return annotation is str or (isinstance(annotation, str) and annotation.split(" ")[0] in ("str", "tuple[str,"))


def _table(owner: str, param: str):
    return OWN_TABLE.get(f"{owner}.{param}", CHOICES.get(param))


def _string_defaults():
    """(owner.option, default) of every string (or tuple of strings) default: parameters and dataclass fields."""
    for owner, fn in _callables():
        for p in inspect.signature(fn).parameters.values():
            if isinstance(p.default, str) or (isinstance(p.default, tuple) and p.default
                                              and all(isinstance(x, str) for x in p.default)):
                yield owner, p.name, p.default
    for mod in _modules():
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == mod.__name__:
                for f in dataclasses.fields(cls):
                    if isinstance(f.default, (str, tuple)) and all(isinstance(x, str) for x in (
                            (f.default,) if isinstance(f.default, str) else f.default)):
                        yield name, f.name, f.default


def _choice_params():
    """(owner, function, option) for every str-typed parameter named like a choice, NOT_A_CHOICE left out."""
    for owner, fn in _callables():
        for p in inspect.signature(fn).parameters.values():
            if _table(owner, p.name) is not None and _is_str(p.annotation) and f"{owner}.{p.name}" not in NOT_A_CHOICE:
                yield owner, fn, p.name


def test_every_string_default_is_one_of_its_choices():
    seen = set()
    for owner, param, default in _string_defaults():
        key = f"{owner}.{param}"
        seen.add(key)
        if key in NOT_A_CHOICE:
            continue
        table = _table(owner, param)
        assert table is not None, f"{key}: a string default {default!r}; add its table to CHOICES or say why not"
        values = (default,) if isinstance(default, str) else default
        assert all(v in table for v in values), f"{key}: default {default!r} is not one of {', '.join(table)}"
    params = {f"{o}.{p}" for o, fn in _callables() for p in inspect.signature(fn).parameters}
    assert set(NOT_A_CHOICE) <= seen | params      # no stale entry


GPT2, DSA, HYBRID = (get_preset(n).config for n in ("gpt2", "deepseek-v3.2", "qwen3.5-9b"))
H100 = DEVICE_PROFILES["H100"]
TINY_INFER = Setup(mode="infer", seq=256)

# owner -> (arguments, keyword arguments) of a cheap call of it
CALLS = {
    "activation_estimate": ((GPT2, 2, 8), {}),
    "context_memory": ((HYBRID, (1024, 4096)), {"batch": 2}),
    "inference_bytes": ((HYBRID, 4096), {"batch": 2}),
    "crossing": ((HYBRID, 40 * 2**30, 2**20), {"batch": 2}),
    "crossings": ((HYBRID, 2**20), {"batch": 2, "devices": ("H100", "L4")}),
    "roofline": ((GPT2, "H100", 2, 8), {}),
    "roofline_on": ((GPT2, H100, 2, 8), {}),
    "DeviceProfile.ridge": ((H100,), {}),
    "arithmetic_intensity": ((GPT2, 2, 8), {}),
    "output_logits_bytes": ((GPT2, 2, 8, "fp32"), {}),
    "pure_policy": (("fp16",), {}),
    "index_key_layers": ((DSA, 2, 64), {}),
    "kv_cache_bytes": ((DSA, 2, 64), {}),
    "index_key_cache_bytes": ((DSA, 2, 64), {}),
    "state_bytes": ((HYBRID, 2), {}),
    "layer_state_bytes": ((HYBRID, HYBRID.layer_spec(0), 2, "bf16"), {}),
    "state_conventions": ((HYBRID, 2), {}),
    "memory_budget": ((GPT2, 2, 8), {}),
    "plan": ((GPT2, "h100-80gb", Layout(), TINY_INFER), {}),
    "smallest_layout": ((GPT2, "h100-80gb", TINY_INFER), {"max_gpus": 1}),
    "cost": ((GPT2, H100, 8, 2048, 10**9, 0.4, 2.0), {}),
    "high_dtype": (("mixed-fp16",), {}),
    "lora_trainable": ((GPT2, 8), {}),
    "target_problems": ((("q", "v"),), {}),
    "adapter_tensors": ((GPT2, 8, ("q", "v")), {}),
}
# functions whose callers hand them checked values (they are not entry points), and why
CHECKED_BY_CALLER = {
    "output_logits_bytes": "the budget command's helper, after memory_budget checked the dtype",
    "pure_policy": "maps a checked dtype to the policy of a plain model.to(dtype) run",
    "layer_state_bytes": "one layer's term of state_bytes and of the planner's cache, both checked first",
    "DeviceProfile.ridge": "a profile method; each profile has peaks for its own dtypes only",
    "cost": "the planner's helper: plan checks the policy its dtype comes from",
    "high_dtype": "the planner's helper: setup_problems checks the policy first",
    "target_problems": "it is the check: setup_problems adds its message (under lora_targets)",
    "lora_trainable": "the planner's helper, after setup_problems checked the targets",
    "adapter_tensors": "the planner's helper, after setup_problems checked the targets",
    "is_quantized": "the planner's helper, after setup_problems checked quantize_also",
    "kept_high": "the planner's helper, after setup_problems checked quantize_also",
    "weight_storage": "the planner's helper, after setup_problems checked quantize_also",
    "Serving.resolved": "plan resolves the engine for a quant setup_problems checked",
    "parallelize": "TrainConfig refuses `parallel` before a run starts",
    "data_slice": "TrainConfig refuses `parallel` before a run starts",
}
TOO_COSTLY = {"train": "a training run; its options are TrainConfig's fields (checked above) and device"}


def test_every_function_with_a_choice_is_called_here():
    owners = {owner for owner, _, _ in _choice_params()}
    missing = owners - set(CALLS) - set(CHECKED_BY_CALLER) - set(TOO_COSTLY)
    assert not missing, f"add a cheap call of {sorted(missing)} to CALLS"
    assert not (set(CALLS) | set(CHECKED_BY_CALLER)) - owners   # no stale entry


DEFAULTED = [(owner, param) for owner, fn, param in _choice_params()
             if owner in CALLS and inspect.signature(fn).parameters[param].default is not inspect.Parameter.empty]


def _fn(owner):
    return next(fn for o, fn in _callables() if o == owner)


def _call(owner, **extra):
    """The cheap call of `owner` with the arguments in `extra` replaced (or added)."""
    fn = _fn(owner)
    bound = inspect.signature(fn).bind_partial(*CALLS[owner][0], **CALLS[owner][1])
    bound.arguments.update(extra)
    return fn(*bound.args, **bound.kwargs)


@pytest.mark.parametrize("owner,param", DEFAULTED, ids=[f"{o}-{p}" for o, p in DEFAULTED])
def test_leaving_a_choice_out_answers_as_its_default(owner, param):
    default = inspect.signature(_fn(owner)).parameters[param].default
    assert _call(owner) == _call(owner, **{param: default})


REFUSED = [(owner, param) for owner, _, param in _choice_params()
           if owner in CALLS and owner not in CHECKED_BY_CALLER]


@pytest.mark.parametrize("owner,param", REFUSED, ids=[f"{o}-{p}" for o, p in REFUSED])
def test_a_value_off_the_choices_is_refused_under_the_options_name(owner, param):
    with pytest.raises(ValueError) as e:
        _call(owner, **{param: "Nonsense"})
    assert str(e.value) == choice_problem(param, "Nonsense", _table(owner, param))


BATCHED = [owner for owner in dict.fromkeys(o for o, _ in REFUSED)
           if "batch" in inspect.signature(_fn(owner)).parameters]


@pytest.mark.parametrize("owner", BATCHED)
def test_every_bad_argument_is_named_in_one_message(owner):
    """Every choice off its table and batch 0 at once: one ValueError naming each of them."""
    params = [p for o, _, p in _choice_params() if o == owner]
    with pytest.raises(ValueError) as e:
        _call(owner, batch=0, **dict.fromkeys(params, "Nonsense"))
    want = [choice_problem(p, "Nonsense", _table(owner, p)) for p in params] + ["batch: 0 is not an integer >= 1"]
    assert sorted(str(e.value).split("; ")) == sorted(want)
