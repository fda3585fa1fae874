"""The shared reading of a Hugging Face config.json: `_Reader` (values with the family's defaults, the keys read,
one problem per HF key), per-layer window patterns, and the sizes every Llama-like family shares. The dense
readers (hf_config.py) and the MoE readers (hf_moe.py) both build on it."""
from __future__ import annotations

from typing import Any

from engine.interop.hf_defaults import DEFAULTS, IGNORED, INERT
from engine.interop.hf_rope import rope_fields

class _Reader:
    """One config.json dict: values with the family defaults, the keys read, and one problem per HF key."""

    def __init__(self, d: dict[str, Any], family: str):
        self.d, self.defaults, self.family = d, DEFAULTS[family], family
        self.read: set[str] = set()
        self.problems: list[str] = []
        self.ignored: list[str] = []
        self.moved: dict[str, str] = {}   # a path of self.d -> the file's, for a mapping a reader moved (OLMo-3)

    def __call__(self, key: str, default: Any = None) -> Any:
        """The value, or the class default when the key is missing or null (transformers' reading)."""
        self.read.add(key)
        value = self.d.get(key)
        value = self.defaults.get(key) if value is None else value
        return default if value is None else value

    def nullable(self, key: str) -> Any:
        """For keys where null is meaningful (no window, no cap): only a missing key takes the default."""
        self.read.add(key)
        return self.d[key] if key in self.d else self.defaults.get(key)

    def expect(self, key: str, allowed: tuple, why: str) -> Any:
        value = self(key)
        if value not in allowed:
            self.bad(key, value, why)
        return value

    def ignore(self, key: str, why: str) -> None:
        """A key present in the config that transformers does not read either: accepted, listed."""
        self.read.add(key)
        self.ignored.append(f"{self.in_file(key)}: {why}")

    def bad(self, key: str, value: Any, why: str) -> None:
        problem = f"{self.in_file(key)}: {value!r} is not expressible ({why})"
        if problem not in self.problems:   # a key two parts read (MiniMax's hidden_act) is refused once
            self.problems.append(problem)

    def in_file(self, path: str) -> str:
        """The path as the file spells it: messages name the key the user wrote, not where a reader moved it."""
        for moved, original in self.moved.items():
            if path == moved or path.startswith(moved + "."):
                return original + path[len(moved):]
        return path

    def act(self, key: str, table: dict[str, str]) -> str:
        name = self(key)
        if name not in table:
            self.bad(key, name, f"supported activations: {', '.join(table)}")
            return next(iter(table.values()))
        return table[name]

    def unknown(self) -> list[str]:
        for k in self.d:
            if k in IGNORED and k not in self.read:
                self.ignore(k, IGNORED[k])
        return [f"{k}: unknown {self.family} config key; refusing to guess what it changes"
                for k in self.d if k not in self.read and k not in INERT]


def windows_to_fields(windows: list[int | None]) -> dict[str, Any]:
    """A per-layer window list (one window size, or None for full attention) as attn_window + global_every (full
    attention on layers k, 2k, ...), or as an explicit layer_types list when the full layers are not every k-th."""
    sizes = {w for w in windows if w is not None}
    if not sizes:
        return dict(attn_window=None, global_every=None)
    w = sizes.pop()
    if None not in windows:
        return dict(attn_window=w, global_every=None)
    k = windows.index(None) + 1
    if windows != [None if (i + 1) % k == 0 else w for i in range(len(windows))]:
        return dict(attn_window=w, global_every=None,
                    layer_types=tuple("full" if x is None else "sliding" for x in windows))
    return dict(attn_window=w, global_every=k)


def _layer_windows(r: _Reader, n_layers: int, window: int | None, default_types: list[str]) -> dict[str, Any]:
    types = r.nullable("layer_types") or default_types
    if len(types) != n_layers or set(types) - {"sliding_attention", "full_attention"}:
        r.bad("layer_types", types, f"{n_layers} entries of sliding_attention / full_attention")
        return dict(attn_window=None, global_every=None)
    return windows_to_fields([window if t == "sliding_attention" else None for t in types])


def _decoder(r: _Reader, theta_default: float = 10000.0, partial_ok: bool = False, fraction_default: float = 1.0,
             dropout_read: bool = False) -> dict[str, Any]:
    """Sizes shared by the Llama-like families (separate q/k/v/o, gated MLP, RMSNorm, RoPE). dropout_read: the
    caller reads attention_dropout itself (a family whose dropouts we can place)."""
    d, heads = r("hidden_size"), r("num_attention_heads")
    kv, hd = r("num_key_value_heads", heads), r("head_dim", d // heads)
    if not dropout_read:
        r.expect("attention_dropout", (0.0,), "our dropout also acts on the residual stream")
    rope = rope_fields(r, hd, theta_default=theta_default, partial_ok=partial_ok, fraction_default=fraction_default)
    return dict(vocab_size=r("vocab_size"), context_length=r("max_position_embeddings"), d_model=d,
                n_layers=r("num_hidden_layers"), n_heads=heads, n_kv_heads=None if kv == heads else kv,
                head_dim=None if hd == d // heads else hd, d_ff=r("intermediate_size"), norm="rmsnorm",
                norm_eps=float(r("rms_norm_eps")), position="rope", tie_embeddings=bool(r("tie_word_embeddings")),
                **rope)


def _same_dropout(r: _Reader, keys: tuple[str, ...]) -> float:
    values = [r(k) for k in keys]
    if len(set(values)) > 1:   # refused at the odd one out: the value fewest keys hold, rather one not the default
        odd = min(range(len(keys)), key=lambda i: (values.count(values[i]), values[i] == r.defaults.get(keys[i])))
        others = ", ".join(f"{k}={v!r}" for i, (k, v) in enumerate(zip(keys, values)) if i != odd)
        r.bad(keys[odd], values[odd], f"our one dropout needs {' = '.join(keys)}; {others}")
    return float(values[0])


def _fixed_head_dim(r: _Reader, d: int, heads: int) -> None:
    if "head_dim" in r.d:
        r.expect("head_dim", (None, d // heads), f"{r.family} heads are hidden_size // num_attention_heads")


def _whole_heads(r: _Reader, d: int, heads: int) -> None:
    """Falcon and GPT-NeoX split hidden_size into heads; transformers refuses a remainder. (A size below 1 is
    ModelConfig's problem, named at its own key.)"""
    if d > 0 and heads > 0 and d % heads:
        r.bad("num_attention_heads", heads, f"{r.family} needs hidden_size ({d}) to be a multiple of it")


def _alias(r: _Reader, key: str, other: str, other_wins: bool = False) -> Any:
    """A key transformers also accepts under another name. other_wins: an attribute_map alias (BLOOM's
    num_attention_heads for n_head) is set after the named argument, so given both, the alias counts."""
    r.read.update({key, other})
    return r.d[other] if r.d.get(other) is not None and (other_wins or r.d.get(key) is None) else r(key)
