"""GitHub repository search and release feeds, against a fake GitHub replaying recorded answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from sources.base import Engagement, SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.github import GitHubSource, web_base_url
from sources.http import HttpClient
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory

SEARCH = "/search/repositories"


def _source(fake_server: FakeHTTPServer, client: HttpClient, *, token: str | None = None) -> GitHubSource:
    config = SourcesConfig(github_api_url=fake_server.url, github_token=SecretStr(token) if token is not None else None)
    return GitHubSource(client=client, config=config)


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> FakeResponse:
    return FakeResponse(status=status, body=body, content_type="application/json", headers=headers or {})


def _route_search(fake_server: FakeHTTPServer, payload: Callable[[str], bytes]) -> None:
    fake_server.route("GET", SEARCH, _json(payload("github_search_repositories.json")))
    fake_server.route(
        "GET",
        "/deepseek-ai/DeepSeek-V4/releases.atom",
        FakeResponse(body=payload("github_releases_deepseek.xml"), content_type="application/atom+xml"),
    )
    fake_server.route(
        "GET",
        "/someone/deepseek-chat-ui/releases.atom",
        FakeResponse(body=payload("github_releases_empty.xml"), content_type="application/atom+xml"),
    )
    # lmsys-fan/deepseek-v4-gguf has no route: the fake answers 404, which must not sink the search.


async def test_recent_repositories_with_token_and_releases(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    _route_search(fake_server, payload)

    batch = await _source(fake_server, http_client, token="ghp_test_token").search(
        SearchQuery(text="the DeepSeek", since=datetime(2026, 11, 18, tzinfo=UTC), limit=50)
    )

    (request,) = fake_server.received(SEARCH)
    assert request.query == {
        "q": "DeepSeek pushed:>2026-11-18T00:00:00Z",
        "sort": "updated",
        "order": "desc",
        "per_page": "50",
    }
    assert request.headers["authorization"] == "Bearer ghp_test_token"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"

    # Releases of the three most starred repositories, the fourth is left alone.
    fetched = {r.path for r in fake_server.requests if r.path.endswith("/releases.atom")}
    assert fetched == {
        "/deepseek-ai/DeepSeek-V4/releases.atom",
        "/someone/deepseek-chat-ui/releases.atom",
        "/lmsys-fan/deepseek-v4-gguf/releases.atom",
    }

    # A repository without html_url, one with negative stars, a release without a link.
    assert batch.skipped == 3
    repos = {item.title: item for item in batch.items if "/releases/" not in item.url}
    assert list(repos) == [
        "deepseek-ai/DeepSeek-V4",
        "lmsys-fan/deepseek-v4-gguf",
        "kt-research/deepseek-eval",
        "someone/deepseek-chat-ui",
    ]
    main = repos["deepseek-ai/DeepSeek-V4"]
    assert main.id == "github:repo:881234567"
    assert main.url == "https://github.com/deepseek-ai/DeepSeek-V4"
    assert main.source == "github"
    assert main.author == "deepseek-ai"
    assert main.engagement == Engagement(points=48211, reposts=6120)
    assert main.published == datetime(2026, 11, 20, 6, 44, 31, tzinfo=UTC)
    assert main.text == (
        "DeepSeek-V4: open-weight MoE model — inference code & weights\nTopics: llm, mixture-of-experts, deepseek"
    )
    assert repos["lmsys-fan/deepseek-v4-gguf"].text == "GGUF 量化版本 of DeepSeek-V4 for llama.cpp"
    assert repos["kt-research/deepseek-eval"].text == "Topics: evaluation"

    # Only the release inside the window; v4.0.0 (Nov 12) is older than `since`.
    (release,) = [item for item in batch.items if "/releases/" in item.url]
    assert release.url == "https://github.com/deepseek-ai/DeepSeek-V4/releases/tag/v4.0.1"
    assert release.title == "deepseek-ai/DeepSeek-V4 v4.0.1 – tokenizer fixes"
    assert release.author == "zhang-wei"
    assert release.published == datetime(2026, 11, 20, 6, 40, tzinfo=UTC)
    assert "Fix 中文 tokenization" in release.text and "<" not in release.text
    assert release.source == "github"


async def test_without_token_or_window(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    _route_search(fake_server, payload)

    batch = await _source(fake_server, http_client).search(SearchQuery(text="deepseek", limit=500))

    (request,) = fake_server.received(SEARCH)
    assert "authorization" not in request.headers
    assert request.query == {"q": "deepseek", "per_page": "100"}
    # Without a window every release counts (up to three per repository).
    releases = [item.title for item in batch.items if "/releases/" in item.url]
    assert releases == ["deepseek-ai/DeepSeek-V4 v4.0.1 – tokenizer fixes", "deepseek-ai/DeepSeek-V4 v4.0.0"]


async def test_empty_token_is_no_token(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", SEARCH, _json(payload("github_empty.json")))

    batch = await _source(fake_server, http_client, token="").search(SearchQuery(text="zzqxv"))

    (request,) = fake_server.received(SEARCH)
    assert "authorization" not in request.headers
    assert batch.items == []
    assert len(fake_server.requests) == 1  # nothing found, no release feeds asked


async def test_403_rate_limit_is_rate_limited(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET",
        SEARCH,
        _json(
            payload("github_rate_limited.json"),
            status=403,
            headers={"x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1795165304"},
        ),
    )

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.RATE_LIMITED
    assert raised.value.status == 403
    assert "GITHUB_TOKEN" in str(raised.value)
    assert len(fake_server.requests) == 1


async def test_429_with_retry_after(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET", SEARCH, _json(payload("github_rate_limited.json"), status=429, headers={"Retry-After": "600"})
    )

    with pytest.raises(SourceError) as raised:
        await _source(fake_server, http_client).search(SearchQuery(text="deepseek"))

    assert raised.value.kind is SourceErrorKind.RATE_LIMITED
    assert raised.value.retry_after == 600


async def test_other_errors_keep_their_kind(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    client = make_http_client(max_retries=0)
    fake_server.route("GET", SEARCH, _json(payload("github_validation_failed.json"), status=422))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, client).search(SearchQuery(text="deepseek"))
    assert raised.value.kind is SourceErrorKind.CLIENT

    fake_server.route("GET", SEARCH, FakeResponse(status=502, body="Bad Gateway"))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, client).search(SearchQuery(text="deepseek"))
    assert raised.value.kind is SourceErrorKind.SERVER

    fake_server.route("GET", SEARCH, _json(b'{"unexpected": true}'))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, client).search(SearchQuery(text="deepseek"))
    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE


def test_web_base_url() -> None:
    assert web_base_url("https://api.github.com") == "https://github.com"
    assert web_base_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com"
    assert web_base_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
