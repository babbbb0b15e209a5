"""The procrastinate job queue (app/jobqueue.py) without PostgreSQL: its jobs on procrastinate's in-memory connector,
Lookout's tables on SQLite, so the default suite covers the tick, the runs, the deliveries, the briefings job and
the retry of stalled jobs. The same paths on PostgreSQL, with real processes: tests/app/test_scale.py,
test_roles.py and test_briefing_job.py (skipped without TEST_DATABASE_URL).

Two `JobQueue`s on one in-memory connector stand for two processes sharing one queue; a test plays a worker by
running the queue's jobs until none is left, and fires the periodic jobs for a chosen minute as procrastinate's
periodic deferrer does in every worker.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from procrastinate import App
from procrastinate.periodic import PeriodicDeferrer
from procrastinate.testing import InMemoryConnector
from sqlalchemy import select

from app.jobqueue import DELIVER, RUN_MONITOR, TICK, DeliveryJobs, JobQueue, WorkerDuties
from app.monitor_service import build_monitor_service
from app.settings import Settings
from monitors import DeliveryWorker, MonitorService, MonitorSettings, parse_schedule
from research.pipeline import run_pipeline
from storage import ChatRecord, Database, DeliveryStatus, RunStatus
from storage.models import Run
from storage.repositories import ChatRepository, DeliveryRepository, RunRepository
from tests.backends import sqlite_url
from tests.kit import FakeClock
from tests.monitors.conftest import story_source
from tests.monitors.fakes import RecordingSender, resolver

RUN_AT = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""The minute both monitors are due (an hour's first minute, so the tick's hourly housekeeping runs too)."""
BRIEFING_AT = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


@dataclass
class Stack:
    """One Lookout stack on SQLite with two processes' job queues sharing one in-memory queue."""

    database: Database
    clock: FakeClock
    sender: RecordingSender
    service: MonitorService
    worker: DeliveryWorker
    connector: InMemoryConnector
    queues: tuple[JobQueue, JobQueue]

    def deliveries(self, queue: JobQueue) -> DeliveryJobs:
        return DeliveryJobs(self.database, queue, worker=self.worker, clock=self.clock)

    async def chat(self, external_id: str) -> ChatRecord:
        return await ChatRepository(self.database).get_or_create("telegram", external_id, title=external_id)

    async def runs_of(self, monitor_id: int) -> list[Run]:
        async with self.database.sessions() as session:
            return list(await session.scalars(select(Run).where(Run.monitor_id == monitor_id)))

    def jobs(self, task: str) -> list[dict[str, object]]:
        return [job for job in self.connector.jobs.values() if job["task_name"] == task]


async def fire(queue: JobQueue, at: datetime) -> None:
    """Defer every periodic job (tick, briefings, stalled jobs) for the slot that `at` falls in, as the periodic
    deferrer of a worker that starts at `at` does."""
    deferrer = PeriodicDeferrer(queue.app.periodic_registry)
    await deferrer.defer_jobs(deferrer.get_previous_tasks(at=at.timestamp()))


async def work_off(queue: JobQueue) -> None:
    """A worker that runs the queue's jobs until none is left."""
    await queue.app.run_worker_async(wait=False, install_signal_handlers=False, concurrency=1)


@pytest.fixture
async def stack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Stack]:
    path = tmp_path / "lookout.db"
    shutil.copyfile(sqlite_template, path)
    database = Database(sqlite_url(path))
    clock = FakeClock(RUN_AT - timedelta(hours=1))
    sender = RecordingSender()
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
    connector = InMemoryConnector()
    settings = Settings(database_url=sqlite_url(path))
    queues = []
    for name in ("worker-a", "worker-b"):
        queue = JobQueue(settings, name=name)
        queue.app = App(connector=connector)  # the same queue for both "processes", in memory
        queue.register(WorkerDuties(database=database, service=service, delivery=worker, clock=clock))
        queues.append(queue)
    first, second = queues
    async with first, second:
        yield Stack(database, clock, sender, service, worker, connector, (first, second))
    await database.dispose()


async def test_two_workers_tick_the_same_minute_once_and_each_due_monitor_runs_and_is_delivered_once(
    stack: Stack,
) -> None:
    a, b = stack.queues
    chats = [await stack.chat("1001"), await stack.chat("1002")]
    monitors = [
        await stack.service.create_monitor(chat.id, "DeepSeek", schedule_text="daily at 13:00", sources="hn")
        for chat in chats
    ]
    stack.clock.set(RUN_AT + timedelta(seconds=20))

    await fire(a, RUN_AT + timedelta(seconds=20))
    await fire(b, RUN_AT + timedelta(seconds=40))  # the other worker's deferrer, the same minute
    assert len(stack.jobs(TICK)) == 1, "one tick per minute however many workers fire it"

    await work_off(b)  # the tick defers one run per due monitor; the runs queue their digests
    runs = [job for job in stack.jobs(RUN_MONITOR) if job["status"] == "succeeded"]
    assert sorted(str(job["queueing_lock"]) for job in runs) == sorted(f"monitor:{m.id}" for m in monitors)
    assert [len(await stack.runs_of(m.id)) for m in monitors] == [1, 1]

    jobs_a, jobs_b = stack.deliveries(a), stack.deliveries(b)
    assert await jobs_a.sweep() == 2  # one delivery job per chat with rows due
    assert await jobs_b.sweep() == 0  # the other process finds them waiting
    deliver = stack.jobs(DELIVER)
    assert sorted(str(job["lock"]) for job in deliver) == sorted(f"chat:{chat.id}" for chat in chats)
    await work_off(a)

    assert sorted(sent.chat.id for sent in stack.sender.sent) == sorted(chat.id for chat in chats)
    assert all("DeepSeek" in sent.text for sent in stack.sender.sent)
    for m in monitors:
        [run] = await stack.runs_of(m.id)
        assert [row.status for row in await DeliveryRepository(stack.database).list_for_run(run.id)] == [
            DeliveryStatus.SENT
        ]

    # The next minute's tick finds nothing due (each monitor's next run is tomorrow); sweeps find nothing to send.
    stack.clock.set(RUN_AT + timedelta(minutes=1, seconds=5))
    await fire(a, RUN_AT + timedelta(minutes=1, seconds=5))
    await work_off(a)
    assert len(stack.jobs(RUN_MONITOR)) == 2
    assert await jobs_b.sweep() == 0
    assert [len(await stack.runs_of(m.id)) for m in monitors] == [1, 1]
    assert len(stack.sender.sent) == 2


async def test_a_run_waiting_or_under_way_gets_no_second_job(stack: Stack) -> None:
    a, b = stack.queues
    assert await a.defer_due_runs([1, 2]) == 2
    assert not await b.defer_run(1)  # its queueing lock: one waiting run per monitor
    manager = a.app.job_manager
    worker_id = await manager.register_worker()
    taken = await manager.fetch_job(queues=None, worker_id=worker_id)  # one run is now under way
    assert taken is not None
    again = await b.defer_due_runs([1, 2, 3])  # the next tick: both still due, and a third
    assert again == 1, "only monitor 3 gets a job: 1 and 2 have one waiting or under way"
    assert sorted(str(job["queueing_lock"]) for job in stack.jobs(RUN_MONITOR)) == [
        "monitor:1",
        "monitor:2",
        "monitor:3",
    ]


async def test_a_delivery_job_per_chat_is_deferred_once_while_it_waits(stack: Stack) -> None:
    a, b = stack.queues
    assert await a.defer_delivery(7)
    assert not await b.defer_delivery(7)  # another process's sweep: the chat's job already waits
    assert await b.defer_delivery(8)
    [seven] = [job for job in stack.jobs(DELIVER) if job["args"] == {"chat_id": 7}]
    assert (seven["lock"], seven["queueing_lock"], seven["queue_name"]) == ("chat:7", "deliver:7", "deliveries")


async def test_the_run_of_a_worker_that_stopped_sending_heartbeats_goes_back_and_another_worker_finishes_it(
    stack: Stack,
) -> None:
    a, b = stack.queues
    chat = await stack.chat("1001")
    monitor = await stack.service.create_monitor(chat.id, "DeepSeek", schedule_text="daily at 13:00", sources="hn")
    stack.clock.set(RUN_AT + timedelta(seconds=20))
    assert await a.defer_run(monitor.id)
    manager = a.app.job_manager
    dead = await manager.register_worker()
    taken = await manager.fetch_job(queues=None, worker_id=dead)
    assert taken is not None and taken.task_name == RUN_MONITOR
    left = await RunRepository(stack.database).open_run(monitor.id, RUN_AT, now=stack.clock())  # it began the run
    assert left is not None
    stack.connector.workers[dead] = datetime.now(UTC) - timedelta(hours=1)  # its last heartbeat, long ago

    await fire(b, datetime.now(UTC))  # the stalled-jobs job, among the periodic ones
    await work_off(b)

    [job] = stack.jobs(RUN_MONITOR)
    assert job["status"] == "succeeded" and job["attempts"] == 2  # handed back once, then run to the end
    [run] = await stack.runs_of(monitor.id)
    assert run.id == left.id and run.status == RunStatus.SUCCEEDED  # the run it left, not a second one
    assert await stack.deliveries(a).sweep() == 1
    await work_off(a)
    [sent] = stack.sender.sent  # its digest, once
    assert sent.chat.id == chat.id


async def test_the_briefings_job_queues_a_due_briefing_once_however_often_it_fires(stack: Stack) -> None:
    a, b = stack.queues
    chat = await stack.chat("4242")
    schedule = parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
    await stack.service.briefings.set_briefing(chat.id, schedule)
    monitor = await stack.service.create_monitor(chat.id, "DeepSeek", schedule_text="daily at 13:00", sources="hn")
    stack.clock.set(RUN_AT)
    run = await stack.service.runs.run_monitor(monitor.id, RUN_AT)
    assert run is not None and run.deliveries == 0  # kept for the briefing

    stack.clock.set(BRIEFING_AT + timedelta(seconds=20))
    await fire(a, BRIEFING_AT + timedelta(seconds=20))
    await fire(b, BRIEFING_AT + timedelta(seconds=50))
    await work_off(a)
    await stack.deliveries(b).sweep()
    await fire(b, BRIEFING_AT + timedelta(minutes=1, seconds=5))  # the next minute's firing finds nothing due
    await work_off(b)
    await stack.deliveries(a).sweep()
    await work_off(a)

    async with stack.database.sessions() as session:
        ids = list(await session.scalars(select(Run.id).where(Run.chat_id == chat.id, Run.monitor_id.is_(None))))
    assert len(ids) == 1
    rows = await DeliveryRepository(stack.database).list_for_run(ids[0])
    assert [row.status for row in rows] == [DeliveryStatus.SENT]
    [sent] = stack.sender.sent
    assert sent.text.startswith("**Your briefing · 2026-11-20 14:00 UTC**")
    refreshed = await RunRepository(stack.database).get(ids[0])
    assert refreshed is not None and refreshed.stats["kind"] == "briefing"
