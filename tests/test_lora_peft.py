"""LoRA trainable counts == peft's on the transformers model built from the same config (dense MHA with a
dense FFN, GQA, gated FFN); peft names the modules by the family's own names, which the test maps."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from engine.interop import to_hf_config  # noqa: E402
from engine.interop.hf_models import hf_model_from_config  # noqa: E402
from engine.plan.finetune import lora_trainable  # noqa: E402
from engine.presets import get_preset  # noqa: E402
from tests.lora_cases import CASES  # noqa: E402

HF_NAMES = {"gpt2": {"o": "attn.c_proj", "up": "mlp.c_fc", "down": "mlp.c_proj"},
            "llama": {t: t + "_proj" for t in ("q", "k", "v", "o", "gate", "up", "down")}}


@pytest.mark.parametrize("case", CASES)
def test_lora_trainables_equal_peft(case):
    cfg, targets, rank = CASES[case]
    family, config = to_hf_config(cfg)
    hf = hf_model_from_config(family, config)
    names = [HF_NAMES[family][t] for t in targets]
    lora = peft.get_peft_model(hf, peft.LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=names))
    trainable, _ = lora.get_nb_trainable_parameters()
    assert trainable == lora_trainable(cfg, rank, targets)


def test_llama_3_8b_on_meta_trains_the_design_fact():
    cfg = get_preset("llama-3-8b").config
    family, config = to_hf_config(cfg)
    with torch.device("meta"):
        hf = hf_model_from_config(family, config)
        lora = peft.get_peft_model(hf, peft.LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
    assert lora.get_nb_trainable_parameters()[0] == lora_trainable(cfg, 16, ("q", "v")) == 6_815_744
