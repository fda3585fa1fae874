"""A page's own settings in the URL, so a copied link reopens the same view (`/budgets?batch=8&optimizer=sgd`).

Each setting is a widget bound to a URL key (app.state.VIEW_PARAMS: the config parser skips them, the URL sync
keeps them). `restore` runs before the widget is drawn: on the widget's first draw in a session it takes the
value from the URL (a bad value is a warning naming the key and what is allowed, and the default applies);
`publish` runs after it and writes the value back, leaving the key out while it holds the default, so links stay
short. Widgets get their value only through st.session_state (no `value=`/`index=`), as Streamlit requires.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import streamlit as st

from app.present import set_view_param
from app.text import md
from engine.config import parse_bool


@dataclass(frozen=True)
class Setting:
    """A URL key and how its text maps to a widget value (parse raises ValueError saying what is allowed)."""
    param: str
    parse: Callable[[str], Any]
    encode: Callable[[Any], str] = str


def restore(key: str, setting: Setting, default: Any) -> None:
    """Give widget `key` its value before it is drawn: the URL's on its first draw, else keep what it holds while
    that is still allowed (a new config can shrink a range: seq beyond a shorter context falls back to default)."""
    if key in st.session_state:
        try:
            setting.parse(setting.encode(st.session_state[key]))
            return
        except ValueError:
            st.session_state[key] = default
            return
    st.session_state[key] = default
    raw = st.query_params.get(setting.param)
    if raw is None:
        return
    try:
        st.session_state[key] = setting.parse(raw)
    except ValueError as e:
        shown = setting.encode(default) if default not in (None, "", []) else "none"
        warn(f"URL: {setting.param}: {e} — ignored and removed from the URL; the default ({shown}) applies.")
        set_view_param(setting.param, None)


NOTICES = "_url_notices"


def notice_area() -> None:
    """The entry point calls this above every page: a problem a page finds in the link while drawing a widget that
    sits in a collapsed expander or a narrow column shows here, at the top, where it is seen."""
    st.session_state[NOTICES] = st.container()


def warn(text: str) -> None:
    """A warning about the link, in the notice area at the top of the page (in place where there is none)."""
    (st.session_state.get(NOTICES) or st).warning(md(text), icon=":material/link_off:")


def publish(key: str, setting: Setting, default: Any, always: bool = False) -> None:
    """Write widget `key`'s value into the URL (no key while it holds the default, unless `always`: a default
    that depends on this machine's load would read differently in another session)."""
    value = st.session_state.get(key, default)
    set_view_param(setting.param, None if value == default and not always else setting.encode(value))


def bound(key: str, setting: Setting, default: Any, draw: Callable[..., Any], *args: Any, always: bool = False,
          **kwargs: Any) -> Any:
    """restore, draw the widget (`draw(*args, key=key, **kwargs)`), publish; returns the widget's value."""
    restore(key, setting, default)
    value = draw(*args, key=key, **kwargs)
    publish(key, setting, default, always)
    return value


# ---- parsers ------------------------------------------------------------------------------------------------
def integer(param: str, lo: int, hi: int) -> Setting:
    def parse(raw: str) -> int:
        try:
            value = int(raw.replace(",", "").replace("_", "").strip())
        except ValueError:
            raise ValueError(f"{raw!r} is not an integer from {lo:,} to {hi:,}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value:,} is not an integer from {lo:,} to {hi:,}")
        return value
    return Setting(param, parse)


def number(param: str, lo: float, hi: float) -> Setting:
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not a number from {lo:g} to {hi:g}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value:g} is not a number from {lo:g} to {hi:g}")
        return value
    return Setting(param, parse, short_float)


def short_float(value: float) -> str:
    """`%g` (3e-05, 60) where that is exact, else the shortest exact form (a typed lr of 0.0001234567 comes back)."""
    text = f"{value:g}"
    return text if float(text) == value else repr(float(value))


def choice(param: str, options: Sequence[Any]) -> Setting:
    """One of `options`, written as str(option) (ints come back as ints)."""
    by_text = {str(o): o for o in options}

    def parse(raw: str) -> Any:
        if raw not in by_text:
            raise ValueError(f"{raw!r} is not one of {', '.join(by_text)}")
        return by_text[raw]
    return Setting(param, parse)


def choices(param: str, options: Sequence[Any]) -> Setting:
    """Several of `options`, comma-separated in the URL (`batches=1,4`); may be empty."""
    one = choice(param, options).parse

    def parse(raw: str) -> list:
        return [] if raw.strip() == "none" else [one(part.strip()) for part in raw.split(",") if part.strip()]
    return Setting(param, parse, lambda values: ",".join(str(v) for v in values) or "none")


def flag(param: str) -> Setting:
    def parse(raw: str) -> bool:
        value = parse_bool(raw)
        if value is None:
            raise ValueError(f"{raw!r} is not 1 or 0 (true/false)")
        return value
    return Setting(param, parse, lambda v: "1" if v else "0")


def interval(param: str, lo: float, hi: float) -> Setting:
    """A slider's (low, high) pair as `low,high`, inside [lo, hi] with low < high."""
    def parse(raw: str) -> tuple[float, float]:
        parts = raw.split(",")
        try:
            a, b = (float(p) for p in parts)
        except ValueError:
            raise ValueError(f"{raw!r} is not two numbers low,high from {lo:g} to {hi:g}") from None
        if not lo <= a < b <= hi:
            raise ValueError(f"{raw!r} is not two numbers low,high from {lo:g} to {hi:g} with low < high")
        return a, b
    return Setting(param, parse, lambda v: f"{v[0]:g},{v[1]:g}")
