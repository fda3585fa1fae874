"""The layer map: every layer's mixer kind and FFN kind in order, as a strip a reader can scan.

Read from the config's layer specs (engine/layers/mixers.py `layer_specs`), never from a second reading of
layer_types / ffn_types: Qwen3-Next's 3:1 pattern, a local/global window rule and MoE's first dense layers all show
the same way. A kind's key is what distinguishes layers on the strip ("full", "sliding", "gdn", "full+gdn", "none";
"dense", "moe", "none"); its label is the registered kind's own (Mixer.label).
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.config import ModelConfig
from engine.layers.kinds import LayerSpec
from engine.layers.mixers import MIXERS, spec_label
from engine.layers.span import Chunk

FFN_LABELS = {"dense": "dense FFN", "moe": "MoE", "none": "no FFN"}


def attention_word(spec: LayerSpec) -> str:
    """The layer_types word of an attention layer's span: 'full', 'sliding' (a window) or 'chunked' (Llama 4)."""
    return "full" if spec.window is None else "chunked" if isinstance(spec.window, Chunk) else "sliding"


def mixer_key(spec: LayerSpec) -> str:
    """The strip's key of a layer's mixer: 'full' / 'sliding' / 'chunked' for softmax attention, the kind's name for
    a recurrent one, 'a+b' for two side by side, 'none' for an FFN-only layer."""
    return "+".join(attention_word(spec) if k == "attention" else k for k in spec.mixers) or "none"


def mixer_key_label(cfg: ModelConfig, key: str) -> str:
    """A mixer key in words: 'softmax attention (full)', 'Gated DeltaNet', 'no mixer (FFN only)'."""
    if key == "none":
        return "no mixer (FFN only)"
    parts = []
    for word in key.split("+"):
        if word in MIXERS["attention"].words:
            latent = ", MLA" if cfg.mla else ""
            # a sliding (chunked) key comes only from a layer whose span is the window (the chunk): never None
            span = "full" if word == "full" else f"sliding {cfg.attn_window:,}" if word == "sliding" \
                else f"chunks of {cfg.attn_chunk:,}"
            parts.append(f"softmax attention ({span}{latent})")
        else:
            parts.append(MIXERS[word].label)
    return " beside ".join(parts)


def index_ranges(indices: list[int]) -> str:
    """1-based layer indices as runs: [1, 2, 3, 5, 7, 8] -> '1–3, 5, 7–8'."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


@dataclass(frozen=True)
class LayerCell:
    index: int          # 1-based, as papers and model cards count layers
    mixer: str          # mixer_key
    ffn: str            # "dense", "moe" or "none"
    label: str          # the whole layer in words (mixers.spec_label)


@dataclass(frozen=True)
class KindRow:
    """One kind on one row of the strip: its key, its words, and exactly which layers (1-based) have it."""
    key: str
    label: str
    layers: tuple[int, ...]

    @property
    def ranges(self) -> str:
        return index_ranges(list(self.layers))


@dataclass(frozen=True)
class LayerMap:
    n_layers: int
    cells: tuple[LayerCell, ...]
    mixers: tuple[KindRow, ...]     # in order of first appearance
    ffns: tuple[KindRow, ...]

    @property
    def kinds(self) -> int:
        """How many distinct (mixer, FFN) layer kinds: 1 for a model with one kind everywhere."""
        return len({(c.mixer, c.ffn) for c in self.cells})


def _rows(cells: tuple[LayerCell, ...], attr: str, label) -> tuple[KindRow, ...]:
    keys: dict[str, list[int]] = {}
    for c in cells:
        keys.setdefault(getattr(c, attr), []).append(c.index)
    return tuple(KindRow(k, label(k), tuple(v)) for k, v in keys.items())


def layer_map(cfg: ModelConfig) -> LayerMap:
    """Every layer of cfg (1-based) with its mixer and FFN kind, and each kind's exact layers."""
    cells = tuple(LayerCell(i + 1, mixer_key(s), s.ffn, spec_label(s)) for i, s in enumerate(cfg.layer_specs))
    return LayerMap(cfg.n_layers, cells, _rows(cells, "mixer", lambda k: mixer_key_label(cfg, k)),
                    _rows(cells, "ffn", FFN_LABELS.__getitem__))


def attention_positions(n: int, k: int) -> set[int]:
    """k of n positions (1-based) spread evenly, the last one always among them: Qwen3-Next's 12 of 48 are
    4, 8, ..., 48 (one attention layer closing every group of four)."""
    return {j * n // k for j in range(1, k + 1)}


def own_recurrent(cfg: ModelConfig) -> str:
    """The recurrent kind of cfg's first recurrent layer (Jamba: mamba1), Gated DeltaNet when it has none."""
    return next((k for s in cfg.layer_specs for k in s.mixers if MIXERS[k].recurrent), "gdn")


def with_attention_layers(cfg: ModelConfig, k: int, recurrent: str | None = None) -> ModelConfig:
    """cfg with k of its mixer layers softmax attention, spread evenly (attention_positions), and the others the
    recurrent kind `recurrent` (None: own_recurrent); FFN-only layers and every FFN stay. A layout that already has
    k attention layers and `recurrent` in every other mixer layer is returned as it is (Jamba's offsets stay). An attention layer keeps its window where it
    had attention (sliding, chunked), else is full; attention beside a recurrent mixer becomes one or the other."""
    recurrent = own_recurrent(cfg) if recurrent is None else recurrent
    if recurrent not in MIXERS or not MIXERS[recurrent].recurrent:
        raise ValueError(f"recurrent: {recurrent!r} is not a recurrent mixer kind "
                         f"({', '.join(m.name for m in MIXERS.values() if m.recurrent)})")
    mixer_layers = [i for i, s in enumerate(cfg.layer_specs) if s.mixers]
    if not 0 <= k <= len(mixer_layers):
        raise ValueError(f"attention_layers: {k} is not between 0 and the {len(mixer_layers)} mixer layers")
    specs = cfg.layer_specs
    if (sum(s.attention for s in specs) == k and cfg.layer_types is not None
            and all(s.mixers in (("attention",), (recurrent,)) for s in specs if s.mixers)):
        return cfg
    chosen = {mixer_layers[p - 1] for p in attention_positions(len(mixer_layers), k)}   # k = 0: none
    words = []
    for i, spec in enumerate(cfg.layer_specs):
        if not spec.mixers:
            words.append("none")
        elif i in chosen:
            words.append(attention_word(spec) if spec.attention else "full")
        else:
            words.append(recurrent)
    ffns = tuple(s.ffn for s in cfg.layer_specs)
    return cfg.replace(layer_types=tuple(words), ffn_types=ffns if cfg.ffn_types is not None else None)
