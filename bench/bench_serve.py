"""Will it serve (issue #25): the planner's figures against what is published, printed as the tables of
bench/RESULTS.md. No timing: every row is a size or a count held against a published one.

  GGUF       llama.cpp's tools/quantize/README.md sizes for meta-llama/Llama-3.1-8B, every file type it lists
  shipped    published checkpoint bytes (model.safetensors.index.json total_size; DeepSeek-V3's and a GPTQ
             model's weight files)
  vLLM       KV blocks and the concurrency line of published vLLM startup logs, from the logs' own inputs
"""
from __future__ import annotations

import json
from pathlib import Path

from engine.interop.hf_config import import_hf_config
from engine.plan import Layout, Serving, Setup
from engine.plan.ggml import tensor_bytes
from engine.plan.memory import gpu_memory
from engine.plan.quant import checkpoint_bytes, gguf_types
from engine.plan.serve import capacity, sequence_bytes
from engine.plan.tensors import param_tensors
from engine.presets import get_preset

GiB = 2**30
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "hf_configs"
PUBLISHED = json.loads((DATA.parent / "llama_cpp_quantize_llama31_8b.json").read_text())   # with its source


def gguf_table() -> None:
    cfg = get_preset("llama-3.1-8b").config
    tensors, params = param_tensors(cfg), PUBLISHED["params"]
    print("| file type | ours GiB | published GiB | gap | ours bits/weight | published | mixture |")
    print("|---|---|---|---|---|---|---|")
    for ftype, row in PUBLISHED["file_types"].items():
        bpw, gib = row["bits_per_weight"], row["size_gib"]
        types = gguf_types(cfg, f"gguf:{ftype}")
        size = sum(tensor_bytes(types[t.name], t.shape) for t in tensors)
        mix: dict[str, int] = {}
        for t in tensors:
            mix[types[t.name]] = mix.get(types[t.name], 0) + 1
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(mix.items(), key=lambda kv: -kv[1]) if k != "F32")
        print(f"| {ftype} | {size / GiB:.3f} | {gib:.2f} | {100 * (size / GiB / gib - 1):+.2f}% | "
              f"{size * 8 / params:.4f} | {bpw:.4f} | {kinds} |")


def shipped_table() -> None:
    oss120, _ = import_hf_config(json.loads((DATA / "gpt-oss-120b.json").read_text()))
    ds, _ = import_hf_config(json.loads((DATA / "deepseek-v3.json").read_text()))
    int8, _ = import_hf_config(json.loads((DATA / "llama-3.1-8b-instruct-bnb-int8.json").read_text()))
    rows = [("openai/gpt-oss-120b (mxfp4)", sum(checkpoint_bytes(oss120)), 65_248_815_744, "index total_size"),
            ("openai/gpt-oss-20b (mxfp4)", sum(checkpoint_bytes(get_preset("gpt-oss-20b").config)),
             13_761_264_768, "index total_size"),
            ("deepseek-ai/DeepSeek-V3 (fp8 128x128, + MTP)", sum(checkpoint_bytes(ds)), 688_586_727_753,
             "weight files, headers included"),
            ("Llama-3.1-8B-Instruct fine-tune (bitsandbytes int8)", sum(checkpoint_bytes(int8)), 9_086_705_888,
             "index total_size")]
    mytho = json.loads((DATA / "mythomax-l2-13b-gptq.json").read_text())
    for branch, q, pub in (("main, 4-bit g128", {}, 7_259_435_192),
                           ("4-bit g64", {"group_size": 64}, 7_507_243_192),
                           ("4-bit g32", {"group_size": 32}, 8_002_859_672),
                           ("8-bit g128", {"bits": 8}, 13_652_883_824)):
        cfg, _ = import_hf_config({**mytho, "quantization_config": {**mytho["quantization_config"], **q}})
        rows.append((f"TheBloke/MythoMax-L2-13B-GPTQ ({branch})", sum(checkpoint_bytes(cfg)), pub,
                     "file size: + AutoGPTQ's fp16 bias buffers, header"))
    print("| checkpoint | ours (B) | published (B) | gap | published as |")
    print("|---|---|---|---|---|")
    for name, ours, pub, what in rows:
        print(f"| {name} | {ours:,} | {pub:,} | {100 * (ours / pub - 1):+.4f}% | {what} |")


def vllm_table() -> None:
    llama31, llama3 = get_preset("llama-3.1-8b").config, get_preset("llama-3-8b").config
    infer = Setup(mode="infer")
    act = round((17.06 - 14.9888) * GiB) + 131072 * 128 * 2
    c = capacity(llama31, round(23.58 * GiB), Layout(), infer,
                 Serving(engine="vllm", utilization=0.9, activation_bytes=act, non_torch_bytes=round(0.35 * GiB)),
                 20000)
    print("| log | inputs | ours | the log |")
    print("|---|---|---|---|")
    print(f"| issue 10517 (Llama-3.1-8B, RTX 3090, 0.90) | 23.58 GiB total, 17.06 peak torch (14.99 weights), "
          f"0.35 non-torch | {c.available_bytes / GiB:.3f} GiB, {c.blocks:,} blocks, {c.max_concurrency:.2f}x "
          f"for 20,000 | 3.81 GiB, 1,952 blocks, 1.56x |")
    h = capacity(llama3, round(79.22 * GiB), Layout(), infer,
                 Serving(engine="vllm", utilization=0.9, activation_bytes=round(1.26 * GiB) + 8192 * 128 * 2,
                         non_torch_bytes=round(1.79 * GiB)))
    w = gpu_memory(llama3, Layout(), Setup(mode="infer", seq=1))["weights"]
    print(f"| PR 10511 (Llama-3-8B, 80 GB, 0.90) | 79.22 GiB, weights 14.96, non-torch 1.79, activations 1.26 | "
          f"weights {w / GiB:.2f} GiB, KV {h.available_bytes / GiB:.2f} GiB | 14.96, 53.29 GiB |")
    page = sequence_bytes(llama3, Layout(), infer, 16)
    for name, blocks, n, shown in (("issue 12330 (Llama-3-8B, A100-40GB)", 5691, 8192, "11.12x"),
                                   ("issue 10517 at 29,000 tokens", 1478, 29000, "0.82x")):
        print(f"| {name} | {blocks:,} blocks of {page:,} B | {blocks * 16:,} tokens, "
              f"{blocks * 16 / n:.2f}x for {n:,} | {shown} |")


def main() -> None:
    print("GGUF: meta-llama/Llama-3.1-8B, ours vs llama.cpp tools/quantize/README.md")
    gguf_table()
    print("\nCheckpoints as shipped (plan --quant checkpoint)")
    shipped_table()
    print("\nvLLM KV sizing from published logs")
    vllm_table()


if __name__ == "__main__":
    main()
