"""Telegram rendering: markdown to Telegram HTML, escaping, UTF-16-aware splitting, plain fallback, captions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots.markdown import utf16_len
from bots.telegram.render import (
    caption,
    caption_html,
    html_to_plain_text,
    markdown_to_telegram_html,
    split_telegram_html,
    split_telegram_text,
)
from tests.bots.samples import MARKDOWN, digest_markdown
from tests.bots.telegram_html import TelegramHTMLError, parse_like_telegram, squeeze, utf16_units

# --- rendering -----------------------------------------------------------------------------------------------


def test_script_tags_and_ampersands_are_escaped_not_rendered() -> None:
    markdown = "Tom & Jerry <script>alert('x')</script> a<b && c>d"

    rendered = markdown_to_telegram_html(markdown)

    assert rendered == "Tom &amp; Jerry &lt;script&gt;alert('x')&lt;/script&gt; a&lt;b &amp;&amp; c&gt;d"
    assert parse_like_telegram(rendered) == markdown


def test_the_strict_reader_refuses_what_telegram_refuses() -> None:
    # The checker the other tests rely on must actually catch the mistakes it stands for.
    for bad in ("a < b", "Tom & Jerry", "<b>open", "<script>x</script>", "<b><i>x</b></i>", "<pre><b>x</b></pre>"):
        with pytest.raises(TelegramHTMLError):
            parse_like_telegram(bad)


def test_a_link_keeps_its_address_escaped_in_the_attribute() -> None:
    rendered = markdown_to_telegram_html('See [the <b>report</b> & notes](https://ex.com/a?x=1&y="2") now')

    assert rendered == (
        'See <a href="https://ex.com/a?x=1&amp;y=&quot;2&quot;">the &lt;b&gt;report&lt;/b&gt; &amp; notes</a> now'
    )
    assert parse_like_telegram(rendered) == "See the <b>report</b> & notes now"


@pytest.mark.parametrize(
    "target",
    ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", "/relative", "http:/x"],
)
def test_unsafe_or_hostless_link_targets_stay_plain_text(target: str) -> None:
    rendered = markdown_to_telegram_html(f"[click me]({target}) please")

    assert "<a" not in rendered
    assert parse_like_telegram(rendered) == "click me please"


def test_bare_urls_become_links_without_trailing_punctuation() -> None:
    rendered = markdown_to_telegram_html(
        "Read https://en.wikipedia.org/wiki/Foo_(bar)?a=1&b=2. Then (https://x.org/y)."
    )

    assert '<a href="https://en.wikipedia.org/wiki/Foo_(bar)?a=1&amp;b=2">' in rendered
    assert '<a href="https://x.org/y">https://x.org/y</a>).' in rendered
    parse_like_telegram(rendered)


def test_code_blocks_and_inline_code_escape_their_content_and_are_not_parsed() -> None:
    markdown = "Use `a < b && **not bold**` here.\n\n```python\nif a < b and c & d:\n    print('<x>')  # **x**\n```"

    rendered = markdown_to_telegram_html(markdown)

    assert "<code>a &lt; b &amp;&amp; **not bold**</code>" in rendered
    assert (
        "<pre><code class=\"language-python\">if a &lt; b and c &amp; d:\n    print('&lt;x&gt;')  # **x**</code></pre>"
        in rendered
    )
    parse_like_telegram(rendered)


def test_nested_bold_and_italic() -> None:
    assert markdown_to_telegram_html("**bold _and italic_ here**") == "<b>bold <i>and italic</i> here</b>"
    assert markdown_to_telegram_html("*italic **and bold***") == "<i>italic <b>and bold</b></i>"
    assert markdown_to_telegram_html("***both***") == "<b><i>both</i></b>"
    assert markdown_to_telegram_html("~~gone~~ and __strong__") == "<s>gone</s> and <b>strong</b>"


def test_underscores_and_stars_that_are_not_emphasis_stay_literal() -> None:
    markdown = "snake_case_name and 2 * 3 * 4 and file_*.py and **unclosed"

    assert markdown_to_telegram_html(markdown) == markdown


def test_headings_lists_quotes_and_rules() -> None:
    markdown = (
        "# Title **x**\n\n- one\n  * nested\n- two\n\n1. first\n2) second\n\n> quoted *line*\n> more\n\n---\n\nend"
    )

    rendered = markdown_to_telegram_html(markdown)

    assert rendered == (
        "<b>Title x</b>\n\n• one\n  • nested\n• two\n\n1. first\n2. second\n\n"
        "<blockquote>quoted <i>line</i>\nmore</blockquote>\n\n──────────\n\nend"
    )
    parse_like_telegram(rendered)


def test_a_list_right_under_its_lead_in_stays_attached() -> None:
    rendered = markdown_to_telegram_html("**Disputed:**\n- one\n- two\n\n- after a blank line")

    assert rendered == "<b>Disputed:</b>\n• one\n• two\n\n• after a blank line"


def test_citation_markers_link_to_the_numbered_sources() -> None:
    markdown = (
        "Prices fell [2] and rose [1, 2] or [9].\n\n"
        "**Sources**\n[1] [One](https://a.org/1) — hn\n[2] [Two](https://b.org/2) — rss"
    )

    rendered = markdown_to_telegram_html(markdown)

    assert 'fell <a href="https://b.org/2">[2]</a>' in rendered
    assert '[<a href="https://a.org/1">1</a>, <a href="https://b.org/2">2</a>]' in rendered
    assert "or [9]." in rendered  # no such source: left as written
    assert '[1] <a href="https://a.org/1">One</a> — hn' in rendered  # the list's own numbers are not links


def test_a_whole_digest_renders_to_html_telegram_accepts() -> None:
    rendered = markdown_to_telegram_html(digest_markdown(12))

    visible = parse_like_telegram(rendered)
    assert "&lt;SWE-bench Verified&gt;" in rendered
    assert "Benchmarks on <SWE-bench Verified> put" in visible
    assert "**" not in visible


# --- splitting -----------------------------------------------------------------------------------------------


def _assert_valid_parts(parts: list[str], *, limit: int) -> list[str]:
    visible = [parse_like_telegram(part) for part in parts]
    for text in visible:
        assert 0 < utf16_units(text) <= limit
    return visible


def test_a_long_digest_is_split_at_paragraphs_with_tags_balanced_in_every_part() -> None:
    rendered = markdown_to_telegram_html(digest_markdown(30))
    assert utf16_units(parse_like_telegram(rendered)) > 4500

    parts = split_telegram_html(rendered)

    assert len(parts) >= 2
    visible = _assert_valid_parts(parts, limit=4096)
    assert squeeze("".join(visible)) == squeeze(parse_like_telegram(rendered))
    whole = parse_like_telegram(rendered)
    for text in visible[:-1]:  # every cut falls where the original has a line break
        assert whole[whole.index(text) + len(text)] == "\n"


def test_a_paragraph_break_is_preferred_to_a_later_line_break() -> None:
    first = "\n".join(["line of the first paragraph " * 3] * 30)  # about 2,500 characters
    second = "\n".join(["line of the second paragraph " * 3] * 30)

    parts = split_telegram_html(f"{first}\n\n{second}")

    assert parts == [first, second]


def test_a_space_right_at_the_limit_is_the_cut() -> None:
    assert split_telegram_html("aaaa bbbb cc", limit=4) == ["aaaa", "bbbb", "cc"]
    assert caption("word " * 300, limit=20) == "word word word word…"


def test_short_html_comes_back_as_one_part_unchanged() -> None:
    rendered = markdown_to_telegram_html("**Hi** & <welcome>")

    assert split_telegram_html(rendered) == [rendered]
    assert split_telegram_html("  \n\n ") == []


def test_emoji_count_two_units_and_are_never_cut_in_half() -> None:
    text = "😀" * 2100  # 4,200 UTF-16 units, 2,100 characters

    parts = split_telegram_html(text)

    assert parts == ["😀" * 2048, "😀" * 52]
    assert [utf16_len(part) for part in parts] == [4096, 104]


def test_an_emoji_sequence_is_not_parted_from_its_joiners_and_modifiers() -> None:
    family = "👨\u200d👩\u200d👧"  # 8 UTF-16 units
    thumbs = "👍🏽"  # 4 UTF-16 units

    for unit in (family, thumbs):
        parts = split_telegram_html(unit * 10, limit=len(unit.encode("utf-16-le")) // 2 * 3 + 3)

        assert "".join(parts) == unit * 10
        assert all(part == unit * (len(part) // len(unit)) for part in parts)


def test_cjk_text_without_spaces_is_cut_by_characters() -> None:
    text = "中文测试，没有空格。" * 500  # 5,000 BMP characters

    parts = split_telegram_html(text)

    assert [len(part) for part in parts] == [4096, 904]
    assert "".join(parts) == text


def test_a_single_word_longer_than_the_limit_is_cut_hard() -> None:
    parts = split_telegram_html("start " + "x" * 10_000 + " end")

    _assert_valid_parts(parts, limit=4096)
    assert parts[0] == "start"
    assert squeeze("".join(parts)) == "start" + "x" * 10_000 + "end"


def test_tags_open_at_a_cut_are_closed_and_reopened() -> None:
    rendered = markdown_to_telegram_html("**" + "word " * 30 + "end** [" + "link " * 10 + "](https://x.org/?a&b)")

    parts = split_telegram_html(rendered, limit=40)

    _assert_valid_parts(parts, limit=40)
    assert all(part.startswith("<b>") and part.endswith("</b>") for part in parts[:3])
    link_parts = [part for part in parts if "link" in part]
    assert all('<a href="https://x.org/?a&amp;b">' in part for part in link_parts)


def test_code_blocks_are_cut_at_lines_and_keep_their_indentation() -> None:
    code = "\n".join(f"    line_{n} = {n} < {n + 1}" for n in range(40))
    rendered = markdown_to_telegram_html(f"```python\n{code}\n```")

    parts = split_telegram_html(rendered, limit=200)

    visible = _assert_valid_parts(parts, limit=200)
    assert all(part.startswith('<pre><code class="language-python">') for part in parts)
    assert "\n".join(visible) == code


def test_entities_are_never_cut_and_the_raw_html_stays_bounded() -> None:
    parts = split_telegram_html("&amp;" * 4000)  # 4,000 visible characters but 20,000 of HTML

    assert len(parts) == 2
    assert all(re.fullmatch(r"(&amp;)+", part) for part in parts)
    assert all(len(part) <= 4 * 4096 for part in parts)


def test_a_link_with_a_very_long_target_does_not_multiply_the_parts() -> None:
    url = "https://tracker.example.com/click?" + "&".join(f"p{n}=v" for n in range(5000))
    rendered = markdown_to_telegram_html(f"[{'label words ' * 40}]({url})")

    parts = split_telegram_html(rendered, limit=300)

    _assert_valid_parts(parts, limit=300)
    assert len(parts) == 2
    assert all(part.startswith(f'<a href="{url.replace("&", "&amp;")}">') for part in parts)


def test_html_with_unclosed_or_stray_tags_is_split_into_well_formed_parts() -> None:
    parts = split_telegram_html("<b>bold <i>both</b> after</i> " + "word " * 30 + "</u>", limit=50)

    _assert_valid_parts(parts, limit=50)
    assert parts[0].startswith("<b>bold <i>both</i></b>")


def test_plain_text_fallback_keeps_the_words_and_the_link_addresses() -> None:
    rendered = markdown_to_telegram_html("**Tom & Jerry** <tag> see [docs](https://x.org/?a=1&b=2) or https://y.org")

    plain = html_to_plain_text(rendered)

    assert plain == "Tom & Jerry <tag> see docs (https://x.org/?a=1&b=2) or https://y.org"


def test_plain_text_fallback_survives_broken_html() -> None:
    assert html_to_plain_text("<b>bold <i>x</b> 1 < 2 &amp; &unknown; </i></u>") == "bold x 1 < 2 & &unknown; "


def test_plain_text_is_split_without_parse_mode_escaping() -> None:
    parts = split_telegram_text("a < b & c " * 1000)

    assert all(utf16_len(part) <= 4096 for part in parts)
    assert parts[0].startswith("a < b & c")


def test_caption_is_cut_at_a_word_with_an_ellipsis_counting_utf16() -> None:
    text = "🚀 launch " * 200  # 2,000 characters, 2,200 UTF-16 units

    short = caption(text)

    assert utf16_len(short) <= 1024
    assert short.endswith("…")
    assert text.startswith(short[:-1] + " ")  # cut between words
    assert caption("  short caption  ") == "short caption"


def test_caption_html_stays_well_formed() -> None:
    short = caption_html(markdown_to_telegram_html("**" + "bold words " * 200 + "end**"), limit=100)

    assert short.endswith("</b>…")
    assert utf16_units(parse_like_telegram(short)) <= 100


def test_a_limit_below_two_units_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_telegram_html("x", limit=1)


# --- properties ----------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(markdown=MARKDOWN, limit=st.integers(min_value=2, max_value=120))
def test_any_markdown_splits_into_well_formed_parts_within_the_limit_losing_no_text(markdown: str, limit: int) -> None:
    rendered = markdown_to_telegram_html(markdown)
    whole = parse_like_telegram(rendered)

    parts = split_telegram_html(rendered, limit=limit)

    visible = [parse_like_telegram(part) for part in parts]
    assert all(utf16_units(text) <= limit for text in visible)
    assert squeeze("".join(visible)) == squeeze(whole)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300), limit=st.integers(min_value=2, max_value=50))
def test_any_plain_text_splits_within_the_limit_losing_no_text(text: str, limit: int) -> None:
    parts = split_telegram_text(text, limit=limit)

    assert all(0 < utf16_len(part) <= limit for part in parts)
    assert squeeze("".join(parts)) == squeeze(text)
