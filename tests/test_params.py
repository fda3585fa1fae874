"""The closed-form parameter count equals the built model, to the parameter, for every variant.

Exhaustive products at tiny sizes (every choice field; every boolean knob under a few structures), then
hypothesis-drawn sizes and knobs. Each check compares per component, by summing the named modules of a
meta-built model, not only the total. The config strategy and the layout/KV tables live in tests/helpers.py.
"""
from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings

from engine.budget.params import COMPONENTS, count_params
from engine.config import FIELDS, ConfigError, ModelConfig
from engine.model import DecoderLM, build_model
from tests.helpers import KV, LAYOUTS, configs, variant_configs

TINY = dict(name="tiny", vocab_size=7, context_length=6, d_model=8, n_layers=2, n_heads=4, ffn_multiple_of=8)
NORM_MODULES = {"norm1", "norm2", "post_attn_norm", "post_ffn_norm", "emb_norm", "final_norm"}


def component_of(name: str) -> str:
    """Which COMPONENTS entry a named parameter of DecoderLM belongs to."""
    path = name.split(".")
    if path[0] in ("tok_emb", "pos_emb", "head"):
        return {"tok_emb": "token_embedding", "pos_emb": "positions", "head": "output_head"}[path[0]]
    if "attn" in path:
        module = path[path.index("attn") + 1]
        if module in ("sinks", "indexer"):
            return "attention_sinks" if module == "sinks" else "indexer"
        if module == "g_proj":
            return "attention_gate"
        return "qk_norm" if module in ("q_norm", "k_norm", "kv_norm") else f"attention_{module[0]}"
    if "gdn" in path:   # Gated DeltaNet: its projections, the short conv, and the per-head gates and gated norm
        module = path[path.index("gdn") + 1]
        return ("gdn_in_proj" if module.startswith("in_proj") else
                {"out_proj": "gdn_out_proj", "conv1d": "gdn_conv"}.get(module, "gdn_gates"))
    if "mamba" in path:   # Mamba-2 / Mamba-1: projections, conv, per-head (per-channel) A, D, dt, their norms
        module = path[path.index("mamba") + 1]
        return {"in_proj": "ssm_in", "out_proj": "ssm_out", "conv1d": "ssm_conv", "x_proj": "ssm_dt_bc",
                "dt_proj": "ssm_dt_bc", "norm": "ssm_norm", "dt_norm": "ssm_norm", "b_norm": "ssm_norm",
                "c_norm": "ssm_norm"}.get(module, "ssm_heads")
    if "kda" in path:   # KDA: q, k, v and beta projections, the short conv, o_proj; the rest its gates and norm
        module = path[path.index("kda") + 1]
        return {"q_proj": "kda_in_proj", "k_proj": "kda_in_proj", "v_proj": "kda_in_proj", "b_proj": "kda_in_proj",
                "conv1d": "kda_conv", "o_proj": "kda_out_proj"}.get(module, "kda_gates")
    if "lightning" in path:   # lightning attention: qkv and the output gate, the norm's gain, out_proj
        module = path[path.index("lightning") + 1]
        return {"qkv_proj": "lightning_in_proj", "output_gate": "lightning_in_proj",
                "out_proj": "lightning_out_proj"}.get(module, "lightning_norm")
    if "ffn" in path:
        sub = path[path.index("ffn") + 1]
        return {"router": "router", "experts": "routed_experts", "shared": "shared_experts",
                "shared_gate": "shared_experts"}.get(sub, "ffn")
    assert path[-2] in NORM_MODULES, f"parameter {name} belongs to no known component"
    return "norms"


def measured(model: torch.nn.Module) -> dict[str, int]:
    """Per-component sums over named_parameters (a tied matrix is listed once, under tok_emb)."""
    comps = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
        if name.endswith("attn.kv_b.weight"):   # MLA: rows [H, dn + dv, r]: each head's key part, then value
            rows = p.view(model.cfg.n_heads, -1, p.shape[1])
            comps["attention_k"] += rows[:, :model.cfg.qk_nope_head_dim].numel()
            comps["attention_v"] += rows[:, model.cfg.qk_nope_head_dim:].numel()
            continue
        comps[component_of(name)] += p.numel()
    return comps


def meta_model(cfg: ModelConfig) -> DecoderLM:
    with torch.device("meta"):
        return DecoderLM(cfg)


def check(cfg: ModelConfig, model: torch.nn.Module | None = None) -> None:
    """Everything count_params promises, against the model."""
    model = model if model is not None else meta_model(cfg)
    count = count_params(cfg)
    assert count.components == measured(model), cfg
    assert count.total == sum(p.numel() for p in model.parameters())
    assert count.per_layer == sum(p.numel() for p in model.blocks[0].parameters())
    assert count.non_embedding == count.total - sum(
        p.numel() for m in (model.tok_emb, model.pos_emb, None if cfg.tie_embeddings else model.head)
        if m is not None for p in m.parameters())
    assert count.tying_saves == cfg.vocab_size * cfg.d_model and count.tied == cfg.tie_embeddings
    # active: every parameter but the routed experts a token skips, E - k of each MoE layer's experts
    skipped = sum(sum(p.numel() for p in m.experts.parameters()) // m.n_experts * (m.n_experts - m.k)
                  for m in model.moe_layers())
    assert count.active == count.total - skipped
    assert count.active_non_embedding == count.non_embedding - skipped


def choice_configs():
    """The product of the core knobs, the FFN taking each choice in turn (an FFN's parameters depend on its own
    choice and width alone; each FFN meets a fifth of the rest, and every pair is in the variant grid: test_every_variant_counts_exactly)."""
    ffns = FIELDS["ffn"].choices
    for i, (norm, placement, layout, position, kv) in enumerate(itertools.product(
            FIELDS["norm"].choices, FIELDS["norm_placement"].choices, LAYOUTS, FIELDS["position"].choices, KV)):
        yield ModelConfig(**TINY, norm=norm, norm_bias=norm == "layernorm", norm_placement=placement,
                          **LAYOUTS[layout], ffn=ffns[i % len(ffns)], position=position, n_kv_heads=KV[kv])


# slow: the product of the core knobs, the FFN taking turns; the inner loop's variant grid holds each pair
@pytest.mark.slow
def test_every_choice_combination_counts_exactly():
    n, ffns = 0, set()
    for cfg in choice_configs():
        check(cfg)
        n, ffns = n + 1, ffns | {cfg.ffn}
    assert n == 2 * len(FIELDS["norm_placement"].choices) * 3 * len(FIELDS["position"].choices) * 3
    assert ffns == set(FIELDS["ffn"].choices)


BOOLEANS = ("norm_bias", "norm_affine", "embed_norm", "final_norm", "qk_norm", "tie_embeddings", "bias",
            "qkv_bias", "parallel_shared_norm")
STRUCTURES = [dict(norm="layernorm", norm_placement="pre", block="serial", ffn="gelu", position="learned"),
              dict(norm="rmsnorm", norm_placement="sandwich", block="parallel", ffn="swiglu", position="rope",
                   n_kv_heads=2),
              dict(norm="layernorm", norm_placement="post", block="parallel", ffn="geglu", position="none",
                   n_kv_heads=1)]


# slow: the full product of the core knobs; the inner loop's pairwise grid and drawn configs hold each pair
@pytest.mark.slow
def test_every_boolean_combination_counts_exactly():
    valid = invalid = 0
    for structure in STRUCTURES:
        for values in itertools.product((False, True), repeat=len(BOOLEANS) + 1):
            knobs = dict(zip(BOOLEANS, values[:-1]), head_dim=6 if values[-1] else None)
            try:
                cfg = ModelConfig(**{**TINY, "n_layers": 1, **structure, **knobs})
            except ConfigError as e:   # rmsnorm with norm_bias is the only rule these can break
                assert e.problems == ["norm_bias: rmsnorm has no bias; set norm_bias: false"]
                invalid += 1
                continue
            check(cfg)
            valid += 1
    assert (valid, invalid) == (3 * 1024 - 512, 512)


def test_build_model_on_meta_allocates_nothing_and_counts_the_same():
    cfg = ModelConfig(**{**TINY, "qk_norm": True, "tie_embeddings": False})
    model = build_model(cfg, "meta")
    assert all(p.is_meta for p in model.parameters())
    check(cfg, model)


@pytest.mark.parametrize("i", range(len(variant_configs())))
def test_every_variant_counts_exactly(i):
    """The single-knob changes, the pairwise grid of every knob pair and the MLA grid (tests/helpers.py)."""
    check(variant_configs()[i])


# slow: 200 drawn configs, ~11 CPU-s of drawing; the inner loop keeps the variant grid above. The same draw holds
# the YAML round trip (one draw for both: the drawing is most of the cost)
@pytest.mark.slow
@settings(max_examples=200, deadline=None, derandomize=True)
@given(configs())
def test_drawn_configs_count_exactly_and_round_trip_through_yaml(cfg):
    check(cfg)
    assert ModelConfig.from_yaml(cfg.to_yaml()) == cfg


def test_components_have_their_textbook_meaning():
    cfg = ModelConfig(**{**TINY, "n_kv_heads": 2, "head_dim": 3, "qk_norm": True, "tie_embeddings": False})
    c = count_params(cfg).components
    d, L, A, K = 8, 2, 4 * 3, 2 * 3
    assert c["attention_q"] == L * (d * A + A) and c["attention_k"] == c["attention_v"] == L * (d * K + K)
    assert c["attention_o"] == L * (A * d + d)
    assert c["qk_norm"] == L * 2 * (3 + 3)                       # LayerNorm gain and bias, width head_dim
    assert c["ffn"] == L * (2 * d * 32 + 32 + d)                 # dense, d_ff = 4 * d_model
    assert c["positions"] == 6 * d and c["token_embedding"] == c["output_head"] == 7 * d


def test_tying_saves_exactly_what_untying_adds():
    for tied in (True, False):
        cfg = ModelConfig(**{**TINY, "tie_embeddings": tied})
        other = count_params(cfg.replace(tie_embeddings=not tied))
        count = count_params(cfg)
        assert abs(other.total - count.total) == count.tying_saves == other.tying_saves
        assert other.non_embedding == count.non_embedding   # neither embedding nor head is non-embedding
        assert count.as_dict()["components"]["output_head"] == (0 if tied else count.tying_saves)
