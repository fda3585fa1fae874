"""Figures as PNG at projector size, rendered offline by kaleido (>= 1.0) driving the local Chromium.

kaleido 1.x no longer bundles a browser: it starts the Chrome/Chromium it finds (Debian's /usr/bin/chromium here,
or $BROWSER_PATH) and needs no network. Where either is missing, png_unavailable() says why and the page offers
the offline HTML, whose camera button saves SVG.
"""
from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import threading

import plotly.graph_objects as go

PROJECTOR = (1920, 1080)          # full-HD projector
PROJECTOR_FONT = 26
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
# kaleido 1.5 can call into its page before the page's own script has run (seen on a loaded machine: "ReferenceError:
# kaleido_scopes is not defined"); every render opens a new page, so a second try gets a fresh one
RACE, RENDER_TRIES = "kaleido_scopes is not defined", 3
# Seen on a loaded machine: Chromium exited mid-render and kaleido waited on its pipe for ever (no timeout of its
# own covers that). A render that has not finished by then is abandoned and tried again with a fresh browser.
RENDER_DEADLINE_S = 180.0


def png_unavailable() -> str | None:
    """Why PNG export cannot work here (None when kaleido and a Chromium are present)."""
    if importlib.util.find_spec("kaleido") is None:
        return "PNG export needs the kaleido package (pip install kaleido)"
    if not (os.environ.get("BROWSER_PATH") or any(shutil.which(b) for b in _BROWSERS)):
        return "PNG export needs Chromium or Chrome installed (kaleido renders with it)"
    return None


def for_projector(fig: go.Figure, width: int = PROJECTOR[0], height: int = PROJECTOR[1]) -> go.Figure:
    """A copy sized for a projector: the given pixels, fonts large enough for the back row."""
    out = go.Figure(copy.deepcopy(fig))
    out.update_layout(width=width, height=height, font=dict(size=PROJECTOR_FONT),
                      title_font=dict(size=PROJECTOR_FONT + 6), title_subtitle_font_size=PROJECTOR_FONT - 4,
                      margin=dict(l=40, r=40, t=170 if fig.layout.title.subtitle.text else 110, b=40))
    out.update_annotations(font_size=PROJECTOR_FONT)            # subplot titles
    out.update_traces(textfont_size=PROJECTOR_FONT - 4, selector=dict(type="scatter"))
    out.update_xaxes(automargin=True)   # the margins grow to hold the larger tick labels and titles, never clip them
    out.update_yaxes(automargin=True)
    return out


def figure_png(fig: go.Figure, width: int = PROJECTOR[0], height: int = PROJECTOR[1]) -> bytes:
    """PNG bytes of `fig` at width x height pixels (projector styling); RuntimeError naming what is missing."""
    if (why := png_unavailable()) is not None:
        raise RuntimeError(why)
    sized = for_projector(fig, width, height)
    for _ in range(RENDER_TRIES - 1):
        try:
            return _render(sized, width, height)
        except Exception as e:   # noqa: BLE001 -- only kaleido's page race and a hung browser are tried again
            if RACE not in str(e) and not isinstance(e, TimeoutError):
                raise
    return _render(sized, width, height)


def _render(fig: go.Figure, width: int, height: int) -> bytes:
    """kaleido's render on a daemon thread, waited for up to RENDER_DEADLINE_S (a hung one is left behind)."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["png"] = fig.to_image(format="png", width=width, height=height, scale=1)
        except BaseException as e:   # noqa: BLE001 -- handed to the caller's thread
            out["error"] = e

    worker = threading.Thread(target=run, name="png-render", daemon=True)
    worker.start()
    worker.join(RENDER_DEADLINE_S)
    if worker.is_alive():
        raise TimeoutError(f"the PNG render did not finish in {RENDER_DEADLINE_S:.0f} s (Chromium stopped answering)")
    if "error" in out:
        raise out["error"]
    return out["png"]
