"""Hostile XML served by a local feed server is refused by name before feedparser reads it; real feeds still read.

The hostile documents point their external entities and DTDs at the same server, which records every request:
none may ever arrive. The named reason is what a digest's "sources that failed" line shows (`failure_reason`).
"""

from __future__ import annotations

import pytest

from sources.arxiv import ArxivSource
from sources.base import SearchQuery, SourceError, SourceErrorKind, failure_reason
from sources.config import SourcesConfig
from sources.feeds import read_feed
from sources.http import HttpClient
from sources.rss import FeedSource
from sources.xmlguard import MAX_XML_DEPTH, MAX_XML_ITEMS, UnsafeXml, guard_xml
from tests.fakes.feeds import many_items_feed
from tests.fakes.hostile_xml import HOSTILE_NAMES, MARKER, hostile_document
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

DEFINES = "this feed defines XML entities, which Lookout does not expand"
EXTERNAL = "this feed declares an external XML entity, which Lookout does not fetch"
EXPECTED = {
    "quadratic": DEFINES,
    "billion_laughs": DEFINES,
    "xxe": EXTERNAL,
    "external_dtd": "this feed uses XML entities it does not define (&send;), which Lookout does not expand",
    "parameter_entity": EXTERNAL,
    "deep_nesting": f"this feed nests elements over {MAX_XML_DEPTH} deep, which Lookout does not read",
    "50mb": "too large",
}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_hostile_feeds_fail_by_name_and_fetch_nothing(
    name: str, fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    document = hostile_document(name, "feed", dtd_url=fake_server.url + "/evil.dtd")
    fake_server.route("GET", "/feed.xml", FakeResponse(body=document, content_type="application/rss+xml"))
    fake_server.route("GET", "/evil.dtd", FakeResponse(body='<!ENTITY send "Zephyr leaked">'))
    source = FeedSource(
        client=http_client, config=SourcesConfig(allow_private_urls=True), feed_url=fake_server.url + "/feed.xml"
    )

    with pytest.raises(SourceError) as raised:
        await source.search(SearchQuery(text="deepseek"))

    error = raised.value
    assert failure_reason(error.kind, str(error), status=error.status) == EXPECTED[name]
    assert error.kind is (SourceErrorKind.TOO_LARGE if name == "50mb" else SourceErrorKind.BAD_RESPONSE)
    assert fake_server.received("/evil.dtd") == []


@pytest.mark.parametrize("name", [name for name in HOSTILE_NAMES if name != "50mb"])
def test_the_guard_refuses_before_expanding(name: str) -> None:
    with pytest.raises(UnsafeXml) as raised:
        guard_xml(hostile_document(name, "opml"), noun="file")
    assert raised.value.reason.startswith("this file ")
    with pytest.raises(UnsafeXml):
        read_feed(hostile_document(name, "feed"), feed_url="https://zephyr.example/feed.xml")


def test_a_malformed_document_never_reaches_the_loose_parser_with_entities() -> None:
    # Garbage before the DOCTYPE stops the strict parser before it reads the declarations: refused all the same.
    broken = b'<?xml version="1.0"?><<<!DOCTYPE r [<!ENTITY a "Zephyr">]><rss><channel><item>&a;</item></channel></rss>'
    unknown_later = b"<rss><channel><item><title>AT&T &xxe;</title></item></channel></rss>"

    with pytest.raises(UnsafeXml, match="declares a DTD or entities"):
        guard_xml(broken)
    with pytest.raises(UnsafeXml, match=r"does not define \(&xxe;\)"):
        guard_xml(unknown_later)


def test_sloppy_real_feeds_still_read() -> None:
    # HTML entities and a bare ampersand (not XML, common in the wild), and the Netscape RSS 0.91 DOCTYPE.
    sloppy = (
        b'<?xml version="1.0"?><!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
        b'"http://my.netscape.com/publish/formats/rss-0.91.dtd"><rss version="0.91"><channel><title>T</title>'
        b"<link>https://example.org/</link><item><title>DeepSeek&nbsp;R2 &eacute;t&eacute;</title>"
        b"<link>https://example.org/1</link><description>A &amp; B</description></item></channel></rss>"
    )
    bare_ampersand = (
        b"<rss><channel><item><title>AT&T and DeepSeek</title><link>https://e.org/2</link></item></channel></rss>"
    )

    (entry,) = read_feed(sloppy, feed_url="https://example.org/feed").entries
    (loose,) = read_feed(bare_ampersand, feed_url="https://example.org/feed").entries

    assert entry.title == "DeepSeek R2 été"  # the no-break space collapsed like any space
    assert entry.text == "A & B"
    assert loose.title.endswith(" and DeepSeek")  # read by the loose parser (which writes "AT&T;")


def test_item_limit() -> None:
    assert len(read_feed(many_items_feed(MAX_XML_ITEMS), feed_url="https://many.example/").entries) == MAX_XML_ITEMS
    with pytest.raises(UnsafeXml, match="has over 10,000 entries"):
        read_feed(many_items_feed(MAX_XML_ITEMS + 1), feed_url="https://many.example/")


async def test_arxiv_answers_are_guarded_too(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/api/query", FakeResponse(body=hostile_document("billion_laughs", "feed")))
    source = ArxivSource(client=http_client, config=SourcesConfig(arxiv_api_url=fake_server.url + "/api/query"))

    with pytest.raises(UnsafeXml) as raised:
        await source.search(SearchQuery(text="deepseek"))

    assert MARKER not in str(raised.value)
    assert str(raised.value) == "this arXiv answer defines XML entities, which Lookout does not expand"
