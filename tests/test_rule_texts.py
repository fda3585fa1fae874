"""The exact text of every refusal a rule gives, one invalid config per message (tests/golden/rule_messages.json
holds the reviewed texts).

A case is a config one step from tests/knob_cases.py's tiny base that breaks exactly one rule: it is refused with
that one message and no other, the message comes from the family the case names (each family's rules, called on
the unchecked config), and each family's cases give as many distinct messages as it has message sites (counted by
hand below; a loop over field names or a singular/plural wording counts once per wording the cases reach).
tests/test_rule_messages.py checks the other side: a value refused by its own declaration gets only that message.
"""
import dataclasses

import pytest

from engine.config import FAMILIES, FIELDS, ConfigError, ModelConfig
from engine.limits import MAX_INT, MAX_LAYERS
from engine.validation import Knobs
from tests.golden import check_golden
from tests.knob_cases import BASE_FIELDS, LLAMA3, LONGROPE, ROPE

MLA = {"position": "rope", "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 3, "v_head_dim": 5}
DSA = {**MLA, "q_lora_rank": 6, "index_topk": 2, "index_n_heads": 2, "index_head_dim": 6}
MAMBA2 = {"layer_types": ("mamba2", "full"), "ssm_head_dim": 4, "ssm_state": 3}
MOE = {"n_experts": 4}

# (family, what the case breaks, overrides of BASE_FIELDS); family None: engine/config.py's own checks
CASES = [
    (None, "empty name", {"name": " "}),
    (None, "integer past 2^53", {"vocab_size": MAX_INT + 1}),
    (None, "integer of 31 digits", {"vocab_size": 10**30}),   # the first shown by its digit count
    (None, "too many layers", {"n_layers": MAX_LAYERS + 1}),
    ("AttentionKnobs", "kv heads not dividing", {"n_heads": 4, "n_kv_heads": 3}),
    ("AttentionKnobs", "head width 0", {"n_heads": 16}),
    ("AttentionKnobs", "output gate with MLA", {**MLA, "attn_gate": "elementwise"}),
    ("AttentionKnobs", "chunked without a chunk", {"layer_types": ("chunked", "full")}),
    *[("MLAKnobs", f"MLA with {name}", {**MLA, name: value}) for name, value in {
        "position": "learned", "n_kv_heads": 1, "head_dim": 4, "rope_fraction": 0.5, "attn_window": 3,
        "qk_norm": True, "attn_softcap": 1.0, "nope_layers": (1,), "attn_sinks": True, "attn_chunk": 3,
        "attn_temperature": 0.5}.items()],
    ("MLAKnobs", "odd rotary key", {**MLA, "qk_rope_head_dim": 3}),
    ("IndexerKnobs", "one indexer type for two layers", {**DSA, "indexer_types": ("full",)}),
    ("IndexerKnobs", "three indexer types for two layers", {**DSA, "indexer_types": ("full", "full", "full")}),
    ("IndexerKnobs", "first attention layer shared", {**DSA, "layer_types": ("none", "full"),
                                                      "indexer_types": ("full", "shared")}),
    ("IndexerKnobs", "sparse attention without MLA", {"index_topk": 2}),
    ("IndexerKnobs", "indexer without a query latent", {**DSA, "q_lora_rank": None}),
    ("IndexerKnobs", "indexer narrower than its rotary part", {**DSA, "index_head_dim": 2}),
    ("IndexerKnobs", "sparse attention on a recurrent layer", {**DSA, "layer_types": ("full", "gdn")}),
    ("LayerKnobs", "one layer type for two layers", {"layer_types": ("full",)}),
    ("LayerKnobs", "three FFN types for two layers", {"ffn_types": ("dense", "dense", "dense")}),
    ("LayerKnobs", "an empty layer", {"layer_types": ("full", "none"), "ffn_types": ("dense", "none")}),
    ("LayerKnobs", "parallel block without an FFN", {"block": "parallel", "ffn_types": ("dense", "none")}),
    ("LayerKnobs", "MoE layer without experts", {"ffn_types": ("dense", "moe")}),
    ("GDNKnobs", "value heads not a multiple", {"layer_types": ("gdn", "full"), "gdn_k_heads": 2, "gdn_v_heads": 3}),
    ("KDAKnobs", "value heads not a multiple", {"layer_types": ("kda", "full"), "gdn_k_heads": 2, "gdn_v_heads": 3}),
    ("Mamba2Knobs", "groups not dividing", {**MAMBA2, "ssm_heads": 4, "ssm_groups": 3}),
    ("Mamba2Knobs", "two projection scales", {**MAMBA2, "ssm_proj_scales": (1.0, 2.0)}),
    ("Mamba2Knobs", "dt limits reversed", {**MAMBA2, "ssm_dt_min": 0.2, "ssm_dt_max": 0.1}),
    ("PositionKnobs", "odd rotary width", {**ROPE, "rope_fraction": 0.25}),
    ("PositionKnobs", "dynamic on 2 rotary dimensions", {**ROPE, "rope_scaling": "dynamic", "rope_factor": 2.0,
                                                         "rope_fraction": 0.5}),
    ("PositionKnobs", "llama3 bands reversed", {**LLAMA3, "rope_low_freq_factor": 4.0, "rope_high_freq_factor": 2.0}),
    ("PositionKnobs", "longrope short factors of one", {**LONGROPE, "rope_short_factor": (1.0,)}),
    ("PositionKnobs", "longrope long factors of three", {**LONGROPE, "rope_long_factor": (1.0, 1.0, 1.0)}),
    ("PositionKnobs", "longrope long factors null", {**LONGROPE, "rope_long_factor": None}),
    ("PositionKnobs", "no-rope layer past the last", {**ROPE, "nope_layers": (3,)}),
    ("PositionKnobs", "learned table too long", {"position": "learned", "context_length": (1 << 24) + 1}),
    ("MoEKnobs", "more experts per token than experts", {**MOE, "experts_per_token": 5}),
    ("MoEKnobs", "groups not dividing", {**MOE, "router_groups": 3}),
    ("MoEKnobs", "more chosen groups than groups", {**MOE, "router_groups": 2, "router_group_topk": 3}),
    ("MoEKnobs", "chosen groups too small", {**MOE, "router_groups": 2, "router_group_topk": 1,
                                            "experts_per_token": 3}),
    ("MoEKnobs", "top2_sum on groups of one", {"n_experts": 2, "router_groups": 2, "router_group_topk": 2,
                                               "router_group_score": "top2_sum"}),
    ("MoEKnobs", "shared gate without a shared expert", {**MOE, "shared_expert_gate": True}),
    ("MoEKnobs", "no MoE layer", {**MOE, "moe_first_dense": 2}),
    ("NormKnobs", "bias on a norm without one", {"norm": "rmsnorm", "norm_bias": True}),
    ("CheckpointKnobs", "bits of a fixed format", {"ckpt_bits": 4}),
    ("CheckpointKnobs", "double quantization outside bitsandbytes", {"ckpt_double_quant": True}),
]
IDS = [f"{family or 'config'}: {what}" for family, what, _ in CASES]

# message sites per family, as distinct messages the cases reach (see the module docstring)
SITES = {None: 4,                 # the empty name, the 2^53 bound (digits and commas), the layer count
         "AttentionKnobs": 4,
         "MLAKnobs": 12,          # each of the 11 fields MLA fixes, and the odd rotary key
         "IndexerKnobs": 7,       # the type count (entry/entries) and 5 more
         "LayerKnobs": 5,         # the type count (layer_types with 1 entry, ffn_types with 3) and 3 more
         "GDNKnobs": 1, "KDAKnobs": 1, "Mamba2Knobs": 3,
         "PositionKnobs": 8,      # longrope's count for each list, with a length or null, and 5 more
         "MoEKnobs": 7, "NormKnobs": 1, "CheckpointKnobs": 2}
BY_NAME = {family.__name__: family for family in FAMILIES}

# the last value each bound accepts (the cases above step past them): a rule refusing it would be a wrong refusal
AT_THE_BOUND = {
    "integer": {"vocab_size": MAX_INT}, "layers": {"n_layers": MAX_LAYERS},
    "head width 1": {"n_heads": 8}, "a learned table of 2^24": {"position": "learned", "context_length": 1 << 24},
    "dt limits equal": {**MAMBA2, "ssm_dt_min": 0.2, "ssm_dt_max": 0.2},
    "all experts per token": {**MOE, "experts_per_token": 4},
    "all groups chosen": {**MOE, "router_groups": 2, "router_group_topk": 2, "experts_per_token": 4},
    "the chosen groups exactly full": {**MOE, "router_groups": 2, "router_group_topk": 1, "experts_per_token": 2},
    "top2_sum on groups of two": {**MOE, "router_groups": 2, "router_group_topk": 1, "router_group_score": "top2_sum"},
    "the last layer MoE": {**MOE, "moe_first_dense": 1},
    "llama3 bands equal": {**LLAMA3, "rope_low_freq_factor": 2.0, "rope_high_freq_factor": 2.0},
    "dynamic on 4 rotary dimensions": {**ROPE, "rope_scaling": "dynamic", "rope_factor": 2.0},
    "no-rope last layer": {**ROPE, "nope_layers": (2,)},
    "indexer as wide as its rotary part": {**DSA, "index_head_dim": 4},
}


@pytest.mark.parametrize("overrides", AT_THE_BOUND.values(), ids=AT_THE_BOUND)
def test_a_config_at_a_rules_bound_is_accepted(overrides):
    cfg = ModelConfig(**{**BASE_FIELDS, **overrides})   # refused: ConfigError
    assert all(getattr(cfg, k) == v for k, v in overrides.items())


def unchecked(overrides: dict) -> ModelConfig:
    """The config with the overrides, built without validation (so each family's rules can be asked alone)."""
    cfg = object.__new__(ModelConfig)
    for f in dataclasses.fields(ModelConfig):
        object.__setattr__(cfg, f.name, f.default)
    for name, value in {**BASE_FIELDS, **overrides}.items():
        object.__setattr__(cfg, name, value)
    return cfg


@pytest.mark.parametrize("family,what,overrides", CASES, ids=IDS)
def test_a_broken_rule_gets_its_one_reviewed_message_from_its_family(family, what, overrides):
    with pytest.raises(ConfigError) as e:
        ModelConfig(**{**BASE_FIELDS, **overrides})
    assert len(e.value.problems) == 1, e.value.problems
    message = e.value.problems[0]
    check_golden("rule_messages", f"{family or 'config'}: {what}", message)
    reported = set() if family else {message.split(":", 1)[0]}   # what _problems refuses before the rules run
    cfg = unchecked(overrides)
    by_family = {name: fam.rules(cfg, lambda *names: not reported.intersection(names))
                 for name, fam in BY_NAME.items()}
    assert {name: out for name, out in by_family.items() if out} == ({family: [message]} if family else {})


def test_the_cases_reach_every_message_site_of_every_family():
    messages: dict = {}
    for family, _, overrides in CASES:
        with pytest.raises(ConfigError) as e:
            ModelConfig(**{**BASE_FIELDS, **overrides})
        messages.setdefault(family, set()).update(e.value.problems)
    assert {family: len(texts) for family, texts in messages.items()} == SITES
    assert set(SITES) - {None} == {name for name, fam in BY_NAME.items() if fam.rules is not Knobs.rules}


def test_a_rule_naming_no_declared_field_is_a_programming_error(monkeypatch):
    """A misspelt name in ok() would never be reported, so its rule would build on a refused value: refused."""
    norm = BY_NAME["NormKnobs"]
    monkeypatch.setattr(norm, "rules", staticmethod(lambda c, ok: ["norm: x"] if ok("norm", "nrom") else []))
    with pytest.raises(KeyError) as e:
        ModelConfig(**BASE_FIELDS)
    assert e.value.args == ("a config rule reads `nrom`, which is not a declared field",)
    assert "nrom" not in FIELDS
