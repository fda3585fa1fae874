"""Each layer family against its own module: parameters, norms per block, KV-cache bytes; the MHA/GQA/MQA
rule; per-module init equal to the old name-matching init; the family tables are the config's choices."""
import itertools
import math

import pytest
import torch

from engine.activation_grid import FORMULAS
from engine.config import FIELDS, ModelConfig
from engine.layers.attention import Attention, LayerKV, attention_params, kv_bytes
from engine.layers.block import Block, block_layout, block_params, plain_spec
from engine.layers.ffn import ACTIVATIONS, GATE_ACTIVATION, ffn_formula, ffn_params, make_ffn
from engine.layers.kv_heads import attention_variants, kv_head_choices
from engine.layers.mixers import MIXERS
from engine.layers.norm import NORMS, make_norm, norm_params
from engine.model import build_model
from engine.presets import PRESETS, get_preset
from tests.helpers import AXES, variant_configs

BASE = ModelConfig(vocab_size=64, context_length=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2)


def _numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("placement,layout,shared", list(itertools.product(
    FIELDS["norm_placement"].choices, FIELDS["block"].choices, (False, True))))
def test_layout_norm_count_is_the_blocks_norm_modules(placement, layout, shared):
    cfg = BASE.replace(norm_placement=placement, block=layout, parallel_shared_norm=shared)
    with torch.device("meta"):
        block = Block(cfg, None)
    norms = [m for name, m in block.named_children() if "norm" in name and m is not None]
    assert len(norms) == block_layout(cfg).norm_count
    assert block_params(cfg) == {**attention_params(cfg), "ffn": ffn_params(cfg),
                                 "norms": len(norms) * norm_params(cfg, cfg.d_model)}
    assert sum(block_params(cfg).values()) == _numel(block)


@pytest.mark.parametrize("ffn", FIELDS["ffn"].choices)
@pytest.mark.parametrize("bias", [False, True])
def test_ffn_params_are_the_modules(ffn, bias):
    cfg = BASE.replace(ffn=ffn, bias=bias)
    with torch.device("meta"):
        assert ffn_params(cfg) == _numel(make_ffn(cfg))


@pytest.mark.parametrize("norm,affine,bias", [("layernorm", True, True), ("layernorm", True, False),
                                              ("layernorm", False, False), ("rmsnorm", True, False),
                                              ("rmsnorm", False, False)])
def test_norm_params_are_the_modules(norm, affine, bias):
    cfg = BASE.replace(norm=norm, norm_affine=affine, norm_bias=bias)
    assert norm_params(cfg, 24) == _numel(make_norm(cfg, 24))


@pytest.mark.parametrize("kw", [{}, {"qk_norm": True}, {"qkv_bias": True}, {"bias": True, "head_dim": 12},
                                {"n_kv_heads": 1}])
def test_attention_params_are_the_modules(kw):
    cfg = BASE.replace(**kw)
    with torch.device("meta"):
        assert sum(attention_params(cfg).values()) == _numel(Attention(cfg, None))


@pytest.mark.parametrize("window", [None, 3])
def test_kv_bytes_are_the_cached_tensors(window):
    cfg = BASE.replace(attn_window=window)
    attn, cache = Attention(cfg, window), LayerKV("fp8")
    torch.manual_seed(0)
    x = torch.randn(2, 5, cfg.d_model)
    attn(x, torch.arange(5), None, cache)
    assert cache.nbytes() == kv_bytes(cfg, 2, 5, window, 4)


def test_attention_variants():
    tiny = ModelConfig(name="tiny", vocab_size=64, context_length=64, d_model=32, n_layers=2, n_heads=4)
    names = lambda cfg: {k: c.attention_kind for k, c in attention_variants(cfg).items()}  # noqa: E731
    assert names(get_preset("gpt2").config) == {"MHA": "MHA", "GQA-3": "GQA-3", "MQA": "MQA"}
    assert names(get_preset("llama-3-8b").config) == {"MHA": "MHA", "GQA-8": "GQA-8", "MQA": "MQA"}
    assert names(tiny.replace(n_heads=2)) == {"MHA": "MHA", "MQA": "MQA"}
    assert names(tiny.replace(n_heads=1)) == {"MHA": "MHA"}
    assert names(tiny) == {"MHA": "MHA", "MQA": "MQA"}         # 4 heads: no GQA with groups of >= 4


@pytest.mark.parametrize("n_heads", [1, 2, 4, 6, 12, 32, 64])
def test_kv_head_choices_follow_the_rule(n_heads):
    """MHA, MQA, and the GQA with the most key/value heads whose groups hold >= 4 query heads (brute force)."""
    gqa = [k for k in range(2, n_heads) if n_heads % k == 0 and n_heads // k >= 4]
    expected = {"MHA": n_heads, **({f"GQA-{max(gqa)}": max(gqa)} if gqa else {}),
                **({"MQA": 1} if n_heads > 1 else {})}
    assert kv_head_choices(n_heads) == expected
    assert kv_head_choices(n_heads, own=2 if n_heads > 2 else None)["MHA"] == n_heads
    assert kv_head_choices(4, min_group=2) == {"MHA": 4, "GQA-2": 2, "MQA": 1}


def test_kv_head_choices_keep_the_configs_own_gqa_count():
    """A config's own GQA count (1 < own < n_heads) is its GQA choice even if the rule would pick another;
    its MHA (own = n_heads) or MQA (own = 1) is no GQA, so the rule picks one."""
    rule = {"MHA": 32, "GQA-8": 8, "MQA": 1}
    assert kv_head_choices(32, own=2) == {"MHA": 32, "GQA-2": 2, "MQA": 1}
    assert kv_head_choices(32, own=16) == {"MHA": 32, "GQA-16": 16, "MQA": 1}
    assert kv_head_choices(32, own=32) == kv_head_choices(32, own=1) == kv_head_choices(32) == rule
    assert kv_head_choices(2, own=2) == {"MHA": 2, "MQA": 1} and kv_head_choices(1, own=1) == {"MHA": 1}


@torch.no_grad()
def _init_by_name_suffix(model, seed: int, std: float = 0.02) -> None:
    """The model-wide init the modules replaced: walk named_modules, match residual projections by suffix."""
    g = torch.Generator().manual_seed(seed)
    out_std = std / math.sqrt(2 * model.cfg.n_layers)
    for name, m in model.named_modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            if not (m is model.head and model.cfg.tie_embeddings):
                torch.nn.init.normal_(m.weight, 0.0, out_std if name.endswith(("o_proj", "ffn.down")) else std,
                                      generator=g)
            if getattr(m, "bias", None) is not None:
                torch.nn.init.zeros_(m.bias)
        elif getattr(m, "sinks", None) is not None:   # attention sinks (newer than the loop): zero logits
            torch.nn.init.zeros_(m.sinks)
        elif hasattr(m, "eps"):
            if m.weight is not None:
                torch.nn.init.ones_(m.weight)
            if getattr(m, "bias", None) is not None:
                torch.nn.init.zeros_(m.bias)


def test_each_module_initialises_itself_to_the_old_values():
    """Per-module init_weights draws the same values, in the same order, as the old name-matching loop (which
    predates recurrent mixers, which draw their own: tests/test_gdn.py, test_kda.py, test_lightning.py)."""
    for cfg in (c for c in variant_configs() if not any(c.uses(k) for k, m in MIXERS.items() if m.recurrent)):
        ours = build_model(cfg, seed=3)
        ref = build_model(cfg, init=False)
        _init_by_name_suffix(ref, seed=3)
        for (name, a), (_, b) in zip(ours.state_dict().items(), ref.state_dict().items(), strict=True):
            assert torch.equal(a, b), (cfg, name)


def test_family_tables_are_the_config_choices():
    """A new FFN activation or norm is one entry in its family module: the config's choices, the lecture's
    formulas and the test grid all follow from it."""
    assert FIELDS["ffn"].choices == tuple(ACTIVATIONS) + tuple(GATE_ACTIVATION)
    assert FIELDS["norm"].choices == tuple(NORMS)
    assert set(FORMULAS) == set(FIELDS["ffn"].choices)
    assert set(AXES["ffn"]) == set(ACTIVATIONS) | set(GATE_ACTIVATION) and set(AXES["norm"]) == set(NORMS)
    assert FORMULAS["swiglu"] == "SiLU(g)·u" and FORMULAS["relu"] == "max(0, x)"


def test_ffn_formula_names_the_dense_activation_or_the_gate_of_each_choice():
    """Called here, not read from activation_grid's import-time table: the formula the lecture prints."""
    assert {ffn: ffn_formula(ffn) for ffn in FIELDS["ffn"].choices} == {
        "relu": "max(0, x)", "gelu": "x·Φ(x)  (exact, Φ = normal CDF)",
        "gelu_tanh": "x·½(1 + tanh(√(2/π)(x + 0.044715x³)))", "silu": "x·σ(x)", "relu2": "max(0, x)²",
        "swiglu": "SiLU(g)·u", "geglu": "GELU(g)·u", "geglu_tanh": "GELU_tanh(g)·u", "reglu": "ReLU(g)·u",
        "swiglu_clamped": "g'·σ(α·g')·(u' + 1),  g' = min(g, limit), u' = clamp(u, ±limit)"}


def test_init_weights_sets_every_value_whatever_the_memory_held():
    """build_model allocates uninitialised memory, which is often zero already: poisoned with NaN first, every
    parameter and buffer (biases and norm shifts included) must come out exactly as a fresh build's."""
    for cfg in variant_configs():
        fresh, model = build_model(cfg, seed=3), build_model(cfg, seed=3)
        with torch.no_grad():
            for t in itertools.chain(model.parameters(), model.buffers()):
                if t.is_floating_point():
                    t.fill_(float("nan"))
        model.init_weights(3)
        for (name, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items(), strict=True):
            assert torch.equal(a, b), (cfg, name)


ONE_KIND = [name for name, p in PRESETS.items() if len(set(p.config.layer_specs)) == 1   # full attention, no
            and p.config.layer_specs[0].window is None and not p.config.layer_specs[0].temperature   # temperature
            ] + ["sinusoidal", "none"]


@pytest.mark.parametrize("name", ONE_KIND)
def test_the_plain_block_is_every_layer_of_a_one_kind_model(name):
    """The block diagram, the MTP module's block and Block(cfg) without a spec use plain_spec as 'the' layer of a
    one-kind model: it must be the layer the model builds, rotary table included (RoPE models) or not (the rest)."""
    cfg = PRESETS[name].config if name in PRESETS else BASE.replace(position=name)
    spec = cfg.layer_specs[0]
    assert plain_spec(cfg, moe=spec.ffn == "moe") == spec
    assert (spec.rope == "global") == (cfg.position == "rope")
