"""app.text.md: a message escaped for Streamlit's Markdown renders as exactly its own text."""
import re

import pytest
from markdown_it import MarkdownIt

from app.text import md

MD = MarkdownIt("commonmark").enable(["strikethrough", "table"])


def shown(markdown: str) -> str:
    """The visible text of rendered Markdown (tags dropped, entities decoded)."""
    import html
    return html.unescape(re.sub(r"<[^>]+>", "", MD.render(markdown))).strip()


@pytest.mark.parametrize("message", [
    "head_dim: rope needs an even rotary width (head_dim*rope_fraction), got 64*0.3 = 19.2",
    "name: 'a*b*c' is not allowed",
    "vocab_size: '__init__' is not an integer >= 1",
    "name: ~~gone~~ [link](http://x) <b>bold</b> # not a heading",
    "n_kv_heads: 5 does not divide n_heads=32",
    "x: '1, two' is not a comma-separated list of numbers",
    "# heading? | a | b |",
    "back\\slash and `code*span` stay",
])
def test_plain_renders_as_typed(message):
    want = message.replace("`", "")   # a `code` span shows its text as typed, in code style
    # the only change md makes to the visible text: an invisible zero-width space that keeps URLs from linking
    assert shown(md(message)).replace("\u200b", "") == want


def test_plain_leaves_identifiers_and_colons_readable():
    assert md("n_kv_heads: 5 does not divide n_heads=32") == "n_kv_heads: 5 does not divide n_heads=32"
    assert md(":smile:") == "\\:smile:"   # the shortcode cannot start: no emoji
