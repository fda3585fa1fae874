"""What a user waits for in a real browser (Playwright + Debian's /usr/bin/chromium, as in tests/test_browser.py):

- knob change: from typing a new n_layers into the sidebar to a settled Design page (the script run has ended,
  the metric row shows the new exact total, and the browser has painted twice since);
- first page: a new browser context (a new Streamlit session) opening the app until the Design page is settled
  (metrics, the Plotly chart and the block diagram drawn, no script running, no stale element).

Goals on an idle machine (issue #15): median knob change < 400 ms, first page < 3 s.
`python -m bench browser` serves this checkout; BENCH_BROWSER_APPS=dir1,dir2 serves several checkouts side by
side (e.g. an exported older commit) and interleaves their rounds, so machine load hits them equally.
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from engine.budget.params import count_params
from engine.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROUNDS, CHANGES = 5, 6            # first-page loads per app; knob changes per round
GOAL_KNOB_S, GOAL_FIRST_S = 0.400, 3.0
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
PAINTED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(app_dir: Path) -> Iterator[str]:
    """`streamlit run` of app_dir/streamlit_app.py on a free loopback port; yields the base URL."""
    port = _free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_dir / "streamlit_app.py"), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    env = {**os.environ, "PYTHONPATH": str(app_dir), "EXPLORER_HOME": f"/tmp/bench_browser_{port}"}
    proc = subprocess.Popen(cmd, cwd=app_dir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.25)
        else:
            raise RuntimeError(f"streamlit did not start for {app_dir}")
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
    out = {app: {"first": [], "knob": []} for app in apps}
    with ExitStack() as stack, sync_playwright() as pw:
        urls = {app: stack.enter_context(served(app)) for app in apps}
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for app, url in urls.items():   # warm-up: the server's first script run imports torch and the pages
            _, page = first_page(browser, url)
            page.context.close()
        for r in range(rounds):
            for app in (apps if r % 2 == 0 else apps[::-1]):
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
    for app, t in measure(apps).items():
        knob, first = statistics.median(t["knob"]), statistics.median(t["first"])
        print(f"  {app.name:<24} knob change median {knob * 1e3:6.0f} ms (min {min(t['knob']) * 1e3:.0f}, "
              f"max {max(t['knob']) * 1e3:.0f}; goal < {GOAL_KNOB_S * 1e3:.0f})   first page median {first:.2f} s "
              f"(min {min(t['first']):.2f}, max {max(t['first']):.2f}; goal < {GOAL_FIRST_S:.0f})")
