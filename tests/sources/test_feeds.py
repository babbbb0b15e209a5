"""Feed parsing (RSS 2.0, Atom, JSON Feed) and the keyword filter."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sources.base import SourceError, SourceErrorKind, item_id
from sources.feeds import html_to_text, matches_keywords, parse_feed, query_terms


def test_rss_items_have_canonical_urls_utc_dates_and_plain_text(payload: Callable[[str], bytes]) -> None:
    batch = parse_feed(payload("rss_tech.xml"), source="rss", query="deepseek", feed_url="https://example.com/feed.xml")

    # No link, no title+text, a javascript: link.
    assert batch.skipped == 3
    by_url = {item.url: item for item in batch.items}
    assert list(by_url) == [
        "https://example.com/ai/deepseek-v4?id=42",
        "https://example.com/de/ki/deepseek",
        "https://example.cn/news/2026/11/deepseek.html",
        "https://example.com/dev/rust-2-roadmap",
        "https://example.com/opinion/why-deepseek-matters",
    ]
    first = by_url["https://example.com/ai/deepseek-v4?id=42"]
    assert first.id == item_id("rss", canonical=first.url)
    assert first.source == "rss"
    assert first.query == "deepseek"
    assert first.author == "Jane Doe"
    assert (first.language, first.language_hint) == (None, "en")  # the channel's <language>: a hint only
    # +0100 on the wire: stored in UTC.
    assert first.published == datetime(2026, 11, 20, 7, 30, tzinfo=UTC)
    assert first.published.utcoffset() is not None
    assert first.text == (
        "The Chinese lab’s new model & its benchmarks beat last month's leader.\nWeights are on Hugging Face."
    )
    assert "trackReader" not in first.text

    german = by_url["https://example.com/de/ki/deepseek"]
    assert german.title == "Künstliche Intelligenz: DeepSeek überholt die Konkurrenz"
    assert german.author == "Jürgen Müller"
    assert "—" in german.text

    chinese = by_url["https://example.cn/news/2026/11/deepseek.html"]
    assert chinese.title == "深度求索发布新模型 DeepSeek-V4"
    assert chinese.text == "杭州的深度求索公司今天发布了新一代大模型。"
    assert chinese.published == datetime(2026, 11, 18, 4, 0, tzinfo=UTC)

    # A relative link resolves against the channel; an unreadable date is unknown, not fatal.
    relative = by_url["https://example.com/opinion/why-deepseek-matters"]
    assert relative.published is None


def test_atom_prefers_full_content_and_joins_authors(payload: Callable[[str], bytes]) -> None:
    batch = parse_feed(payload("atom_blog.xml"), source="rss", query="", feed_url="https://blog.example.fr/atom.xml")

    assert batch.skipped == 1  # the entry with only an enclosure link
    first, second = batch.items
    assert first.url == "https://blog.example.fr/2026/11/deepseek-paris"
    assert first.title == "Café & modèles : DeepSeek à Paris"
    assert first.text == "Une rencontre autour de DeepSeek et des modèles ouverts.\nInférence\nCoûts"
    assert first.author == "Élodie Martin, Kenji Sato"
    assert first.published == datetime(2026, 11, 20, 15, 0, tzinfo=UTC)
    assert (first.language, first.language_hint) == (None, "fr")
    # Only <updated>, relative link.
    assert second.url == "https://blog.example.fr/2026/11/mistral-notes"
    assert second.published == datetime(2026, 11, 18, 7, 0, tzinfo=UTC)
    assert second.text == "Quelques notes rapides."


def test_json_feed_is_parsed_without_feedparser(payload: Callable[[str], bytes]) -> None:
    batch = parse_feed(
        payload("jsonfeed_blog.json"),
        source="rss",
        query="x",
        feed_url="https://notes.example.net/feed.json",
    )

    # No URL, not an object, neither title nor content.
    assert batch.skipped == 3
    urls = [item.url for item in batch.items]
    assert urls == [
        "https://notes.example.net/2026/11/20/deepseek-weights",  # fbclid dropped
        "https://notes.example.net/2026/11/19/short",
        "https://elsewhere.example.org/linked-story",
        "https://notes.example.net/2026/11/16/bad-date",
    ]
    weights, micro, linked, bad_date = batch.items
    assert weights.text == "Downloaded the weights & ran them on two GPUs."
    assert weights.author == "Ana Lima, Björn Berg"
    assert weights.published == datetime(2026, 11, 20, 0, 15, tzinfo=UTC)
    assert (weights.language, weights.language_hint) == (None, "en")
    # A title-less micro post gets a title cut from its text on a word boundary.
    assert micro.title.startswith("A title-less micro post: DeepSeek's API prices")
    assert micro.title.endswith("…")
    assert len(micro.title) <= 121
    assert micro.author == "Ana Lima"
    # A naive timestamp is taken as UTC.
    assert linked.published == datetime(2026, 11, 18, 7, 0, tzinfo=UTC)
    assert bad_date.published is None


def test_empty_feed_gives_an_empty_batch(payload: Callable[[str], bytes]) -> None:
    batch = parse_feed(payload("rss_empty.xml"), source="rss", query="", feed_url="https://quiet.example.org/")
    assert batch.items == []
    assert batch.skipped == 0


@pytest.mark.parametrize(
    "content",
    [b"", b"<html><body>not a feed</body></html>", b"{not json", b'{"version": "1.0", "items": []}'],
)
def test_a_document_that_is_not_a_feed_is_a_bad_response(content: bytes) -> None:
    with pytest.raises(SourceError) as raised:
        parse_feed(content, source="rss", query="", feed_url="https://example.com/feed")
    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE


def test_error_page_payload_is_a_bad_response(payload: Callable[[str], bytes]) -> None:
    with pytest.raises(SourceError) as raised:
        parse_feed(payload("rss_error_page.xml"), source="rss", query="", feed_url="https://example.com/feed")
    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE


def test_html_to_text_drops_tags_scripts_and_decodes_entities() -> None:
    html = "<div>Hello&nbsp;<b>world</b> &amp; <style>p{}</style>friends<br>next&#x2F;line</div>"
    assert html_to_text(html) == "Hello world & friends\nnext/line"
    assert html_to_text("  plain   text ") == "plain text"


@pytest.mark.parametrize(
    ("text", "query", "expected"),
    [
        ("DeepSeek releases V4", "deepseek v4", True),
        ("DeepSeek releases V4", "DEEPSEEK", True),
        ("DeepSeek releases a model", "deepseek v4", False),
        ("Open weights from DeepSeek", '"open weights" deepseek', True),
        ("weights are open at DeepSeek", '"open weights" deepseek', False),
        ("She said it works", "ai", False),  # a word, not a substring of "said"
        ("New AI models from OpenAI's lab", "model openai", True),  # plural and possessive endings
        ("杭州的深度求索公司今天发布了新一代大模型", "深度求索 模型", True),
        ("杭州的公司今天发布了新一代大模型", "深度求索", False),
        ("Künstliche Intelligenz überholt", "KÜNSTLICHE", True),
        ("Ｄｅｅｐｓｅｅｋ full-width", "deepseek", True),
        ("She said it works", "ＡＩ", False),  # a full-width query word is still a word
        ("anything at all", "", True),
        ("Modern C++ and Rust", "+rust c++", True),
        ("Modern C and Rust", "c++", False),
        ("news about the DeepSeek launch", "the latest news about DeepSeek", True),  # stop-words dropped
    ],
)
def test_matches_keywords(text: str, query: str, expected: bool) -> None:
    assert matches_keywords(text, query) is expected


def test_query_terms_keep_phrases_and_drop_stop_words() -> None:
    assert query_terms('the "open weights" of DeepSeek, please!') == ["open weights", "DeepSeek", "please"]
    # Only stop-words: keep them rather than match everything.
    assert query_terms("the who") == ["the", "who"]
