"""The markdown subset's block rules that every platform's renderer relies on."""

from __future__ import annotations

from bots.markdown import ListItem, Paragraph, Text, parse_markdown
from bots.terminal.render import markdown_to_plain


def test_a_line_at_the_margin_after_a_list_is_a_paragraph_of_its_own() -> None:
    """Replies end a list with a hint line ("/alert off <n> removes one."): it must not be glued to the last item."""
    blocks = parse_markdown("**Alerts** (2):\n- #1 Apple\n- #2 DeepSeek\n`/alert off <n>` removes one.")
    assert [type(block) for block in blocks] == [Paragraph, ListItem, ListItem, Paragraph]
    last_item = blocks[2]
    assert isinstance(last_item, ListItem)
    assert [node.text for node in last_item.inlines if isinstance(node, Text)] == ["#2 DeepSeek"]
    assert markdown_to_plain("- #2 DeepSeek\nUse /alerts.").splitlines()[-1] == "Use /alerts."


def test_an_indented_line_still_continues_its_item() -> None:
    blocks = parse_markdown("- a long item\n  that wraps\n- next")
    first = blocks[0]
    assert isinstance(first, ListItem)
    assert "".join(node.text for node in first.inlines if isinstance(node, Text)) == "a long item that wraps"
    assert len(blocks) == 2
