"""OpenAlex: key required, the /works request, abstracts rebuilt, malformed works, key never leaked."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.openalex import OpenAlexSource, rebuild_abstract
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory

API_KEY = "oa-key-7f3c9e21b4d5a6"


def openalex_config(server: FakeHTTPServer, *, key: str | None = API_KEY) -> SourcesConfig:
    return SourcesConfig(openalex_api_url=server.url, openalex_api_key=SecretStr(key) if key else None)


def json_body(payload: Callable[[str], bytes], name: str, *, status: int = 200) -> FakeResponse:
    return FakeResponse(status=status, body=payload(name), content_type="application/json")


async def test_without_a_key_it_is_off(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server, key=None))

    assert "OPENALEX_API_KEY" in (source.unavailable_reason() or "")
    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))
    assert caught.value.kind is SourceErrorKind.UNAVAILABLE
    assert fake_server.requests == []


async def test_works_request_parameters(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/works", json_body(payload, "openalex_works.json"))
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    await source.search(
        SearchQuery(
            text="mixture of experts",
            since=datetime(2026, 11, 1, 6, tzinfo=UTC),
            until=datetime(2026, 11, 21, tzinfo=UTC),
            limit=30,
        )
    )

    (request,) = fake_server.received("/works")
    assert request.query["search"] == "mixture of experts"
    assert request.query["filter"] == "from_publication_date:2026-11-01,to_publication_date:2026-11-21"
    assert request.query["sort"] == "publication_date:desc"
    assert request.query["per-page"] == "30"
    assert request.query["api_key"] == API_KEY


async def test_works_become_items(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/works", json_body(payload, "openalex_works.json"))
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek"))

    assert batch.skipped == 2  # cited_by_count "many"; no id
    paper, chinese = batch.items
    assert paper.id == "openalex:W4404011223"
    assert paper.url == "https://arxiv.org/abs/2611.01234"  # arXiv DOI mapped to the abstract page
    assert paper.title.startswith("DeepSeek-V4: Scaling Sparse")
    assert paper.text == "We present DeepSeek-V4, a sparse model with a 1.2T parameters."
    assert paper.author == "Wenfeng Liang, Zhao Chenggang, Zoë Müller"
    assert paper.published == datetime(2026, 11, 18, tzinfo=UTC)
    assert paper.engagement.points == 17
    assert paper.language == "en"
    assert chinese.title == "大语言模型在中文法律文本中的应用评估"
    assert chinese.url == "https://www.cnki.net/kcms/detail/LAW.2026.11.003.html"  # utm_* removed
    assert chinese.text == "" and chinese.author is None
    assert chinese.engagement.points == 0


async def test_no_results(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/works", json_body(payload, "openalex_empty.json"))
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    batch = await source.search(SearchQuery(text="zzzxqv"))

    assert batch.items == [] and batch.skipped == 0


async def test_rejected_key_never_appears_in_the_error_or_logs(
    fake_server: FakeHTTPServer,
    http_client: HttpClient,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="sources")  # httpx logs URLs at INFO: app keeps it at WARNING
    fake_server.route("GET", "/works", json_body(payload, "openalex_forbidden.json", status=403))
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED and caught.value.status == 403  # per OpenAlex docs
    assert "api_key" in str(caught.value)  # the body's explanation is kept
    assert API_KEY not in str(caught.value)
    assert "***" in str(caught.value)  # the URL is still there to debug with, minus the key
    assert API_KEY not in caplog.text


async def test_rate_limit_and_server_error_keep_the_key_out(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(max_retry_wait=1.0, max_retries=1)
    source = OpenAlexSource(client=client, config=openalex_config(fake_server))
    fake_server.route(
        "GET", "/works", FakeResponse.json({"error": "rate limited"}, status=429, headers={"Retry-After": "60"})
    )
    with pytest.raises(SourceError) as limited:
        await source.search(SearchQuery(text="deepseek"))
    fake_server.route("GET", "/works", FakeResponse(status=500, body="Internal Server Error"))
    with pytest.raises(SourceError) as broken:
        await source.search(SearchQuery(text="deepseek"))

    assert limited.value.kind is SourceErrorKind.RATE_LIMITED and limited.value.retry_after == 60
    assert broken.value.kind is SourceErrorKind.SERVER
    assert API_KEY not in str(limited.value) and API_KEY not in str(broken.value)


async def test_a_document_without_results_is_a_bad_response(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route("GET", "/works", FakeResponse.json({"meta": {"count": 0}}))
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE


def test_rebuild_abstract_orders_words_by_position() -> None:
    assert rebuild_abstract({"world": [1], "hello": [0, 2]}) == "hello world hello"
    assert rebuild_abstract(None) == ""
    assert rebuild_abstract({}) == ""


async def test_a_full_page_asks_for_the_next_one(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    def answer(request: RecordedRequest) -> FakeResponse:
        return json_body(payload, "openalex_empty.json" if request.query.get("page") == "2" else "openalex_works.json")

    fake_server.route("GET", "/works", answer)
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    # Four results fill a page of four, but only two are usable: the next page may hold more.
    batch = await source.search(SearchQuery(text="deepseek", limit=4))

    first, second = fake_server.received("/works")
    assert first.query["per-page"] == "4" and "page" not in first.query
    assert second.query["per-page"] == "4" and second.query["page"] == "2"
    assert len(batch.items) == 2 and batch.skipped == 2


@pytest.mark.parametrize(
    "second_page",
    [
        FakeResponse(status=500, body="upstream timeout"),
        FakeResponse.json({"meta": {"count": 4}, "results": {"W1": {}}}),
        FakeResponse.json({"error": "Invalid query parameters"}),
        FakeResponse(body="<html>maintenance</html>", content_type="text/html"),
    ],
    ids=["server-error", "results-not-a-list", "no-results", "not-json"],
)
async def test_a_later_page_that_fails_or_is_malformed_keeps_the_first_page(
    fake_server: FakeHTTPServer,
    make_http_client: HttpClientFactory,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
    second_page: FakeResponse,
) -> None:
    def answer(request: RecordedRequest) -> FakeResponse:
        return second_page if request.query.get("page") == "2" else json_body(payload, "openalex_works.json")

    fake_server.route("GET", "/works", answer)
    source = OpenAlexSource(client=make_http_client(max_retries=0), config=openalex_config(fake_server))

    # Four results fill a page of four, so page 2 is asked for.
    batch = await source.search(SearchQuery(text="deepseek", limit=4))

    assert len(fake_server.received("/works")) == 2
    assert [item.id for item in batch.items] == ["openalex:W4404011223", "openalex:W4404099871"]
    assert batch.skipped == 2
    assert batch.stopped is not None and batch.stopped.startswith("stopped after page 1: page 2 failed")
    assert "openalex: stopped after page 1" in caplog.text
    assert API_KEY not in caplog.text and API_KEY not in batch.stopped


@pytest.mark.parametrize(
    ("first_page", "reason"),
    [
        (FakeResponse.json({"results": {"W1": {}}}), "openalex `results` is not a list"),
        (FakeResponse.json(["W1"]), "openalex returned no `results` list"),
        (FakeResponse(body="<html>down</html>", content_type="text/html"), "openalex returned no `results` list"),
    ],
    ids=["results-not-a-list", "not-an-object", "not-json"],
)
async def test_a_malformed_first_page_is_the_sources_failure(
    fake_server: FakeHTTPServer, http_client: HttpClient, first_page: FakeResponse, reason: str
) -> None:
    fake_server.route("GET", "/works", first_page)
    source = OpenAlexSource(client=http_client, config=openalex_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE
    assert str(caught.value) == reason
