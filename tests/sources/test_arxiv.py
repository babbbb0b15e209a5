"""arXiv through its Atom API, against a fake server replaying recorded feeds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from sources import arxiv
from sources.arxiv import ARXIV_POLICY, ArxivSource, arxiv_id
from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HostPolicy, HttpClient
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory


def _source(fake_server: FakeHTTPServer, client: HttpClient) -> ArxivSource:
    return ArxivSource(client=client, config=SourcesConfig(arxiv_api_url=fake_server.url + "/api/query"))


def _atom(body: bytes, status: int = 200) -> FakeResponse:
    return FakeResponse(status=status, body=body, content_type="application/atom+xml")


async def test_newest_first_query_and_entries(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/query", _atom(payload("arxiv_query.xml")))

    batch = await _source(fake_server, http_client).search(SearchQuery(text="DeepSeek", limit=50))

    (request,) = fake_server.received("/api/query")
    assert request.query == {
        "search_query": "all:DeepSeek",
        "sortBy": "submittedDate",
        "sortOrder": "descending",
        "start": "0",
        "max_results": "50",
    }
    assert batch.skipped == 2  # no id; empty title
    paper, budget = batch.items

    assert paper.id == "arxiv:2611.08123"  # version dropped: v1 and v2 are one paper
    assert paper.url == "https://arxiv.org/abs/2611.08123"
    assert paper.source == "arxiv"
    assert paper.title == (
        "DeepSeek-V4: Scaling Sparse Mixture-of-Experts with $\\alpha$-Routing and Multi-Token Prediction"
    )
    assert paper.text == (
        "We present DeepSeek-V4, a Mixture-of-Experts language model with 1.2T total parameters. "
        'Routing uses a learned $\\alpha$ temperature & a load-balancing loss that "never drops tokens".'
        "\n[cs.CL]"
    )
    assert paper.author == "Zhang Wéi, Łukasz Nowak"
    assert paper.published == datetime(2026, 11, 19, 18, 59, 58, tzinfo=UTC)
    assert paper.query == "DeepSeek"

    assert budget.text.endswith("[cs.LG]")
    assert budget.author is not None and budget.author.endswith("Jonas Weber et al.")
    assert "Kofi Mensah" not in budget.author


async def test_window_and_phrases_go_into_search_query(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/query", _atom(payload("arxiv_query.xml")))
    query = SearchQuery(
        text='"mixture of experts" routing for the masses',
        since=datetime(2026, 11, 19, tzinfo=UTC),
        until=datetime(2026, 11, 20, 12, 30, tzinfo=UTC),
        limit=5000,
    )

    batch = await _source(fake_server, http_client).search(query)

    (request,) = fake_server.received("/api/query")
    assert request.query["search_query"] == (
        'all:"mixture of experts" AND all:routing AND all:masses AND submittedDate:[202611190000 TO 202611201230]'
    )
    assert request.query["max_results"] == "2000"
    # The paper of Nov 18 falls outside the window even if the server sent it.
    assert [item.id for item in batch.items] == ["arxiv:2611.08123"]


async def test_empty_result(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/api/query", _atom(payload("arxiv_empty.xml")))

    batch = await _source(fake_server, http_client).search(SearchQuery(text="zzqxv"))

    assert batch.items == []
    assert batch.skipped == 0


@pytest.mark.parametrize("status", [200, 400])
async def test_arxiv_error_feed_is_a_client_error(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes], status: int
) -> None:
    fake_server.route("GET", "/api/query", _atom(payload("arxiv_error.xml"), status=status))

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.CLIENT
    if status == 200:
        assert "unbalanced parenthesis" in str(raised.value)


async def test_server_error_and_rate_limit(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    fake_server.route("GET", "/api/query", FakeResponse(status=503, body="Service Unavailable"))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, make_http_client(max_retries=0)).search(SearchQuery(text="deepseek"))
    assert raised.value.kind is SourceErrorKind.SERVER

    fake_server.route("GET", "/api/query", FakeResponse(status=429, headers={"Retry-After": "120"}))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, make_http_client(max_retries=3)).search(SearchQuery(text="deepseek"))
    # Longer than the client will wait: given up at once, the wait passed on.
    assert raised.value.kind is SourceErrorKind.RATE_LIMITED
    assert raised.value.retry_after == 120


async def test_not_a_feed_is_a_bad_response(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/api/query", FakeResponse(body="<html>maintenance</html>", content_type="text/html"))

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE


def test_policy_is_one_request_per_three_seconds() -> None:
    assert HostPolicy(concurrency=1, min_interval=3.0) == ARXIV_POLICY


async def test_requests_to_the_arxiv_host_are_spaced(
    fake_server: FakeHTTPServer,
    http_client: HttpClient,
    payload: Callable[[str], bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real policy spaces requests by 3 s; a shorter interval keeps the test quick but proves
    # that constructing the source installs its policy on the shared client for the configured host.
    monkeypatch.setattr(arxiv, "ARXIV_POLICY", HostPolicy(concurrency=1, min_interval=0.5))
    arrivals: list[float] = []
    body = payload("arxiv_empty.xml")

    def answer(request: RecordedRequest) -> FakeResponse:
        arrivals.append(time.monotonic())
        return _atom(body)

    fake_server.route("GET", "/api/query", answer)
    source = _source(fake_server, http_client)

    await asyncio.gather(source.search(SearchQuery(text="a1")), source.search(SearchQuery(text="b2")))

    assert len(arrivals) == 2
    assert arrivals[1] - arrivals[0] >= 0.4


def test_arxiv_id() -> None:
    assert arxiv_id("http://arxiv.org/abs/2611.08123v2") == "2611.08123"
    assert arxiv_id("https://arxiv.org/abs/hep-th/9901001v1") == "hep-th/9901001"
    assert arxiv_id("https://arxiv.org/abs/2611.08123") == "2611.08123"
    assert arxiv_id("http://arxiv.org/api/errors#bad") is None
