"""engine/budget/context_memory.py: inference memory against context, held against memory.* closed forms and the
issue's published figures (Qwen3-Next-80B: 24,576 cached bytes per token in bf16; as 48 attention layers 98,304)."""
import pytest

from engine.budget.context_memory import all_attention, context_memory, crossing, crossings, inference_bytes
from engine.budget.memory import kv_cache_bytes, memory_budget, state_bytes
from engine.budget.params import count_params
from engine.presets import PRESETS
from tests.hybrid_cases import hybrid_configs

QWEN = PRESETS["qwen3-next-80b-a3b"].config


def test_terms_are_the_memory_closed_forms():
    grid = (1, 4096, 131072, 262144)
    m = context_memory(QWEN, grid, batch=2, dtype="bf16")
    assert m.weights == 79_674_391_296 * 2
    assert m.kv == tuple(kv_cache_bytes(QWEN, 2, t, "bf16") for t in grid)
    assert m.kv == tuple(2 * 24_576 * t for t in grid)           # 12 attention layers x 2 KV heads x 256 x K,V x bf16
    parts = state_bytes(QWEN, 2, "bf16")
    assert m.state == parts["conv"] + parts["recurrent"] > 0
    budget = memory_budget(QWEN, 2, 4096, "bf16", "bf16")
    assert m.totals[1] == budget.infer_total_bytes == inference_bytes(QWEN, 4096, 2, "bf16")


def test_inference_bytes_in_fp32_are_four_bytes_a_value():
    """gpt2 served in fp32: 4 B per weight and per cached key and value (12 layers x 768 wide x K,V)."""
    gpt2 = PRESETS["gpt2"].config
    assert inference_bytes(gpt2, 1024, 1, "fp32") == 4 * count_params(gpt2).total + 12 * 2 * 768 * 1024 * 4
    assert inference_bytes(gpt2, 1024, 1, "fp32") == 2 * inference_bytes(gpt2, 1024, 1, "bf16")


def test_all_attention_is_the_same_model_with_attention_everywhere():
    dense = all_attention(QWEN)
    assert dense.layer_types == ("full",) * 48 and dense.ffn_types == QWEN.ffn_types
    assert kv_cache_bytes(dense, 1, 1000, "bf16") == 98_304 * 1000
    assert state_bytes(dense, 1)["recurrent"] == 0
    gdn, attention = (count_params(c).components for c in (QWEN, dense))
    assert attention["routed_experts"] == gdn["routed_experts"]       # the FFNs are untouched
    assert all_attention(PRESETS["llama-3-8b"].config) is PRESETS["llama-3-8b"].config


@pytest.mark.parametrize("name", list(hybrid_configs()))
def test_all_attention_keeps_ffns_and_attention_words(name):
    cfg = hybrid_configs()[name]
    dense = all_attention(cfg)
    for spec, plain in zip(cfg.layer_specs, dense.layer_specs):
        assert plain.ffn == spec.ffn and plain.window == spec.window
        assert plain.mixers == (("attention",) if spec.mixers else ())
    assert state_bytes(dense, 1) == {"conv": 0, "recurrent": 0}


def test_crossing_is_the_first_context_over_memory():
    fixed = context_memory(QWEN, ())
    base = fixed.weights + fixed.state
    memory = base + 24_576 * 30_000 + 100                 # room for 30,000 tokens and a little
    at = crossing(QWEN, memory, 262_144)
    assert at == 30_001
    assert inference_bytes(QWEN, at - 1) <= memory < inference_bytes(QWEN, at)
    assert crossing(QWEN, base - 1, 262_144) == 0          # the weights and state alone do not fit
    assert crossing(QWEN, base + 24_576 * 262_144, 262_144) is None
    dense = all_attention(QWEN)                            # four times the KV per token: crossed sooner
    got = crossing(dense, memory, 262_144)
    assert got is not None and got < at


def test_crossing_with_a_window_counts_what_the_window_holds():
    """Gemma-2-2B's sliding layers stop growing at 4,096 tokens: the closed form's kink is found exactly."""
    cfg = PRESETS["gemma-2-2b"].config
    memory = inference_bytes(cfg, 6000) + 1
    at = crossing(cfg, memory, cfg.context_length)
    assert inference_bytes(cfg, at - 1) <= memory < inference_bytes(cfg, at)


def test_crossings_per_device():
    """Two H100s (2 x 80 GiB) hold Qwen3-Next's 148 GiB of bf16 weights and its whole 262,144-token context; the
    same model with attention in every layer runs out part way. One RTX 4090 cannot hold the weights at all."""
    from engine.budget.devices import DEVICE_PROFILES
    got = {c.device: c for c in crossings(QWEN, 262_144, gpus=2, devices=["H100", "RTX 4090"])}
    h100 = got["2 × H100"]
    assert h100.memory_bytes == 2 * DEVICE_PROFILES["H100"].memory_bytes
    assert h100.tokens is None and h100.all_attention_tokens == crossing(all_attention(QWEN), h100.memory_bytes,
                                                                          262_144)
    assert 0 < h100.all_attention_tokens < 262_144
    assert got["2 × RTX 4090"].tokens == 0
    plain = crossings(PRESETS["llama-2-7b"].config, 4096)
    assert all(c.tokens == c.all_attention_tokens for c in plain)
    assert {c.device for c in plain} == {n for n, p in DEVICE_PROFILES.items() if p.memory_bytes is not None}
    with pytest.raises(ValueError, match="devices: 'H900' is not one of"):
        crossings(QWEN, 4096, devices=["H900"])


def test_all_attention_keeps_a_layer_without_a_mixer_as_it_is():
    """Nemotron-H's FFN-only layers (layer type none) have no mixer to replace: they stay none, and each
    recurrent mixer becomes full attention."""
    from tests.hybrid_cases import HYBRID_BASE
    from engine.config import ModelConfig
    cfg = ModelConfig(**{**HYBRID_BASE, "layer_types": ("mamba2", "none", "gdn", "full")})
    assert all_attention(cfg).layer_types == ("full", "none", "full", "full")


def test_bad_options_name_the_field():
    """The Context page's dtype and batch inputs: a refused value is reported under the field's own name."""
    with pytest.raises(ValueError) as e:
        context_memory(QWEN, (4096,), dtype="fp8")
    assert str(e.value) == "dtype: 'fp8' is not one of fp32, bf16, fp16"
    with pytest.raises(ValueError) as e:
        state_bytes(QWEN, 1, convention="exllama")
    assert str(e.value) == "convention: 'exllama' is not one of transformers, vllm, llama.cpp"
    with pytest.raises(ValueError) as e:
        state_bytes(QWEN, 0)                    # the state has no sequence length to complain about
    assert str(e.value) == "batch: 0 is not an integer >= 1"


def test_crossing_bisects_in_log2_steps(monkeypatch):
    """The Context page answers at once: the first context over memory is found in at most 1 + log2(262,144) = 19
    KV-cache evaluations (the longest context, then one halving each), not by a search that stops narrowing."""
    import engine.budget.context_memory as cm
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        assert len(calls) <= 19, "the bisection stopped halving"
        return kv_cache_bytes(*args, **kwargs)

    monkeypatch.setattr(cm, "kv_cache_bytes", counted)
    fixed = context_memory(QWEN, ())
    memory = fixed.weights + fixed.state + 24_576 * 30_000 + 100
    assert crossing(QWEN, memory, 262_144) == 30_001



DSA = PRESETS["deepseek-v3.2"].config


@pytest.mark.parametrize("fn, args, spelled, other", [
    (kv_cache_bytes, (DSA, 2, 100), dict(dtype="bf16", kind="latent", index_keys="fp8"),
     dict(dtype="fp32", kind="expanded", index_keys="dtype")),
    (state_bytes, (QWEN, 2), dict(dtype="bf16", convention="vllm"), dict(dtype="fp32", convention="llama.cpp")),
    (context_memory, (QWEN, (4096,)), dict(batch=1, dtype="bf16"), dict(batch=2, dtype="fp32")),
    (inference_bytes, (QWEN, 4096), dict(batch=1, dtype="bf16"), dict(batch=2, dtype="fp32")),
    (memory_budget, (QWEN, 1, 64),
     dict(dtype="bf16", policy="mixed-bf16", optimizer="adamw", recompute="none", attention="sdpa"),
     dict(dtype="fp32", policy="fp32", optimizer="sgd", recompute="full", attention="explicit")),
], ids=lambda x: getattr(x, "__name__", ""))
def test_left_out_options_are_the_documented_defaults(fn, args, spelled, other):
    """A caller (the CLI, the app's first render) that leaves an option out gets the documented default: one
    sequence in bf16, MLA's latent cache with fp8 indexer keys, the vLLM state convention, mixed-bf16 AdamW
    training without recompute on SDPA; and each of those options changes the answer, so a wrong default shows."""
    short = fn(*args)
    assert short == fn(*args, **spelled)
    for key, value in other.items():
        assert fn(*args, **{key: value}) != short, key
