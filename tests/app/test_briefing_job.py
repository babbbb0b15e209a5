"""The `lookout.briefings` job (JOB_QUEUE=procrastinate): a due briefing is assembled and delivered once, however
often the periodic job fires. On a throwaway PostgreSQL database; skipped without TEST_DATABASE_URL."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from procrastinate.exceptions import AlreadyEnqueued
from sqlalchemy import select

from app.jobqueue import BRIEFINGS, DeliveryJobs, JobQueue, WorkerDuties, process_name
from app.monitor_service import build_monitor_service
from app.settings import Settings
from monitors import DeliveryWorker, MonitorSettings, parse_schedule
from research.pipeline import run_pipeline
from storage import Database, DeliveryStatus
from storage.models import Run
from storage.repositories import ChatRepository, DeliveryRepository, RunRepository
from tests.kit import FakeClock
from tests.monitors.conftest import story_source
from tests.monitors.fakes import RecordingSender, resolver

pytestmark = pytest.mark.postgres

RUN_AT = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
BRIEFING_AT = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


async def _work_off(queue: JobQueue) -> None:
    """Run the queue's jobs until none is left (a worker that stops when the queue is empty)."""
    await queue.app.run_worker_async(wait=False, install_signal_handlers=False, concurrency=1)


async def _fire_briefings(queue: JobQueue, at: datetime) -> None:
    """What the periodic deferrer does each minute: defer `lookout.briefings` with that minute's timestamp."""
    deferrer = queue.app.configure_task(name=BRIEFINGS, queue="monitors", queueing_lock="briefings")
    with contextlib.suppress(AlreadyEnqueued):  # one is already waiting: it does the work
        await deferrer.defer_async(timestamp=int(at.timestamp()))


def test_the_briefings_job_assembles_a_due_briefing_and_it_is_delivered_once(
    job_queue_settings: Settings, tmp_path: Path
) -> None:
    settings = job_queue_settings

    async def scenario() -> tuple[RecordingSender, list[DeliveryStatus], dict[str, object], datetime | None]:
        database = Database(settings.database_url)
        clock = FakeClock(RUN_AT - timedelta(hours=1))
        sender = RecordingSender(split=True)  # the text, the CSV, the chart
        worker = DeliveryWorker(database, {"telegram": sender}, clock=clock)
        service = build_monitor_service(
            database,
            resolve_sources=resolver({"hn": story_source("hn")}),
            light_model=None,
            heavy_model=None,
            out_dir=tmp_path / "exports",
            settings=MonitorSettings(min_interval_seconds=900),
            clock=clock,
            pipeline=run_pipeline,
        )
        try:
            chat = await ChatRepository(database).get_or_create("telegram", "4242", title="reader")
            schedule = parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
            await service.briefings.set_briefing(chat.id, schedule)
            first = await service.create_monitor(chat.id, "DeepSeek", schedule_text="daily at 13:00", sources="hn")
            second = await service.create_monitor(chat.id, "Mistral", schedule_text="daily at 13:00", sources="hn")
            clock.set(RUN_AT)
            runs = [await service.runs.run_monitor(m.id, RUN_AT) for m in (first, second)]
            assert all(run is not None and run.deliveries == 0 for run in runs)  # kept for the briefing

            async with JobQueue(settings, name=process_name("test")) as queue:
                queue.register(WorkerDuties(database=database, service=service, delivery=worker, clock=clock))
                jobs = DeliveryJobs(database, queue, worker=worker, clock=clock)
                clock.set(BRIEFING_AT + timedelta(seconds=20))
                await _fire_briefings(queue, BRIEFING_AT)
                await _work_off(queue)  # the briefings job claims and queues the chat's briefing
                await jobs.sweep()  # every process's sweep defers a delivery job for the chat
                await _fire_briefings(queue, BRIEFING_AT + timedelta(minutes=1))  # the next minute's firing
                await _work_off(queue)
                clock.set(BRIEFING_AT + timedelta(minutes=2))
                await _fire_briefings(queue, BRIEFING_AT + timedelta(minutes=2))
                await jobs.sweep()
                await _work_off(queue)
            async with database.sessions() as session:
                ids = list(
                    await session.scalars(select(Run.id).where(Run.chat_id == chat.id, Run.monitor_id.is_(None)))
                )
            briefing_runs = [run for run_id in ids if (run := await RunRepository(database).get(run_id)) is not None]
            assert len(briefing_runs) == 1
            rows = await DeliveryRepository(database).list_for_run(briefing_runs[0].id)
            refreshed = await ChatRepository(database).get(chat.id)
            assert refreshed is not None
            return sender, [row.status for row in rows], dict(briefing_runs[0].stats), refreshed.briefing_next_at
        finally:
            await database.dispose()

    sender, statuses, stats, next_at = asyncio.run(scenario())

    assert statuses == [DeliveryStatus.SENT]
    assert [sent.index for sent in sender.sent] == [0, 1, 2]  # one briefing: its text, CSV and chart, once
    text = sender.sent[0].text
    assert text.startswith("**Your briefing · 2026-11-20 14:00 UTC**")
    # both monitors are covered: the same stories came to both, so Mistral's are told under DeepSeek once
    assert "**DeepSeek** · monitor #1" in text and "nothing new on Mistral" in text
    assert [a.filename for a in sender.sent[0].message.attachments] == [
        "briefing-2026-11-20-1400.csv",
        "briefing-2026-11-20-1400.png",
    ]
    assert stats["kind"] == "briefing" and stats["topics"] == 2
    assert next_at == BRIEFING_AT + timedelta(days=1)
