"""`collect`: every query × source, bounded; failures, timeouts and off sources are recorded, not fatal."""

from __future__ import annotations

import asyncio

from research.collect import UNEXPECTED, ProgressEvent, SearchStatus, collect
from sources.base import SearchQuery, SourceBatch, SourceErrorKind
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
    assert slow.cancelled == 2, "a search past the timeout is cancelled"
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
    assert len(result.errors) == 6

    tallies = result.per_source()
    assert (tallies["hn"].items, tallies["hn"].skipped_malformed, tallies["hn"].errors) == (6, 4, 0)
    assert (tallies["arxiv"].searches, tallies["arxiv"].errors) == (2, 2)
    assert tallies["x"].skipped_reason == "X_BEARER_TOKEN is not set"
    found_by = {(item.id, outcome.source, outcome.query_index) for item, outcome in result.items_with_outcomes()}
    assert len(found_by) == 12 and {(s, i) for _, s, i in found_by} == {("hn", 0), ("hn", 1), ("news", 0), ("news", 1)}
    assert [e.done for e in events] == list(range(1, 11))
    assert {e.total for e in events} == {10}


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
