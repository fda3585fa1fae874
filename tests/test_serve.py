"""Serving answers (engine/plan/serve.py, speed.py) against the engines' own startup logs and formulas.

vLLM: vllm-project/vllm issue 10517 prints every input of its KV sizing (Llama-3.1-8B, RTX 3090, 0.9 utilisation:
total_gpu_memory 23.58 GiB, peak_torch 17.06 GiB with 14.9888 GiB of weights, non_torch 0.35 GiB -> kv_cache_size
3.81 GiB, "GPU blocks: 1952", "Maximum concurrency for 20000 tokens per request: 1.56x"; at 29,000 tokens 1478
blocks, "23648" tokens, 0.82x); PR 10511's log (Meta-Llama-3-8B, 79.22 GiB x 0.90, weights 14.96, non-torch 1.79,
activation peak 1.26 -> 53.29 GiB for KV); issue 12330 (Llama-3-8B, A100-40GB: 5691 blocks, 11.12x for 8192
tokens); PR 12569 (Llama-3.1-70B: 1381 blocks, 10.79x for 2048). vLLM counts its rotary cos/sin cache
(max_position x head_dim in bf16) inside "model weights": 131,072 x 128 x 2 B = 32 MiB for Llama-3.1.
llama.cpp: K and V cells of n_embd_k_gqa values per token and layer in the cache type's ggml rows.
"""
from __future__ import annotations

import pytest

from engine.plan import Layout, Serving, Setup
from engine.plan.memory import gpu_memory
from engine.plan.serve import capacity, memory_at, sequence_bytes
from engine.plan.speed import experts_read, speed, weight_bytes
from engine.budget.devices import DEVICE_PROFILES
from engine.presets import get_preset

GiB = 2**30
LLAMA31, LLAMA3 = get_preset("llama-3.1-8b").config, get_preset("llama-3-8b").config
INFER = Setup(mode="infer")


def _weights(cfg) -> int:
    return gpu_memory(cfg, Layout(), Setup(mode="infer", seq=1))["weights"]


def test_the_page_is_vllms_cache_block_size():
    """vLLM: block_size x layers x 2 (K, V) x kv_heads x head_dim x dtype bytes = 2 MiB for Llama-3-8B in bf16."""
    assert sequence_bytes(LLAMA3, Layout(), INFER, 16) == 16 * 32 * 2 * 8 * 128 * 2 == 2 * 2**20


def test_issue_10517_log_from_its_own_inputs():
    rope_cache = 131072 * 128 * 2
    act = round((17.06 - 14.9888) * GiB) + rope_cache     # peak_torch - vLLM's weights; its rotary cache is ours
    sv = Serving(engine="vllm", utilization=0.90, activation_bytes=act, non_torch_bytes=round(0.35 * GiB))
    c = capacity(LLAMA31, round(23.58 * GiB), Layout(), INFER, sv, request_tokens=20000)
    assert abs(c.blocks - 1952) <= 8             # the log's three inputs are rounded to 0.01 GiB (+-2.6 blocks each)
    assert abs(c.available_bytes / GiB - 3.81) < 0.015


@pytest.mark.parametrize("cfg, blocks, n, tokens, shown", [
    (LLAMA31, 1952, 20000, 31232, "1.56"),        # issue 10517, 20k
    (LLAMA31, 1478, 29000, 23648, "0.82"),        # issue 10517, 29k: "can be stored in KV cache (23648)"
    (LLAMA3, 5691, 8192, 91056, "11.12"),         # issue 12330
    (get_preset("llama-3-70b").config, 1381, 2048, 22096, "10.79"),   # PR 12569 (70B, weights not modelled)
])
def test_blocks_to_tokens_and_concurrency_as_vllm_prints_them(cfg, blocks, n, tokens, shown):
    """With exactly `blocks` pages free, the pool and the concurrency line read as the log prints them."""
    page = sequence_bytes(cfg, Layout(), INFER, 16)
    sv = Serving(engine="vllm", utilization=1.0, activation_bytes=0, non_torch_bytes=0)
    c = capacity(cfg, _weights(cfg) + blocks * page + page // 2, Layout(), INFER, sv, request_tokens=n)
    assert (c.blocks, c.kv_tokens, f"{c.max_concurrency:.2f}") == (blocks, tokens, shown)
    assert c.max_concurrency == blocks * 16 / n


def test_pr_10511_available_kv_memory():
    sv = Serving(engine="vllm", utilization=0.90, activation_bytes=round(1.26 * GiB) + 8192 * 128 * 2,
                 non_torch_bytes=round(1.79 * GiB))
    c = capacity(LLAMA3, round(79.22 * GiB), Layout(), INFER, sv)
    assert abs(c.available_bytes / GiB - 53.29) < 0.01
    assert round(_weights(LLAMA3) / GiB, 2) == 14.96                        # "model weights take 14.96GiB"


def test_llama_cpp_cells_in_its_cache_types():
    """K and V per layer: n_ctx x 1024 values in ggml rows; 8,192 cells of Llama-3-8B: f16 1 GiB, q8_0 544 MiB
    (34 B per 32 values), q4_0 288 MiB (18 per 32)."""
    for kv, mib in (("f16", 1024), ("q8_0", 544), ("q4_0", 288), ("none", 1024)):
        assert sequence_bytes(LLAMA3, Layout(), Setup(mode="infer", kv_quant=kv), 8192) == mib * 2**20
    c = capacity(LLAMA3, 24 * GiB, Layout(), Setup(mode="infer", quant="gguf:Q4_K_M", kv_quant="q8_0"))
    assert c.engine == "llama.cpp" and c.page_bytes == 544 * 2**20 // 8192          # one cell: 69,632 B
    budget = 24 * GiB - _weights_q4(LLAMA3) - 512 * LLAMA3.vocab_size * 4
    assert c.blocks == budget // c.page_bytes and c.kv_tokens == c.blocks


def _weights_q4(cfg) -> int:
    return gpu_memory(cfg, Layout(), Setup(mode="infer", seq=1, quant="gguf:Q4_K_M"))["weights"]


def test_longest_context_follows_windows_and_the_model_limit():
    """gpt-oss keeps 128 tokens on its sliding layers: beyond that a token costs the full layers only, so one
    sequence reaches further than blocks x 16 (counted on every layer); a model is never offered more than its
    context_length."""
    oss = get_preset("gpt-oss-20b").config
    s = Setup(mode="infer", quant="checkpoint")
    growth = sequence_bytes(oss, Layout(), s, 10_001) - sequence_bytes(oss, Layout(), s, 10_000)
    assert growth == 12 * 2 * 8 * 64 * 2                                  # 12 full layers, 8 kv heads of 64
    c = capacity(oss, 24 * GiB, Layout(), s)
    assert c.max_context > c.kv_tokens or c.kv_tokens >= oss.context_length
    assert c.context_limit == "context_length" and c.max_context == oss.context_length
    small = capacity(LLAMA31, 24 * GiB, Layout(), INFER)
    assert small.context_limit == "memory" and small.max_context == small.kv_tokens
    assert memory_at(LLAMA31, Layout(), INFER, Serving(), small.max_context) <= 24 * GiB * 0.9 + 2**20


@pytest.mark.parametrize("preset, gib, engine", [("llama-3.1-8b", 8, "vllm"), ("llama-3.1-8b", 20, "vllm"),
                                                 ("gpt-oss-20b", 17, "vllm"), ("llama-3.1-8b", 17, "llama.cpp"),
                                                 ("llama-3.1-8b", 19, "llama.cpp"), ("llama-3.1-8b", 23, "llama.cpp"),
                                                 ("llama-3.1-8b", 30, "llama.cpp")])
def test_the_longest_context_is_the_last_length_whose_cache_fits_the_pool(preset, gib, engine):
    """max_context: a sequence of that many tokens fits the KV pool (blocks x page bytes), one token more does
    not; 0 where the weights leave no pool (Llama-3.1-8B on 8 GiB). gpt-oss's sliding layers stop growing, so
    its answer lies past the pool's token count; llama.cpp's one-token cells put the answer on any token."""
    cfg, s = get_preset(preset).config, Setup(mode="infer", quant="checkpoint")
    c = capacity(cfg, gib * GiB, Layout(), s, Serving(engine=engine))
    pool = c.blocks * c.page_bytes
    assert c.context_limit == "memory" and (c.max_context == 0) == (gib == 8)
    assert sequence_bytes(cfg, Layout(), s, c.max_context) <= pool < sequence_bytes(cfg, Layout(), s, c.max_context + 1)


def test_mla_latent_is_the_cache_and_is_replicated_under_tensor_parallelism():
    ds = get_preset("deepseek-v3").config
    assert sequence_bytes(ds, Layout(), INFER, 1000) == 70_272 * 1000          # DESIGN: 70,272 B per token
    assert sequence_bytes(ds, Layout(8, tp=8), INFER, 1000) == 70_272 * 1000   # vLLM keeps the latent on each rank
    assert sequence_bytes(LLAMA3, Layout(8, tp=8), INFER, 1000) == 131_072 * 1000 // 8


def test_decode_reads_the_weights_and_kv_once_per_step():
    h100 = DEVICE_PROFILES["H100"]
    sp = speed(LLAMA31, h100, Layout(), INFER, 1, 4096, efficiency=0.8)
    kv = 4096 * 131_072
    assert sp.weight_bytes == _weights(LLAMA31) and sp.kv_bytes == kv and sp.bound == "memory"
    assert sp.step_seconds == pytest.approx((sp.weight_bytes + kv) / (3.35e12 * 0.8))
    big = speed(LLAMA31, h100, Layout(), INFER, 64, 4096, efficiency=0.8)
    assert big.total == pytest.approx(64 * big.per_user) and big.total > 20 * sp.total
    assert (big.batch, big.context, big.kv_bytes) == (64, 4096, 64 * kv)     # every sequence's own cache is read
    assert big.as_dict()["context"] == 4096
    tp = speed(LLAMA31, h100, Layout(2, tp=2), INFER, 1, 4096, efficiency=0.8)
    assert tp.step_seconds == pytest.approx(sp.step_seconds / 2)


def test_moe_decode_at_batch_one_reads_only_the_routed_experts():
    """Mixtral top-2 of 8: batch 1 reads 2 experts per layer, not 8; a large batch reads nearly all of them
    (uniform routing: 8 * (1 - (6/8)^B))."""
    mix = get_preset("mixtral-8x7b").config
    dense, experts = weight_bytes(mix, INFER)
    one = speed(mix, DEVICE_PROFILES["H100"], Layout(), INFER, 1, 1024)
    assert one.experts_read == 2 and one.weight_bytes == dense + experts * 2 // 8
    assert experts_read(mix, 8) == pytest.approx(8 * (1 - 0.75 ** 8))
    many = speed(mix, DEVICE_PROFILES["H100"], Layout(), INFER, 256, 1024)
    assert many.weight_bytes == pytest.approx(dense + experts, rel=1e-6)
    assert "2.00 of 8 experts" in one.formulas["step_seconds"]


def test_prefill_is_compute_bound_and_efficiency_is_stated():
    sp = speed(LLAMA31, DEVICE_PROFILES["A100"], Layout(), INFER, 1, 8192, compute_efficiency=0.5)
    from engine.budget.flops import flops_budget
    assert sp.prefill_seconds == pytest.approx(flops_budget(LLAMA31, 1, 8192, causal=True).forward_flops /
                                               (312e12 * 0.5))
    assert "0.5" in sp.formulas["prefill_seconds"]


def test_a_short_prompts_prefill_reads_the_weights_and_its_cache_once():
    """Llama-2-7B, one 64-token prompt on an H100: far too few FLOPs to be compute-bound, so prefill takes the
    time to read the 13,476,831,232 B of bf16 weights and write the prompt's KV cache (32 layers x K and V x
    4,096 x 64 tokens x 2 B = 33,554,432 B) at 75% of the 3.35 TB/s bandwidth."""
    h100 = DEVICE_PROFILES["H100"]
    sp = speed(get_preset("llama-2-7b").config, h100, Layout(), INFER, 1, 64)
    assert (sp.weight_bytes, sp.kv_bytes) == (13_476_831_232, 32 * 2 * 4096 * 64 * 2)
    assert sp.prefill_seconds == pytest.approx((13_476_831_232 + 33_554_432) / (h100.mem_bandwidth * 0.75),
                                               rel=1e-12)


@pytest.mark.parametrize("preset, ffn_width", [
    ("llama-3-8b", 14_336),                  # dense: d_ff
    ("mixtral-8x7b", 2 * 14_336),            # top-2 experts, no shared expert (shared_width 0)
    ("qwen1.5-moe-a2.7b", 4 * 1_408 + 5_632),  # top-4 routed experts and the shared expert's width
])
def test_vllm_activation_peak_default_is_the_ffn_a_token_passes_through(preset, ffn_width):
    """Without a profiled figure vLLM's activation peak is priced as one profile chunk (8,192 tokens) of the FFN's
    two intermediate tensors and three residual-width tensors in fp32: 8192 x (2 x width + 3 x d_model) x 4 B."""
    cfg = get_preset(preset).config
    sv = Serving().resolved(cfg, "none")
    assert sv.chunk == 8192 and sv.activation_bytes == 8192 * (2 * ffn_width + 3 * cfg.d_model) * 4
    assert Serving(chunk=512).resolved(cfg, "none").activation_bytes == 512 * (2 * ffn_width + 3 * cfg.d_model) * 4


def test_a_model_without_a_growing_cache_has_no_kv_blocks_and_serves_by_its_state():
    """An all-Mamba-2 model's cache does not grow with the context: vLLM gets no KV blocks (0, not 1), every
    context up to context_length fits, and concurrency is the pool over one request's fixed state."""
    cfg = LLAMA3.replace(name="mamba2-only", layer_types=("mamba2",) * LLAMA3.n_layers, position="none")
    assert sequence_bytes(cfg, Layout(), INFER, 16) == sequence_bytes(cfg, Layout(), INFER, 0) > 0
    c = capacity(cfg, 24 * GiB, Layout(), INFER)
    sv = Serving().resolved(cfg, "none")
    pool = int(24 * GiB * 0.9) - sv.activation_bytes - sv.non_torch_bytes - _weights(cfg)
    assert (c.page_bytes, c.blocks, c.kv_tokens) == (0, 0, 0)
    assert c.max_context == cfg.context_length and c.context_limit == "context_length"
    assert c.max_concurrency == pytest.approx(pool / sequence_bytes(cfg, Layout(), INFER, cfg.context_length))


def test_a_pipeline_stage_holds_the_kv_of_its_own_layers():
    """Mamba-2 layers first, attention last: under pp=2 the second stage holds every attention layer's KV, so
    the tightest GPU's bytes grow by the whole model's KV cache, and the first stage's by none."""
    from engine.budget.memory import kv_cache_bytes
    from engine.config import ModelConfig
    cfg = ModelConfig(name="mamba-then-attention", vocab_size=64, context_length=4096, d_model=64, n_layers=4,
                      n_heads=4, layer_types=("mamba2", "mamba2", "full", "full"), ssm_head_dim=16, ssm_state=8)
    lay, s, sv = Layout(2, pp=2), Setup(mode="infer", seq=1), Serving(activation_bytes=0, non_torch_bytes=0)
    assert sequence_bytes(cfg, lay, s, 4096, stage=0) == sequence_bytes(cfg, lay, s, 1, stage=0)   # the state
    assert sequence_bytes(cfg, lay, s, 4096, stage=1) == kv_cache_bytes(cfg, 1, 4096)
    # from 2,048 tokens on the attention stage is the tightest (the Mamba stage holds more weights)
    grown = memory_at(cfg, lay, s, sv, 4096) - memory_at(cfg, lay, s, sv, 2048)
    assert grown == kv_cache_bytes(cfg, 1, 4096) - kv_cache_bytes(cfg, 1, 2048)


def test_plan_json_reports_the_serving_answers_and_the_assumptions_behind_them():
    """`plan --json` (Plan.as_dict): max_context and max_concurrency at the top, as the README documents, equal to
    the serving answer; its assumptions are vLLM's defaults: 0.9 of memory, 1 GiB non-torch, blocks of 16 and an
    8,192-token profile chunk whose activation peak is 8,192 x (2 x 14,336 + 3 x 4,096) x 4 B."""
    from engine.plan import plan
    p = plan(LLAMA31, "h100-80gb", Layout(), Setup(mode="infer", seq=4096))
    out = p.as_dict()
    assert out["max_context"] == p.capacity.max_context == out["serving"]["max_context"]
    assert out["max_concurrency"] == p.capacity.max_concurrency == out["serving"]["max_concurrency"] > 1
    assert out["serving"]["assumptions"] == {"utilization": 0.9, "activation_bytes": 8192 * (2 * 14336 + 3 * 4096) * 4,
                                             "non_torch_bytes": GiB, "block_size": 16, "chunk": 8192}
