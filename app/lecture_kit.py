"""Small building blocks of the Lecture page's sections: the section chart (on the stage in present mode), number
and list inputs, a metric row, and a short tuple format."""
from __future__ import annotations

import zlib

import plotly.graph_objects as go
import streamlit as st

from app import export, present
from app.widgets import fitted_columns


def chart(fig: go.Figure, key: str) -> None:
    """In present mode a section's first chart goes to the stage (right under its title, see present.stage), so
    the back row sees it without scrolling; the inputs and numbers that produced it follow below."""
    with present.stage():
        export.chart(present.scale(fig), key=f"lecture_{key}", name=f"lecture-{key}", download=not present.is_present())


def vector(where, label: str, default: str, key: str) -> tuple[float, ...]:
    """Comma-separated numbers from a text box; a bad entry raises ValueError naming the field."""
    raw = where.text_input(label, default, key=key, help="Numbers separated by commas, e.g. 1, 2, 3, 4")
    try:
        return tuple(float(p) for p in raw.split(","))
    except ValueError:
        raise ValueError(f"{label}: {raw!r} is not a comma-separated list of numbers") from None


def numbers(cols, *specs: tuple) -> list:
    """Number inputs side by side, one per column: (label, min, max, default, key[, step])."""
    return [col.number_input(label, lo, hi, default, key=key, step=step[0] if step else None)
            for col, (label, lo, hi, default, key, *step) in zip(cols, specs)]


def metrics(*items: tuple) -> None:
    """A row of metrics, one per column: (label, value[, help[, delta]]); a delta is a neutral note, no colour.
    Values show whole, in present mode's large type too (widgets.fitted_columns); the row's key comes from its
    labels, so two rows of one section never share it."""
    key = f"lecture_metrics_{zlib.crc32(repr([i[0] for i in items]).encode()):08x}"
    for col, (label, value, *more) in zip(fitted_columns([[str(i[1]) for i in items]], key), items):
        delta = more[1] if len(more) > 1 else None
        col.metric(label, value, help=more[0] if more else None, delta=delta, delta_color="off",
                   delta_arrow=delta_arrow(delta))


def delta_arrow(delta: str | None) -> str:
    """An arrow only on a signed change ("+33% vs dense" up, "-0.4%" down); a share or a note ("8.33% of MHA",
    "finite") gets none: Streamlit would draw an up arrow on any text without a minus sign."""
    return "auto" if delta and delta.lstrip()[:1] in ("+", "-") else "off"


def nums(values: list[float], digits: int = 4) -> str:
    return "(" + ", ".join(f"{v:.{digits}f}" for v in values) + ")"
