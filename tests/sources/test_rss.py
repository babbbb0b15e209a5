"""A feed URL as a source: conditional GET, SSRF guard, keyword and time filtering."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.rss import FeedSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.kit import offline_resolver
from tests.sources.conftest import HttpClientFactory

ETAG = 'W/"feed-v1-5f3a"'
LAST_MODIFIED = "Fri, 20 Nov 2026 09:00:00 GMT"


def _feed(fake_server: FakeHTTPServer, client: HttpClient, path: str = "/feed.xml") -> FeedSource:
    return FeedSource(client=client, config=SourcesConfig(allow_private_urls=True), feed_url=fake_server.url + path)


async def test_keyword_filter_and_newest_first(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET", "/feed.xml", FakeResponse(body=payload("rss_tech.xml"), content_type="application/rss+xml")
    )

    batch = await _feed(fake_server, http_client).search(SearchQuery(text="DeepSeek"))

    # The Rust story does not mention DeepSeek; the undated opinion piece comes last.
    assert [item.url for item in batch.items] == [
        "https://example.com/ai/deepseek-v4?id=42",
        "https://example.com/de/ki/deepseek",
        "https://example.cn/news/2026/11/deepseek.html",
        "https://example.com/opinion/why-deepseek-matters",
    ]
    assert batch.skipped == 3
    assert all(item.source == "rss" and item.query == "DeepSeek" for item in batch.items)


async def test_phrase_and_non_latin_keywords(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=payload("rss_tech.xml")))
    source = _feed(fake_server, http_client)

    chinese = await source.search(SearchQuery(text="深度求索"))
    assert [item.url for item in chinese.items] == ["https://example.cn/news/2026/11/deepseek.html"]

    phrase = await source.search(SearchQuery(text='"hugging face" deepseek'))
    assert [item.url for item in phrase.items] == ["https://example.com/ai/deepseek-v4?id=42"]


async def test_since_until_and_limit(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=payload("rss_tech.xml")))

    batch = await _feed(fake_server, http_client).search(
        SearchQuery(
            text="",
            since=datetime(2026, 11, 18, tzinfo=UTC),
            until=datetime(2026, 11, 20, 7, 0, tzinfo=UTC),
            limit=2,
        )
    )

    # In the window: the German (19th) and Chinese (18th) stories, plus the undated one (unknown, kept);
    # the limit keeps the two newest.
    assert [item.url for item in batch.items] == [
        "https://example.com/de/ki/deepseek",
        "https://example.cn/news/2026/11/deepseek.html",
    ]


async def test_second_fetch_is_a_304_with_the_same_items(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    body = payload("rss_tech.xml")

    def answer(request: RecordedRequest) -> FakeResponse:
        if request.headers.get("if-none-match") == ETAG:
            return FakeResponse(status=304, headers={"ETag": ETAG})
        return FakeResponse(
            body=body,
            headers={"ETag": ETAG, "Last-Modified": LAST_MODIFIED, "Content-Type": "application/rss+xml"},
        )

    fake_server.route("GET", "/feed.xml", answer)

    # Each run builds its own feed source on the shared client (which keeps the validators).
    first = await _feed(fake_server, http_client).search(SearchQuery(text="deepseek"))
    second = await _feed(fake_server, http_client).search(SearchQuery(text="deepseek"))

    initial, conditional = fake_server.received("/feed.xml")
    assert "if-none-match" not in initial.headers
    assert conditional.headers["if-none-match"] == ETAG
    assert conditional.headers["if-modified-since"] == LAST_MODIFIED
    assert [i.id for i in second.items] == [i.id for i in first.items]
    assert len(second.items) == 4
    assert http_client.stats.not_modified == 1


async def test_json_feed_and_atom_through_the_source(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET", "/feed.json", FakeResponse(body=payload("jsonfeed_blog.json"), content_type="application/feed+json")
    )
    fake_server.route(
        "GET", "/atom.xml", FakeResponse(body=payload("atom_blog.xml"), content_type="application/atom+xml")
    )

    json_batch = await _feed(fake_server, http_client, "/feed.json").search(SearchQuery(text="deepseek"))
    atom_batch = await _feed(fake_server, http_client, "/atom.xml").search(SearchQuery(text="deepseek"))

    assert [i.url for i in json_batch.items] == [
        "https://notes.example.net/2026/11/20/deepseek-weights",
        "https://notes.example.net/2026/11/19/short",
    ]
    assert [i.url for i in atom_batch.items] == ["https://blog.example.fr/2026/11/deepseek-paris"]


async def test_feed_urls_go_through_the_ssrf_guard(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=payload("rss_tech.xml")))
    guarded = make_http_client(allow_private=False)

    with pytest.raises(SourceError) as raised:
        await _feed(fake_server, guarded).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.BLOCKED
    assert fake_server.requests == []


async def test_dead_and_broken_feeds_are_reported(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    client = make_http_client(max_retries=1)
    fake_server.route("GET", "/down.xml", FakeResponse(status=502, body="Bad Gateway"))
    fake_server.route("GET", "/busy.xml", FakeResponse(status=429, headers={"Retry-After": "0"}))
    fake_server.route("GET", "/page.xml", FakeResponse(body=payload("rss_error_page.xml"), content_type="text/html"))

    kinds = []
    for path in ("/down.xml", "/busy.xml", "/page.xml"):
        with pytest.raises(SourceError) as raised:
            await _feed(fake_server, client, path).search(SearchQuery(text="deepseek"))
        kinds.append(raised.value.kind)

    assert kinds == [SourceErrorKind.SERVER, SourceErrorKind.RATE_LIMITED, SourceErrorKind.BAD_RESPONSE]
    # Asked once even though the client would retry: for a feed the next run is the retry.
    assert len(fake_server.received("/down.xml")) == 1


async def test_empty_feed(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=payload("rss_empty.xml")))

    batch = await _feed(fake_server, http_client).search(SearchQuery(text="anything"))

    assert batch.items == []
    assert batch.skipped == 0


def test_unavailable_reason_for_non_http_urls(http_client: HttpClient) -> None:
    config = SourcesConfig()
    assert (
        FeedSource(client=http_client, config=config, feed_url="https://example.com/feed").unavailable_reason() is None
    )
    reason = FeedSource(client=http_client, config=config, feed_url="file:///etc/passwd").unavailable_reason()
    assert reason is not None and "http" in reason


async def test_one_fetch_answers_every_query_of_a_run(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=payload("rss_tech.xml"), delay=0.2))
    fake_server.route("GET", "/down.xml", FakeResponse(status=500, body="oops", delay=0.2))
    source = _feed(fake_server, http_client)
    broken = _feed(fake_server, http_client, "/down.xml")

    together = await asyncio.gather(*(source.search(SearchQuery(text=word)) for word in ("deepseek", "rust", "")))
    later = await source.search(SearchQuery(text="深度求索"))
    failures = await asyncio.gather(
        *(broken.search(SearchQuery(text=word)) for word in ("deepseek", "rust")), return_exceptions=True
    )
    with pytest.raises(SourceError):
        await broken.search(SearchQuery(text="again"))

    assert len(fake_server.received("/feed.xml")) == 1
    assert len(fake_server.received("/down.xml")) == 1
    assert [len(batch.items) for batch in together] == [4, 1, 5]
    assert [item.query for item in together[1].items] == ["rust"]
    assert [item.url for item in later.items] == ["https://example.cn/news/2026/11/deepseek.html"]
    assert all(isinstance(f, SourceError) and f.kind is SourceErrorKind.SERVER for f in failures)


async def test_a_private_feed_is_refused_before_any_fetch_naming_the_setting(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    guarded = make_http_client(allow_private=False)
    feed = _feed(fake_server, guarded)

    with pytest.raises(SourceError) as raised:
        await feed.check_address()

    assert raised.value.kind is SourceErrorKind.BLOCKED
    assert "127.0.0.1" in str(raised.value) and "ALLOW_PRIVATE_URLS=true" in str(raised.value)
    assert fake_server.requests == []
    # Allowed when the setting is on; a name that does not resolve now is not refused either.
    await _feed(fake_server, make_http_client(allow_private=True)).check_address()
    offline = make_http_client(allow_private=False, resolver=offline_resolver)
    await FeedSource(client=offline, config=SourcesConfig(), feed_url="https://feeds.invalid/rss.xml").check_address()
