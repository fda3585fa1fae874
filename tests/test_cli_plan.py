"""`python -m engine plan`: the issue's command line, its JSON keys, and exit 2 naming the impossible field."""
from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.plan import Layout, Setup, plan
from engine.presets import get_preset

KEYS = {"weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes", "working_set_bytes",
        "total_bytes"}


def test_plan_json_has_per_gpu_keys_and_fits(capsys):
    argv = ["plan", "--preset", "llama-3-70b", "--gpu", "h100-80gb", "--gpus", "8", "--zero", "3", "--tp", "2",
            "--quant", "int4-g128", "--finetune", "qlora", "--lora-rank", "16", "--seq", "2048", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["per_gpu"]) == KEYS and isinstance(out["fits"], bool)
    assert out["per_gpu"]["total_bytes"] == sum(v for k, v in out["per_gpu"].items() if k != "total_bytes")
    ref = plan(get_preset("llama-3-70b").config, "h100-80gb", Layout(8, 2, 1, 3),
               Setup(seq=2048, quant="int4-g128", finetune="qlora", lora_rank=16))
    assert out["per_gpu"] == {f"{k}_bytes": v for k, v in ref.per_gpu.items()} and out["layout"]["dp"] == 4


@pytest.mark.parametrize("flags, field", [(["--tp", "3"], "tp: 3 does not divide n_heads = 64"),
                                          (["--pp", "81", "--gpus", "81"], "pp: 81 stages is more than n_layers"),
                                          (["--zero", "5"], "zero: 5"),
                                          (["--finetune", "lora", "--lora-targets", "qkv"], "lora_targets: qkv"),
                                          (["--quant", "gguf:Q9_K"], "quant: 'gguf:Q9_K' is not one of"),
                                          (["--mode", "infer", "--utilization", "1.5"], "utilization: 1.5 is more"),
                                          (["--mode", "infer", "--efficiency", "0"], "efficiency: 0"),
                                          (["--mode", "infer", "--request-tokens", "0"], "request_tokens: 0"),
                                          (["--mode", "infer", "--block-size", "0"], "block_size: 0")])
def test_impossible_layouts_exit_2_naming_the_field(capsys, flags, field):
    assert main(["plan", "--preset", "llama-3-70b", "--gpus", "8", *flags]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_plan_text_says_fit_and_margin(capsys):
    assert main(["plan", "--preset", "gpt2", "--seq", "128"]) == 0
    out = capsys.readouterr().out
    assert "fits in 80.00 GiB" in out and "working_set" in out      # an 80 GB HBM3 part holds 80 GiB
