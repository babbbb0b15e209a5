"""X: bearer token, recent-search parameters (7-day clamp), posts and authors joined, failures."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.x import RECENT_WINDOW, XSource, search_window
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory

TOKEN = (
    "AAAAAAAAAAAAAAAAAAAAAMLheAAAAAAA0%2BuSeid%2BULvsea4JtiGRiSDSJSI%3D"
    "EUifiRBkKG5E2XzMDjRfl76ZC9Ub0wnz4XsNiRVBChTYbJcE3F"
)
SEARCH_PATH = "/2/tweets/search/recent"


def x_config(server: FakeHTTPServer, *, token: str | None = TOKEN) -> SourcesConfig:
    return SourcesConfig(x_api_url=server.url + "/2", x_bearer_token=SecretStr(token) if token else None)


def json_body(payload: Callable[[str], bytes], name: str, **kw: object) -> FakeResponse:
    return FakeResponse(body=payload(name), content_type="application/json", **kw)  # type: ignore[arg-type]


async def test_without_a_token_it_is_off(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    source = XSource(client=http_client, config=x_config(fake_server, token=None))

    assert "X_BEARER_TOKEN" in (source.unavailable_reason() or "")
    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))
    assert caught.value.kind is SourceErrorKind.UNAVAILABLE
    assert fake_server.requests == []


async def test_request_parameters_and_bearer_header(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "x_search.json"))
    source = XSource(client=http_client, config=x_config(fake_server))
    since = datetime.now(UTC) - timedelta(days=2)

    await source.search(SearchQuery(text="deepseek -is:retweet", since=since, limit=5))

    (request,) = fake_server.received(SEARCH_PATH)
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.query["query"] == "deepseek -is:retweet"
    assert request.query["max_results"] == "10"  # the API's minimum
    assert request.query["tweet.fields"] == "created_at,public_metrics,lang,author_id"
    assert request.query["expansions"] == "author_id"
    assert request.query["user.fields"] == "username"
    assert request.query["start_time"] == since.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "end_time" not in request.query


async def test_since_older_than_seven_days_is_clamped(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "x_empty.json"))
    source = XSource(client=http_client, config=x_config(fake_server))
    before = datetime.now(UTC)

    await source.search(SearchQuery(text="deepseek", since=before - timedelta(days=30), language="zh"))

    (request,) = fake_server.received(SEARCH_PATH)
    start = datetime.strptime(request.query["start_time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before - RECENT_WINDOW < start < before - RECENT_WINDOW + timedelta(minutes=5)
    assert request.query["query"] == "deepseek lang:zh"


async def test_posts_become_items_with_authors_and_metrics(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "x_search.json"))
    source = XSource(client=http_client, config=x_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=50))

    assert batch.skipped == 2  # a non-numeric id; a post without text
    english, chinese, link_only = batch.items
    assert english.id == "x:1861234567890123456"
    assert english.url == "https://x.com/ainewsdesk/status/1861234567890123456"
    assert english.author == "@ainewsdesk"
    assert english.text.startswith("DeepSeek-V4 is out: 1.2T MoE")
    assert english.title  # cut from the text
    assert english.published == datetime(2026, 11, 21, 12, 31, 5, tzinfo=UTC)
    assert (english.engagement.likes, english.engagement.reposts, english.engagement.comments) == (5120, 812, 143)
    assert english.language == "en"
    assert chinese.text == "深度求索发布新模型，开源权重，中文能力大幅提升 🚀 #DeepSeek"
    assert chinese.author == "@keji_guancha" and chinese.language == "zh"
    assert link_only.url == "https://x.com/i/web/status/1861234567890777777"  # author not in includes
    assert link_only.author is None and link_only.language is None  # `zxx`: no linguistic content


async def test_no_results(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "x_empty.json"))
    source = XSource(client=http_client, config=x_config(fake_server))

    batch = await source.search(SearchQuery(text="zzzxqv"))

    assert batch.items == [] and batch.skipped == 0


async def test_unauthorized_token_never_leaks(
    fake_server: FakeHTTPServer,
    http_client: HttpClient,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_server.route("GET", SEARCH_PATH, json_body(payload, "x_unauthorized.json", status=401))
    source = XSource(client=http_client, config=x_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.CLIENT and caught.value.status == 401
    assert TOKEN not in str(caught.value)
    assert TOKEN not in caplog.text  # a header, so not even httpx's request log carries it


async def test_rate_limited_and_server_error(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    source = XSource(client=make_http_client(max_retries=1, max_retry_wait=1.0), config=x_config(fake_server))
    fake_server.route(
        "GET", SEARCH_PATH, json_body(payload, "x_rate_limited.json", status=429, headers={"Retry-After": "900"})
    )
    with pytest.raises(SourceError) as limited:
        await source.search(SearchQuery(text="deepseek"))
    fake_server.route("GET", SEARCH_PATH, FakeResponse.json({"title": "Service Unavailable"}, status=503))
    with pytest.raises(SourceError) as broken:
        await source.search(SearchQuery(text="deepseek"))

    assert limited.value.kind is SourceErrorKind.RATE_LIMITED and limited.value.retry_after == 900
    assert broken.value.kind is SourceErrorKind.SERVER


async def test_overlong_query_is_refused_before_spending_money(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    source = XSource(client=http_client, config=x_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek " * 80))

    assert caught.value.kind is SourceErrorKind.CLIENT
    assert fake_server.requests == []


def test_search_window() -> None:
    now = datetime(2026, 11, 22, 12, tzinfo=UTC)
    start, end = search_window(None, None, now=now)
    assert now - RECENT_WINDOW < start < now - RECENT_WINDOW + timedelta(minutes=5) and end is None
    start, end = search_window(now - timedelta(days=1), now - timedelta(hours=2), now=now)
    assert start == now - timedelta(days=1) and end == now - timedelta(hours=2)
    _, end = search_window(None, now + timedelta(days=1), now=now)
    assert end is None  # a future `until` is the same as none (the API refuses it)


async def test_pages_follow_next_token_and_never_ask_for_more_than_wanted(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    first_page = json.loads(payload("x_search.json"))
    first_page["meta"]["next_token"] = "b26v89c19zqg8o3fpzbkk8dqm0uvnh3w0a6tk1x7nb1j1"

    def answer(request: RecordedRequest) -> FakeResponse:
        if request.query.get("next_token") == "b26v89c19zqg8o3fpzbkk8dqm0uvnh3w0a6tk1x7nb1j1":
            return json_body(payload, "x_empty.json")
        return FakeResponse.json(first_page)

    fake_server.route("GET", SEARCH_PATH, answer)
    source = XSource(client=http_client, config=x_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=120))

    first, second = fake_server.received(SEARCH_PATH)
    assert first.query["max_results"] == "100" and "next_token" not in first.query
    assert second.query["max_results"] == "100"  # 117 still wanted, capped at the API's 100
    assert second.query["start_time"] == first.query["start_time"]
    assert len(batch.items) == 3


async def test_no_second_page_once_the_limit_is_reached(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    first_page = json.loads(payload("x_search.json"))
    first_page["meta"]["next_token"] = "more"
    fake_server.route("GET", SEARCH_PATH, FakeResponse.json(first_page))
    source = XSource(client=http_client, config=x_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=2))

    assert len(fake_server.received(SEARCH_PATH)) == 1
    assert len(batch.items) == 2


def paged_search(payload: Callable[[str], bytes], *, second_page: FakeResponse) -> Callable[..., FakeResponse]:
    """Answer the first page (three usable posts, two malformed) with a `next_token`, and that token with
    `second_page`."""
    first_page = json.loads(payload("x_search.json"))
    first_page["meta"]["next_token"] = "page-2"

    def answer(request: RecordedRequest) -> FakeResponse:
        return second_page if request.query.get("next_token") == "page-2" else FakeResponse.json(first_page)

    return answer


@pytest.mark.parametrize(
    "second_page",
    [
        FakeResponse(status=503, body="over capacity"),
        FakeResponse.json({"data": {"id": "1861234567890000001"}, "meta": {"result_count": 1}}),
        FakeResponse.json({"data": [], "includes": ["not", "an", "object"]}),
        FakeResponse(body="<html>rate limit page</html>", content_type="text/html"),
    ],
    ids=["server-error", "data-not-a-list", "includes-not-an-object", "not-json"],
)
async def test_a_later_page_that_fails_or_is_malformed_keeps_the_first_page(
    fake_server: FakeHTTPServer,
    make_http_client: HttpClientFactory,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
    second_page: FakeResponse,
) -> None:
    fake_server.route("GET", SEARCH_PATH, paged_search(payload, second_page=second_page))
    source = XSource(client=make_http_client(max_retries=0), config=x_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=120))

    assert len(fake_server.received(SEARCH_PATH)) == 2
    assert [item.id for item in batch.items] == [
        "x:1861234567890123456",
        "x:1861234567890999999",
        "x:1861234567890777777",
    ]
    assert batch.skipped == 2
    assert batch.stopped is not None and batch.stopped.startswith("stopped after page 1: page 2 failed")
    assert "x: stopped after page 1" in caplog.text
    assert TOKEN not in caplog.text and TOKEN not in batch.stopped


@pytest.mark.parametrize(
    ("first_page", "reason"),
    [
        (FakeResponse.json({"data": "none", "meta": {}}), "X `data` or `includes.users` is not a list"),
        (FakeResponse.json({"data": [], "includes": "users"}), "X `data` or `includes.users` is not a list"),
        (FakeResponse.json(["not", "an", "object"]), "X returned an unexpected document"),
        (FakeResponse(body="<html>down</html>", content_type="text/html"), "X returned something other than JSON"),
    ],
    ids=["data-not-a-list", "includes-not-an-object", "not-an-object", "not-json"],
)
async def test_a_malformed_first_page_is_the_sources_failure(
    fake_server: FakeHTTPServer, http_client: HttpClient, first_page: FakeResponse, reason: str
) -> None:
    fake_server.route("GET", SEARCH_PATH, first_page)
    source = XSource(client=http_client, config=x_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE
    assert str(caught.value) == reason
