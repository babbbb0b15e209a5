"""Semantic Scholar: the paper search request, optional key header, parsing, and its frequent 429s."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.semanticscholar import PAPER_FIELDS, SemanticScholarSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory

API_KEY = "s2-key-Zk29fQpL0xW7"
SEARCH_PATH = "/graph/v1/paper/search"


def s2_config(server: FakeHTTPServer, *, key: str | None = None) -> SourcesConfig:
    return SourcesConfig(
        semanticscholar_api_url=server.url + "/graph/v1",
        semanticscholar_api_key=SecretStr(key) if key else None,
    )


def json_body(payload: Callable[[str], bytes], name: str, **kw: object) -> FakeResponse:
    return FakeResponse(body=payload(name), content_type="application/json", **kw)  # type: ignore[arg-type]


async def test_works_without_a_key_and_sends_no_key_header(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "s2_search.json"))
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    assert source.unavailable_reason() is None
    await source.search(SearchQuery(text="mixture of experts", limit=20))

    (request,) = fake_server.received(SEARCH_PATH)
    assert "x-api-key" not in request.headers
    assert request.query["query"] == "mixture of experts"
    assert request.query["fields"] == PAPER_FIELDS
    assert request.query["limit"] == "20"
    assert "publicationDateOrYear" not in request.query


async def test_key_goes_in_the_x_api_key_header_and_dates_in_the_filter(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "s2_search.json"))
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server, key=API_KEY), min_interval=0.0)

    await source.search(SearchQuery(text="deepseek", since=datetime(2026, 11, 1, tzinfo=UTC), limit=500))

    (request,) = fake_server.received(SEARCH_PATH)
    assert request.headers["x-api-key"] == API_KEY
    assert API_KEY not in str(request.query)
    assert request.query["publicationDateOrYear"] == "2026-11-01:"
    assert request.query["limit"] == "100"  # the API's maximum


async def test_papers_become_items(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "s2_search.json"))
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    batch = await source.search(SearchQuery(text="deepseek"))

    assert batch.skipped == 2  # no title; no paperId
    arxiv_paper, french = batch.items
    assert arxiv_paper.id == "semanticscholar:649def34f8be52c8b66281af98ae884c09aef38b"
    assert arxiv_paper.url == "https://arxiv.org/abs/2611.01234"  # shared with arXiv and OpenAlex
    assert arxiv_paper.text == "We present DeepSeek-V4, a sparse model with 1.2T parameters."
    assert arxiv_paper.author == "Wenfeng Liang, Zhao Chenggang"
    assert arxiv_paper.published == datetime(2026, 11, 18, tzinfo=UTC)
    assert arxiv_paper.engagement.points == 17
    assert french.title == "Évaluation des grands modèles de langue pour le résumé juridique"
    assert french.url == "https://doi.org/10.1145/3711234.3711299"
    assert french.text == "" and french.published is None
    assert french.author == "Zoë Lefèvre"


async def test_no_match_has_no_data_field(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "s2_empty.json"))
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    batch = await source.search(SearchQuery(text="zzzxqv"))

    assert batch.items == [] and batch.skipped == 0


async def test_a_429_is_retried_after_retry_after(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET",
        SEARCH_PATH,
        [
            json_body(payload, "s2_429.json", status=429, headers={"Retry-After": "0"}),
            json_body(payload, "s2_search.json"),
        ],
    )
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    batch = await source.search(SearchQuery(text="deepseek"))

    assert len(batch.items) == 2
    assert len(fake_server.received(SEARCH_PATH)) == 2


async def test_a_final_429_is_rate_limited_and_keeps_the_key_out(
    fake_server: FakeHTTPServer,
    make_http_client: HttpClientFactory,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="sources")
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "s2_429.json", status=429, headers={"Retry-After": "0"}))
    source = SemanticScholarSource(
        client=make_http_client(max_retries=2), config=s2_config(fake_server, key=API_KEY), min_interval=0.0
    )

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert caught.value.status == 429
    assert len(fake_server.received(SEARCH_PATH)) == 3
    assert API_KEY not in str(caught.value) and API_KEY not in caplog.text


async def test_server_error_and_bad_request(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    source = SemanticScholarSource(
        client=make_http_client(max_retries=1), config=s2_config(fake_server), min_interval=0.0
    )
    fake_server.route("GET", SEARCH_PATH, FakeResponse.json({"message": "Internal Server Error"}, status=500))
    with pytest.raises(SourceError) as broken:
        await source.search(SearchQuery(text="deepseek"))
    fake_server.route(
        "GET", SEARCH_PATH, FakeResponse.json({"error": "Unrecognized or unsupported fields"}, status=400)
    )
    with pytest.raises(SourceError) as refused:
        await source.search(SearchQuery(text="deepseek"))

    assert broken.value.kind is SourceErrorKind.SERVER
    assert refused.value.kind is SourceErrorKind.CLIENT and refused.value.status == 400


async def test_non_json_is_a_bad_response(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", SEARCH_PATH, FakeResponse(body="<html>maintenance</html>", content_type="text/html"))
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE


async def test_pages_follow_next_offset_up_to_the_limit(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    first_page = json.loads(payload("s2_search.json"))
    first_page["next"] = 4

    def answer(request: RecordedRequest) -> FakeResponse:
        if request.query.get("offset") == "4":
            return json_body(payload, "s2_empty.json")
        return FakeResponse.json(first_page)

    fake_server.route("GET", SEARCH_PATH, answer)
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.0)

    batch = await source.search(SearchQuery(text="deepseek", limit=150))

    first, second = fake_server.received(SEARCH_PATH)
    assert first.query["limit"] == "100" and "offset" not in first.query
    assert second.query["offset"] == "4" and second.query["limit"] == "100"
    assert len(batch.items) == 2 and batch.skipped == 2


async def test_requests_are_spaced_one_per_interval(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    arrivals: list[float] = []

    def answer(request: RecordedRequest) -> FakeResponse:
        arrivals.append(time.monotonic())
        return json_body(payload, "s2_empty.json")

    fake_server.route("GET", SEARCH_PATH, answer)
    source = SemanticScholarSource(client=http_client, config=s2_config(fake_server), min_interval=0.2)

    await asyncio.gather(*(source.search(SearchQuery(text=f"topic {n}")) for n in range(3)))

    # Causality, not speed: the host gate holds each start until `min_interval` after the previous one.
    assert len(arrivals) == 3
    assert all(later - earlier >= 0.2 * 0.9 for earlier, later in itertools.pairwise(arrivals))
