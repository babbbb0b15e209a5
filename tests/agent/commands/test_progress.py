"""The bridge from research's synchronous progress callback to a chat's async progress sink."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import timedelta
from pathlib import Path

import pytest

from agent.commands.progress import CollectionProgress, PipelineProgress, ProgressRelay
from kernel import ProgressUpdate
from research.collect import ProgressEvent
from research.goal import CollectionGoal
from research.jobs import run_collection_job
from research.pipeline import run_pipeline
from research.pipeline_models import PipelineRequest
from sources.base import SearchQuery
from tests.research.fake_sources import BASE_TIME, RecordingSource, make_item


class Sink:
    """A progress sink that records updates; `hold()` makes it wait (a slow chat platform) until `release()`."""

    def __init__(self) -> None:
        self.updates: list[ProgressUpdate] = []
        self._open = asyncio.Event()
        self._open.set()
        self.waiting = asyncio.Event()

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def __call__(self, update: ProgressUpdate) -> None:
        self.waiting.set()
        await self._open.wait()
        self.updates.append(update)

    @property
    def texts(self) -> list[str]:
        return [update.text for update in self.updates]


def event(message: str, kind: str = "stage", done: int = 0, total: int = 0) -> ProgressEvent:
    return ProgressEvent(kind=kind, message=message, done=done, total=total)  # type: ignore[arg-type]


def echo(event: ProgressEvent) -> str:
    return event.message


async def test_lines_arrive_in_order_and_end_with_done() -> None:
    sink = Sink()
    async with ProgressRelay(sink, echo, final_text="all done") as relay:
        await relay.announce("starting…")
        for n in range(3):
            relay(event(f"step {n}"))
            await asyncio.sleep(0)  # the work awaits something between steps
        relay(event("step 2"))  # an unchanged line is not sent again

    assert sink.texts == ["starting…", "step 0", "step 1", "step 2", "all done"]
    assert [update.done for update in sink.updates] == [False, False, False, False, True]
    assert relay.sent == sink.texts


async def test_a_slow_sink_never_blocks_the_work_and_superseded_lines_are_skipped() -> None:
    sink = Sink()
    async with ProgressRelay(sink, echo) as relay:
        relay(event("first"))
        await asyncio.wait_for(sink.waiting.wait(), timeout=10)
        sink.hold()  # the platform is slow with the next line
        relay(event("second"))
        await asyncio.sleep(0)
        for n in range(50):  # the work goes on meanwhile: every call returns at once
            relay(event(f"line {n}"))
        sink.release()

    assert sink.texts[0] == "first"
    assert sink.texts[-2:] == ["line 49", "done"]
    assert len(sink.texts) < 10  # the pile-up was collapsed to its newest line
    positions = [int(text.split()[1]) for text in sink.texts if text.startswith("line ")]
    assert positions == sorted(positions)


async def test_lines_from_a_worker_thread_arrive() -> None:
    sink = Sink()
    async with ProgressRelay(sink, echo) as relay:
        # the thread hands the line to the loop before to_thread's own result arrives, so it is queued first
        await asyncio.to_thread(relay, event("from a thread"))

    assert sink.texts == ["from a thread", "done"]


async def test_a_failing_sink_or_description_does_not_break_the_work(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    async def broken(update: ProgressUpdate) -> None:
        calls.append(update.text)
        raise ConnectionError("platform down")

    def fussy(event: ProgressEvent) -> str:
        if event.message == "bad":
            raise KeyError("oops")
        return event.message

    with caplog.at_level(logging.WARNING):
        async with ProgressRelay(broken, fussy) as relay:
            relay(event("bad"))
            relay(event("good"))

    assert calls == ["good", "done"]
    assert relay.sent == []
    assert "progress description failed" in caplog.text


async def test_failed_work_still_closes_the_status_and_the_error_propagates() -> None:
    sink = Sink()
    with pytest.raises(RuntimeError, match="boom"):
        async with ProgressRelay(sink, echo) as relay:
            relay(event("working"))
            raise RuntimeError("boom")

    assert sink.updates[-1] == ProgressUpdate(text="stopped", done=True)


async def test_cancelled_work_sends_nothing_more() -> None:
    sink = Sink()
    started = asyncio.Event()

    async def work() -> None:
        async with ProgressRelay(sink, echo) as relay:
            relay(event("working"))
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(work())
    await asyncio.wait_for(started.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert not any(update.done for update in sink.updates)


async def test_long_lines_are_cut_to_the_platform_limit() -> None:
    sink = Sink()
    async with ProgressRelay(sink, echo, final_text="x" * 900) as relay:
        relay(event("y" * 900))

    assert [len(text) for text in sink.texts] == [500, 500]


async def test_a_real_pipeline_run_reads_stage_by_stage(tmp_path: Path) -> None:
    def answer(name: str):  # type: ignore[no-untyped-def]
        return lambda query: [
            make_item(name, f"{name}-{n}", title=f"{name} story {n} about DeepSeek") for n in range(4)
        ]

    sources = [RecordingSource("hn", answer("hn")), RecordingSource("news", answer("news"))]
    describe = PipelineProgress()
    lines: list[str] = []

    def record(event: ProgressEvent) -> None:
        line = describe(event)
        if line is not None:
            lines.append(line)

    await run_pipeline(
        PipelineRequest(topic="DeepSeek", sources=sources, since=BASE_TIME - timedelta(days=1), until=BASE_TIME),
        light_model=None,
        heavy_model=None,
        out_dir=tmp_path,
        stem="deepseek",
        progress=record,
    )

    assert lines[0] == "planning the searches…"
    assert lines[1] == "collecting 2 sources…"
    assert "collecting 2 sources… 2/2 searches, 8 items" in lines
    assert lines[-1].startswith("collecting 2 sources… 8 items… searching related terms…")
    assert re.search(
        r"checking what is new… critiquing the top \d+… writing the digest… saving the CSV and chart…$", lines[-1]
    )
    assert all(len(line) <= 500 for line in lines)


async def test_a_real_collection_job_reads_attempt_by_attempt(tmp_path: Path) -> None:
    def answer(query: SearchQuery) -> list:  # type: ignore[type-arg]
        return [make_item("hn", f"{query.text}-{n}", title=f"{query.text} {n}") for n in range(5)]

    describe = CollectionProgress()
    lines: list[str] = []

    def record(event: ProgressEvent) -> None:
        line = describe(event)
        if line is not None:
            lines.append(line)

    result = await run_collection_job(
        "rust embedded",
        sources=[RecordingSource("hn", answer)],
        model=None,
        goal=CollectionGoal(target=8),
        out_dir=tmp_path,
        progress=record,
    )

    assert lines[0] == "attempt 1 of 10: searching…"
    assert any(line.startswith("attempt 1 of 10: done · so far ") for line in lines), lines
    assert lines[-2].startswith(f"{result.report.total_unique} unique items: ")
    assert lines[-1] == f"writing {result.report.total_unique} items…"
