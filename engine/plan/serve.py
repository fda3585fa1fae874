"""Will it serve: the longest context and the most concurrent requests, as the inference engines size them.

Every KV figure comes from one path: engine/plan/memory.py kv_cache_per_gpu (this GPU's layers and heads, the
KV storage) over engine/budget/memory.py kv_cache_layers; a sequence's bytes at T tokens may hold a part that
does not grow with T (per-layer scales, and any fixed per-sequence state), so the growth and that part are read
off the same function: page = bytes(block) - bytes(0).

vLLM (vllm/worker/worker.py determine_num_available_blocks; v1 gpu_worker.py, core/kv_cache_utils.py):
  available   = total memory x gpu_memory_utilization - weights - activation peak - non-torch memory
                (the last two are measured by vLLM's profile run; here stated assumptions you can overwrite)
  page        = block_size (16) tokens of K and V on every layer this GPU holds
  blocks      = floor(available / page), the fewest of any GPU           log: "# GPU blocks: N"
  KV tokens   = blocks x block_size                                       log: "GPU KV cache size: N tokens"
  concurrency = blocks x page / KV bytes of one request of N tokens       log: "Maximum concurrency for N tokens
                (= blocks x 16 / N when every layer holds every token)         per request: X.XXx"
llama.cpp (llama-kv-cache): n_ctx cells of K and V per layer, in --cache-type-k/-v (f16 by default, q8_0, q4_0,
  ...), allocated at startup beside the weights and a compute buffer:
  available   = total memory x share - weights - compute buffer; cells = the most that fit; -np parallel
  sequences share the cells, so concurrency = available / KV bytes of one sequence of N tokens.
Assumed defaults, each overwritable: activation peak = chunk x (2 x FFN width + 3 x d_model) x 4 B, fitted to
vLLM PR 10511's Llama-3-8B log (1.26 GiB at 8,192 tokens; issue 10517's 20,000-token Llama-3.1-8B run shows
2.07 GiB where this gives 3.05, so it errs on the safe side); non-torch memory 1 GiB (published logs show
0.2-1.8 GiB); llama.cpp's compute buffer = n_ubatch (512) x vocab x 4 B (the fp32 logits of one micro-batch,
its largest tensor).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.config import ModelConfig
from engine.plan.memory import Setup, gpu_memory, kv_cache_per_gpu
from engine.plan.parallel import Layout
from engine.validation import choice_problem, int_problem, number_problem

ENGINES = ("vllm", "llama.cpp")
GiB = 2**30


@dataclass(frozen=True)
class Serving:
    """How an engine is set up; None takes the engine's default (vLLM 0.9 of memory and a 8,192-token profile
    chunk; llama.cpp all of it and a 512-token micro-batch). No engine: llama.cpp for gguf: weights, else vLLM."""
    engine: str | None = None
    utilization: float | None = None       # vLLM gpu_memory_utilization; llama.cpp: share of memory it may use
    activation_bytes: int | None = None    # vLLM: the profiled activation peak; llama.cpp: the compute buffer
    non_torch_bytes: int = GiB             # vLLM: CUDA context, cuBLAS, NCCL (0 for llama.cpp)
    block_size: int = 16                   # vLLM tokens per page; llama.cpp: 1 (a cell)
    chunk: int | None = None               # vLLM max_num_batched_tokens / llama.cpp n_ubatch

    def resolved(self, cfg: ModelConfig, quant: str) -> Serving:
        engine = self.engine or ("llama.cpp" if quant.startswith("gguf:") else "vllm")
        vllm = engine == "vllm"
        chunk = self.chunk or (8192 if vllm else 512)
        share = self.utilization if self.utilization is not None else (0.9 if vllm else 1.0)
        if self.activation_bytes is not None:
            act = self.activation_bytes
        elif vllm:
            act = chunk * (2 * _ffn_width(cfg) + 3 * cfg.d_model) * 4
        else:
            act = chunk * cfg.vocab_size * 4
        return replace(self, engine=engine, utilization=share, activation_bytes=act, chunk=chunk,
                       non_torch_bytes=self.non_torch_bytes if vllm else 0, block_size=self.block_size if vllm else 1)


def _ffn_width(cfg: ModelConfig) -> int:
    """The FFN width one token passes through: d_ff, or an MoE layer's k routed experts plus its shared ones."""
    if cfg.n_experts is None:
        return cfg.ffn_width
    return cfg.experts_per_token * cfg.expert_width + (cfg.shared_width or 0)


def serving_problems(sv: Serving) -> list[str]:
    out = [sv.engine and choice_problem("engine", sv.engine, ENGINES), int_problem("block_size", sv.block_size),
           int_problem("non_torch_bytes", sv.non_torch_bytes, lo=0)]
    if sv.utilization is not None:
        out.append(number_problem("utilization", sv.utilization, 0, strict=True)
                   or (f"utilization: {sv.utilization} is more than 1" if sv.utilization > 1 else None))
    if sv.activation_bytes is not None:
        out.append(int_problem("activation_bytes", sv.activation_bytes, lo=0))
    if sv.chunk is not None:
        out.append(int_problem("chunk", sv.chunk))
    return [p for p in out if p]


@dataclass(frozen=True)
class Capacity:
    engine: str
    available_bytes: int                  # KV memory of the tightest GPU
    page_bytes: int                       # one block (vLLM) or one cell (llama.cpp) of that GPU's KV
    blocks: int                           # vLLM pages / llama.cpp cells that fit on every GPU
    kv_tokens: int                        # blocks x block size: tokens the KV pool holds
    max_context: int                      # the longest single sequence that fits, at most context_length
    context_limit: str                    # "memory" or "context_length": what stops max_context
    request_tokens: int                   # N of the concurrency answer
    max_concurrency: float                # requests of N tokens the pool holds at once (vLLM's "X.XXx")
    assumptions: dict[str, int | float]
    formulas: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"engine": self.engine, "available_kv_bytes": self.available_bytes, "page_bytes": self.page_bytes,
                "blocks": self.blocks, "kv_tokens": self.kv_tokens, "max_context": self.max_context,
                "context_limit": self.context_limit, "request_tokens": self.request_tokens,
                "max_concurrency": self.max_concurrency, "assumptions": self.assumptions, "formulas": self.formulas}


def sequence_bytes(cfg: ModelConfig, lay: Layout, s: Setup, tokens: int, batch: int = 1, stage: int = 0) -> int:
    """What `batch` sequences of `tokens` hold on one GPU of `stage` (KV and anything per sequence)."""
    return kv_cache_per_gpu(cfg, lay, replace(s, micro_batch=batch, seq=tokens), stage)


def _largest(fits, hi: int) -> int:
    """The largest t in [0, hi] with fits(t) (fits is monotone: true up to some point). Each step leaves at most
    half of [lo, hi] (rounded up), so hi.bit_length() steps narrow hi + 1 candidates to one; later steps test lo
    again and keep it. A fixed count, not `while lo < hi`: a wrong midpoint gives a wrong answer, never a hang."""
    lo = 0
    for _ in range(hi.bit_length()):
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def capacity(cfg: ModelConfig, memory_bytes: int, lay: Layout, s: Setup, sv: Serving = Serving(),
             request_tokens: int | None = None) -> Capacity:
    """Longest context and most concurrent requests of `request_tokens` (default: context_length) on GPUs of
    `memory_bytes` each, weights stored per s.quant and KV per s.kv_quant."""
    sv = sv.resolved(cfg, s.quant)
    n = request_tokens or cfg.context_length
    weights = [gpu_memory(cfg, lay, replace(s, mode="infer", micro_batch=1, seq=1), st)["weights"]
               for st in range(lay.pp)]
    budget = int(memory_bytes * sv.utilization) - sv.activation_bytes - sv.non_torch_bytes
    stages = []
    for st in range(lay.pp):
        fixed = sequence_bytes(cfg, lay, s, 0, stage=st)
        page = sequence_bytes(cfg, lay, s, sv.block_size, stage=st) - fixed
        stages.append((st, budget - weights[st], page))
    growing = [x for x in stages if x[2] > 0] or stages   # a stage whose cache does not grow binds nothing
    st0, avail0, page0 = min(growing, key=lambda x: x[1] // max(x[2], 1))
    blocks = max(0, avail0 // page0) if page0 else 0
    pool = {st: blocks * page if page else max(avail, 0) for st, avail, page in stages}   # what each GPU reserves
    fits = lambda t: all(sequence_bytes(cfg, lay, s, t, stage=st) <= pool[st] for st in pool)  # noqa: E731
    longest = _largest(fits, cfg.context_length)   # the answer is capped there: no need to search past it
    concurrency = min(pool[st] / max(1, sequence_bytes(cfg, lay, s, n, stage=st)) for st in pool)
    vllm = sv.engine == "vllm"
    formulas = {
        "available_kv_bytes": (f"{memory_bytes:,} B x {sv.utilization:g} - weights {weights[st0]:,} - "
                               f"{'activation peak' if vllm else 'compute buffer'} {sv.activation_bytes:,} - "
                               f"non-torch {sv.non_torch_bytes:,}"),
        "blocks": f"floor({avail0:,} / {page0:,} B per " + (f"block of {sv.block_size} tokens)" if vllm else "cell)"),
        "kv_tokens": f"{blocks:,} x {sv.block_size}",
        "max_context": "the longest sequence whose KV fits the pool, at most context_length",
        "max_concurrency": (f"{blocks:,} x {page0:,} B / KV bytes of one {n:,}-token request "
                            f"({sequence_bytes(cfg, lay, s, n, stage=st0):,} B)"),
    }
    return Capacity(engine=sv.engine, available_bytes=avail0, page_bytes=page0, blocks=blocks,
                    kv_tokens=blocks * sv.block_size, max_context=longest,
                    context_limit="memory" if longest < cfg.context_length else "context_length",
                    request_tokens=n, max_concurrency=concurrency,
                    assumptions={"utilization": sv.utilization, "activation_bytes": sv.activation_bytes,
                                 "non_torch_bytes": sv.non_torch_bytes, "block_size": sv.block_size,
                                 "chunk": sv.chunk},
                    formulas=formulas)


def memory_at(cfg: ModelConfig, lay: Layout, s: Setup, sv: Serving, tokens: int, batch: int = 1) -> int:
    """Bytes the tightest GPU needs to hold `batch` sequences of `tokens`, with the engine's overheads."""
    sv = sv.resolved(cfg, s.quant)
    return max(gpu_memory(cfg, lay, replace(s, mode="infer", micro_batch=1, seq=1), st)["weights"]
               + sv.activation_bytes + sv.non_torch_bytes + sequence_bytes(cfg, lay, s, tokens, batch, st)
               for st in range(lay.pp))
