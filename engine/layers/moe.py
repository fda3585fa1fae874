"""Mixture of experts: a router picks k of E expert FFNs per token; shared experts see every token.
(This file is longer than 300 lines: the family's declared fields, its module and its closed forms stay in one place.)

    y = sum_{e in topk(x)} w_e(x) * FFN_e(x)  +  [sigmoid(x g)] * FFN_shared(x)

Routers (cfg.router): softmax_topk  p = softmax(x R), keep the k largest (optionally renormalised to sum 1);
topk_softmax  softmax over the k largest logits; sigmoid  s = sigmoid(x R), chosen by s + selection bias
inside the best groups, weighted by s (renormalised), times routed_scale (DeepSeek-V3). Groups (DeepSeek-V2
group_limited_greedy, V3) restrict the choice of any router to the router_group_topk best groups of experts.
Dispatch sorts the N*k (token, expert) pairs by expert, so each expert runs one matmul over its own rows and
index_add_ scatters the weighted results back: no loop over tokens, no expert computed for a token it skips.

Closed forms beside the module (d = d_model, f = expert width, s = shared width, E, k, m = 3 gated / 2 dense):
  params   router E*d (+E bias, +E for a selection bias stored as a parameter);  routed E*m*d*f (+E*((m-1)*f + d) biases);  shared m*d*s (+ gate d)
  active   router + shared + k/E of the routed experts
  FLOPs    2 * (E*d + k*m*d*f + m*d*s (+ d)) per token: the router and the k chosen experts, never all E
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.layers.ffn import ACTIVATIONS, DenseFFN, GatedFFN, config_unit, ffn_saved_bytes
from engine.layers.init import init_linear
from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig


ROUTERS = ("softmax_topk", "topk_softmax", "sigmoid")


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class MoEKnobs(Knobs):
    """Mixture of experts; n_experts null keeps every FFN dense."""
    n_experts: int | None = declare(None, "moe", "Routed experts E in each MoE layer: FFNs of which a router picks "
                                     "experts_per_token for every token.", lo=1, null="dense FFN in every layer")
    experts_per_token: int = declare(2, "moe", "k: routed experts each token uses (k <= n_experts).", lo=1)
    expert_d_ff: int | None = declare(None, "moe", "Hidden width of one routed expert (same FFN type as `ffn`).",
                                       lo=1, null="the dense FFN width")
    n_shared_experts: int | None = declare(None, "moe", "Always-on experts every token passes through besides the routed "
                                     "ones (Qwen2-MoE, DeepSeek); built as one FFN of n_shared_experts times "
                                     "shared_d_ff.", lo=1, null="no shared expert")
    shared_d_ff: int | None = declare(None, "moe", "Hidden width of one shared expert.", lo=1,
                                       null="expert_d_ff")
    shared_expert_gate: bool = declare(False, "moe", "Scale the shared experts' output by sigmoid(x w), "
                                        "one learned vector w (Qwen2-MoE).")
    moe_first_dense: int | None = declare(None, "moe", "The first this-many layers keep a dense FFN (DeepSeek "
                                           "first_k_dense_replace).", lo=1, null="no leading dense layers")
    moe_every: int = declare(1, "moe", "Only layers k, 2k, ... (counting from 1) are MoE; the others stay dense "
                              "(Qwen decoder_sparse_step).", lo=1)
    router: str = declare("softmax_topk", "moe", "softmax_topk: softmax over all experts, keep the k largest "
                            "(Mixtral, Qwen, OLMoE); topk_softmax: keep the k largest logits, softmax over them; "
                            "sigmoid: independent sigmoid scores (DeepSeek-V3).", choices=ROUTERS)
    router_renorm: bool = declare(True, "moe", "Rescale the k kept weights to sum to 1 (Mixtral, Qwen3-MoE; off "
                                   "in Qwen1.5-MoE and OLMoE). topk_softmax sums to 1 anyway.")
    router_selection_bias: bool = declare(False, "moe", "A per-expert bias added to the scores only to choose "
                                           "experts, not to weight them (DeepSeek-V3 load balancing without aux loss).")
    selection_bias_parameter: bool = declare(False, "moe", "Store the selection bias as a frozen parameter, counted "
                                              "in the total (ERNIE-4.5), rather than as a buffer (DeepSeek-V3); "
                                              "the routing is the same; ignored without router_selection_bias.")
    router_groups: int = declare(1, "moe", "Group-limited selection: experts split into this many groups "
                                  "(must divide n_experts); 1 means no groups.", lo=1)
    router_group_topk: int = declare(1, "moe", "With groups: tokens choose experts only inside this many best "
                                      "groups (scored by router_group_score).", lo=1)
    router_group_score: str = declare("top2_sum", "moe", "With groups: a group's score is the sum of its two best "
                                       "expert scores (DeepSeek-V3) or its best one (DeepSeek-V2).",
                                       choices=("top2_sum", "max"))
    routed_scale: float = declare(1.0, "moe", "Multiply the routed experts' weights by this factor "
                                   "(DeepSeek-V3 routed_scaling_factor 2.5).", lo=0, lo_open=True)
    expert_bias: bool = declare(False, "moe", "Biases on the router and on every expert projection (gpt-oss).")
    router_scales_input: bool = declare(False, "moe", "Multiply each routed expert's input by its router weight "
                                         "instead of its output (Llama 4); the same for a linear expert, not for "
                                         "a gated one.")
    aux_loss_coef: float = declare(0.01, "moe", "Training: weight of the load-balancing loss "
                                    "E * sum_i f_i P_i (Switch / Mixtral), added to the language-model loss.", lo=0)
    z_loss_coef: float = declare(0.0, "moe", "Training: weight of the router z-loss mean(logsumexp(logits)^2) "
                                  "(ST-MoE), which keeps router logits small.", lo=0)

    @property
    def expert_width(self) -> int:
        return self.ffn_width if self.expert_d_ff is None else self.expert_d_ff

    @property
    def shared_width(self) -> int:
        """Hidden width of the one FFN that holds all shared experts (0 without shared experts)."""
        return (self.n_shared_experts or 0) * (self.expert_width if self.shared_d_ff is None else self.shared_d_ff)

    def moe_layer(self, i: int) -> bool:
        """Whether layer i (0-based) is a mixture of experts: ffn_types when given, else the MoE rule."""
        if self.ffn_types is not None:
            return self.ffn_types[i] == "moe"
        return self.n_experts is not None and i >= (self.moe_first_dense or 0) and (i + 1) % self.moe_every == 0

    @property
    def moe_layers(self) -> list[bool]:
        """Per layer (0-based list): a mixture of experts (True) or not (a dense FFN, or none)."""
        return [self.moe_layer(i) for i in range(self.n_layers)]

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """Rules tying the mixture-of-experts fields together (only when n_experts is set)."""
        if c.n_experts is None or not ok("n_experts"):
            return []
        E, out = c.n_experts, []
        if ok("experts_per_token") and c.experts_per_token > E:
            out.append(f"experts_per_token: {c.experts_per_token} is more than n_experts={E}")
        if ok("router_groups") and E % c.router_groups:
            out.append(f"router_groups: {c.router_groups} does not divide n_experts={E}")
        elif ok("router_groups", "router_group_topk", "experts_per_token"):
            if c.router_group_topk > c.router_groups:
                out.append(f"router_group_topk: {c.router_group_topk} is more than router_groups={c.router_groups}")
            elif c.router_groups > 1 and c.experts_per_token > c.router_group_topk * (E // c.router_groups):
                out.append(f"experts_per_token: {c.experts_per_token} is more than the chosen groups hold: "
                           f"router_group_topk={c.router_group_topk} * {E // c.router_groups} experts per group")
            elif c.router_groups > 1 and c.router_group_score == "top2_sum" and E // c.router_groups < 2:
                out.append(f"router_groups: {c.router_groups} groups of {E // c.router_groups} expert; a group "
                           f"score sums its two best experts, so a group needs at least 2")
        if ok("shared_expert_gate", "n_shared_experts") and c.shared_expert_gate and not c.n_shared_experts:
            out.append("shared_expert_gate: there is no shared expert to gate; set n_shared_experts >= 1")
        if ok("moe_first_dense", "moe_every", "n_layers") and c.ffn_types is None and not any(c.moe_layers):
            out.append(f"moe_first_dense: with moe_every={c.moe_every} no layer of n_layers={c.n_layers} is MoE")
        return out


class Router(nn.Module):
    ROLES = {"weight": ("router", "router"), "bias": ("router", "router"), "selection_bias": ("router", "router")}

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        E, d = cfg.n_experts, cfg.d_model
        self.cfg, self.k = cfg, cfg.experts_per_token
        self.weight = nn.Parameter(torch.empty(E, d))
        self.bias = nn.Parameter(torch.empty(E)) if cfg.expert_bias else None
        # adjusted by load statistics, not by gradients: a buffer (DeepSeek-V3) or a frozen parameter (ERNIE-4.5)
        bias = None
        if cfg.router_selection_bias:
            bias = (nn.Parameter(torch.zeros(E), requires_grad=False) if cfg.selection_bias_parameter
                    else nn.Buffer(torch.zeros(E)))
        self.selection_bias = bias

    @torch.no_grad()
    def init_weights(self, std: float, generator: torch.Generator) -> None:
        self.weight.normal_(0.0, std, generator=generator)
        if self.bias is not None:
            self.bias.zero_()
        if self.selection_bias is not None:
            self.selection_bias.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [N, d] -> (logits [N, E], weights [N, k], chosen experts [N, k])."""
        cfg = self.cfg
        logits = F.linear(x, self.weight, self.bias)
        if cfg.router == "topk_softmax":
            idx = logits.detach().topk(self.k, dim=-1)[1]
            return logits, logits.gather(1, idx).softmax(-1, dtype=torch.float32).to(x.dtype), idx
        scores = logits.float().softmax(-1) if cfg.router == "softmax_topk" else logits.float().sigmoid()
        with torch.no_grad():   # choosing is not differentiable; only the chosen scores carry gradients
            choice = scores if self.selection_bias is None else scores + self.selection_bias
            if cfg.router_groups > 1:
                choice = self._within_best_groups(choice)
            idx = choice.topk(self.k, dim=-1)[1]
        w = scores.gather(1, idx)
        if cfg.router_renorm:
            w = w / w.sum(-1, keepdim=True)
        return logits, (w * cfg.routed_scale).to(x.dtype), idx

    def _within_best_groups(self, choice: torch.Tensor) -> torch.Tensor:
        """Scores outside the router_group_topk best groups set to -inf, so no expert there is chosen: not 0,
        which would beat the negative choice scores a selection bias can give. A group's score is the sum of
        its two best choice scores (DeepSeek-V3) or its best one (DeepSeek-V2, router_group_score: max)."""
        cfg = self.cfg
        grouped = choice.view(choice.shape[0], cfg.router_groups, -1)
        score = grouped.max(-1)[0] if cfg.router_group_score == "max" else grouped.topk(2, dim=-1)[0].sum(-1)
        best = score.topk(cfg.router_group_topk, dim=-1)[1]
        keep = torch.zeros_like(score, dtype=torch.bool).scatter_(1, best, True).unsqueeze(-1)
        return grouped.masked_fill(~keep, -math.inf).view_as(choice)


class Experts(nn.Module):
    """E FFNs stored as stacked tensors [E, out, in]; `run` applies each to its own block of sorted rows."""
    ROLES = {**{p: ("expert_" + p, "expert") for p in ("gate", "up", "down")},
             **{p + "_bias": ("expert_" + p + "_bias", "bias") for p in ("gate", "up", "down")}}

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        E, d, f = cfg.n_experts, cfg.d_model, cfg.expert_width
        self.act = None if cfg.gated else ACTIVATIONS[cfg.ffn]
        self.unit = config_unit(cfg) if cfg.gated else None
        self.gate = nn.Parameter(torch.empty(E, f, d)) if cfg.gated else None
        self.up = nn.Parameter(torch.empty(E, f, d))
        self.down = nn.Parameter(torch.empty(E, d, f))
        bias = cfg.expert_bias
        self.gate_bias = nn.Parameter(torch.empty(E, f)) if bias and cfg.gated else None
        self.up_bias = nn.Parameter(torch.empty(E, f)) if bias else None
        self.down_bias = nn.Parameter(torch.empty(E, d)) if bias else None

    @torch.no_grad()
    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        """As a dense FFN: N(0, std) in, N(0, out_std) for the projection into the residual stream, zero biases."""
        for w in (self.gate, self.up):
            if w is not None:
                w.normal_(0.0, std, generator=generator)
        self.down.normal_(0.0, out_std, generator=generator)
        for b in (self.gate_bias, self.up_bias, self.down_bias):
            if b is not None:
                b.zero_()

    @staticmethod
    def _per_expert(t: torch.Tensor | None, n: int) -> list:
        """One view per expert. unbind, not t[e]: indexing a parameter E times makes backward build E full
        [E, out, in] gradients and add them (quadratic in E); unbind's backward stacks the E pieces once."""
        return [None] * n if t is None else t.unbind(0)

    def run(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """rows [sum(counts), d], sorted by expert; counts[e] rows belong to expert e."""
        E = len(counts)
        gate, up, down = (self._per_expert(w, E) for w in (self.gate, self.up, self.down))
        gb, ub, db = (self._per_expert(b, E) for b in (self.gate_bias, self.up_bias, self.down_bias))
        outs = []
        for e, chunk in enumerate(rows.split(counts)):
            if not counts[e]:
                continue
            h = F.linear(chunk, up[e], ub[e])
            h = self.unit(F.linear(chunk, gate[e], gb[e]), h) if self.gate is not None else self.act(h)
            outs.append(F.linear(h, down[e], db[e]))
        return torch.cat(outs)


class MoE(nn.Module):
    ROLES = {"shared_gate": ("shared_gate", "router")}   # the shared experts are an FFN module with its own ROLES

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_experts, self.k = cfg.n_experts, cfg.experts_per_token
        self.scale_input, self.out_scale = cfg.router_scales_input, cfg.ffn_out_scale
        self.aux_coef, self.z_coef = cfg.aux_loss_coef, cfg.z_loss_coef
        self.router = Router(cfg)
        self.experts = Experts(cfg)
        self.shared = None
        if cfg.n_shared_experts:
            act = config_unit(cfg) if cfg.gated else cfg.ffn
            self.shared = (GatedFFN if cfg.gated else DenseFFN)(cfg.d_model, cfg.shared_width, act, cfg.expert_bias)
        self.shared_gate = nn.Linear(cfg.d_model, 1, bias=False) if cfg.shared_expert_gate else None
        self.load: torch.Tensor | None = None      # tokens per expert in the last forward (int64 [E])
        self.choice: torch.Tensor | None = None    # chosen experts of the last forward ([N, k])
        self.aux_loss: torch.Tensor | None = None  # training only: load-balancing loss of the last forward
        self.z_loss: torch.Tensor | None = None

    def init_weights(self, std: float, out_std: float, generator: torch.Generator) -> None:
        self.router.init_weights(std, generator)
        self.experts.init_weights(std, out_std, generator)
        if self.shared is not None:
            self.shared.init_weights(std, out_std, generator)
        if self.shared_gate is not None:
            init_linear(self.shared_gate, std, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        logits, w, idx = self.router(x)
        flat = idx.flatten()
        order = flat.argsort(stable=True)
        token = order // self.k
        if x.is_meta:   # no values to route on the meta device: assume balanced routing (same FLOPs)
            sizes = balanced_counts(flat.numel(), self.n_experts)
            counts = torch.tensor(sizes)
        else:
            counts = torch.bincount(flat, minlength=self.n_experts)
            sizes = counts.tolist()
        weight = w.flatten()[order].unsqueeze(-1)                       # [N*k, 1], sorted like the rows
        if self.scale_input:   # Llama 4: the router weight scales what the expert reads
            out = self.experts.run(x[token] * weight, sizes)
        else:
            out = self.experts.run(x[token], sizes) * weight
        y = torch.zeros_like(x).index_add_(0, token, out)
        if self.shared is not None:
            s = self.shared(x)
            y = y + (torch.sigmoid(self.shared_gate(x)) * s if self.shared_gate is not None else s)
        self.load, self.choice = counts.detach(), idx.detach()
        self.aux_loss = balance_loss(logits, idx, self.n_experts) if self.training and not x.is_meta else None
        self.z_loss = z_loss(logits) if self.training and not x.is_meta else None
        s = self.out_scale
        return (y * s if s != 1.0 else y).reshape(shape)

    def regularizer(self) -> torch.Tensor:
        """aux_loss_coef * load-balancing loss + z_loss_coef * z-loss of the last training forward."""
        return self.aux_coef * self.aux_loss + self.z_coef * self.z_loss


def balanced_counts(assignments: int, n_experts: int) -> list[int]:
    """N*k assignments spread as evenly as possible over E experts (the first ones get one more)."""
    q, r = divmod(assignments, n_experts)
    return [q + (e < r) for e in range(n_experts)]


def balance_loss(logits: torch.Tensor, idx: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Switch Transformer / Mixtral load-balancing loss E * sum_e f_e * P_e: f_e the share of the N*k
    assignments per token that went to expert e (shares sum to k, as transformers' Mixtral counts them), P_e
    the mean softmax probability of e. Perfectly balanced routing gives k; concentrated routing more."""
    probs = logits.float().softmax(-1).mean(0)
    share = torch.bincount(idx.flatten(), minlength=n_experts).float() / idx.shape[0]
    return n_experts * (share * probs).sum()


def z_loss(logits: torch.Tensor) -> torch.Tensor:
    """ST-MoE router z-loss: mean over tokens of logsumexp(logits)^2."""
    return logits.float().logsumexp(-1).square().mean()


# ---- closed forms (per MoE layer) ---------------------------------------------------------------------------
def _ffn_params(cfg: ModelConfig, width: int, bias: bool) -> int:
    m, d = (3 if cfg.gated else 2), cfg.d_model
    return m * d * width + (((m - 1) * width + d) if bias else 0)


def expert_params(cfg: ModelConfig) -> int:
    """One routed expert."""
    return _ffn_params(cfg, cfg.expert_width, cfg.expert_bias)


def moe_params(cfg: ModelConfig) -> dict[str, int]:
    """Parameters of one MoE layer by component: router, shared_experts (with their gate), routed_experts."""
    E, d = cfg.n_experts, cfg.d_model
    shared = _ffn_params(cfg, cfg.shared_width, cfg.expert_bias) if cfg.n_shared_experts else 0
    frozen = E if cfg.router_selection_bias and cfg.selection_bias_parameter else 0   # a counted selection bias
    return {"router": E * d + (E if cfg.expert_bias else 0) + frozen,
            "shared_experts": shared + (d if cfg.shared_expert_gate else 0),
            "routed_experts": E * expert_params(cfg)}


def moe_skipped_params(cfg: ModelConfig) -> int:
    """Routed-expert parameters one token does not use in one MoE layer: E - k experts."""
    return (cfg.n_experts - cfg.experts_per_token) * expert_params(cfg)


def moe_matmul_params(cfg: ModelConfig) -> int:
    """Weights one token multiplies in one MoE layer (router, shared gate, shared and k routed experts)."""
    m, d = (3 if cfg.gated else 2), cfg.d_model
    return (cfg.n_experts * d + (d if cfg.shared_expert_gate else 0) + m * d * cfg.shared_width
            + cfg.experts_per_token * m * d * cfg.expert_width)


def moe_saved_bytes(cfg: ModelConfig, tokens: int, e: int) -> dict[str, int]:
    """Bytes autograd saves inside one MoE layer for N = tokens (its input, the norm output, is counted by
    the block), e = element bytes. Per-expert tensors sum over experts to N*k rows whatever the routing, so
    the count is the same for the measured batch's real expert loads and for balanced routing.
      router     softmax/sigmoid output N*E*4 (topk_softmax: the k-way softmax N*k*4 and, unless fp32, the
                 logits N*E*e), chosen ids N*k*8,
                 renormalising: the k weights N*k*4 and their sums N*4
      dispatch   the sort order and token ids 2*N*k*8, gathered rows N*k*d*e, weights N*k*e,
                 expert outputs before and after weighting 2*N*k*d*e (router_scales_input: the rows before
                 and after weighting, and the outputs: the same bytes)
      experts    the dense FFN's tensors on N*k rows of width expert_d_ff
      shared     the dense FFN's tensors on N rows of the shared width; gate: sigmoid N*e and output N*d*e
      losses     load balance: softmax N*E*4 + shares E*4;  z-loss: fp32 logits N*E*4 + logsumexp N*4"""
    N, k, E, d = tokens, cfg.experts_per_token, cfg.n_experts, cfg.d_model
    rows = N * k
    if cfg.router == "topk_softmax":   # gather keeps the logits: in fp32 the very tensor the z-loss keeps
        router = rows * 4 + rows * 8 + (N * E * e if e != 4 else 0)
    else:
        router = N * E * 4 + rows * 8 + ((rows + N) * 4 if cfg.router_renorm else 0)
    out = {"moe_router": router,
           "moe_dispatch": 2 * rows * 8 + rows * d * e + rows * e + 2 * rows * d * e,
           "moe_experts": ffn_saved(cfg, rows, cfg.expert_width, e),
           "moe_losses": 2 * N * E * 4 + E * 4 + N * 4}
    if cfg.n_shared_experts:
        out["moe_shared"] = ffn_saved(cfg, N, cfg.shared_width, e) + (N * e + N * d * e if cfg.shared_expert_gate else 0)
    return out


def ffn_saved(cfg: ModelConfig, rows: int, width: int, e: int) -> int:
    """What the dense FFN family saves (ffn_saved_bytes) for `rows` tokens, at another hidden width."""
    return ffn_saved_bytes(cfg, rows, e) // cfg.ffn_width * width   # linear in the width


def dense_counterpart(cfg: ModelConfig) -> ModelConfig:
    """The dense model computing as much per token: every MoE layer's FFN replaced by one dense FFN as wide as
    the k routed plus the shared experts together. Its total (= active) equals the MoE's active parameters
    minus the router (and shared-expert gate), which a dense model has no use for, when the experts have no
    biases (one dense FFN has one output bias where k experts have k) and any dense layers already have that
    width (one config has one FFN width: they take it too)."""
    width = cfg.experts_per_token * cfg.expert_width + cfg.shared_width
    return cfg.replace(name=f"{cfg.name}-dense-equal-active", n_experts=None, d_ff=width, moe_first_dense=None,
                       moe_every=1, n_shared_experts=None, shared_d_ff=None, shared_expert_gate=False,
                       expert_d_ff=None, bias=cfg.bias or cfg.expert_bias, expert_bias=False)
