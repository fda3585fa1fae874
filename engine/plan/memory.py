"""Per-GPU memory of a training step or of inference under a parallel layout, component by component.

For one GPU (stage s, tensor rank, data rank r), with its tensors from engine/plan/parallel.py and the policy's
bytes per parameter (engine/budget/memory.py: weights wb, grads gb, fp32 master mb, optimizer state sb each):
  weights      frozen or trainable base tensors in wb (or their quantized bytes), LoRA adapters in wb;
               ZeRO-3: only this rank's dim-0 chunk
  grads        trainable elements * gb; ZeRO-2/3: chunked
  optimizer    trainable elements * (states * sb + mb) + 4 B step counter per trainable tensor (AdamW);
               ZeRO-1/2/3: chunked (the master copy counts here, as DeepSpeed does)
  activations  engine/budget/activations.py per block at the micro-batch, for this stage's blocks (+ embedding on
               the first, head on the last stage), times the micro-batches in flight under 1F1B: min(pp - s, m)
               (Narayanan et al. 2021). TP (Korthikanti et al. 2022): everything but the d_model-wide norm
               inputs divides by tp; with sequence parallelism those divide too. Recompute "full" adds one
               block's rebuilt activations. Inference: the [B, V] logits of one decode step.
  kv_cache     inference: this stage's attention layers' cache (kv_cache_per_gpu: kv heads / tp, an MLA latent on
               every rank), stored per engine/plan/quant.py, plus its recurrent layers' state (vLLM's convention) / tp
  working_set  ZeRO-3 only (modelled): the gathered weights of the largest block, twice (the one computing and
               the one prefetched), plus its gathered gradients in training
  total        the sum
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from engine.budget.activations import activation_estimate
from engine.budget.memory import (_OPTIMIZER_STATES, _POLICY_BYTES, POLICY_DTYPE, index_key_layers, kv_cache_layers,
                                  layer_state_bytes)
from engine.config import ModelConfig
from engine.layers.block import block_norm_count
from engine.layers.norm import norm_saved_bytes
from engine.plan.finetune import adapter_tensors
from engine.plan.parallel import Layout, chunk_shape, stage_layers, stage_tensors, tp_shape
from engine.plan.quant import Storage, kv_quant_bytes, weight_storage
from engine.plan.tensors import EXPERTS, Tensor
from engine.runtime import DTYPE_BYTES

COMPONENTS = ("weights", "grads", "optimizer", "activations", "kv_cache", "working_set")


@dataclass(frozen=True)
class Setup:
    """Everything besides the model and the layout that decides the bytes."""
    mode: str = "train"                 # "train" or "infer"
    policy: str = "mixed-bf16"
    optimizer: str = "adamw"
    recompute: str = "none"
    micro_batch: int = 1                # sequences per micro-batch (training) or batch (inference)
    micro_batches: int = 1              # m: micro-batches per step (pipeline / accumulation)
    seq: int = 2048                     # training sequence, or tokens held in the KV cache
    finetune: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q", "v")
    quant: str = "none"                 # weight storage (engine/plan/quant.py): a scheme or gguf:FILE_TYPE
    quantize_also: tuple[str, ...] = () # "embeddings", "head": quantized too
    kv_quant: str = "none"


def high_dtype(policy: str) -> str:
    """The precision of weights that are not quantized: the policy's weight dtype (its compute dtype; fp32 for
    fp32, which is the one policy whose weights take 4 bytes)."""
    return POLICY_DTYPE[policy]


def gpu_memory(cfg: ModelConfig, lay: Layout, s: Setup, stage: int = 0, dp_rank: int = 0) -> dict[str, int]:
    """Bytes per component on the GPU at pipeline `stage` and data rank `dp_rank` (any tensor rank: equal)."""
    wb, gb, mb, sb = _POLICY_BYTES[s.policy]
    high = high_dtype(s.policy)
    train = s.mode == "train"
    lora = s.finetune in ("lora", "qlora")
    base = stage_tensors(cfg, lay.pp, stage)
    adapters = [x for _, a, b in adapter_tensors(cfg, s.lora_rank, s.lora_targets) if a.layer in
                stage_layers(cfg, lay.pp, stage) for x in (a, b)] if lora else []
    trainable = adapters if lora else (base if train else [])

    def local(t: Tensor, shard: bool) -> tuple[int, ...]:
        shape = tp_shape(t, lay.tp, lay.ep)
        if not shard:
            return shape
        return chunk_shape(shape, lay.dp // lay.ep, dp_rank % (lay.dp // lay.ep)) if t.role in EXPERTS else \
            chunk_shape(shape, lay.dp, dp_rank)

    shard_w = lay.zero >= 3
    store = weight_storage(cfg, s.quant, high, s.quantize_also)
    weights = sum(store(t, local(t, shard_w))[0] for t in base)
    weights += sum(math.prod(local(t, shard_w)) * wb for t in adapters)
    out = dict.fromkeys(COMPONENTS, 0)
    out["weights"] = weights
    if train:
        out["grads"] = sum(math.prod(local(t, lay.zero >= 2)) for t in trainable) * gb
        states = _OPTIMIZER_STATES[s.optimizer]
        out["optimizer"] = (sum(math.prod(local(t, lay.zero >= 1)) for t in trainable) * (states * sb + mb)
                            + (4 * len(trainable) if s.optimizer == "adamw" else 0))
        out["activations"] = _activations(cfg, lay, s, stage)
    else:
        out["activations"] = (s.micro_batch * cfg.vocab_size * DTYPE_BYTES[POLICY_DTYPE[s.policy]]
                              if stage == lay.pp - 1 else 0)
        out["kv_cache"] = kv_cache_per_gpu(cfg, lay, s, stage)
    if shard_w:
        out["working_set"] = _working_set(lay, s, stage, cfg, base, trainable, store)
    out["total"] = sum(out[c] for c in COMPONENTS)
    return out


def _activations(cfg: ModelConfig, lay: Layout, s: Setup, stage: int) -> int:
    dtype = POLICY_DTYPE[s.policy]
    act = activation_estimate(cfg, s.micro_batch, s.seq, dtype, "sdpa", s.recompute)
    layers = stage_layers(cfg, lay.pp, stage)
    per_layer = sum(act.per_layer[i] for i in layers)
    if lay.tp > 1:
        whole = sum(activation_estimate(cfg, s.micro_batch, s.seq, dtype, "sdpa", "none").per_layer[i]
                    for i in layers)
        kept = per_layer / whole if whole else 1.0     # recompute keeps this share of each block
        norms = sum(block_norm_count(cfg, cfg.layer_spec(i)) for i in layers) * norm_saved_bytes(
            cfg, s.micro_batch * s.seq, cfg.d_model, DTYPE_BYTES[dtype])
        split = per_layer - (0 if lay.sequence_parallel else round(norms * kept))
        per_layer = per_layer - split + math.ceil(split / lay.tp)
    edges = (act.embedding if stage == 0 else 0) + (act.head if stage == lay.pp - 1 else 0)
    in_flight = min(lay.pp - stage, s.micro_batches)
    peak = math.ceil(act.recompute_peak / lay.tp) if s.recompute == "full" else 0
    return in_flight * (per_layer + edges) + peak


def kv_cache_per_gpu(cfg: ModelConfig, lay: Layout, s: Setup, stage: int = 0) -> int:
    """This stage's layers' cache (engine/budget/memory.py kv_cache_layers) at the batch and tokens of `s`,
    stored under s.kv_quant; tensor parallelism splits the kv heads (an MLA latent is replicated on every rank).
    Sparse attention's indexer keys add in their own format (FP8 with scales, replicated like the latent).
    Recurrent layers add their fixed state, split by tp as vLLM splits heads and conv channels."""
    layers, mine = kv_cache_layers(cfg, s.micro_batch, s.seq), stage_layers(cfg, lay.pp, stage)
    split = 1 if cfg.mla else lay.tp
    kv = [(values // split, width) for values, width in (layers[i] for i in mine) if values]
    state = sum(sum(layer_state_bytes(cfg, cfg.layer_spec(i), s.micro_batch, POLICY_DTYPE[s.policy]).values())
                for i in mine)
    index = index_key_layers(cfg, s.micro_batch, s.seq, POLICY_DTYPE[s.policy])
    return (kv_quant_bytes(kv, s.kv_quant, POLICY_DTYPE[s.policy]) + sum(index[i] for i in mine)
            + math.ceil(state / lay.tp))


def _working_set(lay: Layout, s: Setup, stage: int, cfg: ModelConfig, base: list[Tensor],
                 trainable: list[Tensor], store: Storage) -> int:
    """2 gathered blocks of weights (+ one block's gathered gradients when training)."""
    _, gb, _, _ = _POLICY_BYTES[s.policy]
    shape = lambda t: tp_shape(t, lay.tp, lay.ep)   # noqa: E731

    def block(i: int) -> int:
        w = sum(store(t, shape(t))[0] for t in base if t.layer == i)
        g = sum(math.prod(shape(t)) for t in trainable if t.layer == i) * gb if s.mode == "train" else 0
        return 2 * w + g
    return max(block(i) for i in stage_layers(cfg, lay.pp, stage))   # every stage holds a block (pp <= n_layers)
