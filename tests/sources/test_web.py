"""Web search: what the source asks its backend, how results become Items, and the ddgs adapter (no network).

`web` is best-effort: ddgs scrapes search engines and cannot be pointed at a fake server, so these tests
stop at the `search_fn` seam and at ddgs's result shape; no wire format is tested.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.web import (
    WebResult,
    WebResults,
    WebSearchRequest,
    WebSearchSource,
    ddgs_region,
    ddgs_timelimit,
    make_ddgs_search,
)

# The shape `DDGS().text()` returns (title/href/body), incl. what a scraper can hand back broken.
DDGS_RESULTS: list[dict[str, Any]] = [
    {
        "title": "DeepSeek releases V4 with open weights",
        "href": "https://www.example-news.com/ai/deepseek-v4?utm_source=ddg&utm_medium=search#comments",
        "body": "The Hangzhou lab published a 1.2T-parameter mixture-of-experts model under the MIT licence…",
    },
    {
        "title": "深度求索发布 V4 模型",
        "href": "https://www.36kr.com/p/3012345678",
        "body": "深度求索今日发布新一代大模型。",
    },
    {"title": "", "href": "https://example.org/no-title", "body": "no title"},
    {"title": "Relative link", "href": "/search?q=deepseek", "body": ""},
    {"title": "Missing link", "body": "no href at all"},
]


class RecordingSearch:
    """A fake backend that records each request and answers with canned results."""

    def __init__(self, results: WebResults) -> None:
        self.requests: list[WebSearchRequest] = []
        self._results = results

    async def __call__(self, request: WebSearchRequest) -> WebResults:
        self.requests.append(request)
        return self._results


async def test_source_asks_the_backend_with_region_time_and_limit() -> None:
    backend = RecordingSearch(WebResults())
    source = WebSearchSource(search_fn=backend)

    await source.search(
        SearchQuery(text="  deepseek v4 ", language="zh", since=datetime.now(UTC) - timedelta(days=3), limit=500)
    )

    (request,) = backend.requests
    assert request == WebSearchRequest(text="deepseek v4", region="cn-zh", timelimit="w", max_results=100)


async def test_results_become_items_with_canonical_urls_and_no_duplicates() -> None:
    results = [
        WebResult(title="DeepSeek releases V4", href="https://Example-News.com/ai/deepseek-v4?utm_source=x", body="…"),
        WebResult(title="Same page, other tracking", href="https://example-news.com/ai/deepseek-v4?fbclid=1", body=""),
        WebResult(title="深度求索发布 V4 模型", href="https://www.36kr.com/p/3012345678", body="深度求索今日发布"),
    ]
    source = WebSearchSource(search_fn=RecordingSearch(WebResults(results=results, skipped=2)))

    batch = await source.search(SearchQuery(text="deepseek"))

    assert batch.skipped == 2
    assert [item.url for item in batch.items] == [
        "https://example-news.com/ai/deepseek-v4",
        "https://www.36kr.com/p/3012345678",
    ]
    first = batch.items[0]
    assert first.source == "web" and first.id.startswith("url:") and first.query == "deepseek"
    assert first.published is None  # search engines give no reliable date


async def test_default_backend_maps_ddgs_results_and_passes_options() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    threads: list[str] = []

    def fake_text(query: str, **options: Any) -> list[dict[str, Any]]:
        calls.append((query, options))
        threads.append(threading.current_thread().name)
        return DDGS_RESULTS

    search = make_ddgs_search(timeout=5, text_search=fake_text)

    outcome = await search(WebSearchRequest(text="deepseek", region="us-en", timelimit="d", max_results=15))

    assert calls == [("deepseek", {"region": "us-en", "safesearch": "moderate", "timelimit": "d", "max_results": 15})]
    assert threads[0] != threading.main_thread().name  # blocking ddgs runs off the event loop
    assert outcome.skipped == 3  # empty title, relative link, missing link
    assert [r.title for r in outcome.results] == ["DeepSeek releases V4 with open weights", "深度求索发布 V4 模型"]
    assert outcome.results[0].href.startswith("https://www.example-news.com/ai/deepseek-v4")
    assert outcome.results[1].body == "深度求索今日发布新一代大模型。"


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (RatelimitException("https://duckduckgo.com 202 Ratelimit"), SourceErrorKind.RATE_LIMITED),
        (TimeoutException("https://lite.duckduckgo.com/lite/ timed out"), SourceErrorKind.TIMEOUT),
        (DDGSException("all engines failed"), SourceErrorKind.NETWORK),
        (KeyError("results"), SourceErrorKind.BAD_RESPONSE),
    ],
)
async def test_ddgs_exceptions_become_source_errors(raised: Exception, kind: SourceErrorKind) -> None:
    def failing(query: str, **options: Any) -> list[dict[str, Any]]:
        raise raised

    source = WebSearchSource(search_fn=make_ddgs_search(text_search=failing))

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is kind


async def test_no_results_from_ddgs_is_an_empty_batch() -> None:
    def nothing(query: str, **options: Any) -> list[dict[str, Any]]:
        raise DDGSException("No results found.")

    batch = await WebSearchSource(search_fn=make_ddgs_search(text_search=nothing)).search(SearchQuery(text="zzzxqv"))

    assert batch.items == [] and batch.skipped == 0


async def test_a_hung_backend_times_out() -> None:
    release = threading.Event()

    def hang(query: str, **options: Any) -> list[dict[str, Any]]:
        release.wait(5)
        return []

    search = make_ddgs_search(timeout=0.05, text_search=hang)
    try:
        with pytest.raises(SourceError) as caught:
            await search(WebSearchRequest(text="deepseek"))
    finally:
        release.set()

    assert caught.value.kind is SourceErrorKind.TIMEOUT


async def test_empty_query_is_refused() -> None:
    backend = RecordingSearch(WebResults())
    with pytest.raises(SourceError) as caught:
        await WebSearchSource(search_fn=backend).search(SearchQuery(text="   "))
    assert caught.value.kind is SourceErrorKind.CLIENT and backend.requests == []


@pytest.mark.parametrize(
    ("language", "region", "expected"),
    [
        (None, None, "us-en"),
        ("zh", None, "cn-zh"),
        ("en", "GB", "gb-en"),
        ("de", None, "de-de"),
        ("ja-JP", None, "jp-ja"),
    ],
)
def test_ddgs_region(language: str | None, region: str | None, expected: str) -> None:
    assert ddgs_region(language=language, region=region) == expected


def test_ddgs_timelimit() -> None:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    assert ddgs_timelimit(None, now=now) is None
    assert ddgs_timelimit(now - timedelta(hours=5), now=now) == "d"
    assert ddgs_timelimit(now - timedelta(days=20), now=now) == "m"
    assert ddgs_timelimit(now - timedelta(days=300), now=now) == "y"
    assert ddgs_timelimit(now - timedelta(days=3000), now=now) is None
