"""The Deploy page's figures (AppTest sees a Plotly chart only as an unknown element): they draw the engine's
numbers, label their units, and keep the GPU's capacity label off the bars."""
from __future__ import annotations

from app import deploy_view as view
from app.charts.deploy import serving_context_figure, per_gpu_figure, serving_speed_figure
from engine.budget.devices import DEVICE_PROFILES
from engine.plan import Layout, Serving, Setup, plan
from engine.plan.serve import capacity, memory_at
from engine.plan.speed import speed
from engine.presets import get_preset

LLAMA = get_preset("llama-3.1-8b").config
SPEC = view.DeploySpec(mode="infer", gpu="rtx-4090-24gb", gpus=1, zero=0, quant="gguf:Q4_K_M", seq=8192)


def test_gpu_capacity_is_a_legend_entry_not_a_label_over_the_bar():
    p = plan(LLAMA, "h100-80gb", Layout(), Setup(seq=2048, recompute="full"))
    fig = per_gpu_figure(p.per_stage, p.memory_bytes, "H100")
    assert not fig.layout.annotations                                  # nothing written over the plot
    assert "H100 memory: 80.00 GiB" in [t.name for t in fig.data]
    assert fig.layout.yaxis.range[1] >= p.memory_bytes / 2**30         # the line is on the chart
    assert fig.layout.yaxis.title.text == "memory per GPU (GiB)"


def test_memory_against_context_is_the_engines_and_each_gpu_has_a_line():
    tokens, need, lines = view.context_curve(LLAMA, SPEC)
    s = view.setup_of(LLAMA, SPEC)
    assert need == [memory_at(LLAMA, Layout(), s, Serving(), t) for t in tokens]
    assert tokens[0] == 1024 and tokens[-1] == LLAMA.context_length and need == sorted(need)
    assert lines["RTX 4090"] == 24 * 2**30 and lines["H100"] == 80 * 2**30     # llama.cpp: all of the memory
    fig = serving_context_figure(tokens, need, lines, "RTX 4090")
    assert list(fig.data[0].x) == tokens
    labels = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("L4, A10G, RTX 3090, RTX 4090 (24.00 GiB)") for t in labels)   # one line per size
    assert all(a.x == 1 and a.xanchor == "left" for a in fig.layout.annotations)           # right of the plot
    assert fig.layout.xaxis.type == "log" and "tokens" in fig.layout.xaxis.title.text
    cap = capacity(LLAMA, 24 * 2**30, Layout(), s, Serving())
    if cap.context_limit == "memory":                                  # the curve crosses the line at max_context
        assert memory_at(LLAMA, Layout(), s, Serving(), cap.max_context) <= lines["RTX 4090"]


def test_tokens_per_second_against_batch_shades_what_does_not_fit():
    batches, per_user, total, fit = view.speed_curve(LLAMA, SPEC)
    s = view.setup_of(LLAMA, SPEC)
    dev = DEVICE_PROFILES["RTX 4090"]
    assert per_user == [speed(LLAMA, dev, Layout(), s, b, 8192).per_user for b in batches]
    assert total == [b * u for b, u in zip(batches, per_user)]
    assert fit == int(capacity(LLAMA, dev.memory_bytes, Layout(), s, Serving(), 8192).max_concurrency)
    fig = serving_speed_figure(batches, per_user, total, fit, 8192)
    assert [t.name for t in fig.data] == ["all users (tokens/s)", "each user (tokens/s)"]
    shaded = [sh for sh in fig.layout.shapes if sh.type == "rect"]
    assert (len(shaded) == 1 and shaded[0].x0 == fit) if fit < batches[-1] else not shaded
    assert fig.layout.yaxis.title.text == "decode tokens/s (log scale)"
