"""Multi-token prediction (DeepSeek-V3 technical report, section 2.2): mtp_depth extra modules after the model,
module k predicting the token k + 1 steps ahead. Module k combines the previous depth's last hidden state h
(the main model's for k = 1) with the embedding e of the next input token:

    h' = Block_k( W_k [RMSNorm(h); RMSNorm(e)] ),   logits = Head(RMSNorm(h'))

with its own two input norms (enorm, hnorm), projection W_k (2d -> d, no bias), one transformer block (an MoE
block whenever the model has experts, as transformers' MtpModel builds it; with sparse attention its own lightning
indexer, as DeepSeek-V3.2's inference/model.py builds its MTP block) and the norm before the shared head;
the embedding and the output head are the main model's and are not counted again.

  params per module = block + 2*d*d + 3 * norm(d)

The modules are not part of the causal LM (transformers does not build them in its ForCausalLM either): their
parameters are reported beside the total, never in it. DeepSeek-V3: 11,610,067,968 for its one module.
"""
from __future__ import annotations

from engine.config import ModelConfig
from engine.layers.block import block_params, plain_spec
from engine.layers.norm import norm_params


def mtp_params(cfg: ModelConfig) -> int:
    """Parameters of the mtp_depth multi-token-prediction modules (0 without them)."""
    d = cfg.d_model
    block = block_params(cfg, plain_spec(cfg, moe=cfg.n_experts is not None))   # sparse: with its own indexer
    module = sum(block.values()) + 2 * d * d + 3 * norm_params(cfg, d)
    return (cfg.mtp_depth or 0) * module
