"""Reddit: OAuth client-credentials token (cached), search parameters, listing parsing, failures."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.reddit import RedditSource, reddit_time_window
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import HttpClientFactory

CLIENT_ID = "lookout-app-id"
CLIENT_SECRET = "s3cr3t-reddit-app-secret-value"
TOKEN_PATH = "/api/v1/access_token"


def reddit_config(server: FakeHTTPServer, *, secret: str | None = CLIENT_SECRET) -> SourcesConfig:
    return SourcesConfig(
        reddit_api_url=server.url,
        reddit_auth_url=server.url + TOKEN_PATH,
        reddit_client_id=CLIENT_ID if secret else None,
        reddit_client_secret=SecretStr(secret) if secret else None,
    )


def token_response(token: str, *, expires_in: int = 86400) -> FakeResponse:
    return FakeResponse.json({"access_token": token, "token_type": "bearer", "expires_in": expires_in, "scope": "*"})


def listing(payload: Callable[[str], bytes], name: str = "reddit_search.json") -> FakeResponse:
    return FakeResponse(body=payload(name), content_type="application/json")


async def test_without_credentials_it_is_off_and_says_why(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    source = RedditSource(client=http_client, config=reddit_config(fake_server, secret=None))

    reason = source.unavailable_reason()
    assert reason is not None and "REDDIT_CLIENT_ID" in reason
    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))
    assert caught.value.kind is SourceErrorKind.UNAVAILABLE
    assert fake_server.requests == []


async def test_token_request_uses_basic_auth_and_client_credentials_grant(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "POST", TOKEN_PATH, FakeResponse(body=payload("reddit_token.json"), content_type="application/json")
    )
    fake_server.route("GET", "/search", listing(payload))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    await source.search(SearchQuery(text="deepseek v4", limit=25, since=datetime.now(UTC) - timedelta(days=2)))

    (token_request,) = fake_server.received(TOKEN_PATH)
    scheme, _, encoded = token_request.headers["authorization"].partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(encoded).decode() == f"{CLIENT_ID}:{CLIENT_SECRET}"
    assert token_request.form() == {"grant_type": "client_credentials"}
    (search_request,) = fake_server.received("/search")
    token = json.loads(payload("reddit_token.json"))["access_token"]
    assert search_request.headers["authorization"] == f"bearer {token}"
    assert search_request.query["q"] == "deepseek v4"
    assert search_request.query["sort"] == "new"
    assert search_request.query["t"] == "week"
    assert search_request.query["limit"] == "25"
    assert search_request.headers["user-agent"].startswith("LookoutTest/")


async def test_listing_becomes_items_and_malformed_children_are_counted(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", listing(payload))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek"))

    assert batch.skipped == 3  # a string timestamp, a post without id/permalink, a subreddit (t5)
    first, second = batch.items
    assert first.id == "reddit:1gx4k2p"
    assert first.source == "reddit"
    assert (
        first.url
        == "https://www.reddit.com/r/LocalLLaMA/comments/1gx4k2p/deepseekv4_weights_released_12t_moe_mit_licence"
    )
    assert first.title == "DeepSeek-V4 weights released — 1.2T MoE, MIT licence"
    assert first.text == "Link: https://huggingface.co/deepseek-ai/DeepSeek-V4?utm_source=reddit"
    assert first.author == "tensor_wrangler"
    assert first.published == datetime(2026, 11, 21, 12, 30, tzinfo=UTC)
    assert first.engagement.points == 2412
    assert first.engagement.comments == 388
    assert first.query == "deepseek"
    assert second.title == "DeepSeek 新模型体验：中文写作进步很大"
    assert second.text.startswith("刚试了一下 DeepSeek")
    assert second.author is None  # "[deleted]"
    assert "reddit.com/r/China_irl/comments/1gx1zz8/" in second.url


async def test_posts_older_than_since_are_dropped(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", listing(payload))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", since=datetime(2026, 11, 21, 10, 0, tzinfo=UTC)))

    assert [item.id for item in batch.items] == ["reddit:1gx4k2p"]


async def test_token_is_cached_across_searches(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, [token_response("tok-1"), token_response("tok-2")])
    fake_server.route("GET", "/search", listing(payload, "reddit_empty.json"))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    await source.search(SearchQuery(text="a"))
    await source.search(SearchQuery(text="b"))

    assert len(fake_server.received(TOKEN_PATH)) == 1
    assert [r.headers["authorization"] for r in fake_server.received("/search")] == ["bearer tok-1"] * 2


async def test_a_token_about_to_expire_is_not_reused(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    # 30 s of life is inside the refresh margin: good for one request, not worth caching.
    fake_server.route("POST", TOKEN_PATH, [token_response("tok-1", expires_in=30), token_response("tok-2")])
    fake_server.route("GET", "/search", listing(payload, "reddit_empty.json"))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    await source.search(SearchQuery(text="a"))
    await source.search(SearchQuery(text="b"))

    assert [r.headers["authorization"] for r in fake_server.received("/search")] == ["bearer tok-1", "bearer tok-2"]


async def test_a_401_on_search_fetches_a_new_token_once(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, [token_response("stale"), token_response("fresh")])
    fake_server.route(
        "GET",
        "/search",
        [
            FakeResponse(status=401, body=payload("reddit_unauthorized.json"), content_type="application/json"),
            listing(payload),
        ],
    )
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek"))

    assert len(batch.items) == 2
    assert [r.headers["authorization"] for r in fake_server.received("/search")] == ["bearer stale", "bearer fresh"]


async def test_rejected_credentials_are_a_client_error_without_the_secret(
    fake_server: FakeHTTPServer, http_client: HttpClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sources")
    fake_server.route("POST", TOKEN_PATH, FakeResponse.json({"message": "Unauthorized", "error": 401}, status=401))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.CLIENT
    assert caught.value.status == 401
    assert CLIENT_SECRET not in str(caught.value)
    assert CLIENT_SECRET not in caplog.text
    assert len(fake_server.received(TOKEN_PATH)) == 1  # refused credentials are not retried
    assert fake_server.received("/search") == []


async def test_rate_limit_after_retries_reports_retry_after(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route(
        "GET",
        "/search",
        FakeResponse.json({"message": "Too Many Requests", "error": 429}, status=429, headers={"Retry-After": "120"}),
    )
    source = RedditSource(client=make_http_client(max_retry_wait=1.0), config=reddit_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert caught.value.retry_after == 120
    assert "tok-1" not in str(caught.value)


async def test_server_errors_are_retried_then_reported(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", FakeResponse(status=503, body="<html>upstream overloaded</html>"))
    source = RedditSource(client=make_http_client(max_retries=2), config=reddit_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.SERVER
    assert len(fake_server.received("/search")) == 3


async def test_a_non_listing_body_is_a_bad_response(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", FakeResponse(body="<html>reddit is down</html>", content_type="text/html"))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE


@pytest.mark.parametrize(
    ("age", "window"),
    [
        (None, "all"),
        (timedelta(minutes=30), "hour"),
        (timedelta(hours=20), "day"),
        (timedelta(days=5), "week"),
        (timedelta(days=30), "month"),
        (timedelta(days=200), "year"),
        (timedelta(days=900), "all"),
    ],
)
def test_time_window_covers_since(age: timedelta | None, window: str) -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    assert reddit_time_window(None if age is None else now - age, now=now) == window


def paged_listing(
    payload: Callable[[str], bytes], *, second_page: FakeResponse | None = None
) -> Callable[..., FakeResponse]:
    """Answer the first page (no `after`) with a page that has a cursor, and the cursor with `second_page`."""

    def answer(request: RecordedRequest) -> FakeResponse:
        if "after" not in request.query:
            return listing(payload, "reddit_search_first_page.json")
        assert request.query["after"] == "t3_1gx5m0a"
        return second_page or listing(payload)

    return answer


async def test_pages_follow_the_after_cursor_up_to_the_limit(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", paged_listing(payload))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=150))

    first, second = fake_server.received("/search")
    assert first.query["limit"] == "100" and "after" not in first.query
    assert second.query["limit"] == "100" and second.query["after"] == "t3_1gx5m0a"
    assert [item.id for item in batch.items] == ["reddit:1gx6q7r", "reddit:1gx5m0a", "reddit:1gx4k2p", "reddit:1gx1zz8"]
    assert batch.items[1].title == "DeepSeek veröffentlicht V4 – Open-Source-Modell übertrifft GPT-5 in Benchmarks?"
    assert batch.skipped == 3
    assert len(fake_server.received(TOKEN_PATH)) == 1


async def test_paging_stops_at_the_limit_and_at_since(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", paged_listing(payload))
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    enough = await source.search(SearchQuery(text="deepseek", limit=2))
    older_seen = await source.search(
        SearchQuery(text="deepseek", limit=150, since=datetime(2026, 11, 21, 13, 15, tzinfo=UTC))
    )

    assert len(enough.items) == 2
    assert [item.id for item in older_seen.items] == ["reddit:1gx6q7r"]
    assert len(fake_server.received("/search")) == 2  # one request each: nothing newer can follow


@pytest.mark.parametrize(
    "second_page",
    [
        FakeResponse(status=500, body="oops"),
        FakeResponse.json({"kind": "Listing", "data": {"children": "none", "after": None}}),
        FakeResponse.json({"message": "Too Many Requests", "error": 429}),
        FakeResponse(body="<html>reddit is down</html>", content_type="text/html"),
    ],
    ids=["server-error", "children-not-a-list", "not-a-listing", "not-json"],
)
async def test_a_failing_later_page_keeps_the_first_pages(
    fake_server: FakeHTTPServer,
    make_http_client: HttpClientFactory,
    payload: Callable[[str], bytes],
    caplog: pytest.LogCaptureFixture,
    second_page: FakeResponse,
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", paged_listing(payload, second_page=second_page))
    source = RedditSource(client=make_http_client(max_retries=0), config=reddit_config(fake_server))

    batch = await source.search(SearchQuery(text="deepseek", limit=150))

    assert len(fake_server.received("/search")) == 2
    assert [item.id for item in batch.items] == ["reddit:1gx6q7r", "reddit:1gx5m0a"]
    assert "stopped after page 1" in caplog.text
    assert batch.stopped is not None and batch.stopped.startswith("stopped after page 1: page 2 failed")
    assert "tok-1" not in caplog.text and CLIENT_SECRET not in caplog.text


@pytest.mark.parametrize(
    ("first_page", "reason"),
    [
        (FakeResponse.json({"kind": "Listing", "data": {"children": {}}}), "reddit listing has no children list"),
        (FakeResponse.json({"message": "Forbidden", "error": 403}), "reddit returned something other than a listing"),
        (FakeResponse.json(["Listing"]), "reddit returned something other than a listing"),
    ],
    ids=["children-not-a-list", "an-error-object", "a-list"],
)
async def test_a_malformed_first_page_is_the_sources_failure(
    fake_server: FakeHTTPServer, http_client: HttpClient, first_page: FakeResponse, reason: str
) -> None:
    fake_server.route("POST", TOKEN_PATH, token_response("tok-1"))
    fake_server.route("GET", "/search", first_page)
    source = RedditSource(client=http_client, config=reddit_config(fake_server))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE
    assert str(caught.value) == reason
