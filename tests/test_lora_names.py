"""The LoRA adapters the planner prices are the ones peft adds to our own model: the same parameter names (peft's
`<module>.lora_A.<adapter>.weight`, adapter name left out) and the same shapes, for every target set we offer."""
from __future__ import annotations

import pytest
import torch

peft = pytest.importorskip("peft")

from engine.model import build_model  # noqa: E402
from engine.plan.finetune import adapter_tensors  # noqa: E402
from tests.lora_cases import CASES  # noqa: E402

# our module names, which peft matches by suffix: Llama's for attention, the FFN's own
MODULES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate", "up": "up", "down": "down"}
TARGET_SETS = {"peft default": ("q", "v"), "attention": ("q", "k", "v", "o"), "all": tuple(MODULES)}


@pytest.mark.parametrize("targets", TARGET_SETS)
@pytest.mark.parametrize("case", ["gqa", "gated-ffn"])
def test_adapters_are_peft_s_parameters_by_name_and_shape(case, targets):
    cfg, _, rank = CASES[case]
    chosen = TARGET_SETS[targets]
    torch.manual_seed(0)
    wrapped = peft.get_peft_model(build_model(cfg), peft.LoraConfig(r=rank, target_modules=[MODULES[t] for t in chosen]))
    added = {name.removeprefix("base_model.model.").replace(".default.", "."): tuple(p.shape)
             for name, p in wrapped.named_parameters() if ".lora_" in name}
    priced = {x.name: tuple(x.shape) for _, a, b in adapter_tensors(cfg, rank, chosen) for x in (a, b)}
    assert priced == added
