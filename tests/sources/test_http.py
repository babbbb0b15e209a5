"""The shared HTTP client against the recording fake server: what arrives, retries, limits, 304s, errors."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time

import pytest

from sources.base import SourceError, SourceErrorKind
from sources.http import (
    HostPolicy,
    HttpClient,
    MemoryValidatorStore,
    StoredResponse,
)
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.sources.conftest import TEST_USER_AGENT, HttpClientFactory


class ArrivalLog:
    """A route handler that notes when each request arrived (server side) and answers with `response`."""

    def __init__(self, response: FakeResponse) -> None:
        self.response = response
        self.times: list[float] = []

    def __call__(self, request: RecordedRequest) -> FakeResponse:
        self.times.append(time.monotonic())
        return self.response


async def test_user_agent_params_and_headers_arrive(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/search", FakeResponse.json({"hits": []}))

    response = await http_client.get(
        fake_server.url + "/search?fixed=1", params={"q": "deep seek", "page": 2}, headers={"X-Extra": "yes"}
    )

    assert response.status == 200
    assert response.json() == {"hits": []}
    assert response.headers["CONTENT-TYPE"].startswith("application/json")
    [request] = fake_server.received("/search")
    assert request.headers["user-agent"] == TEST_USER_AGENT
    assert request.headers["x-extra"] == "yes"
    assert request.query == {"fixed": "1", "q": "deep seek", "page": "2"}
    assert http_client.stats.requests == 1
    assert http_client.stats.bytes_received == len(b'{"hits": []}')


async def test_caller_headers_override_ours_case_insensitively(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route("GET", "/ua", FakeResponse(body="ok"))

    await http_client.get(fake_server.url + "/ua", headers={"user-agent": "Special/2.0"})

    assert fake_server.received("/ua")[0].headers["user-agent"] == "Special/2.0"


async def test_429_with_retry_after_is_honoured_then_succeeds(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    log = ArrivalLog(FakeResponse(body="ok"))
    answers = [FakeResponse(status=429, headers={"Retry-After": "1"}, body="slow down"), FakeResponse(body="ok")]
    fake_server.route("GET", "/feed", lambda request: (log(request), answers.pop(0))[1])

    response = await http_client.get(fake_server.url + "/feed")

    assert response.content == b"ok"
    assert len(fake_server.received("/feed")) == 2
    # The retry waited what the server asked (1 s), far more than the test client's 1 ms backoff.
    assert log.times[1] - log.times[0] >= 0.95
    assert http_client.stats.retries == 1


async def test_retry_after_longer_than_max_wait_gives_up_at_once(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route("GET", "/limited", FakeResponse(status=429, headers={"Retry-After": "3600"}))

    with pytest.raises(SourceError) as caught:
        await http_client.get(fake_server.url + "/limited")

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert caught.value.retry_after == 3600
    assert caught.value.status == 429
    assert len(fake_server.received("/limited")) == 1


async def test_429_until_retries_run_out_is_rate_limited(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(max_retries=2)
    fake_server.route("GET", "/limited", FakeResponse(status=429))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/limited")

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert len(fake_server.received("/limited")) == 3


async def test_5xx_is_retried_then_server_error(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(max_retries=2)
    fake_server.route("GET", "/flaky", FakeResponse(status=503, body="down"))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/flaky")

    assert caught.value.kind is SourceErrorKind.SERVER
    assert caught.value.status == 503
    assert len(fake_server.received("/flaky")) == 3
    assert client.stats.retries == 2


async def test_5xx_then_success_returns_the_success(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/flaky", [FakeResponse(status=500), FakeResponse(status=502), FakeResponse(body="fine")])

    response = await http_client.get(fake_server.url + "/flaky")

    assert response.content == b"fine"
    assert len(fake_server.received("/flaky")) == 3


async def test_slow_server_times_out_after_retries(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(timeout=0.2, max_retries=1)
    fake_server.route("GET", "/slow", FakeResponse(body="late", delay=1.0))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/slow")

    assert caught.value.kind is SourceErrorKind.TIMEOUT
    assert len(fake_server.received("/slow")) == 2


async def test_attempt_deadline_bounds_a_whole_attempt(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    # The read timeout alone (5 s) would wait; the end-to-end deadline (0.2 s) stops it.
    client = make_http_client(timeout=5.0, attempt_deadline=0.2, max_retries=0)
    fake_server.route("GET", "/drip", FakeResponse(body="late", delay=1.0))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/drip")

    assert caught.value.kind is SourceErrorKind.TIMEOUT
    assert len(fake_server.received("/drip")) == 1


async def test_503_asking_for_a_long_pause_is_not_retried(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/maintenance", FakeResponse(status=503, headers={"Retry-After": "600"}))

    with pytest.raises(SourceError) as caught:
        await http_client.get(fake_server.url + "/maintenance")

    assert caught.value.kind is SourceErrorKind.SERVER
    assert caught.value.retry_after == 600
    assert len(fake_server.received("/maintenance")) == 1


async def test_404_is_a_client_error_without_retry(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/missing", FakeResponse(status=404, body="no such feed"))

    with pytest.raises(SourceError) as caught:
        await http_client.get(fake_server.url + "/missing")

    assert caught.value.kind is SourceErrorKind.CLIENT
    assert caught.value.status == 404
    assert "no such feed" in str(caught.value)
    assert len(fake_server.received("/missing")) == 1
    assert http_client.stats.retries == 0


async def test_connection_refused_is_a_network_error(make_http_client: HttpClientFactory) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    client = make_http_client(max_retries=1)

    with pytest.raises(SourceError) as caught:
        await client.get(f"http://127.0.0.1:{closed_port}/")

    assert caught.value.kind is SourceErrorKind.NETWORK
    assert client.stats.retries == 1


async def test_body_over_the_cap_is_too_large(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    client = make_http_client(max_bytes=1000)
    fake_server.route("GET", "/big", FakeResponse(body=b"x" * 5000))
    fake_server.route("GET", "/small", FakeResponse(body=b"x" * 1000))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/big")
    small = await client.get(fake_server.url + "/small")

    assert caught.value.kind is SourceErrorKind.TOO_LARGE
    assert len(small.content) == 1000


async def test_cap_applies_to_decompressed_bytes_while_streaming(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    # 2 MB of zeros gzip to a few KB: Content-Length is small, so only the streaming count can catch it.
    bomb = gzip.compress(b"\0" * 2_000_000)
    client = make_http_client(max_bytes=100_000)
    fake_server.route("GET", "/bomb", FakeResponse(body=bomb, headers={"Content-Encoding": "gzip"}))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/bomb")

    assert len(bomb) < 100_000
    assert caught.value.kind is SourceErrorKind.TOO_LARGE


async def test_conditional_get_with_etag(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    def feed(request: RecordedRequest) -> FakeResponse:
        if request.headers.get("if-none-match") == '"v1"':
            return FakeResponse(status=304, headers={"ETag": '"v1"'})
        return FakeResponse(body="<rss>v1</rss>", content_type="application/rss+xml", headers={"ETag": '"v1"'})

    fake_server.route("GET", "/feed.xml", feed)
    url = fake_server.url + "/feed.xml"

    first = await http_client.get(url, params={"lang": "en"}, conditional=True)
    second = await http_client.get(url, params={"lang": "en"}, conditional=True)

    first_request, second_request = fake_server.received("/feed.xml")
    assert "if-none-match" not in first_request.headers
    assert second_request.headers["if-none-match"] == '"v1"'
    assert first.not_modified is False
    assert second.not_modified is True
    assert second.status == 304
    assert second.content == first.content == b"<rss>v1</rss>"
    assert second.headers["content-type"].startswith("application/rss+xml")
    assert http_client.stats.not_modified == 1


async def test_conditional_get_with_last_modified(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    stamp = "Sat, 21 Nov 2026 08:00:00 GMT"

    def feed(request: RecordedRequest) -> FakeResponse:
        if request.headers.get("if-modified-since") == stamp:
            return FakeResponse(status=304)
        return FakeResponse(body="body-1", headers={"Last-Modified": stamp})

    fake_server.route("GET", "/atom", feed)

    await http_client.get(fake_server.url + "/atom", conditional=True)
    second = await http_client.get(fake_server.url + "/atom", conditional=True)

    assert fake_server.received("/atom")[1].headers["if-modified-since"] == stamp
    assert "if-none-match" not in fake_server.received("/atom")[1].headers
    assert second.not_modified and second.content == b"body-1"
    assert http_client.stats.not_modified == 1


async def test_validators_are_kept_per_url_and_params(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/feed", FakeResponse(body="x", headers={"ETag": '"e"'}))

    await http_client.get(fake_server.url + "/feed", params={"q": "a"}, conditional=True)
    await http_client.get(fake_server.url + "/feed", params={"q": "b"}, conditional=True)
    await http_client.get(fake_server.url + "/feed", params={"q": "a"})

    requests = fake_server.received("/feed")
    assert "if-none-match" not in requests[1].headers  # other params: another resource
    assert "if-none-match" not in requests[2].headers  # not asked to be conditional


async def test_memory_validator_store_drops_least_recently_used() -> None:
    store = MemoryValidatorStore(max_entries=2)
    for key in ("a", "b"):
        await store.put(key, StoredResponse(etag=key, content=key.encode()))
    assert await store.get("a") is not None  # "a" is now the most recent
    await store.put("c", StoredResponse(etag="c", content=b"c"))

    assert await store.get("b") is None
    assert await store.get("a") is not None
    assert await store.get("c") is not None


async def test_min_interval_spaces_request_starts(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    log = ArrivalLog(FakeResponse(body="ok"))
    fake_server.route("GET", "/api", log)
    http_client.set_host_policy("127.0.0.1", HostPolicy(concurrency=1, min_interval=0.3))

    await asyncio.gather(*(http_client.get(fake_server.url + "/api") for _ in range(3)))

    gaps = [later - earlier for earlier, later in zip(log.times, log.times[1:], strict=False)]
    assert len(gaps) == 2
    assert all(gap >= 0.25 for gap in gaps), gaps


async def test_concurrency_limit_holds_back_extra_requests(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    log = ArrivalLog(FakeResponse(body="ok", delay=0.3))
    fake_server.route("GET", "/slowish", log)
    http_client.set_host_policy("127.0.0.1", HostPolicy(concurrency=2))

    await asyncio.gather(*(http_client.get(fake_server.url + "/slowish") for _ in range(4)))

    times = sorted(log.times)
    # Two went at once; the third could only start once one of the first two had been answered.
    assert times[1] - times[0] < 0.2
    assert times[2] - times[0] >= 0.25


def test_arxiv_has_a_polite_default_policy() -> None:
    client = HttpClient(user_agent="t")
    assert client.host_policy("export.arxiv.org") == HostPolicy(concurrency=1, min_interval=3.0)
    assert client.host_policy("EXPORT.ARXIV.ORG") == HostPolicy(concurrency=1, min_interval=3.0)
    assert client.host_policy("hn.algolia.com") == HostPolicy()


def test_host_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        HostPolicy(concurrency=0)


async def test_post_form_json_and_basic_auth_arrive(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("POST", "/token", FakeResponse.json({"access_token": "t"}))
    fake_server.route("POST", "/items", FakeResponse.json({"ok": True}))

    token = await http_client.post(
        fake_server.url + "/token", data={"grant_type": "client_credentials"}, auth=("id", "secret")
    )
    await http_client.post(fake_server.url + "/items", json={"query": "x", "n": 1})

    [token_request] = fake_server.received("/token", "POST")
    assert token.json() == {"access_token": "t"}
    assert token_request.form() == {"grant_type": "client_credentials"}
    assert token_request.headers["authorization"] == "Basic aWQ6c2VjcmV0"
    assert token_request.headers["user-agent"] == TEST_USER_AGENT
    assert fake_server.received("/items", "POST")[0].json() == {"query": "x", "n": 1}


async def test_post_is_not_retried_on_500_but_is_on_429(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("POST", "/broken", FakeResponse(status=500))
    fake_server.route("POST", "/busy", [FakeResponse(status=429), FakeResponse(body="done")])

    with pytest.raises(SourceError) as caught:
        await http_client.post(fake_server.url + "/broken", json={})
    busy = await http_client.post(fake_server.url + "/busy", json={})

    assert caught.value.kind is SourceErrorKind.SERVER
    assert len(fake_server.received("/broken")) == 1
    assert busy.content == b"done"
    assert len(fake_server.received("/busy")) == 2


async def test_redirects_are_followed_and_the_final_url_reported(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route("GET", "/old", FakeResponse(status=301, headers={"Location": "/new?x=1"}))
    fake_server.route("GET", "/new", FakeResponse(body="moved here"))

    response = await http_client.get(fake_server.url + "/old")

    assert response.content == b"moved here"
    assert response.url == fake_server.url + "/new?x=1"
    assert fake_server.received("/new")[0].query == {"x": "1"}
    assert http_client.stats.redirects == 1


async def test_post_303_becomes_get_and_auth_is_not_carried_to_another_host(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    client = make_http_client(resolver=resolver)
    other = f"http://other.example:{fake_server.port}/landing"
    fake_server.route("POST", "/submit", FakeResponse(status=303, headers={"Location": other}))
    fake_server.route("GET", "/landing", FakeResponse(body="landed"))

    response = await client.post(fake_server.url + "/submit", data={"a": "1"}, auth=("u", "p"))

    assert response.content == b"landed"
    [landing] = fake_server.received("/landing", "GET")
    assert "authorization" not in landing.headers
    assert landing.headers["host"] == f"other.example:{fake_server.port}"


async def test_text_uses_the_declared_charset_and_json_errors_are_source_errors(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route(
        "GET",
        "/latin",
        FakeResponse(body="café".encode("latin-1"), headers={"Content-Type": "text/plain; charset=iso-8859-1"}),
    )
    fake_server.route("GET", "/notjson", FakeResponse(body="<html>", content_type="text/html"))

    latin = await http_client.get(fake_server.url + "/latin")
    not_json = await http_client.get(fake_server.url + "/notjson")

    assert latin.text() == "café"
    with pytest.raises(SourceError) as caught:
        not_json.json()
    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE


@pytest.mark.parametrize("url", ["ftp://example.com/x", "not a url", "http:///nohost"])
async def test_unusable_urls_are_client_errors(http_client: HttpClient, url: str) -> None:
    with pytest.raises(SourceError) as caught:
        await http_client.get(url)
    assert caught.value.kind is SourceErrorKind.CLIENT


async def test_exhausted_quota_403_is_rate_limited_with_reset(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    reset = int(time.time()) + 120
    fake_server.route(
        "GET",
        "/quota",
        FakeResponse.json(
            {"message": "API rate limit exceeded"},
            status=403,
            headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)},
        ),
    )
    with pytest.raises(SourceError) as caught:
        await http_client.get(f"{fake_server.url}/quota")
    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert caught.value.retry_after is not None and 100 < caught.value.retry_after <= 120
    assert len(fake_server.received("/quota")) == 1


async def test_plain_403_stays_a_client_error(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route("GET", "/forbidden", FakeResponse(status=403, headers={"X-RateLimit-Remaining": "12"}))
    with pytest.raises(SourceError) as caught:
        await http_client.get(f"{fake_server.url}/forbidden")
    assert caught.value.kind is SourceErrorKind.CLIENT
    assert caught.value.retry_after is None


def test_setting_the_same_host_policy_keeps_its_gate() -> None:
    client = HttpClient(user_agent="t")
    gate = client._gate("export.arxiv.org")
    client.set_host_policy("export.arxiv.org", HostPolicy(concurrency=1, min_interval=3.0))
    assert client._gate("export.arxiv.org") is gate
    client.set_host_policy("export.arxiv.org", HostPolicy(concurrency=1, min_interval=5.0))
    assert client._gate("export.arxiv.org") is not gate
