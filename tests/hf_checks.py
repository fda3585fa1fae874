"""Helpers for the tests held against transformers (test files never import each other): its meta-device build and
active count of a config.json, conversion cases built on first use, and weight-mapping checks. Every caller
importorskips transformers first."""
from __future__ import annotations


# ---- transformers' counts (used by the MoE and MLA preset tests; they importorskip transformers first) ----
def hf_meta(config: dict):
    """transformers' model of a config.json dict, built on the meta device (no memory)."""
    import torch
    import transformers

    hf_config = transformers.AutoConfig.for_model(config["model_type"],
                                                  **{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf_config)


def hf_active(hf) -> int:
    """transformers' total minus the routed-expert weights a token skips: (E - k) / E of each experts module."""
    total = sum(p.numel() for p in hf.parameters())
    k = hf.config.num_experts_per_tok
    for name, experts in hf.named_modules():   # layer.mlp.experts, or feed_forward / mixer / block_sparse_moe
        if name.endswith(".experts") and hasattr(experts, "num_experts"):
            E = experts.num_experts
            total -= sum(p.numel() for p in experts.parameters()) * (E - k) // E
    return total


# ---- HF parity: each case built once per module --------------------------------------------------------------
class _Cases(dict):
    """Builds a case when a test first asks for it, inside that test: a mutation tool that maps code to the tests
    calling it then sees the conversion of case X under the first test that checks X (a module fixture building
    every case up front ran all conversions under the module's first test, which checks only its own case)."""

    def __init__(self, cases: dict, vocab: int, seq: int):
        super().__init__()
        self.cases, self.vocab, self.seq = cases, vocab, seq

    def __missing__(self, name: str):
        import torch

        from engine.interop import from_transformers, hf_model_from_config, scramble_

        i = list(self.cases).index(name)
        model_type, config, *_ = self.cases[name]
        torch.manual_seed(i)
        hf = hf_model_from_config(model_type, config, attn_implementation="eager").eval()
        scramble_(hf, seed=i)
        idx = torch.randint(0, self.vocab, (2, self.seq), generator=torch.Generator().manual_seed(i))
        self[name] = (hf, from_transformers(hf), idx)
        return self[name]


def convert_cases(cases: dict, vocab: int, seq: int) -> dict:
    """name -> (HF model, our model, token ids) for cases {name: (model_type, config, ...)}: the HF model built
    eager, every weight redrawn (seeded by the case's position), converted to ours, and a batch of 2 x `seq` ids;
    each case built on first use."""
    return _Cases(cases, vocab, seq)


def assert_same_weights(ref: dict, got: dict, family: str) -> None:
    """Two HF state dicts hold the same tensors, bit for bit (Gemma's and Qwen3-Next's / Qwen3.5's norm gains
    up to one ulp of 1 + w)."""
    import torch
    assert got.keys() == ref.keys()
    for key in ref:
        if family.startswith(("gemma", "qwen3_next", "qwen3_5")) and "norm" in key:
            # Gemma stores w for a gain of (1 + w): (1 + w) - 1 is exact up to one ulp of 1 + w (< 4 here)
            assert ref[key].abs().max() < 3
            torch.testing.assert_close(got[key], ref[key], rtol=0, atol=2 ** -22)
        else:
            assert torch.equal(got[key], ref[key]), key


def pairs_missing_from(hf, pairs: list) -> list[str]:
    """The HF modules a weight mapping names that the transformers model lacks (each would be skipped silently
    both ways)."""
    sd = hf.state_dict()
    modules = set(sd) | {k.rsplit(".", 1)[0] for k in sd}
    return [p.hf for p in pairs if p.hf not in modules]


def assert_round_trip(hf, ours, family: str) -> None:
    """Ours -> transformers gives the model's class and every weight back (no mapped module missing), and ours ->
    config.json -> ours gives the same config (named by the family)."""
    from engine.interop import from_hf_config, to_hf_config, to_transformers
    from engine.interop.weights import pairs_for
    assert not pairs_missing_from(hf, pairs_for(ours.cfg, family))
    back = to_transformers(ours, model_type=family)
    assert type(back) is type(hf)
    assert_same_weights(hf.state_dict(), back.state_dict(), family)
    got_family, config = to_hf_config(ours.cfg, family)
    assert got_family == family and from_hf_config({"model_type": family, **config}) == ours.cfg.replace(
        name=family)


def assert_logits_match(case: tuple, tol: float):
    """A converted case (HF model, ours, token ids): transformers' logits are non-trivial (some |z| > 1) and ours
    equal them within `tol`; returns transformers' logits."""
    import torch
    hf, ours, idx = case
    with torch.no_grad():
        ref, got = hf(input_ids=idx).logits, ours(idx)
    assert ref.abs().max() > 1.0
    torch.testing.assert_close(got, ref, rtol=tol, atol=tol)
    return ref


def hf_language_counts(config: dict) -> tuple[int, int | None]:
    """(total, active) parameters of the language model transformers builds from a config.json dict, on the meta
    device: a multimodal file's text model and head (not its vision tower); active (None for a dense model) drops
    (E - k) / E of every routed-experts module, k the text config's experts per token."""
    import torch
    import transformers

    from engine.interop.hf_dsa import BUILT_AS
    from engine.interop.hf_wrappers import WRAPPERS
    built_as = BUILT_AS.get(config["model_type"], config["model_type"])   # kimi_k2: transformers' deepseek_v3
    cfg = transformers.AutoConfig.for_model(built_as, **{k: v for k, v in config.items() if k != "model_type"})
    auto = transformers.AutoModelForCausalLM
    if type(cfg) in transformers.AutoModelForImageTextToText._model_mapping:
        auto = transformers.AutoModelForImageTextToText
    with torch.device("meta"):
        model = auto.from_config(cfg)
    wrapper = WRAPPERS.get(config["model_type"])
    keep = lambda name: wrapper is None or name.startswith((wrapper.prefix, wrapper.head))  # noqa: E731
    total = sum(p.numel() for n, p in model.named_parameters() if keep(n))
    text = cfg.get_text_config()
    k = next((getattr(text, a) for a in ("num_experts_per_tok", "moe_k") if isinstance(getattr(text, a, None), int)), 0)
    skipped = 0
    for name, module in model.named_modules():
        if name.endswith(".experts") and keep(name + "."):
            params = list(module.parameters())
            experts = params[0].shape[0]
            skipped += sum(p.numel() for p in params) * (experts - k) // experts
    return total, (total - skipped if skipped else None)


def assert_both_attention_paths_match(ours, idx, ref, atol: float = 1e-5) -> None:
    """Our logits equal `ref` (a transformers model's, non-trivial ones) through SDPA and through the explicit
    softmax path alike."""
    import torch
    assert ref.abs().max() > 1.0
    for impl in ("sdpa", "explicit"):
        ours.set_attention(impl)
        try:
            with torch.no_grad():
                torch.testing.assert_close(ours(idx), ref, rtol=1e-5, atol=atol)
        finally:
            ours.set_attention("sdpa")


def hooked_outputs(modules: dict, run) -> dict:
    """{key: output} of each module in `modules` ({key: nn.Module}) during `run()` (no grad), hooks removed after."""
    import torch
    got = {}
    hooks = [m.register_forward_hook(lambda _m, _a, out, k=k: got.__setitem__(k, out)) for k, m in modules.items()]
    try:
        with torch.no_grad():
            run()
    finally:
        for h in hooks:
            h.remove()
    return got


def assert_counts_match(hf) -> None:
    """Our closed form == our built model == the transformers model `hf`, for the config imported from it."""
    from engine.budget.params import count_params
    from engine.interop import from_hf_config
    from engine.model import build_model
    cfg = from_hf_config(hf.config.to_dict())
    built = build_model(cfg, device="meta")
    assert count_params(cfg).total == sum(p.numel() for p in built.parameters()) == sum(
        p.numel() for p in hf.parameters())


def unit_scale_model(cfg, dtype=None):
    """Our model (eval, seed 1) with every matrix drawn at unit scale (seeded): the default init's small scores
    tie at ReLU's zero and are too small to tell the attention paths apart."""
    import torch

    from engine.model import build_model
    model = build_model(cfg, seed=1).eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
    return model if dtype is None else model.to(dtype)
