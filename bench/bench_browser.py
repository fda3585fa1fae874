"""What a user waits for in a real browser (Playwright + Debian's /usr/bin/chromium, as in tests/test_browser.py):

- knob change: from typing a new n_layers into the sidebar to a settled Design page (the script run has ended,
  the metric row shows the new exact total, and the browser has painted twice since);
- first page: a new browser context (a new Streamlit session) opening the app until the Design page is settled
  (metrics, the Plotly chart and the block diagram drawn, no script running, no stale element);
- the peer of the first page (issue #26): a bare Streamlit page with one metric and one Plotly chart
  (bench/bare_app), served the same way, opened in the same rounds until both are drawn.

Goals on an idle machine (issues #15, #26): median knob change < 400 ms, first page < 3 s and within 1.3x the bare
page's. Every app is served as `make serve` serves it (app.serve.streamlit_command).
`python -m bench browser` serves this checkout; BENCH_BROWSER_APPS=dir1,dir2 serves several checkouts side by
side (e.g. an exported older commit) and interleaves their rounds, so machine load hits them equally.
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from app.serve import streamlit_command, wait_for_health
from engine.budget.params import count_params
from engine.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROUNDS = int(os.environ.get("BENCH_BROWSER_ROUNDS", "5"))   # first-page loads per app (interleaved rounds)
CHANGES = 6                                                  # knob changes per round
GOAL_KNOB_S, GOAL_FIRST_S, GOAL_BARE_RATIO = 0.400, 3.0, 1.3
BARE = ROOT / "bench" / "bare_app"
PRESET = "gpt2"

SETTLED = """([total]) => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  const values = [...document.querySelectorAll('[data-testid="stMetricValue"]')].map(e => e.innerText.trim());
  if (!values.includes(total)) return false;
  const diagram = document.querySelector('[data-testid="stGraphVizChart"] svg')
    || [...document.querySelectorAll('[data-testid="stImage"] img')].some(i => i.complete && i.naturalWidth > 0);
  return !!document.querySelector('.js-plotly-plot .main-svg') && diagram;
}"""
BARE_SETTLED = """() => !document.querySelector('[data-testid="stStatusWidget"]')
  && !!document.querySelector('[data-testid="stMetricValue"]') && !!document.querySelector('.js-plotly-plot .main-svg')"""
PAINTED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(app_dir: Path) -> Iterator[str]:
    """app_dir/streamlit_app.py served as `make serve` serves it, on a free loopback port; yields the base URL."""
    port = _free_port()
    cmd = streamlit_command(app_dir / "streamlit_app.py", "127.0.0.1", port)
    env = {**os.environ, "PYTHONPATH": str(app_dir), "EXPLORER_HOME": f"/tmp/bench_browser_{port}"}
    cwd = ROOT if app_dir == BARE else app_dir   # the bare page reads this checkout's .streamlit/config.toml too
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc, timeout_s=60)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _total(n_layers: int) -> str:
    return f"{count_params(PRESETS[PRESET].config.replace(n_layers=n_layers)).total:,}"


def first_page(browser, url: str) -> tuple[float, object]:
    """Seconds from navigation to a settled Design page in a new session; returns the page, still open."""
    page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    start = time.perf_counter()
    page.goto(f"{url}/?preset={PRESET}")
    page.wait_for_function(SETTLED, arg=[_total(PRESETS[PRESET].config.n_layers)], timeout=120_000, polling="raf")
    page.evaluate(PAINTED)
    return time.perf_counter() - start, page


def bare_first_page(browser, url: str) -> float:
    """Seconds from navigation to the bare page's metric and chart drawn, in a new session."""
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_function(BARE_SETTLED, timeout=120_000, polling="raf")
    page.evaluate(PAINTED)
    seconds = time.perf_counter() - start
    context.close()
    return seconds


def knob_changes(page, n: int) -> list[float]:
    """Seconds from entering a new n_layers to the settled page, n times (alternating values)."""
    box = page.locator('[data-testid="stSidebar"] input[aria-label="n_layers"]')
    base, times = PRESETS[PRESET].config.n_layers, []
    for i in range(n):
        layers = base + 1 + i % 2
        box.fill(str(layers))
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(SETTLED, arg=[_total(layers)], timeout=60_000, polling="raf")
        page.evaluate(PAINTED)
        times.append(time.perf_counter() - start)
    return times


def measure(apps: list[Path], rounds: int = ROUNDS, changes: int = CHANGES) -> dict[Path, dict[str, list[float]]]:
    """Interleaved rounds: each round opens every app once (first page) and changes its knob `changes` times."""
    from playwright.sync_api import sync_playwright
    out = {app: {"first": [], "knob": []} for app in apps} | {BARE: {"first": [], "knob": []}}
    with ExitStack() as stack, sync_playwright() as pw:
        urls = {app: stack.enter_context(served(app)) for app in (*apps, BARE)}
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        bare_first_page(browser, urls[BARE])   # warm-up: the servers' first script runs import their modules
        for app in apps:
            _, page = first_page(browser, urls[app])
            page.context.close()
        for r in range(rounds):
            order = [BARE, *apps] if r % 2 == 0 else [*apps[::-1], BARE]
            for app in order:
                if app == BARE:
                    out[BARE]["first"].append(bare_first_page(browser, urls[BARE]))
                    continue
                seconds, page = first_page(browser, urls[app])
                out[app]["first"].append(seconds)
                out[app]["knob"] += knob_changes(page, changes)
                page.context.close()
        browser.close()
    return out


def main() -> None:
    apps = [Path(p).resolve() for p in os.environ.get("BENCH_BROWSER_APPS", str(ROOT)).split(",")]
    load = os.getloadavg()[0]
    print(f"Browser timings, {PRESET}, Chromium headless 1600x1000, {ROUNDS} rounds x {CHANGES} knob changes, "
          f"interleaved; load average {load:.1f} on {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M')}")
    results = measure(apps)
    bare = results.pop(BARE)["first"]
    print(f"  {'bare page (1 metric, 1 chart)':<24} first page median {statistics.median(bare):.2f} s "
          f"(min {min(bare):.2f}, max {max(bare):.2f})")
    for app, t in results.items():
        knob, first = statistics.median(t["knob"]), statistics.median(t["first"])
        ratio = first / statistics.median(bare)
        paired = sorted(a / b for a, b in zip(t["first"], bare))   # same round: the same machine state
        print(f"  {app.name:<24} first page / bare page: {ratio:.2f}x (goal <= {GOAL_BARE_RATIO}: "
              f"{'met' if ratio <= GOAL_BARE_RATIO else 'MISSED'}); round by round {paired[0]:.2f}-{paired[-1]:.2f}x, "
              f"median {statistics.median(paired):.2f}x")
        print(f"  {app.name:<24} knob change median {knob * 1e3:6.0f} ms (min {min(t['knob']) * 1e3:.0f}, "
              f"max {max(t['knob']) * 1e3:.0f}; goal < {GOAL_KNOB_S * 1e3:.0f})   first page median {first:.2f} s "
              f"(min {min(t['first']):.2f}, max {max(t['first']):.2f}; goal < {GOAL_FIRST_S:.0f})")
