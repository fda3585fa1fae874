"""One CLI vocabulary: the same JSON key for the same quantity in every command, and list options typed either
as `q,v` or as `q v`."""
from __future__ import annotations

import json

from engine.cli import main


def _json(capsys, argv: list[str]):
    assert main(argv) == 0, argv
    return json.loads(capsys.readouterr().out)


def test_parameter_counts_and_bytes_have_one_name_across_commands(capsys):
    params = _json(capsys, ["params", "--preset", "gpt2", "--json"])
    sweep = _json(capsys, ["sweep", "--preset", "gpt2", "--knob", "n_layers", "--values", "12", "--json"])
    presets = {r["name"]: r for r in _json(capsys, ["presets", "--json"])}
    memory = _json(capsys, ["memory", "--preset", "gpt2", "--seq", "128", "--json"])
    plan = _json(capsys, ["plan", "--preset", "gpt2", "--seq", "128", "--json"])
    assert params["total_params"] == sweep["rows"][0]["total_params"] == presets["gpt2"]["total_params"]
    assert params["non_embedding_params"] == sweep["rows"][0]["non_embedding_params"]
    assert params["active_params"] == sweep["rows"][0]["active_params"]
    assert memory["weights_bytes"] == sweep["rows"][0]["weights_bytes"]
    assert {k for k in plan["per_gpu"]} == {f"{c}_bytes" for c in ("weights", "grads", "optimizer", "activations",
                                                                    "kv_cache", "working_set", "total")}
    assert plan["trainable_params"] == params["total_params"]
    for data in (params, sweep["rows"][0], memory, plan["per_gpu"]):     # no bare "total" or "weights" left
        assert not {"total", "weights", "params"} & set(data)


def test_list_options_take_commas_or_spaces(capsys):
    base = ["plan", "--preset", "llama-3-8b", "--finetune", "lora", "--seq", "128", "--json"]
    comma = _json(capsys, base + ["--lora-targets", "q,v,gate"])
    space = _json(capsys, base + ["--lora-targets", "q", "v", "gate"])
    mixed = _json(capsys, base + ["--lora-targets", "q,v", "gate"])
    assert comma["trainable_params"] == space["trainable_params"] == mixed["trainable_params"]
    sweep = ["sweep", "--preset", "gpt2", "--knob", "n_kv_heads", "--json"]
    commas, spaces = (_json(capsys, sweep + ["--values", *v])["rows"] for v in (["1,4,12"], ["1", "4", "12"]))
    assert commas == spaces and len(commas) == 3
    one = _json(capsys, ["params", "--preset", "gemma-3-1b", "--layer-types", "full,sliding", "--n-layers", "2",
                         "--json"])
    two = _json(capsys, ["params", "--preset", "gemma-3-1b", "--layer-types", "full", "sliding", "--n-layers", "2",
                         "--json"])
    assert one == two
    quant = _json(capsys, ["plan", "--preset", "llama-3-8b", "--mode", "infer", "--seq", "8", "--quant", "int8",
                           "--quantize-also", "embeddings,head", "--json"])
    assert quant["high_precision"] == ["norms (bf16)", "biases (bf16)"]
