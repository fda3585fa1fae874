"""Which slice of every tensor one GPU holds under data (ZeRO), tensor and pipeline parallelism.

GPUs = dp * tp * pp. A GPU is (pipeline stage s, tensor rank, data rank r):
  PP    stage s holds blocks [s*L//pp, (s+1)*L//pp); stage 0 also the embeddings (and embedding norm), the
        last stage the final norm and the head (a tied head is a second copy there when pp > 1, as in Megatron).
  TP    Megatron: q, k, v, gate, up split by output features (heads and FFN columns, with their biases; the
        attention output gate g with the query heads), o and down by input features (their biases replicated);
        norms, embeddings and head replicated, and MLA's down-projections q_a, kv_a. The sparse-attention
        indexer is replicated, as vLLM's (deepseek_v2.py Indexer: ReplicatedLinear, "no tensor parallel, just
        replicated"). The recurrent mixers' weights (Gated DeltaNet, KDA, Mamba, lightning) are counted whole on
        every rank: vLLM splits them by heads, which is not modelled, and this engine's tp refuses recurrent
        layers (engine/train/sharding.py); the plan says so in a note.
        MoE routed experts split their hidden width the same way. Needs tp to divide n_heads, kv_heads and the
        FFN widths.
  EP    MoE: the routed experts are divided among ep of the data-parallel ranks (E/ep each; ep divides dp and E);
        ZeRO shards an expert's tensors over the dp/ep ranks that hold the same experts. LoRA on a column-split matrix: A replicated, B split;
        on a row-split one: A split, B replicated.
  ZeRO  over the dp ranks each tensor is cut along dim 0 as torch.chunk does (FSDP2's layout): data rank r
        holds rows [r*c, min((r+1)*c, n0)), c = ceil(n0/dp); rank 0 holds the most. ZeRO-1 shards optimizer
        state (and the fp32 master copy), ZeRO-2 also gradients, ZeRO-3 (FSDP full sharding) also weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.config import ModelConfig
from engine.plan.tensors import COLUMN_SPLIT, ROW_SPLIT, Tensor, param_tensors

TP_REPLICATED = ("q_a", "kv_a", "index_q", "index_k", "index_weights")   # block matrices replicated by design
TP_MIXER_NOTE = ("tp: the recurrent mixers' weights (projections, conv, A_log/D/dt_bias, norms) are counted whole "
                 "on every tensor rank; vLLM splits them by heads (not modelled here) and this engine's own tp "
                 "refuses recurrent layers")


def tp_whole_mixers(cfg: ModelConfig) -> bool:
    """Whether tensor parallelism leaves block matrices whole beyond the replicated-by-design ones (the
    recurrent mixers'), which the plan notes."""
    return any(t.kind == "matrix" and t.layer is not None and t.role.removesuffix("_bias") not in
               COLUMN_SPLIT + ROW_SPLIT + TP_REPLICATED for t in param_tensors(cfg))


@dataclass(frozen=True)
class Layout:
    gpus: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0                 # 0 (plain DDP) .. 3 (FSDP full sharding)
    sequence_parallel: bool = False
    ep: int = 1                   # expert parallelism (MoE), within the data-parallel ranks

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)


def layout_problems(cfg: ModelConfig, lay: Layout) -> list[str]:
    """Field-named reasons a layout cannot run this config (empty when it can)."""
    out = []
    for name in ("gpus", "tp", "pp", "ep"):
        v = getattr(lay, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            out.append(f"{name}: {v!r} is not an integer >= 1")
    if out:
        return out
    if lay.zero not in (0, 1, 2, 3):
        out.append(f"zero: {lay.zero!r} is not one of 0, 1, 2, 3")
    if not isinstance(lay.sequence_parallel, bool):
        out.append(f"sequence_parallel: {lay.sequence_parallel!r} is not true or false")
    if lay.gpus % (lay.tp * lay.pp):
        out.append(f"gpus: {lay.gpus} is not a multiple of tp*pp = {lay.tp * lay.pp}")
    moe = cfg.n_experts is not None
    widths = (("expert_d_ff", cfg.expert_width),) + (   # the shared experts are one FFN of their summed width
        (("n_shared_experts*shared_d_ff", cfg.shared_width),) if cfg.shared_width else ())
    for what, n in (("n_heads", cfg.n_heads), ("kv_heads", cfg.kv_heads),
                    *(widths if moe else ()),
                    *((("d_ff", cfg.ffn_width),) if not moe or cfg.moe_first_dense or cfg.moe_every > 1 else ())):
        if n % lay.tp:
            out.append(f"tp: {lay.tp} does not divide {what} = {n}")
    if lay.ep > 1 and not moe:
        out.append(f"ep: {lay.ep} needs MoE experts (n_experts is null)")
    elif lay.ep > 1 and (cfg.n_experts % lay.ep or (lay.gpus % (lay.tp * lay.pp) == 0 and lay.dp % lay.ep)):
        out.append(f"ep: {lay.ep} must divide n_experts = {cfg.n_experts} and dp = {lay.dp}")
    if lay.pp > cfg.n_layers:
        out.append(f"pp: {lay.pp} stages is more than n_layers = {cfg.n_layers}")
    return out


def stage_layers(cfg: ModelConfig, pp: int, stage: int) -> range:
    return range(stage * cfg.n_layers // pp, (stage + 1) * cfg.n_layers // pp)


def stage_tensors(cfg: ModelConfig, pp: int, stage: int) -> list[Tensor]:
    """The base tensors pipeline stage `stage` holds (a tied head counted again on the last stage)."""
    layers, last = stage_layers(cfg, pp, stage), stage == pp - 1
    out = []
    for t in param_tensors(cfg):
        if t.layer is not None:
            keep = t.layer in layers
        elif t.kind in ("embedding", "positions") or t.name.startswith("emb_norm"):
            keep = stage == 0
        else:                                    # final norm, untied head
            keep = last
        if keep:
            out.append(t)
    if cfg.tie_embeddings and last and pp > 1:
        emb = next(t for t in param_tensors(cfg) if t.role == "embedding")
        out.append(Tensor("head.weight", emb.shape, "head", None, "head"))
    return out


def tp_shape(t: Tensor, tp: int, ep: int = 1) -> tuple[int, ...]:
    """The local shape of `t` on one tensor-parallel (and expert-parallel) rank."""
    if t.role in ("expert_gate", "expert_up"):
        return (t.shape[0] // ep, t.shape[1] // tp, t.shape[2])
    if t.role == "expert_down":
        return (t.shape[0] // ep, t.shape[1], t.shape[2] // tp)
    base = t.role.removesuffix("_bias")
    if base in COLUMN_SPLIT:
        return (t.shape[0] // tp,) + t.shape[1:]
    if t.role in ROW_SPLIT:
        return (t.shape[0], t.shape[1] // tp)
    kind, _, target = t.role.partition(".")       # adapters: "lora_A.q", "lora_B.down", ...
    if kind == "lora_B" and target in COLUMN_SPLIT:
        return (t.shape[0] // tp, t.shape[1])
    if kind == "lora_A" and target in ROW_SPLIT:
        return (t.shape[0], t.shape[1] // tp)
    return t.shape


def chunk_shape(shape: tuple[int, ...], dp: int, rank: int) -> tuple[int, ...]:
    """Data rank `rank`'s piece of a tensor cut along dim 0 into dp chunks (torch.chunk / FSDP2)."""
    if dp == 1 or not shape:
        return shape
    c = math.ceil(shape[0] / dp)
    return (max(0, min(c, shape[0] - rank * c)),) + shape[1:]
