"""`collect`: every query × source, bounded; failures, timeouts, partial answers and off sources are recorded, not
fatal."""

from __future__ import annotations

import asyncio

from pydantic import SecretStr

from research.collect import UNEXPECTED, FailedSources, ProgressEvent, SearchStatus, collect
from sources.base import SearchQuery, SourceBatch, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.rss import FeedSource
from sources.x import XSource
from tests.fakes.feeds import many_items_feed
from tests.fakes.hostile_xml import MARKER, hostile_document
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.research.fake_sources import (
    FailingSource,
    RecordingSource,
    SlowSource,
    UnavailableSource,
    make_item,
    rate_limited,
)

QUERIES = [SearchQuery(text="deepseek"), SearchQuery(text="deepseek r2", language="zh")]


async def test_every_query_goes_to_every_source_and_failures_are_recorded() -> None:
    good = RecordingSource("hn", skipped=2)
    other = RecordingSource("news")
    limited = rate_limited("github")
    slow = SlowSource("arxiv")
    broken = FailingSource("web", ValueError("boom"))
    off = UnavailableSource("x")
    events: list[ProgressEvent] = []

    result = await collect(QUERIES, [good, limited, slow, off, broken, other], timeout=0.2, progress=events.append)

    assert [q.text for q in good.queries] == ["deepseek", "deepseek r2"]
    assert [q.text for q in other.queries] == ["deepseek", "deepseek r2"]
    assert off.queries == [], "an unavailable source must not be asked"
    assert slow.cancelled == 1, "a search past the timeout is cancelled"
    # A source that failed on its first query is not asked the second one.
    assert [q.text for q in limited.queries] == [q.text for q in slow.queries] == ["deepseek"]
    assert [q.text for q in broken.queries] == ["deepseek"]
    assert len(result.items) == 12  # 3 items × 2 queries × 2 working sources
    assert {i.query for i in result.items} == {"deepseek", "deepseek r2"}

    by_pair = {(o.source, o.query): o for o in result.outcomes}
    assert len(by_pair) == 12
    ok = by_pair[("hn", "deepseek r2")]
    assert (ok.status, ok.count, ok.skipped_malformed, ok.language) == (SearchStatus.OK, 3, 2, "zh")
    assert by_pair[("github", "deepseek")].error_kind is SourceErrorKind.RATE_LIMITED
    assert by_pair[("github", "deepseek")].message == "429 Too Many Requests"
    assert by_pair[("arxiv", "deepseek")].error_kind is SourceErrorKind.TIMEOUT
    assert by_pair[("web", "deepseek")].error_kind == UNEXPECTED
    assert "ValueError: boom" in (by_pair[("web", "deepseek")].message or "")
    assert by_pair[("x", "deepseek")].status is SearchStatus.SKIPPED
    assert result.skipped_sources == {"x": "X_BEARER_TOKEN is not set"}
    assert len(result.errors) == 3
    dropped = by_pair[("github", "deepseek r2")]
    assert dropped.status is SearchStatus.DROPPED and "rate-limited" in (dropped.message or "")
    assert [f.line for f in result.failed_sources()] == [
        "github: rate-limited (HTTP 429)",
        "arxiv: no answer within 0.2 s",
        "web: unexpected error, see the log",
    ]

    tallies = result.per_source()
    assert (tallies["hn"].items, tallies["hn"].skipped_malformed, tallies["hn"].errors) == (6, 4, 0)
    assert (tallies["arxiv"].searches, tallies["arxiv"].errors) == (1, 1)
    assert tallies["x"].skipped_reason == "X_BEARER_TOKEN is not set"
    found_by = {(item.id, outcome.source, outcome.query_index) for item, outcome in result.items_with_outcomes()}
    assert len(found_by) == 12 and {(s, i) for _, s, i in found_by} == {("hn", 0), ("hn", 1), ("news", 0), ("news", 1)}
    # One event per search asked: a failing source's failure is reported once, not once per query.
    assert [e.done for e in events] == list(range(1, 8))
    assert sum("rate-limited" in e.message for e in events) == 1


async def test_concurrency_is_bounded() -> None:
    running = 0
    peak = 0

    class Counting(RecordingSource):
        async def search(self, query: SearchQuery) -> SourceBatch:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            return SourceBatch()

    queries = [SearchQuery(text=f"q{i}") for i in range(10)]
    await collect(queries, [Counting("a"), Counting("b")], concurrency=3)
    assert peak == 3


async def test_items_beyond_the_limit_are_dropped_and_query_text_is_kept() -> None:
    source = RecordingSource("hn", lambda q: [make_item("hn", str(i), query="found-by-hn") for i in range(9)])
    result = await collect([SearchQuery(text="ai", limit=4)], [source])
    assert len(result.items) == 4
    assert {i.query for i in result.items} == {"found-by-hn"}, "a query the source set is kept"


async def test_a_failing_progress_callback_does_not_break_collection() -> None:
    def explode(event: ProgressEvent) -> None:
        raise RuntimeError("display broke")

    result = await collect([SearchQuery(text="ai")], [RecordingSource("hn")], progress=explode)
    assert len(result.items) == 3


async def test_an_item_without_a_stated_language_gets_the_one_its_text_is_in() -> None:
    found = [
        make_item("news", "zh", title="深度求索发布新一代开源大模型，性能比肩国际顶尖水平", language=None),
        make_item("news", "ja", title="東京五輪、開幕式は無観客で実施へ　組織委が発表", language=None),
        make_item(
            "news", "de", title="Die Bundesregierung beschließt neue Regeln für künstliche Intelligenz", language=None
        ),
        make_item("news", "stated", title="深度求索发布新模型", language="en"),
        make_item("news", "short", title="AI", language=None),
    ]
    result = await collect([SearchQuery(text="ai")], [RecordingSource("news", lambda q: found)])
    languages = {item.id: item.language for item in result.items}
    assert languages == {"news:zh": "zh", "news:ja": "ja", "news:de": "de", "news:stated": "en", "news:short": None}


async def test_a_failed_source_is_not_asked_again_in_the_same_run() -> None:
    down = FailingSource("hn", SourceError(SourceErrorKind.NETWORK, "cannot connect to hn.example: refused"))
    picky = FailingSource("github", SourceError(SourceErrorKind.CLIENT, "HTTP 422: bad query", status=422))
    fine = RecordingSource("news")
    failed = FailedSources()

    first = await collect(QUERIES, [down, picky, fine], failed=failed)
    second = await collect([SearchQuery(text="related terms")], [down, picky, fine], failed=failed)

    assert len(down.queries) == 1, "a source that is down is asked once per run"
    assert len(picky.queries) == 3, "a query the source rejected says nothing about the next one"
    assert len(fine.queries) == 3
    assert [f.line for f in failed.failures] == ["hn: cannot connect"]
    assert [o.status for o in second.outcomes if o.source == "hn"] == [SearchStatus.DROPPED]
    assert {f.spec for f in first.failed_sources()} == {"hn", "github"}


async def test_two_feeds_are_told_apart() -> None:
    class Feed(FailingSource):
        def __init__(self, url: str) -> None:
            super().__init__("rss", SourceError(SourceErrorKind.SERVER, f"HTTP 500 from {url}: oops", status=500))
            self.spec = f"rss:{url}"

    broken = Feed("https://www.example.org/broken/feed.xml")
    working = RecordingSource("rss")

    result = await collect(QUERIES, [broken, working])

    assert len(working.queries) == 2, "one failing feed must not silence the other"
    assert [f.line for f in result.failed_sources()] == ["rss example.org/broken/feed.xml: HTTP 500"]


async def test_a_hostile_feed_is_a_named_failure_and_gives_nothing(fake_server: FakeHTTPServer) -> None:
    fake_server.route("GET", "/laughs.xml", FakeResponse(body=hostile_document("billion_laughs", "feed")))
    fake_server.route("GET", "/good.xml", FakeResponse(body=many_items_feed(3)))
    client = HttpClient(user_agent="LookoutTest/0.1", allow_private=True)
    config = SourcesConfig(allow_private_urls=True)
    try:
        feeds = [
            FeedSource(client=client, config=config, feed_url=f"{fake_server.url}/{n}.xml") for n in ("laughs", "good")
        ]
        result = await collect([SearchQuery(text="")], feeds)
    finally:
        await client.aclose()

    host = fake_server.url.removeprefix("http://")
    assert [f.line for f in result.failed_sources()] == [
        f"rss {host}/laughs.xml: this feed defines XML entities, which Lookout does not expand"
    ]
    assert len(result.items) == 3 and not any(MARKER in f"{i.title} {i.text}" for i in result.items)


async def test_a_search_cut_short_by_a_later_page_is_ok_and_says_so(fake_server: FakeHTTPServer) -> None:
    first_page = {
        "data": [{"id": "1861234567890123456", "text": "DeepSeek-V4 is out", "author_id": "7", "lang": "en"}],
        "includes": {"users": [{"id": "7", "username": "ainewsdesk"}]},
        "meta": {"result_count": 1, "next_token": "page-2"},
    }

    def answer(request: RecordedRequest) -> FakeResponse:
        if request.query.get("next_token") == "page-2":
            return FakeResponse.json({"data": "not a list"})
        return FakeResponse.json(first_page)

    fake_server.route("GET", "/2/tweets/search/recent", answer)
    client = HttpClient(user_agent="LookoutTest/0.1", allow_private=True)
    config = SourcesConfig(x_api_url=fake_server.url + "/2", x_bearer_token=SecretStr("x-token"))
    try:
        result = await collect([SearchQuery(text="deepseek")], [XSource(client=client, config=config)])
    finally:
        await client.aclose()

    (outcome,) = result.outcomes
    assert (outcome.status, outcome.count, outcome.error_kind) == (SearchStatus.OK, 1, None)
    assert outcome.message == "stopped after page 1: page 2 failed: X `data` or `includes.users` is not a list"
    assert result.partial == [outcome] and result.errors == [] and result.failed_sources() == []
    assert [item.id for item in result.items] == ["x:1861234567890123456"]
