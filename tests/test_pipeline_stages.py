"""Pipeline stages (engine/plan/parallel.py stage_tensors): every parameter of the built model on exactly one
stage (a tied head once more on the last), the inputs' tables where the tokens enter (stage 0), the final norm
and an untied head where the logits leave (the last stage)."""
from collections import Counter

import pytest

from engine.model import build_model
from engine.plan.parallel import stage_layers, stage_tensors
from engine.presets import PRESETS

# learned positions and a tied head; an untied head and an embedding norm; a hybrid with MoE
NAMES = ["gpt2", "bloom-560m", "qwen3-next-80b-a3b", "llama-3-8b"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("pp", [2, 3])
def test_every_parameter_on_one_stage_and_the_ends_where_tokens_enter_and_leave(name, pp):
    cfg = PRESETS[name].config
    built = dict(build_model(cfg, device="meta").named_parameters())
    stages = [[t.name for t in stage_tensors(cfg, pp, st)] for st in range(pp)]
    held = Counter(n for names in stages for n in names)
    extra = {"head.weight": 1} if cfg.tie_embeddings else {}
    assert held == Counter({n: 1 for n in built}) + Counter(extra)
    for st, names in enumerate(stages):
        layers = {int(n.split(".")[1]) for n in names if n.startswith("blocks.")}
        assert layers == set(stage_layers(cfg, pp, st))
        outside = {n.split(".")[0] for n in names if not n.startswith("blocks.")}
        ends = {"tok_emb", "pos_emb", "emb_norm"} if st == 0 else set()
        ends |= {"final_norm", "head"} if st == pp - 1 else set()
        assert outside == ends & {n.split(".")[0] for n in built} | ({"head"} if st == pp - 1 and extra else set())
