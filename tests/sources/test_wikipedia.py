"""Wikipedia: the MediaWiki search request, the language edition, snippet cleaning, API errors, pacing."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.wikipedia import WikipediaSource, article_url, wikipedia_edition
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory


def wiki_config(server: FakeHTTPServer) -> SourcesConfig:
    return SourcesConfig(wikipedia_api_url=server.url + "/{lang}/w/api.php")


def json_body(payload: Callable[[str], bytes], name: str) -> FakeResponse:
    return FakeResponse(body=payload(name), headers={"Content-Type": "application/json; charset=utf-8"})


async def test_search_request_has_the_mediawiki_parameters(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/en/w/api.php", json_body(payload, "wikipedia_en.json"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    await source.search(SearchQuery(text="DeepSeek", limit=7))

    (request,) = fake_server.received("/en/w/api.php")
    assert request.query["action"] == "query"
    assert request.query["list"] == "search"
    assert request.query["format"] == "json"
    assert request.query["srsearch"] == "DeepSeek"
    assert request.query["srlimit"] == "7"
    assert "snippet" in request.query["srprop"]
    assert request.headers["user-agent"].startswith("LookoutTest/")


async def test_hits_become_items_with_plain_snippets(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/en/w/api.php", json_body(payload, "wikipedia_en.json"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    batch = await source.search(SearchQuery(text="DeepSeek"))

    assert batch.skipped == 2  # no page id; a timestamp that is not one
    first, second = batch.items
    assert first.id == "wikipedia:en:76563472"
    assert first.url == "https://en.wikipedia.org/wiki/DeepSeek"
    assert first.title == "DeepSeek"
    assert first.text.startswith("DeepSeek (Chinese: 深度求索; pinyin: Shēndù Qiúsuǒ) is a Chinese")
    assert "<span" not in first.text and "&amp;" not in first.text and "& open-weight" in first.text
    assert first.published == datetime(2026, 11, 20, 8, 12, 44, tzinfo=UTC)
    assert first.language == "en"
    assert first.query == "DeepSeek"
    assert second.url == "https://en.wikipedia.org/wiki/Liang_Wenfeng"


async def test_query_language_picks_the_edition(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/zh/w/api.php", json_body(payload, "wikipedia_zh.json"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    batch = await source.search(SearchQuery(text="深度求索", language="zh-Hans"))

    (request,) = fake_server.received("/zh/w/api.php")
    assert request.query["srsearch"] == "深度求索"
    (item,) = batch.items
    assert item.id == "wikipedia:zh:8123456"
    assert item.language == "zh"
    assert item.url.startswith("https://zh.wikipedia.org/wiki/")
    assert item.text == "深度求索（DeepSeek）是一家位于杭州的人工智能公司"


async def test_no_hits_is_an_empty_batch(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/en/w/api.php", json_body(payload, "wikipedia_empty.json"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    batch = await source.search(SearchQuery(text="zzzxqv"))

    assert batch.items == [] and batch.skipped == 0


async def test_api_error_object_with_http_200_is_an_error(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/en/w/api.php", json_body(payload, "wikipedia_error.json"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="DeepSeek"))

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert "maxlag" in str(caught.value)


async def test_rate_limit_and_server_error(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    fake_server.route(
        "GET", "/en/w/api.php", FakeResponse(status=429, body="Too many requests", headers={"Retry-After": "90"})
    )
    fake_server.route("GET", "/de/w/api.php", FakeResponse(status=502, body="<html>Bad Gateway</html>"))
    source = WikipediaSource(
        client=make_http_client(max_retry_wait=1.0, max_retries=1), config=wiki_config(fake_server)
    )

    with pytest.raises(SourceError) as limited:
        await source.search(SearchQuery(text="DeepSeek"))
    with pytest.raises(SourceError) as broken:
        await source.search(SearchQuery(text="DeepSeek", language="de"))

    assert limited.value.kind is SourceErrorKind.RATE_LIMITED and limited.value.retry_after == 90
    assert broken.value.kind is SourceErrorKind.SERVER
    assert len(fake_server.received("/de/w/api.php")) == 2  # retried once


async def test_garbage_body_is_a_bad_response(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/en/w/api.php", FakeResponse(body="<!DOCTYPE html><p>Wikimedia error</p>"))
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="DeepSeek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE


async def test_requests_to_wikipedia_are_sequential(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    arrivals: list[float] = []
    delay = 0.15

    def answer(request: RecordedRequest) -> FakeResponse:
        arrivals.append(time.monotonic())
        return FakeResponse(body=payload("wikipedia_empty.json"), content_type="application/json", delay=delay)

    fake_server.route("GET", "/en/w/api.php", answer)
    source = WikipediaSource(client=http_client, config=wiki_config(fake_server))

    await asyncio.gather(*(source.search(SearchQuery(text=f"topic {n}")) for n in range(3)))

    # Causality, not speed: a request can only arrive after the previous answer (sent `delay` s later).
    assert len(arrivals) == 3
    assert all(later - earlier >= delay * 0.9 for earlier, later in itertools.pairwise(arrivals))


@pytest.mark.parametrize(
    ("language", "edition"),
    [
        (None, "en"),
        ("en", "en"),
        ("zh-Hans", "zh"),
        ("pt_BR", "pt"),
        ("simple", "simple"),
        ("evil.example.com/", "en"),
        ("", "en"),
    ],
)
def test_edition_from_language(language: str | None, edition: str) -> None:
    assert wikipedia_edition(language) == edition


def test_article_url_escapes_titles() -> None:
    assert (
        article_url("en", "C++ (programming language)")
        == "https://en.wikipedia.org/wiki/C%2B%2B_(programming_language)"
    )
    assert article_url("zh", "深度求索") == "https://zh.wikipedia.org/wiki/%E6%B7%B1%E5%BA%A6%E6%B1%82%E7%B4%A2"


async def test_a_silent_server_times_out(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET",
        "/en/w/api.php",
        FakeResponse(body=payload("wikipedia_empty.json"), content_type="application/json", delay=1.0),
    )
    source = WikipediaSource(client=make_http_client(timeout=0.1, max_retries=0), config=wiki_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="DeepSeek"))

    assert caught.value.kind is SourceErrorKind.TIMEOUT
