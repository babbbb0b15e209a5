"""Slack rendering: markdown to mrkdwn, Block Kit messages within Slack's limits, the fallback text."""

from __future__ import annotations

import re

from hypothesis import given, settings

from bots.markdown import utf16_len
from bots.slack.render import (
    BLOCKS_PER_MESSAGE,
    HEADER_TEXT_LIMIT,
    SECTION_TEXT_LIMIT,
    SlackBlock,
    fallback_text,
    header_text,
    markdown_to_blocks,
    markdown_to_mrkdwn,
)
from tests.bots.samples import MARKDOWN, digest_markdown
from tests.bots.telegram_html import squeeze

_LINK = re.compile(r"<(?:https?://|mailto:)[^<>|\s]+(?:\|[^<>]*)?>")


def assert_slack_escaped(mrkdwn: str) -> None:
    """Outside <url|text> links, no bare <, > and no & that does not start one of Slack's three escapes."""
    outside = _LINK.sub("", mrkdwn)
    assert "<" not in outside and ">" not in re.sub(r"(^|\n)>", r"\1", outside), outside
    assert not re.search(r"&(?!amp;|lt;|gt;)", outside), outside


def visible_words(mrkdwn: str) -> str:
    """What a reader sees, without whitespace: link labels (a link too long to keep is shown as its label),
    no code fences or quote markers (a code block or quoted line cut across sections gets them again)."""
    labelled = re.sub(r"<[^<>|]*\|([^<>]*)>", r"\1", mrkdwn)
    unquoted = re.sub(r"(?m)^>", "", re.sub(r"<([^<>]*)>", r"\1", labelled))
    return squeeze(unquoted.replace("```", "").replace("──────────", ""))


def sections(message: list[SlackBlock]) -> list[str]:
    return [block["text"]["text"] for block in message if block["type"] == "section"]


# --- mrkdwn --------------------------------------------------------------------------------------------------


def test_script_tags_and_ampersands_are_escaped() -> None:
    mrkdwn = markdown_to_mrkdwn("Tom & Jerry <script>alert('x')</script> <!channel> a>b")

    assert mrkdwn == "Tom &amp; Jerry &lt;script&gt;alert('x')&lt;/script&gt; &lt;!channel&gt; a&gt;b"
    assert_slack_escaped(mrkdwn)


def test_emphasis_becomes_slack_markers() -> None:
    assert markdown_to_mrkdwn("**bold _italic_** and *it* and ~~gone~~") == "*bold _italic_* and _it_ and ~gone~"
    assert markdown_to_mrkdwn("***both***") == "*_both_*"


def test_emphasis_over_several_lines_is_marked_on_each_line() -> None:
    # Slack does not carry *bold* across a line break, so each line gets its own markers.
    assert markdown_to_mrkdwn("**first line\nsecond line**") == "*first line*\n*second line*"


def test_links_use_slack_angle_syntax_with_escaped_targets() -> None:
    mrkdwn = markdown_to_mrkdwn("See [the <report> & notes](https://ex.com/a?x=1&y=2|3) or https://y.org/p.")

    assert mrkdwn == "See <https://ex.com/a?x=1&amp;y=2%7C3|the &lt;report&gt; &amp; notes> or <https://y.org/p>."
    assert_slack_escaped(mrkdwn)


def test_unsafe_link_targets_stay_plain_text() -> None:
    assert markdown_to_mrkdwn("[click](javascript:alert(1)) [data](data:text/html,x)") == "click data"


def test_code_is_escaped_and_code_blocks_lose_their_language() -> None:
    mrkdwn = markdown_to_mrkdwn("Run `a < b && c`\n\n```python\nif a < b:\n    pass\n```")

    assert mrkdwn == "Run `a &lt; b &amp;&amp; c`\n\n```\nif a &lt; b:\n    pass\n```"


def test_headings_lists_and_quotes() -> None:
    mrkdwn = markdown_to_mrkdwn("## Heading **x**\n\n- one\n  - nested\n\n1. first\n\n> quoted\n>\n> more")

    assert mrkdwn == "*Heading x*\n\n• one\n    • nested\n\n1. first\n\n> quoted\n>\n> more"


def test_citation_markers_link_to_their_sources() -> None:
    mrkdwn = markdown_to_mrkdwn("Prices fell [2].\n\n[2] [Two](https://b.org/2?a&b) — rss")

    assert "fell <https://b.org/2?a&amp;b|[2]>." in mrkdwn
    assert "[2] <https://b.org/2?a&amp;b|Two> — rss" in mrkdwn


# --- Block Kit -----------------------------------------------------------------------------------------------


def test_a_short_reply_is_one_section_under_a_header() -> None:
    messages = markdown_to_blocks("Hello **there** & welcome", header="Lookout: DeepSeek")

    assert messages == [
        [
            {"type": "header", "text": {"type": "plain_text", "text": "Lookout: DeepSeek", "emoji": True}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "Hello *there* &amp; welcome"}},
        ]
    ]


def test_a_long_header_is_shortened_on_one_line_with_an_ellipsis() -> None:
    title = header_text("Weekly digest:\n" + "DeepSeek and friends " * 20)

    assert len(title) <= HEADER_TEXT_LIMIT
    assert title.endswith("…") and "\n" not in title
    assert title.startswith("Weekly digest: DeepSeek and friends")
    assert header_text("x" * 400) == "x" * 149 + "…"


def test_rules_become_dividers_between_sections_only() -> None:
    messages = markdown_to_blocks("---\n\nfirst\n\n---\n\n***\n\nsecond\n\n---")

    assert [block["type"] for block in messages[0]] == ["section", "divider", "section"]


def test_a_long_digest_becomes_several_messages_within_slack_limits() -> None:
    digest = "\n\n---\n\n".join(digest_markdown(8) for _ in range(20))  # about 100 sections and dividers

    messages = markdown_to_blocks(digest, header="DeepSeek digest")

    assert len(messages) >= 2
    assert all(1 <= len(message) <= BLOCKS_PER_MESSAGE for message in messages)
    assert messages[0][0]["type"] == "header"
    assert all(block["type"] != "header" for message in messages[1:] for block in message)
    texts = [text for message in messages for text in sections(message)]
    assert all(0 < len(text) <= SECTION_TEXT_LIMIT for text in texts)
    for text in texts:
        assert_slack_escaped(text)
    expected = markdown_to_mrkdwn(digest).replace("──────────", "")
    assert squeeze("".join(texts)) == squeeze(expected)


def test_one_huge_paragraph_is_cut_between_words_never_inside_a_link() -> None:
    paragraph = " ".join(f"word [link {n} & more](https://x.org/{n}?a=1&b=2)" for n in range(400))

    texts = sections(markdown_to_blocks(paragraph)[0])

    assert len(texts) >= 2
    for text in texts:
        assert len(text) <= SECTION_TEXT_LIMIT
        assert text.count("<") == text.count(">")
        assert_slack_escaped(text)
    assert squeeze("".join(texts)) == squeeze(markdown_to_mrkdwn(paragraph))


def test_a_huge_code_block_is_fenced_again_in_every_section() -> None:
    code = "\n".join(f"value_{n} = compute({n}) < limit & mask" for n in range(300))

    texts = sections(markdown_to_blocks(f"```\n{code}\n```")[0])

    assert len(texts) >= 4
    assert all(text.startswith("```\n") and text.endswith("\n```") and len(text) <= 3000 for text in texts)
    assert "\n".join(text[4:-4] for text in texts) == code.replace("&", "&amp;").replace("<", "&lt;")


def test_a_word_longer_than_a_section_is_cut_hard() -> None:
    texts = sections(markdown_to_blocks("x" * 7000)[0])

    assert [len(text) for text in texts] == [3000, 3000, 1000]


def test_nothing_to_show_gives_no_messages() -> None:
    assert markdown_to_blocks("  \n\n---\n") == []
    assert markdown_to_blocks("", header="Only a title") == [
        [{"type": "header", "text": {"type": "plain_text", "text": "Only a title", "emoji": True}}]
    ]


def test_fallback_text_is_cut_at_a_boundary_outside_links() -> None:
    paragraph = " ".join(f"[link {n}](https://x.org/{n}) & text" for n in range(50))

    text = fallback_text(paragraph, limit=500)

    assert len(text) <= 500
    assert text.endswith("…")
    assert text.count("<") == text.count(">")
    assert_slack_escaped(text[:-1])
    assert fallback_text("short & sweet") == "short &amp; sweet"


def test_fallback_text_closes_a_cut_code_block() -> None:
    text = fallback_text("```\n" + "line\n" * 200 + "```", limit=300)

    assert len(text) <= 300
    assert text.endswith("\n```…")


# --- properties ----------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(markdown=MARKDOWN)
def test_any_markdown_gives_blocks_within_limits_losing_no_text(markdown: str) -> None:
    messages = markdown_to_blocks(markdown * 40)  # long enough to need several sections

    texts = [text for message in messages for text in sections(message)]
    assert all(len(message) <= BLOCKS_PER_MESSAGE for message in messages)
    assert all(len(text.strip()) > 0 and utf16_len(text) <= SECTION_TEXT_LIMIT for text in texts)
    expected = markdown_to_mrkdwn(markdown * 40).replace("──────────", "")
    assert visible_words("\n".join(texts)) == visible_words(expected)
    for text in texts:
        assert_slack_escaped(text)


def test_a_long_quoted_line_stays_quoted_in_every_section() -> None:
    texts = sections(markdown_to_blocks("> " + "quoted words " * 600)[0])

    assert len(texts) >= 2
    assert all(text.startswith("> ") and len(text) <= SECTION_TEXT_LIMIT for text in texts)


def test_a_link_longer_than_a_section_is_kept_as_its_text() -> None:
    url = "https://tracker.example.com/click?" + "&".join(f"p{n}=v" for n in range(800))

    texts = sections(markdown_to_blocks(f"Go to {url} now")[0])

    assert all(len(text) <= SECTION_TEXT_LIMIT for text in texts)
    for text in texts:
        assert_slack_escaped(text)
    assert squeeze("".join(texts)) == squeeze(f"Go to {url} now".replace("&", "&amp;"))


def test_sections_of_emoji_are_measured_in_utf16_units_to_stay_safe() -> None:
    texts = sections(markdown_to_blocks("🚀" * 2000)[0])

    assert [len(text) for text in texts] == [1500, 500]
