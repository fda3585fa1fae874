"""import-hf: a local Hugging Face checkpoint folder -> our YAML config, and optionally a logits parity check."""
from __future__ import annotations

import argparse
import math
import sys

from engine.commands import UsageError
from engine.config import ModelConfig


MAX_CHECK_TOKENS = 65_536   # a parity check needs a few windows' worth of tokens, not a whole context


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-hf", help="import a local Hugging Face config.json as our YAML config",
                       description="Print the YAML config of a local Hugging Face checkpoint folder (config.json, "
                                   "optionally model.safetensors or pytorch_model.bin). Never downloads.")
    p.add_argument("path", help="folder holding config.json (and optionally weights), or a config.json file")
    p.add_argument("--verbose", action="store_true",
                   help="also list the keys present that transformers does not read either (accepted, ignored)")
    p.add_argument("--check", action="store_true",
                   help="build the transformers model (with the folder's weights, else random ones), convert it "
                        "to ours and print the largest logits difference (needs transformers)")
    p.add_argument("--tokens", type=int, default=64, help="sequence length for --check (default 64)")
    p.add_argument("--tol", type=float, default=1e-4, help="--check fails (exit 1) above this gap (default 1e-4)")
    p.set_defaults(run=_import_hf)


def _import_hf(args: argparse.Namespace) -> int:
    from engine.interop.hf_config import import_hf
    from engine.interop.hf_models import read_checkpoint
    if args.check and not 1 <= args.tokens <= MAX_CHECK_TOKENS:
        raise UsageError(f"--tokens: {args.tokens} is not an integer >= 1 and <= {MAX_CHECK_TOKENS:,}")
    if args.check and not (math.isfinite(args.tol) and args.tol >= 0):
        raise UsageError(f"--tol: {args.tol} is not a finite number >= 0 (nan would pass every gap)")
    try:
        config, _, _ = read_checkpoint(args.path, weights=False)
    except ValueError as e:
        raise UsageError(str(e)) from None
    got = import_hf(config)   # ConfigError -> exit 2 with each HF key named
    cfg = got.config
    if got.not_counted:   # a multimodal file: say which part of it the YAML is
        print(f"# source: {got.source}")
        for line in got.not_counted:
            print(f"# not counted: {line}")
    print(cfg.to_yaml(), end="")
    if args.verbose:
        for line in got.ignored or ["(no ignored keys)"]:
            print(f"# ignored: {line}")
    if not args.check:
        return 0
    return _parity_check(cfg, config, args)


def _parity_check(cfg: ModelConfig, config: dict, args: argparse.Namespace) -> int:
    try:
        import transformers
    except ImportError:
        raise UsageError("--check needs transformers: pip install -r requirements-dev.txt") from None
    import torch

    from engine.interop.hf_models import (from_transformers, hf_model_from_config, load_into, logits_gap,
                                          read_checkpoint, scramble_)
    from engine.guard import MemoryRefusal, check_fits
    from engine.interop.hf_dsa import BUILT_AS
    from engine.runtime import default_device
    transformers.logging.set_verbosity_error()
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    device = default_device()
    try:   # the checkpoint's tensors, two fp32 models (transformers' and ours) and logits for 2 x tokens
        check_fits(cfg, device, 2, args.tokens, "fp32", training=False, copies=3)
        _, state, source = read_checkpoint(args.path)
    except MemoryRefusal as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        family = BUILT_AS.get(config["model_type"], config["model_type"])   # kimi_k2: transformers' deepseek_v3
        hf = hf_model_from_config(family, kwargs, attn_implementation="eager")
    except (ValueError, TypeError) as e:
        raise UsageError(f"transformers cannot build this config: {e}") from None
    if state is None:
        scramble_(hf, seed=0)
    else:
        try:
            load_into(hf, state)
        except ValueError as e:
            raise UsageError(str(e)) from None
    hf.eval().float().to(device)
    ours = from_transformers(hf)
    tokens = args.tokens if cfg.position != "learned" else min(args.tokens, cfg.context_length)
    with torch.inference_mode():
        gap = logits_gap(hf, ours, tokens)
    windows = [w for w in cfg.layer_windows if w is not None]
    print(f"# check: weights from {source}; fp32 on {device}, 2 x {tokens} random tokens")
    if windows and tokens <= max(windows):
        print(f"# note: {tokens} tokens do not reach the sliding window of {max(windows)}; pass --tokens "
              f"{max(windows) + 16} to test it")
    print(f"# max |logits gap| vs transformers: {gap:.3g} (tolerance {args.tol:g})")
    if gap > args.tol:
        print(f"error: logits differ by {gap:.3g} > {args.tol:g}", file=sys.stderr)
        return 1
    return 0
