"""Peers side by side (issue #14): our planner vs DeepSpeed's ZeRO-2/ZeRO-3 model-state estimators and
llm-analysis, same inputs, one run. The peers are not project dependencies: install them into a folder of your
own (`DS_BUILD_OPS=0 pip install --target DIR --no-deps deepspeed llm-analysis hjson py-cpuinfo fire termcolor
einops msgpack ninja`) and run `PYTHONPATH=DIR python -m bench peers`; without them this says so and stops."""
from __future__ import annotations

from engine.budget.params import count_params
from engine.plan import Layout, Setup
from engine.plan.memory import gpu_memory
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

GPUS, SEQ = 8, 8192


def _ours(cfg, zero: int) -> dict[str, int]:
    m = gpu_memory(cfg, Layout(GPUS, zero=zero), Setup(seq=SEQ, recompute="full"))
    return {"weights": m["weights"], "grads": m["grads"], "optimizer": m["optimizer"],
            "states": m["weights"] + m["grads"] + m["optimizer"] + m["working_set"]}


def _deepspeed(P: int, largest: int) -> dict[int, int]:
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    return {2: estimate_zero2_model_states_mem_needs(P, GPUS, 1, cpu_offload=False)[1],
            3: estimate_zero3_model_states_mem_needs(P, largest, GPUS, 1, cpu_offload=False)[1]}


def _llm_analysis(cfg, zero: int) -> dict[str, float]:
    from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
    from llm_analysis.config import ModelConfig, ParallelismConfig, get_dtype_config_by_name, get_gpu_config_by_name
    moe = dict(moe_num_experts=cfg.n_experts, moe_top_k=cfg.experts_per_token) if cfg.n_experts else {}
    f = cfg.expert_width if cfg.n_experts else cfg.ffn_width
    m = ModelConfig(name=cfg.name, num_layers=cfg.n_layers, n_head=cfg.n_heads, hidden_dim=cfg.d_model,
                    vocab_size=cfg.vocab_size, max_seq_len=cfg.context_length, num_key_value_heads=cfg.kv_heads,
                    ffn_embed_dim=f, expansion_ratio=f / cfg.d_model, model_type="llama", **moe)
    a = LLMAnalysis(m, get_gpu_config_by_name("h100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"),
                    ParallelismConfig(dp_size=GPUS), flops_efficiency=0.4, hbm_memory_efficiency=1.0)
    r = a.training(batch_size_per_gpu=1, seq_len=SEQ, gradient_accumulation_steps=1,
                   ds_zero={2: DSZeRO.STAGE_2, 3: DSZeRO.STAGE_3}[zero],
                   activation_recomputation=ActivationRecomputation.FULL, mlp_gated_linear_units=True)
    return {"params": a.get_num_params_total(), "weights": r["weight_memory_per_gpu"],
            "grads": r["gradient_memory_per_gpu"], "optimizer": r["optimizer_state_memory_per_gpu"],
            "states": r["(weight+op_state+grad)_memory_per_gpu"]}


def main() -> None:
    try:
        import deepspeed  # noqa: F401
        import llm_analysis  # noqa: F401
    except ImportError as e:
        print(f"peers not installed ({e}); see this module's docstring")
        return
    print(f"{GPUS} GPUs, data parallel, mixed-bf16 AdamW, seq {SEQ}, full recompute; bytes per GPU")
    print("| config | ZeRO | params (ours / llm-analysis) | ours: w, g, opt, model states | DeepSpeed model states "
          "| llm-analysis: w, g, opt, model states |")
    print("|---|---:|---:|---|---:|---|")
    for name in ("llama-3-8b", "mixtral-8x7b"):
        cfg = get_preset(name).config
        P = count_params(cfg).total
        largest = max(t.numel for t in param_tensors(cfg))
        ds = _deepspeed(P, largest)
        for zero in (2, 3):
            o = _ours(cfg, zero)
            try:
                la = _llm_analysis(cfg, zero)
                peer = (f"{la['weights']:,.0f}, {la['grads']:,.0f}, {la['optimizer']:,.0f}, **{la['states']:,.0f}**",
                        f"{la['params']:,.0f}")
            except AssertionError as e:   # it refuses a layout whose weights alone exceed the GPU
                peer = (f"refused: {str(e)[:60]}", "-")
            print(f"| {name} | {zero} | {P:,} / {peer[1]} | {o['weights']:,}, {o['grads']:,}, "
                  f"{o['optimizer']:,}, **{o['states']:,}** | **{ds[zero]:,}** | {peer[0]} |")
