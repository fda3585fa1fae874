"""Whole models: a transformers causal LM <-> our DecoderLM, checkpoint folders, and the logits check.

transformers is a dev/test dependency: it is imported inside the functions that need it, never at module
import, so the app and the rest of the engine run without it. Checkpoint weights are read only with
safetensors or `torch.load(weights_only=True)` (no pickle code runs). Module and config names follow
transformers 5 (e.g. `rope_parameters`, GPT-NeoX's `lm_head`); older checkpoints' tensor names are mapped.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from engine.interop.hf_config import import_hf
from engine.interop.hf_export import to_hf_config
from engine.interop.hf_wrappers import WRAPPERS, language_state
from engine.interop.weights import hf_to_ours, ours_to_hf
from engine.limits import MAX_CONFIG_BYTES, json_loads, read_text
from engine.model import DecoderLM, build_model

# Buffers that old checkpoints saved although nothing reads them (GPT-2's causal-mask tables, rotary caches),
# and tensor names older transformers versions used.
_STALE_BUFFERS = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")
_RENAMED = {"embed_out.weight": "lm_head.weight"}   # GPT-NeoX's output head before transformers 5


def from_transformers(hf_model: nn.Module) -> DecoderLM:
    """Our model computing what `hf_model` computes (a multimodal model: its language model): its config
    imported, its weights converted (a tied head stays one Parameter), same dtype, device and train/eval mode."""
    got = import_hf(hf_model.config.to_dict())
    cfg, state = got.config, hf_model.state_dict()
    if hf_model.config.model_type in WRAPPERS:
        state = language_state(hf_model.config.model_type, state)
    weights = hf_to_ours(cfg, got.family, state)
    ref = next(hf_model.parameters())
    model = build_model(cfg, device=ref.device, dtype=ref.dtype, init=False)
    model.load_state_dict(weights, strict=True)
    return model.train(hf_model.training)


def hf_model_from_config(model_type: str, config: dict[str, Any],
                         attn_implementation: str | None = None) -> nn.Module:
    """A randomly initialised transformers causal LM for a config dict (no network); a multimodal family as
    its image-text-to-text model (vision tower included)."""
    import transformers
    hf_cfg = transformers.AutoConfig.for_model(model_type, **config)
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    auto = transformers.AutoModelForCausalLM   # a multimodal family: its whole model, when transformers has one
    if type(hf_cfg) in transformers.AutoModelForImageTextToText._model_mapping:
        auto = transformers.AutoModelForImageTextToText
    return auto.from_config(hf_cfg, **extra)


def to_transformers(model: DecoderLM, attn_implementation: str | None = None,
                    model_type: str | None = None) -> nn.Module:
    """The transformers model computing what `model` computes, or ConfigError naming each feature that no
    supported family (or `model_type`, when given) can express (e.g. post-norm, or GQA in a serial Falcon block).
    Where two families compute the same model (Qwen3-Next and Qwen3.5 with the same layers), the first
    supported one is taken unless model_type names the other."""
    family, config = to_hf_config(model.cfg, model_type)
    ref = next(model.parameters())
    hf = hf_model_from_config(family, config, attn_implementation).to(device=ref.device, dtype=ref.dtype)
    hf.load_state_dict(ours_to_hf(model.cfg, family, model.state_dict()), strict=True)
    return hf.train(model.training)


@torch.no_grad()
def scramble_(model: nn.Module, seed: int = 0, spread: float = 0.5) -> None:
    """Re-draw every parameter so each one matters in a parity check (default inits leave norms at 1 and
    biases at 0, which would hide a mis-mapped norm or bias): embeddings N(0, 1), matrices N(0, 1/fan_in),
    stacked expert weights N(0, 1/fan_in), biases N(0, spread), norm gains their init (1, or 0 for Gemma's
    1 + w) plus N(0, spread)."""
    g = torch.Generator().manual_seed(seed)

    def draw(p: torch.Tensor, std: float) -> torch.Tensor:
        return torch.randn(p.shape, generator=g).to(p) * std

    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if isinstance(module, nn.Embedding):
                p.copy_(draw(p, 1.0))
            elif p.ndim == 3:   # stacked expert weights [experts, out, in]
                p.copy_(draw(p, p.shape[2] ** -0.5))
            elif p.ndim == 2:   # nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out]
                fan_in = p.shape[1] if isinstance(module, nn.Linear) else p.shape[0]
                p.copy_(draw(p, fan_in ** -0.5))
            elif name == "bias":
                p.copy_(draw(p, spread))
            else:
                p.add_(draw(p, spread))


def read_checkpoint(folder: str | Path, weights: bool = True
                    ) -> tuple[dict[str, Any], dict[str, torch.Tensor] | None, str]:
    """(config.json dict, state dict or None, where the weights came from) of a local checkpoint folder, or of
    a config file alone (a config.json saved from the Hub's file view: no weights, so random ones for --check).
    weights=False reads only config.json (so the memory guard can run before any tensor is loaded).
    Raises ValueError with a readable message for anything missing or malformed."""
    folder = Path(folder)
    if folder.is_file() and folder.suffix == ".json":
        config = json_loads(read_text(folder, MAX_CONFIG_BYTES, folder.name), folder.name, constants=True)
        return config, None, "random init (a config file, no weights)" if weights else "not read"
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder (nor a .json config file)")
    if not (folder / "config.json").exists():
        raise ValueError(f"{folder}: no config.json")
    config = json_loads(read_text(folder / "config.json", MAX_CONFIG_BYTES, "config.json"), "config.json",
                        constants=True)
    files = _weight_files(folder) if weights else []
    if not weights:
        return config, None, "not read"
    if not files:
        return config, None, "random init (no weights in the folder)"
    state: dict[str, torch.Tensor] = {}
    for f in files:
        try:   # torch.load reads a .safetensors path with safetensors itself, anything else weights-only
            state.update(torch.load(f, map_location="cpu", weights_only=True))
        except Exception as e:   # corrupt file, or a pickle that weights_only refuses
            raise ValueError(f"{f}: cannot load weights: {e}") from None
    return config, state, ", ".join(f.name for f in files)


def _weight_files(folder: Path) -> list[Path]:
    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if (folder / single).is_file():
            return [folder / single]
        if (folder / index).is_file():
            return _index_shards(folder, index)
    return []


def _index_shards(folder: Path, index: str) -> list[Path]:
    """The shard files a weight index names, each confined to `folder` (no absolute paths, no `..`)."""
    data = json_loads(read_text(folder / index, MAX_CONFIG_BYTES * 64, index), index)
    shards = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(shards, dict) or not all(isinstance(v, str) for v in shards.values()):
        raise ValueError(f"{index}: weight_map: expected a JSON object of tensor name -> shard file name")
    root = folder.resolve()
    paths = []
    for name in sorted(set(shards.values())):
        path = (folder / name).resolve()
        if not path.is_relative_to(root) or path == root:
            raise ValueError(f"{index}: weight_map: shard {name[:80]!r} is outside the model folder {folder}")
        paths.append(path)
    return paths


def load_into(hf_model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load checkpoint tensors into a transformers model built from the same config. Keys saved without the
    base-model prefix (e.g. GPT-2's `h.0...` for `transformer.h.0...`) are matched; a missing tensor (other
    than a tied head) or a tensor with no place is an error."""
    expected = hf_model.state_dict()
    prefix = hf_model.base_model_prefix
    renamed = {}
    for k, v in state.items():
        if k.endswith(_STALE_BUFFERS) and k not in expected:
            continue
        k = _RENAMED.get(k, k)
        key = k if k in expected or f"{prefix}.{k}" not in expected else f"{prefix}.{k}"
        renamed[key] = v
    owners: dict[int, list[str]] = {}
    for k, v in expected.items():
        owners.setdefault(v.data_ptr(), []).append(k)
    tied = {k for keys in owners.values() if len(keys) > 1 for k in keys}
    missing = sorted(set(expected) - set(renamed) - tied)
    unexpected = sorted(set(renamed) - set(expected))
    if missing or unexpected:
        raise ValueError(f"weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    try:
        hf_model.load_state_dict(renamed, strict=False)
    except RuntimeError as e:   # a tensor of the wrong shape
        raise ValueError(f"weights do not match the config: {str(e).splitlines()[-1].strip()}") from None


@torch.no_grad()
def logits_gap(hf_model: nn.Module, model: DecoderLM, tokens: int, batch: int = 2, seed: int = 0) -> float:
    """Max |logits difference| between the transformers model and ours on the same random token ids."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, model.cfg.vocab_size, (batch, tokens), generator=g)
    ref = hf_model(input_ids=idx.to(next(hf_model.parameters()).device)).logits
    ours = model(idx.to(next(model.parameters()).device))
    gap = (ref.float() - ours.float()).abs().max().item()
    return gap if math.isfinite(gap) else math.inf
