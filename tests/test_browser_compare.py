"""Real browser, Compare at 1280x800 with four pins: every bar label of the half-width Memory and FLOPs charts is
drawn at the chart font, level (upright bars ~40 px wide shrank them to ~6 px or turned them on end), and the log
memory axis reads in whole binary units (it read TiB down to 0.0001)."""
import re

import pytest

from app.charts import FONT
from tests.browser_pages import quiet, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LABELS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => ({
  title: plot.querySelector('.gtitle') && plot.querySelector('.gtitle').textContent,
  labels: [...plot.querySelectorAll('.bars .bartext')].map(t => [t.textContent, parseFloat(getComputedStyle(t).fontSize),
                                                               t.getAttribute('transform') || '']),
  ticks: [...plot.querySelectorAll('.xaxislayer-above text')].map(t => t.textContent)}))"""


def shrunk(transform: str) -> float:
    """The factor plotly scaled a label by to fit its bar (`scale(0.26)` in its transform), 1 when not scaled."""
    found = re.search(r"scale\(([\d.]+)", transform)
    return float(found.group(1)) if found else 1.0


def test_bar_labels_are_full_size_and_level_and_the_memory_axis_in_binary_units(served_app, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{served_app}/compare?preset=deepseek-v3&pins=deepseek-v3,llama-3-8b,gpt2,microgpt")
    settle(page)
    page.wait_for_selector(".js-plotly-plot .bars .bartext")
    quiet(page)                  # charts and images drawn, page unchanged at two looks
    charts = {c["title"]: c for c in page.evaluate(LABELS_JS)}
    page.close()
    for title in ("Memory", "FLOPs per token"):
        labels = charts[title]["labels"]
        assert len(labels) == 4 * {"Memory": 3, "FLOPs per token": 2}[title], labels
        assert all(size * shrunk(transform) >= FONT["size"] - 0.5 and "rotate" not in transform
                   for _, size, transform in labels), labels
    assert charts["Memory"]["ticks"] and all(t.split()[-1] in ("B", "KiB", "MiB", "GiB", "TiB")
                                             and float(t.split()[0]) >= 1 for t in charts["Memory"]["ticks"]), \
        charts["Memory"]["ticks"]
