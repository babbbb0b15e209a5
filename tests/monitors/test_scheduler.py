"""The scheduler: jobs rebuilt from the database, catch-up once after downtime, one run per scheduled time."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from monitors.schedule import latest_due_time, parse_schedule
from monitors.scheduler import (
    MonitorScheduler,
    _OffsetTrigger,
    jitter_seconds,
    misfire_grace_seconds,
)
from storage import MonitorRepository, RunRecord, RunRepository, RunStatus
from tests.monitors.conftest import World


async def test_a_monitor_three_runs_overdue_runs_once(world: World) -> None:
    service = world.service()
    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    # the process was down from 14:00 to 17:20: the 14:00, 15:00, 16:00 and 17:00 runs were missed
    world.clock.set(datetime(2026, 11, 20, 17, 20, tzinfo=UTC))

    first, second = await asyncio.gather(scheduler.fire(view.id), scheduler.fire(view.id))
    third = await scheduler.fire(view.id)

    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert [run.scheduled_for for run in runs] == [datetime(2026, 11, 20, 17, 0, tzinfo=UTC)]
    assert [s is not None for s in (first, second, third)].count(True) == 1
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.next_run_at == datetime(2026, 11, 20, 18, 0, tzinfo=UTC)


async def test_a_job_that_fires_before_the_monitor_is_due_does_nothing(world: World) -> None:
    service = world.service()
    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")

    assert await scheduler.fire(view.id) is None  # 13:00; next run 14:00
    assert await RunRepository(world.database).list_for_monitor(view.id) == []
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))
    summary = await scheduler.fire(view.id)
    assert summary is not None and summary.scheduled_for == datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


async def test_a_run_abandoned_by_a_crash_does_not_leave_the_monitor_stuck(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    due = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)
    await RunRepository(world.database).open_run(view.id, due, now=due)  # the process died mid-run
    world.clock.set(due + timedelta(minutes=10))

    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    await scheduler.start()
    try:
        assert await scheduler.fire(view.id) is None  # the 14:00 run exists (now failed as abandoned)
    finally:
        scheduler.shutdown()

    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert [run.status for run in runs] == [RunStatus.FAILED]
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.next_run_at == due + timedelta(hours=1)


async def test_start_rebuilds_jobs_and_a_real_scheduler_fires_the_catch_up(world: World) -> None:
    world.clock.set(datetime.now(UTC))  # APScheduler keeps real time: let the monitors' clock agree with it
    service = world.service()
    monitors = MonitorRepository(world.database)
    overdue = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    await monitors.set_next_run(overdue.id, world.clock() - timedelta(hours=3))
    upcoming = await service.create_monitor(world.chats[1].id, "Mistral", schedule_text="daily", sources="hn")
    paused = await service.create_monitor(world.chats[2].id, "Qwen", sources="hn")
    await service.pause(paused.id, chat_id=world.chats[2].id)

    # no jitter, so the catch-up fires at once rather than up to a minute later
    scheduler = MonitorScheduler(service, world.database, clock=world.clock, max_jitter_seconds=0)
    assert await scheduler.start() == 2
    try:
        assert scheduler.running
        assert scheduler.job(paused.id) is None
        job = scheduler.job(upcoming.id)
        assert job is not None and job.max_instances == 1 and job.coalesce
        assert job.misfire_grace_time == 3600
        assert job.next_run_time > datetime.now(UTC)
        runs = await _runs_when_finished(world, overdue.id)  # the overdue monitor fires once, right away
        assert len(runs) == 1 and runs[0].status is RunStatus.SUCCEEDED
        assert await RunRepository(world.database).list_for_monitor(upcoming.id) == []
        catch_up = scheduler.job(overdue.id)
        assert catch_up is not None and catch_up.next_run_time > datetime.now(UTC)  # back on its hourly trigger
    finally:
        scheduler.shutdown()
        # a run still going when an assertion failed must end before the database is closed under it
        await _runs_when_finished(world, overdue.id)


async def _runs_when_finished(world: World, monitor_id: int, *, within: float = 120.0) -> list[RunRecord]:
    """The monitor's runs once none is running (a loaded machine can take many seconds), or as they are."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        runs = await RunRepository(world.database).list_for_monitor(monitor_id)
        finished = bool(runs) and all(run.status is not RunStatus.RUNNING for run in runs)
        if finished or asyncio.get_running_loop().time() > deadline:
            return runs
        await asyncio.sleep(0.05)


async def test_jobs_follow_create_pause_resume_and_delete(world: World) -> None:
    service = world.service()
    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    await scheduler.start()
    try:
        chat = world.chats[0].id
        view = await service.create_monitor(chat, "DeepSeek", schedule_text="every 6 hours", sources="hn")
        assert scheduler.job(view.id) is not None
        await service.pause(view.id, chat_id=chat)
        assert scheduler.job(view.id) is None
        await service.resume(view.id, chat_id=chat)
        job = scheduler.job(view.id)
        assert job is not None and job.misfire_grace_time == 3600
        await service.update_monitor(view.id, chat_id=chat, schedule_text="every 30 minutes")
        job = scheduler.job(view.id)
        assert job is not None and job.misfire_grace_time == 15 * 60
        await service.delete(view.id, chat_id=chat)
        assert scheduler.job(view.id) is None
    finally:
        scheduler.shutdown()


def test_misfire_grace_fits_the_schedule() -> None:
    def grace(text: str) -> int:
        return misfire_grace_seconds(parse_schedule(text, timezone="UTC", min_interval_seconds=60))

    assert grace("every 15 minutes") == 450
    assert grace("hourly") == 1800
    assert grace("daily at 09:00") == 3600
    assert grace("weekly on monday") == 3600


def test_jitter_is_small_stable_and_spreads_monitors() -> None:
    daily = parse_schedule("daily at 09:00", timezone="UTC", min_interval_seconds=60)
    short = parse_schedule("every 5 minutes", timezone="UTC", min_interval_seconds=60)
    offsets = [jitter_seconds(monitor_id, daily) for monitor_id in range(1, 101)]
    assert offsets == [jitter_seconds(monitor_id, daily) for monitor_id in range(1, 101)]
    assert all(0 <= offset <= 60 for offset in offsets) and len(set(offsets)) > 20
    assert all(0 <= jitter_seconds(monitor_id, short) <= 30 for monitor_id in range(1, 101))


def test_the_offset_trigger_fires_after_the_schedule_by_the_jitter() -> None:
    daily = parse_schedule("daily at 09:00", timezone="Europe/Berlin", min_interval_seconds=60)
    trigger = _OffsetTrigger(daily.trigger(), 17)
    first = trigger.get_next_fire_time(None, datetime(2026, 11, 20, 8, 0, 10, tzinfo=UTC))
    assert first == datetime(2026, 11, 20, 8, 0, 17, tzinfo=UTC)  # 09:00 Berlin + 17 s, still ahead of now
    following = trigger.get_next_fire_time(first, first)
    assert following == datetime(2026, 11, 21, 8, 0, 17, tzinfo=UTC)


def test_latest_due_time_picks_the_most_recent_missed_time() -> None:
    schedule = parse_schedule("every 6 hours", timezone="UTC", min_interval_seconds=60)
    first_due = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
    assert latest_due_time(schedule, first_due, first_due) == first_due
    assert latest_due_time(schedule, first_due, datetime(2026, 11, 1, 13, 0, tzinfo=UTC)) == datetime(
        2026, 11, 1, 12, 0, tzinfo=UTC
    )
    # a month down: the search is bounded, the answer still the latest time
    assert latest_due_time(schedule, first_due, datetime(2026, 12, 1, 5, 59, tzinfo=UTC)) == datetime(
        2026, 12, 1, 0, 0, tzinfo=UTC
    )
