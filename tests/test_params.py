"""The closed-form parameter count equals the built model, to the parameter, for every variant.

Exhaustive products at tiny sizes (every choice field; every boolean knob under a few structures), then
hypothesis-drawn sizes and knobs. Each check compares per component, by summing the named modules of a
meta-built model, not only the total. `configs()` is the shared strategy other test files import.
"""
from __future__ import annotations

import itertools

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine.budget.params import COMPONENTS, count_params
from engine.config import FIELDS, ConfigError, ModelConfig
from engine.model import DecoderLM, build_model

TINY = dict(name="tiny", vocab_size=7, context_length=6, d_model=8, n_layers=2, n_heads=4, ffn_multiple_of=8)
LAYOUTS = {"serial": dict(block="serial"),
           "parallel-shared": dict(block="parallel", parallel_shared_norm=True),
           "parallel-separate": dict(block="parallel", parallel_shared_norm=False)}
KV = {"MHA": None, "GQA": 2, "MQA": 1}
NORM_MODULES = {"norm1", "norm2", "post_attn_norm", "post_ffn_norm", "emb_norm", "final_norm"}


def component_of(name: str) -> str:
    """Which COMPONENTS entry a named parameter of DecoderLM belongs to."""
    path = name.split(".")
    if path[0] in ("tok_emb", "pos_emb", "head"):
        return {"tok_emb": "token_embedding", "pos_emb": "positions", "head": "output_head"}[path[0]]
    if "attn" in path:
        module = path[path.index("attn") + 1]
        return "qk_norm" if module in ("q_norm", "k_norm") else f"attention_{module[0]}"
    if "ffn" in path:
        return "ffn"
    assert path[-2] in NORM_MODULES, f"parameter {name} belongs to no known component"
    return "norms"


def measured(model: torch.nn.Module) -> dict[str, int]:
    """Per-component sums over named_parameters (a tied matrix is listed once, under tok_emb)."""
    comps = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():
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


def choice_configs():
    for norm, placement, layout, ffn, position, kv in itertools.product(
            FIELDS["norm"].choices, FIELDS["norm_placement"].choices, LAYOUTS, FIELDS["ffn"].choices,
            FIELDS["position"].choices, KV):
        yield ModelConfig(**TINY, norm=norm, norm_bias=norm == "layernorm", norm_placement=placement,
                          **LAYOUTS[layout], ffn=ffn, position=position, n_kv_heads=KV[kv])


def test_every_choice_combination_counts_exactly():
    n = 0
    for cfg in choice_configs():
        check(cfg)
        n += 1
    assert n == 2 * 3 * 3 * 8 * len(FIELDS["position"].choices) * 3


BOOLEANS = ("norm_bias", "norm_affine", "embed_norm", "final_norm", "qk_norm", "tie_embeddings", "bias",
            "qkv_bias", "parallel_shared_norm")
STRUCTURES = [dict(norm="layernorm", norm_placement="pre", block="serial", ffn="gelu", position="learned"),
              dict(norm="rmsnorm", norm_placement="sandwich", block="parallel", ffn="swiglu", position="rope",
                   n_kv_heads=2),
              dict(norm="layernorm", norm_placement="post", block="parallel", ffn="geglu", position="none",
                   n_kv_heads=1)]


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


@st.composite
def configs(draw, max_d: int = 24) -> ModelConfig:
    """Any valid config at tiny sizes: sizes and every knob drawn; invalid combinations are filtered out."""
    n_heads = draw(st.integers(1, 6))
    divisors = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
    opt = lambda s: st.none() | s  # noqa: E731
    values = dict(
        name=draw(st.text(max_size=12)),
        vocab_size=draw(st.integers(1, 40)), context_length=draw(st.integers(1, 12)),
        d_model=draw(st.integers(1, max_d)), n_layers=draw(st.integers(1, 3)), n_heads=n_heads,
        n_kv_heads=draw(opt(st.sampled_from(divisors))), head_dim=draw(opt(st.integers(1, 8))),
        attn_window=draw(opt(st.integers(1, 6))), global_every=draw(opt(st.integers(1, 3))),
        qk_norm=draw(st.booleans()), attn_softcap=draw(opt(st.floats(0.5, 50))), qkv_bias=draw(st.booleans()),
        position=draw(st.sampled_from(FIELDS["position"].choices)), rope_base=draw(st.floats(2, 1e6)),
        rope_fraction=draw(st.sampled_from([0.25, 0.5, 1.0]) | st.floats(0, 1, exclude_min=True)),
        ffn=draw(st.sampled_from(FIELDS["ffn"].choices)), d_ff=draw(opt(st.integers(1, 40))),
        ffn_multiple_of=draw(st.integers(1, 16)), norm=draw(st.sampled_from(FIELDS["norm"].choices)),
        norm_eps=draw(st.floats(1e-8, 1e-2)), norm_affine=draw(st.booleans()), embed_norm=draw(st.booleans()),
        norm_placement=draw(st.sampled_from(FIELDS["norm_placement"].choices)), final_norm=draw(st.booleans()),
        block=draw(st.sampled_from(FIELDS["block"].choices)), parallel_shared_norm=draw(st.booleans()),
        bias=draw(st.booleans()), dropout=draw(st.sampled_from([0.0, 0.1]) | st.floats(0, 0.9)),
        tie_embeddings=draw(st.booleans()), embed_scale=draw(st.booleans()),
        logit_softcap=draw(opt(st.floats(0.5, 50))),
        rope_scaling=draw(st.sampled_from(FIELDS["rope_scaling"].choices)), rope_factor=draw(st.floats(0.5, 16)),
        rope_original_context=draw(opt(st.integers(1, 12))), rope_low_freq_factor=draw(st.floats(0.5, 2)),
        rope_high_freq_factor=draw(st.floats(2.5, 8)), rope_beta_fast=draw(st.floats(1, 64)),
        rope_beta_slow=draw(st.floats(0.25, 2)), rope_truncate=draw(st.booleans()),
        rope_attention_factor=draw(opt(st.floats(0.5, 2))),
        rope_short_factor=draw(opt(st.lists(st.floats(0.5, 4), min_size=1, max_size=4).map(tuple))),
        rope_long_factor=draw(opt(st.lists(st.floats(0.5, 4), min_size=1, max_size=4).map(tuple))),
        layer_types=draw(opt(st.lists(st.sampled_from(["full", "sliding"]), min_size=1, max_size=3).map(tuple))),
        attn_scale=draw(opt(st.floats(0.01, 2))), rope_local_base=draw(opt(st.floats(2, 1e6))),
        nope_layers=draw(opt(st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple))))
    values["norm_bias"] = values["norm"] == "layernorm" and draw(st.booleans())
    assert set(values) == set(FIELDS), "a new field needs a strategy here"
    try:
        return ModelConfig(**values)
    except ConfigError:
        assume(False)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(configs())
def test_hypothesis_configs_count_exactly(cfg):
    check(cfg)


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
