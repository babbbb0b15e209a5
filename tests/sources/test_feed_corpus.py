"""Cases from feedparser's own test corpus (github.com/kurtmckee/feedparser, tests/, BSD-2-Clause), each read the way
a monitor reads a feed and shown the way a digest shows it.

Each case is one small file of that corpus, named by its path there, with a `<link>` added where the original has
none (Lookout needs one to cite an entry) and the feedparser result it pins. `bench/feeds_corpus.py` runs the whole
corpus; these are the cases it found Lookout getting wrong.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.slack.render import markdown_to_mrkdwn
from bots.telegram.render import markdown_to_telegram_html
from bots.terminal.render import markdown_to_plain
from research.digest import extractive_digest, render_digest_markdown
from research.rank import rank
from sources.base import SourceError
from sources.feeds import parse_feed, read_feed

NOW = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)


def _read(document: str) -> list[tuple[str, str]]:
    batch = parse_feed(document.encode(), source="rss", query="", feed_url="https://feeds.example/feed.xml")
    return [(item.title, item.text) for item in batch.items]


# ---- plain-text titles and summaries are shown as written ---------------------------------------------------------

TEXT_CONSTRUCTS = [
    pytest.param(
        # wellformed/atom10/entry_title_text_plain_brackets.xml: entries[0]['title'] == 'History of the <blink> tag'
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="https://site.example/1"/>'
        '<title type="text">History of the &lt;blink&gt; tag</title></entry></feed>',
        ("History of the <blink> tag", ""),
        id="atom10 type=text title naming a tag",
    ),
    pytest.param(
        # wellformed/atom/entry_title_base64.xml: entries[0]['title'] == 'Example <b>Atom</b>' (Atom 0.3: plain text)
        '<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><link rel="alternate" href="https://site.example/1"/>'
        '<title mode="base64">RXhhbXBsZSA8Yj5BdG9tPC9iPg==</title></entry></feed>',
        ("Example <b>Atom</b>", ""),
        id="atom03 base64 plain title",
    ),
    pytest.param(
        # The same rule for a summary of type text, and entities in plain text stay what they spell.
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="https://site.example/1"/>'
        '<title type="text">C++ &lt;vector&gt; &amp;amp; friends</title>'
        '<summary type="text">Use &lt;br&gt; to break a line; AT&amp;T agrees.</summary></entry></feed>',
        ("C++ <vector> &amp; friends", "Use <br> to break a line; AT&T agrees."),
        id="atom10 type=text summary",
    ),
    pytest.param(
        # RSS declares no type: words in brackets that are no HTML tag stay (feedparser calls this one plain text).
        '<rss version="2.0"><channel><item><link>https://site.example/1</link>'
        "<title>Why x &lt; y in C++ &lt;vector&gt; &amp; &lt;T&gt;</title></item></channel></rss>",
        ("Why x < y in C++ <vector> & <T>", ""),
        id="rss title with words in brackets",
    ),
    pytest.param(
        # ...while escaped HTML in an RSS title (wellformed/rss/item_title_*, common in the wild) is still markup,
        # even where feedparser guesses "plain" (an <img> with no end tag), and a double escape is read once more.
        '<rss version="2.0"><channel><item><link>https://site.example/1</link>'
        "<title>&lt;b&gt;Bold&lt;/b&gt; news</title><description>&lt;p&gt;A &lt;i&gt;story&lt;/i&gt;.&lt;/p&gt;"
        "</description></item><item><link>https://site.example/2</link>"
        "<title>&lt;img src=x onerror=alert(1)&gt;Hi &lt;script&gt;alert(1)&lt;/script&gt;there</title></item>"
        "<item><link>https://site.example/3</link><title>Tom &amp;amp; Jerry &lt;3</title></item>"
        "</channel></rss>",
        ("Bold news", "A story."),
        id="rss html titles",
    ),
    pytest.param(
        # HTML and XHTML constructs keep being read as HTML (wellformed/atom10/entry_title_inline_markup.xml).
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="https://site.example/1"/>'
        '<title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">Example <b>Atom</b></div></title>'
        '<content type="html">&lt;p&gt;One&lt;/p&gt;&lt;p&gt;Two &amp;amp; three&lt;/p&gt;</content></entry></feed>',
        ("Example Atom", "One\nTwo & three"),
        id="atom10 xhtml title html content",
    ),
]


@pytest.mark.parametrize(("document", "expected"), TEXT_CONSTRUCTS)
def test_text_constructs_read_as_their_type_says(document: str, expected: tuple[str, str]) -> None:
    assert _read(document)[0] == expected


def test_escaped_html_in_rss_titles_never_reaches_a_message() -> None:
    document = str(TEXT_CONSTRUCTS[4].values[0])

    assert [title for title, _ in _read(document)] == ["Bold news", "Hi there", "Tom & Jerry <3"]


def test_a_json_feed_title_and_summary_are_plain_text() -> None:
    # JSON Feed 1.1: "title … is plain text", "summary … is a plain text sentence or two".
    document = (
        '{"version": "https://jsonfeed.org/version/1.1", "title": "F", "items": [{"id": "1", '
        '"url": "https://site.example/1", "title": "Templates: <typename T> explained", '
        '"summary": "Why <T> beats void*"}]}'
    )

    assert _read(document) == [("Templates: <typename T> explained", "Why <T> beats void*")]


def test_a_plain_text_title_is_shown_as_written_and_never_as_formatting() -> None:
    document = TEXT_CONSTRUCTS[0].values[0]
    batch = parse_feed(str(document).encode(), source="rss", query="", feed_url="https://feeds.example/feed.xml")
    digest = extractive_digest(rank(batch.items, topic="tag", now=NOW), topic="tag", now=NOW)
    markdown = render_digest_markdown(digest)

    html = markdown_to_telegram_html(markdown)
    assert "History of the &lt;blink&gt; tag" in html and "<blink>" not in html
    assert "History of the &lt;blink&gt; tag" in markdown_to_mrkdwn(markdown)
    assert "History of the <blink> tag" in markdown_to_plain(markdown)


# ---- an entry's date: published, else updated, else created ---------------------------------------------------------

DATED = [
    pytest.param(
        # wellformed/atom/entry_created.xml: entries[0]['created'] == 'Thu, 01 Jan 2004 19:48:21 GMT'
        '<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><link rel="alternate" href="https://site.example/1"/>'
        "<title>T</title><created>Thu, 01 Jan 2004 19:48:21 GMT</created></entry></feed>",
        datetime(2004, 1, 1, 19, 48, 21, tzinfo=UTC),
        id="atom03 created",
    ),
    pytest.param(
        # wellformed/rss/item_dcterms_created.xml: entries[0]['created'] == '2003-12-31T10:14:55Z'
        '<rss version="2.0" xmlns:dcterms="http://purl.org/dc/terms/"><channel><item>'
        "<link>https://site.example/1</link><title>T</title><dcterms:created>2003-12-31T10:14:55Z</dcterms:created>"
        "</item></channel></rss>",
        datetime(2003, 12, 31, 10, 14, 55, tzinfo=UTC),
        id="rss dcterms created",
    ),
    pytest.param(
        # Published wins over created when both are there (wellformed/atom/entry_issued.xml gives "published").
        '<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><link rel="alternate" href="https://site.example/1"/>'
        "<title>T</title><created>2003-12-31T10:14:55Z</created><issued>2004-01-01T19:48:21Z</issued></entry></feed>",
        datetime(2004, 1, 1, 19, 48, 21, tzinfo=UTC),
        id="atom03 issued over created",
    ),
]


@pytest.mark.parametrize(("document", "expected"), DATED)
def test_an_entry_dated_only_by_its_creation_keeps_that_date(document: str, expected: datetime) -> None:
    # Undated entries sort last and pass every time window: a date the feed gives must not be lost.
    batch = parse_feed(document.encode(), source="rss", query="", feed_url="https://feeds.example/feed.xml")

    assert [item.published for item in batch.items] == [expected]


# ---- the corpus itself, where a mirror of feedparser's repository is at hand ------------------------------------

MIRROR = Path(os.environ.get("FEEDPARSER_MIRROR", "/work/.mirror/kurtmckee+feedparser/repo"))


def _corpus(folder: str) -> dict[str, bytes]:
    """Every file of feedparser's tests/<folder>, by name; the test is skipped where no mirror is at hand."""
    if not (MIRROR / "HEAD").exists() and not (MIRROR / ".git").exists():
        pytest.skip(f"no feedparser mirror at {MIRROR} (set FEEDPARSER_MIRROR)")
    git = ["git", "-C", str(MIRROR)]
    names = subprocess.run(
        [*git, "ls-tree", "--name-only", "HEAD", f"tests/{folder}/"], check=True, capture_output=True, text=True
    ).stdout.split()
    return {
        name: subprocess.run([*git, "show", f"HEAD:{name}"], check=True, capture_output=True).stdout for name in names
    }


def test_every_file_of_the_encoding_corpus_is_read() -> None:
    files = _corpus("encoding")
    failures = {}
    for name, content in files.items():
        try:
            read_feed(content, feed_url="https://feeds.example/feed.xml", content_type="text/xml")
        except SourceError as error:
            failures[name] = str(error)

    assert len(files) > 50
    assert failures == {}
