"""Parameter counts of the models transformers builds from a config.json, on the meta device (tests only)."""


def hf_language_counts(config: dict) -> tuple[int, int | None]:
    """(total, active) parameters of the language model transformers builds from a config.json dict, on the meta
    device: a multimodal file's text model and head (not its vision tower); active (None for a dense model) drops
    (E - k) / E of every routed-experts module, k the text config's experts per token."""
    import torch
    import transformers

    from engine.interop.hf_wrappers import WRAPPERS
    cfg = transformers.AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})
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
