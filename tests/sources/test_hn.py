"""Hacker News through Algolia, against a fake Algolia server replaying recorded answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sources.base import Engagement, SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource, search_keywords
from sources.http import HttpClient
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory


def _source(fake_server: FakeHTTPServer, client: HttpClient) -> HackerNewsSource:
    return HackerNewsSource(client=client, config=SourcesConfig(hn_api_url=fake_server.url + "/api/v1"))


def _json(body: bytes) -> FakeResponse:
    return FakeResponse(body=body, content_type="application/json")


async def test_window_searches_by_date_and_maps_hits(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/v1/search_by_date", _json(payload("hn_search_by_date.json")))
    since = datetime(2026, 11, 19, tzinfo=UTC)
    until = datetime(2026, 11, 21, tzinfo=UTC)

    batch = await _source(fake_server, http_client).search(
        SearchQuery(text="DeepSeek", since=since, until=until, limit=50)
    )

    (request,) = fake_server.received("/api/v1/search_by_date")
    assert request.query == {
        "query": "DeepSeek",
        "tags": "(story,comment)",
        "hitsPerPage": "50",
        "numericFilters": f"created_at_i>{int(since.timestamp())},created_at_i<{int(until.timestamp())}",
    }
    assert request.headers["user-agent"].startswith("LookoutTest/")
    # A hit without objectID and a hit with neither title nor text.
    assert batch.skipped == 2
    story, comment, ask = batch.items

    assert story.id == "hn:46012345"
    assert story.source == "hn"
    assert story.url == "https://api-docs.deepseek.com/news/news261120"  # utm_source dropped
    assert story.title == "DeepSeek-V4: open weights, 1M context"
    assert story.author == "throwaway_ml"
    assert story.published == datetime(2026, 11, 20, 8, 12, 5, tzinfo=UTC)
    assert story.engagement == Engagement(points=845, comments=312)
    assert story.query == "DeepSeek"

    # A comment links to its own HN page and is titled after its story.
    assert comment.id == "hn:46012399"
    assert comment.url == "https://news.ycombinator.com/item?id=46012399"
    assert comment.title == "Re: DeepSeek-V4: open weights, 1M context"
    assert comment.text == (
        "The interesting part is the price: $0.14 per million tokens & it runs on 8×H100.\nAlso the licence is MIT."
    )
    assert comment.engagement == Engagement()

    # Ask HN has no outside link: its HN page is the item; HTML and entities are gone from the text.
    assert ask.url == "https://news.ycombinator.com/item?id=46011111"
    assert ask.title == "Ask HN: DeepSeek on-prem – 中文 tokenization issues?"
    assert "<" not in ask.text and "中文/English" in ask.text
    assert ask.engagement == Engagement(points=97, comments=41)


async def test_without_a_window_it_uses_relevance_search(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/v1/search", _json(payload("hn_search_by_date.json")))

    batch = await _source(fake_server, http_client).search(SearchQuery(text="deepseek", limit=2))

    (request,) = fake_server.received("/api/v1/search")
    assert "numericFilters" not in request.query
    assert request.query["hitsPerPage"] == "2"
    assert not fake_server.received("/api/v1/search_by_date")
    assert len(batch.items) == 2


async def test_long_queries_are_trimmed_and_hits_capped_at_1000(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/v1/search", _json(payload("hn_empty.json")))

    batch = await _source(fake_server, http_client).search(
        SearchQuery(text='what is the latest on "open weights" DeepSeek model pricing in Europe', limit=5000)
    )

    (request,) = fake_server.received("/api/v1/search")
    # Algolia needs every word: stop-words go and at most four terms remain.
    assert request.query["query"] == '"open weights" DeepSeek model pricing'
    assert request.query["hitsPerPage"] == "1000"
    assert batch.items == []
    assert batch.skipped == 0


def test_search_keywords() -> None:
    assert search_keywords("the DeepSeek") == "DeepSeek"
    assert search_keywords("a b c d e f") == "b c d e"
    assert search_keywords("") == ""


async def test_retry_after_is_honoured_then_the_answer_is_used(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET",
        "/api/v1/search",
        [
            FakeResponse(status=429, body="Too Many Requests", headers={"Retry-After": "0"}),
            _json(payload("hn_search_by_date.json")),
        ],
    )

    batch = await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert len(fake_server.received("/api/v1/search")) == 2
    assert len(batch.items) == 3


async def test_persistent_429_is_rate_limited(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    fake_server.route("GET", "/api/v1/search", FakeResponse(status=429, headers={"Retry-After": "0"}))

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, make_http_client(max_retries=1)).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.RATE_LIMITED
    assert raised.value.retry_after == 0
    assert len(fake_server.received("/api/v1/search")) == 2


async def test_server_error_is_reported(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    fake_server.route("GET", "/api/v1/search", FakeResponse(status=503, body="upstream down"))

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, make_http_client(max_retries=0)).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.SERVER
    assert raised.value.status == 503


@pytest.mark.parametrize("body", ['{"message": "index not found"}', "<html>oops</html>", '{"hits": 3}'])
async def test_unexpected_bodies_are_bad_responses(
    fake_server: FakeHTTPServer, http_client: HttpClient, body: str
) -> None:
    fake_server.route("GET", "/api/v1/search", FakeResponse(body=body, content_type="application/json"))

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE


async def test_empty_query_asks_nothing(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    batch = await _source(fake_server, http_client).search(SearchQuery(text="   "))

    assert batch.items == []
    assert fake_server.requests == []
