"""Real browser, Design page at 1280x800 (the sidebar open) for the two widest presets: the component table, once
opened, shows every row without scrolling (its fixed ten-row height hid norms, output head and total), and the block diagram's
text stays readable (squeezed into the side column, DeepSeek's MLA block drew its 12-point text at ~6 px)."""
import pytest

from tests.browser_pages import quiet, settle

pytestmark = [pytest.mark.browser, pytest.mark.slow]
GRAPHVIZ_TEXT_PX = 16     # Graphviz's 12-point labels at the SVG's natural size (1 pt = 4/3 px)
READABLE_PX = 10

TABLE_JS = """() => { const grid = document.querySelector('[data-testid="stDataFrame"]');
  const scroller = grid.querySelector('.dvn-scroller');
  return {hidden: scroller.scrollHeight - scroller.clientHeight,
          rows: [...grid.querySelectorAll('[role=row]')].map(r => r.firstElementChild.innerText.trim())}; }"""
DIAGRAM_JS = """() => [...document.querySelectorAll('[data-testid="stImage"] img')]
  .filter(i => i.src.startsWith('data:image/svg')).map(i => [i.naturalWidth, i.clientWidth])"""


@pytest.mark.parametrize("preset", ["deepseek-v3", "gpt-oss-20b"])
def test_component_table_and_diagram_show_whole(served_app, browser, preset):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{served_app}/?preset={preset}")
    settle(page)
    page.get_by_text("Every component: exact count and share").click()
    page.wait_for_selector('[data-testid="stDataFrame"] .dvn-scroller')
    page.wait_for_selector('[data-testid="stImage"] img')
    quiet(page)                  # charts and images drawn, page unchanged at two looks
    table = page.evaluate(TABLE_JS)
    (natural, shown), = page.evaluate(DIAGRAM_JS)
    page.close()
    assert table["hidden"] <= 1, table
    assert {"norms", "output head", "total"} <= set(table["rows"]), table["rows"]
    assert GRAPHVIZ_TEXT_PX * shown / natural >= READABLE_PX, (natural, shown)
