"""Position information: sinusoidal tables (added to the input), rotary embedding (applied to q and k) and ALiBi
(a per-head linear penalty on attention scores, no parameters).
(This file is longer than 300 lines: the family's declared fields, its module and its closed forms stay in one place.)

Learned positions are a plain nn.Embedding in the model; "none" adds nothing.
ALiBi (Press et al. 2022, BLOOM, MPT): head h adds -m_h * (i - j) to the score of query i for key j. For n heads
with n a power of two, m_h = 2^(-8h/n), h = 1..n; otherwise the first p = 2^floor(log2 n) slopes are those of p
heads, and the remaining n - p are every other slope of 2p heads: 2^(-8(2k-1)/(2p)), k = 1..n-p.
RoPE uses the rotate-half pairing (dimension i pairs with i + r/2, as in GPT-NeoX and Hugging Face Llama)
and rotates only the first `rotary_dim` dimensions of each head (partial rotary).

RoPE scaling (context extension) changes the inverse frequencies w_i = base^(-2i/r), i < r/2, and, for yarn and
longrope, multiplies cos and sin by an attention factor m (so every rotated q.k product is scaled by m^2).
With s = rope_factor, L0 = rope_original_context (null: context_length), T = tokens seen (max position + 1):
  linear    w_i / s                                                    (Chen et al. 2023, position interpolation)
  dynamic   base' = base * (s*T/L0 - (s-1))^(r/(r-2)) once T > L0, else plain          (NTK-aware, /u/emozilla)
  llama3    wavelength 2pi/w_i above L0/low: w_i/s; below L0/high: w_i; in between
            (1-a) w_i/s + a w_i with a = (L0/wavelength - low)/(high - low)              (Llama 3.1)
  yarn      dims below d(beta_fast) keep w_i, dims above d(beta_slow) get w_i/s, linear ramp between, with
            d(b) = r*ln(L0/(2pi b)) / (2 ln base) (floor/ceil when truncating); m = 0.1 ln s + 1  (Peng et al. 2023)
  longrope  w_i / short_i while T <= L0, w_i / long_i beyond; m = sqrt(1 + ln s / ln L0)  (Ding et al. 2024)
Written to give what transformers' rotary embeddings give (tests/test_rope_scaling.py holds them against it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from engine.runtime import DTYPE_BYTES
from engine.validation import Knobs, declare

if TYPE_CHECKING:   # engine.config assembles ModelConfig from this module's knobs
    from engine.config import ModelConfig


ROPE_SCALINGS = ("none", "linear", "dynamic", "llama3", "yarn", "longrope")


# ---- declared fields (engine/config.py assembles every family's into ModelConfig) ----------------------------
@dataclass(frozen=True)
class PositionKnobs(Knobs):
    """Positions: learned, sinusoidal, RoPE (with scaling, NoPE layers), ALiBi or none."""
    position: str = declare("learned", "position", "How the model knows token order: a learned table, fixed "
                             "sinusoids added to the input, rotary embedding of queries and keys, a linear "
                             "penalty on attention scores growing with distance (alibi), or nothing.",
                             choices=("learned", "sinusoidal", "rope", "alibi", "none"))
    rope_base: float = declare(10000.0, "position", "RoPE base theta: larger means slower rotation, longer reach.",
                                lo=1, lo_open=True)
    rope_fraction: float = declare(1.0, "position", "Share of each head's dimensions that rotate (partial RoPE).",
                                    lo=0, hi=1, lo_open=True)
    rope_local_base: float | None = declare(None, "position", "Sliding-window layers use plain RoPE with this base "
                                             "(Gemma-3: 10,000 locally, 1,000,000 globally).", lo=1, lo_open=True,
                                             null="the same RoPE in every layer")
    nope_layers: tuple[int, ...] | None = declare(None, "position", "Layers (counting from 1) that skip RoPE and "
                                                   "see no positions at all (NoPE).", lo=1, null="RoPE in every layer")
    # RoPE scaling (context extension), as transformers' rope_parameters; see engine/layers/position.py
    rope_scaling: str = declare("none", "position", "Stretch RoPE beyond its training context: linear divides every "
                                 "frequency, dynamic raises theta once the sequence is longer, llama3 and yarn slow "
                                 "only the low frequencies, longrope multiplies each by its own factor.",
                                 choices=ROPE_SCALINGS)
    rope_factor: float = declare(1.0, "position", "Scaling factor s: the context is stretched s times (linear, "
                                  "dynamic, llama3, yarn; longrope uses it for its attention correction).",
                                  lo=0, lo_open=True)
    rope_original_context: int | None = declare(None, "position", "Context length of pretraining, before "
                                                 "scaling (llama3, yarn, longrope).", lo=1, null="context_length")
    rope_low_freq_factor: float = declare(1.0, "position", "llama3: wavelengths above original context / this "
                                           "are divided by the factor.", lo=0, lo_open=True)
    rope_high_freq_factor: float = declare(4.0, "position", "llama3: wavelengths below original context / this "
                                            "stay unscaled; in between is a smooth blend.", lo=0, lo_open=True)
    rope_beta_fast: float = declare(32.0, "position", "yarn: dimensions rotating more than this often over the "
                                     "original context keep their frequency.", lo=0, lo_open=True)
    rope_beta_slow: float = declare(1.0, "position", "yarn: dimensions rotating fewer times than this are fully "
                                     "interpolated (divided by the factor).", lo=0, lo_open=True)
    rope_truncate: bool = declare(True, "position", "yarn: round the blend's dimension range to whole dimensions.")
    rope_attention_factor: float | None = declare(None, "position", "yarn and longrope multiply cos and sin by "
                                                   "this, sharpening attention at long range.", lo=0, lo_open=True,
                                                   null="from rope_factor: yarn 0.1*ln(s)+1, longrope "
                                                        "sqrt(1+ln(s)/ln(original context))")
    rope_mscale_all_dim: float | None = declare(None, "position", "yarn with MLA (DeepSeek's mscale_all_dim m): "
                                                 "the softmax scale is also multiplied by (0.1*m*ln(s)+1)^2, "
                                                 "s = rope_factor; ignored without MLA or without yarn.", lo=0,
                                                 lo_open=True, null="no softmax correction")
    rope_short_factor: tuple[float, ...] | None = declare(None, "position", "longrope: per-frequency divisors "
                                                           "(rotary_dim/2 numbers) within the original context.",
                                                           lo=0, lo_open=True, null="not longrope")
    rope_long_factor: tuple[float, ...] | None = declare(None, "position", "longrope: per-frequency divisors "
                                                          "once the sequence is longer than the original context.",
                                                          lo=0, lo_open=True, null="not longrope")
    # query temperature for long contexts (Llama 4's attn_temperature_tuning, Ministral 3's llama_4_scaling_beta)
    attn_temperature: float | None = declare(None, "position", "Long-context query temperature beta: the query at "
                                              "position p is multiplied by 1 + beta*ln(1 + floor(p'/F)), so attention "
                                              "sharpens as the context grows (Llama 4: 0.1 on NoPE layers).", lo=0,
                                              lo_open=True, null="no temperature")
    attn_temperature_floor: int = declare(8192, "position", "F: positions per step of the query temperature "
                                           "(Llama 4 floor_scale; Ministral 3 its original context).", lo=1)
    attn_temperature_one_based: bool = declare(False, "position", "Count positions from 1 in the temperature, "
                                                "p' = p + 1 (Llama 4), instead of p' = p (Ministral 3).")
    attn_temperature_layers: str = declare("all", "position", "Layers the temperature scales: all, or only those "
                                            "without RoPE (nope, Llama 4).", choices=("all", "nope"))

    @property
    def rotary_dim(self) -> int:
        if self.position != "rope":
            return 0
        return self.qk_rope_head_dim if self.mla else int(round(self.head_width * self.rope_fraction))

    def layer_rope(self, i: int) -> str | None:
        """Layer i's (0-based) RoPE: 'global', 'local' (rope_local_base on a window layer) or None (no RoPE, or
        no attention in the layer to rotate)."""
        if self.position != "rope" or (self.nope_layers and i + 1 in self.nope_layers):
            return None
        if "attention" not in self.layer_mixers(i):
            return None
        local = self.rope_local_base is not None and isinstance(self.layer_window(i), int)   # sliding, not chunked
        return "local" if local else "global"

    def layer_temperature(self, i: int) -> bool:
        """Whether layer i (0-based) scales its queries by the long-context temperature."""
        if self.attn_temperature is None:
            return False
        return self.attn_temperature_layers == "all" or self.layer_rope(i) is None

    @property
    def layer_ropes(self) -> list[str | None]:
        """layer_rope of every layer, in order."""
        return [self.layer_rope(i) for i in range(self.n_layers)]

    @staticmethod
    def rules(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
        """An even rotary width, the scaling type's own rules, layers that exist, a learned table that fits."""
        out = []
        if (ok("position", "head_dim", "d_model", "n_heads", "rope_fraction") and c.position == "rope"
                and not c.mla and not (c.head_dim is None and c.d_model < c.n_heads)):   # 0: attention's problem
            rot = c.head_width * c.rope_fraction
            if abs(rot - round(rot)) > 1e-9 or round(rot) % 2 or round(rot) == 0:
                out.append(f"head_dim: rope needs an even rotary width (head_dim*rope_fraction), "
                           f"got {c.head_width}*{c.rope_fraction:g} = {rot:g}")
        out += _scaling_problems(c, ok)
        if ok("nope_layers", "n_layers") and c.nope_layers and max(c.nope_layers) > c.n_layers:
            out.append(f"nope_layers: layer {max(c.nope_layers)} does not exist (n_layers={c.n_layers})")
        if ok("position", "context_length") and c.position == "learned" and c.context_length > 1 << 24:
            out.append(f"context_length: {c.context_length:,} is too long for a learned position table "
                       f"(at most 16,777,216)")
        return out


# what rotary_dim reads: a refused one of these is reported on its own and the scaling rules wait for it
ROTARY_FIELDS = ("position", "head_dim", "rope_fraction", "d_model", "n_heads", "kv_lora_rank", "qk_rope_head_dim")


def _scaling_problems(c: ModelConfig, ok: Callable[..., bool]) -> list[str]:
    """Rules of the RoPE scaling fields (checked only with position = rope and that scaling type; an unknown
    rope_scaling equals none of the types below, so its own choice message stands alone)."""
    if c.position != "rope" or not ok(*ROTARY_FIELDS):
        return []
    problems = []
    if c.rope_scaling == "dynamic" and c.rotary_dim < 4:   # the new base has the exponent r / (r - 2)
        problems.append(f"rope_scaling: dynamic needs a rotary width of at least 4, got {c.rotary_dim}")
    if c.rope_scaling == "llama3" and ok("rope_low_freq_factor", "rope_high_freq_factor") \
            and c.rope_high_freq_factor < c.rope_low_freq_factor:   # equal: a hard cut at the original context
        problems.append(f"rope_high_freq_factor: {c.rope_high_freq_factor:g} must be at least "
                        f"rope_low_freq_factor={c.rope_low_freq_factor:g}")
    if c.rope_scaling == "longrope":
        half = c.rotary_dim // 2
        for name in ("rope_short_factor", "rope_long_factor"):
            value = getattr(c, name)
            if ok(name) and (value is None or len(value) != half):
                got = "null" if value is None else f"{len(value)} number{'' if len(value) == 1 else 's'}"
                problems.append(f"{name}: longrope needs rotary_dim/2 = {half} numbers, got {got}")
    return problems


def sinusoidal_table(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """[T] positions -> [T, dim]: sin on even, cos on odd channels, wavelengths 2pi .. 10000*2pi."""
    half = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    freq = torch.exp(-math.log(10000.0) * half / dim)
    angles = positions.float()[:, None] * freq[None, :]
    table = torch.zeros(len(positions), dim, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


def _exponents(rotary_dim: int, device: torch.device | None = None) -> torch.Tensor:
    return torch.arange(0, rotary_dim, 2, device=device, dtype=torch.float32) / rotary_dim


def plain_inv_freq(rotary_dim: int, base: float | torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """w_i = base^(-2i/r) for i < r/2 (fp32)."""
    return 1.0 / (base ** _exponents(rotary_dim, device))


def rope_inv_freq(cfg: ModelConfig, tokens: int, device: torch.device | None = None,
                  base: float | None = None) -> tuple[torch.Tensor, float]:
    """(inverse frequencies [rotary_dim/2], cos/sin multiplier) of cfg's RoPE, scaled by cfg.rope_scaling, for a
    sequence whose last position is tokens - 1. `base` overrides rope_base (e.g. local layers)."""
    r, base = cfg.rotary_dim, cfg.rope_base if base is None else base
    kind, s = cfg.rope_scaling, cfg.rope_factor
    L0 = cfg.rope_original_context or cfg.context_length
    if kind == "linear":
        return plain_inv_freq(r, base, device) / s, 1.0
    if kind == "dynamic":
        if tokens > L0:   # fp32 like transformers, which computes the new base from a tensor
            grown = torch.tensor(tokens, device=device)
            base = base * (s * grown / L0 - (s - 1)) ** (r / (r - 2))
        return plain_inv_freq(r, base, device), 1.0
    if kind == "llama3":
        return _llama3(plain_inv_freq(r, base, device), s, L0, cfg.rope_low_freq_factor,
                       cfg.rope_high_freq_factor), 1.0
    if kind == "yarn":
        return _yarn(cfg, r, base, s, L0, device)
    if kind == "longrope":
        factors = cfg.rope_long_factor if tokens > L0 else cfg.rope_short_factor
        ext = torch.tensor(factors, dtype=torch.float32, device=device)
        m = cfg.rope_attention_factor or (1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L0)))
        return 1.0 / (ext * base ** _exponents(r, device)), m
    return plain_inv_freq(r, base, device), 1.0


def rope_frequency_profile(cfg: ModelConfig, tokens: int) -> tuple[list[float], list[float]]:
    """(original, scaled) rotation frequency of each rotating dimension pair i, in radians per token: base^(-2i/r)
    before scaling, and what cfg.rope_scaling makes of it for a sequence of `tokens` (the rotary embedding's own
    inverse frequencies); the scaled list equals the original when rope_scaling is none."""
    scaled, _ = rope_inv_freq(cfg, tokens)
    return plain_inv_freq(cfg.rotary_dim, cfg.rope_base).tolist(), scaled.tolist()


def rope_scaling_text(cfg: ModelConfig, tokens: int) -> str:
    """One sentence a lecturer can read aloud: what cfg.rope_scaling does to the rotation frequencies at a
    sequence of `tokens` (the Design page's caption under the frequency chart)."""
    kind, s = cfg.rope_scaling, cfg.rope_factor
    L0 = cfg.rope_original_context or cfg.context_length
    within = f"so {tokens:,} tokens stay within the angles seen in {L0:,}-token training"
    if kind == "linear":
        return f"Linear scaling divides every pair's frequency by {s:g}, {within}."
    if kind == "dynamic":
        if tokens <= L0:
            return f"Dynamic scaling changes nothing up to {L0:,} tokens; {tokens:,} tokens use the trained frequencies."
        return (f"Dynamic (NTK) scaling raises theta once a sequence passes {L0:,} tokens: at {tokens:,} the slow "
                "pairs turn more slowly, the fastest hardly change.")
    if kind == "llama3":
        return (f"Llama 3 scaling divides the slow pairs (wavelength above {L0 / cfg.rope_low_freq_factor:,.0f} "
                f"tokens) by {s:g}, keeps the fast ones (below {L0 / cfg.rope_high_freq_factor:,.0f}) and blends "
                f"in between, {within}.")
    if kind == "yarn":
        times = lambda b: "once" if b == 1 else f"{b:g} times"  # noqa: E731
        return (f"YaRN keeps the pairs that turn more than {times(cfg.rope_beta_fast)} over {L0:,} tokens, "
                f"divides those turning less than {times(cfg.rope_beta_slow)} by {s:g} and ramps in between, "
                f"{within}.")
    if kind == "longrope":
        which = "long" if tokens > L0 else "short"
        return (f"LongRoPE divides each pair's frequency by its own factor: the short factors up to {L0:,} tokens, "
                f"the long ones beyond (at {tokens:,} tokens, the {which} ones).")
    return "No RoPE scaling: every pair keeps the frequency it was trained with, so the two curves coincide."


def _llama3(w: torch.Tensor, s: float, L0: int, low: float, high: float) -> torch.Tensor:
    wavelength = 2 * math.pi / w
    long_waves = torch.where(wavelength > L0 / low, w / s, w)
    a = (L0 / wavelength - low) / (high - low)
    blended = (1 - a) * long_waves / s + a * long_waves
    middle = (wavelength >= L0 / high) & (wavelength <= L0 / low)
    return torch.where(middle, blended, long_waves)


def _yarn(cfg: ModelConfig, r: int, base: float, s: float, L0: int,
          device: torch.device | None) -> tuple[torch.Tensor, float]:
    def dim_of(rotations: float) -> float:   # the dimension that turns `rotations` times over L0 tokens
        return r * math.log(L0 / (rotations * 2 * math.pi)) / (2 * math.log(base))

    lo, hi = dim_of(cfg.rope_beta_fast), dim_of(cfg.rope_beta_slow)
    if cfg.rope_truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, r - 1)
    if lo == hi:
        hi += 0.001   # as transformers: avoid dividing by zero
    ramp = ((torch.arange(r // 2, dtype=torch.float32) - lo) / (hi - lo)).clamp(0, 1).to(device)
    periods = base ** _exponents(r, device)
    keep = 1 - ramp   # 1: keep the frequency (extrapolate), 0: divide by s (interpolate)
    w = (1.0 / (s * periods)) * (1 - keep) + (1.0 / periods) * keep
    m = cfg.rope_attention_factor or (1.0 if s <= 1 else 0.1 * math.log(s) + 1.0)
    return w, m


def tables_from(positions: torch.Tensor, inv_freq: torch.Tensor,
                scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape [T, 2*len(inv_freq)], each frequency repeated for both halves (rotate-half layout),
    times `scale` (the attention factor of yarn / longrope)."""
    angles = positions.float()[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    if scale == 1.0:
        return angles.cos(), angles.sin()
    return angles.cos() * scale, angles.sin() * scale


def rope_tables(positions: torch.Tensor, rotary_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain (unscaled) RoPE tables [T, rotary_dim]."""
    return tables_from(positions, plain_inv_freq(rotary_dim, base, positions.device))


def model_rope_tables(cfg: ModelConfig, positions: torch.Tensor, tokens: int,
                      base: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, rotary_dim] for cfg's RoPE (scaling included) at these absolute positions, the last of
    which is tokens - 1 (passed, not read, so a meta-device forward works)."""
    w, m = rope_inv_freq(cfg, tokens, positions.device, base)
    return tables_from(positions, w, m)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first cos.shape[-1] dims of x [B, H, T, hd]; the rest pass through."""
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    a, b = rot[..., : r // 2], rot[..., r // 2:]
    rotated = rot * cos.to(x.dtype) + torch.cat([-b, a], dim=-1) * sin.to(x.dtype)
    return torch.cat([rotated, rest], dim=-1) if rest.shape[-1] else rotated


def query_temperature(cfg: ModelConfig, positions: torch.Tensor) -> torch.Tensor:
    """[T] fp32 multipliers of the queries at these absolute positions: 1 + beta*ln(1 + floor(p'/F)), with
    p' = p + 1 when attn_temperature_one_based (Llama 4) else p (Ministral 3); 1 until p' reaches F."""
    p = positions.float() + (1.0 if cfg.attn_temperature_one_based else 0.0)
    return 1.0 + cfg.attn_temperature * torch.log1p(torch.floor(p / cfg.attn_temperature_floor))


def alibi_slopes(n_heads: int, device: torch.device | None = None) -> torch.Tensor:
    """The n_heads ALiBi slopes m_h (fp32), geometric from 2^(-8/n) for a power-of-two head count."""
    p = 2 ** math.floor(math.log2(n_heads))
    first = [2.0 ** (-8.0 * h / p) for h in range(1, p + 1)]
    rest = [2.0 ** (-8.0 * (2 * k - 1) / (2 * p)) for k in range(1, n_heads - p + 1)]
    return torch.tensor(first + rest, dtype=torch.float32, device=device)


def alibi_bias(n_heads: int, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """[H, Tq, Tk] fp32: -m_h * (i - j), the penalty for looking back i - j positions."""
    back = (q_pos[:, None] - k_pos[None, :]).float()
    return -alibi_slopes(n_heads, q_pos.device)[:, None, None] * back


def position_params(cfg: ModelConfig) -> int:
    """Learned positions are a context_length x d_model table; the other kinds have no parameters."""
    return cfg.context_length * cfg.d_model if cfg.position == "learned" else 0


def seq_problem(cfg: ModelConfig, seq: int) -> str | None:
    """A learned table has context_length rows: a longer sequence has no position to read."""
    if cfg.position == "learned" and seq > cfg.context_length:
        return f"seq: {seq} exceeds context_length={cfg.context_length} (learned positions have no row for it)"
    return None


def rope_saved_bytes(cfg: ModelConfig, T: int, e: int) -> tuple[int, int]:
    """(shared, per RoPE layer) bytes of rotary tables autograd saves: in fp32 the cos and sin tables
    [T, rotary_dim] are computed once per table set in use (global, and local with rope_local_base) and shared
    by the layers; other dtypes cast them per call (4 tables per RoPE layer; NoPE layers none)."""
    if cfg.position != "rope":
        return 0, 0
    if e != DTYPE_BYTES["fp32"]:
        return 0, rope_layer_bytes(cfg, T, e)
    sets = len(set(cfg.layer_ropes) - {None})
    return 2 * T * cfg.rotary_dim * e * sets, 0


def rope_layer_bytes(cfg: ModelConfig, T: int, e: int) -> int:
    """rope_saved_bytes' per-layer part alone, without walking the layers (each layer asks for it)."""
    return 0 if cfg.position != "rope" or e == DTYPE_BYTES["fp32"] else 4 * T * cfg.rotary_dim * e
