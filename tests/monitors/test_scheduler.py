"""The scheduler: one tick over `next_run_at`; catch-up once after downtime; one run per scheduled time; changes made
in this process or by another one (straight in the database) seen while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitors.schedule import latest_due_time, parse_schedule
from monitors.scheduler import MonitorScheduler, due_monitor_ids
from storage import RunRecord, RunStatus
from storage.locks import FileLocks
from storage.repositories import MonitorRepository, RunRepository
from tests.monitors.conftest import World


async def test_a_monitor_three_runs_overdue_runs_once(world: World) -> None:
    service = world.service()
    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    # the process was down from 14:00 to 17:20: the 14:00, 15:00, 16:00 and 17:00 runs were missed
    world.clock.set(datetime(2026, 11, 20, 17, 20, tzinfo=UTC))

    first, second = await asyncio.gather(scheduler.tick(), scheduler.tick())  # the second finds it under way
    await scheduler.idle()
    third = await scheduler.tick()  # moved on to 18:00: nothing due

    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert [run.scheduled_for for run in runs] == [datetime(2026, 11, 20, 17, 0, tzinfo=UTC)]
    assert (first, second, third) == ([view.id], [], [])
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.next_run_at == datetime(2026, 11, 20, 18, 0, tzinfo=UTC)


async def test_two_schedulers_on_one_database_still_run_a_time_once(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    world.clock.set(datetime(2026, 11, 20, 14, 0, 5, tzinfo=UTC))
    one = MonitorScheduler(service, world.database, clock=world.clock)
    other = MonitorScheduler(world.service(), world.database, clock=world.clock)

    summaries = await asyncio.gather(one.fire(view.id), other.fire(view.id))

    assert [summary is not None for summary in summaries].count(True) == 1
    assert len(await RunRepository(world.database).list_for_monitor(view.id)) == 1


async def test_a_tick_before_the_monitor_is_due_does_nothing(world: World) -> None:
    service = world.service()
    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")

    assert await scheduler.tick() == []  # 13:00; next run 14:00
    assert await RunRepository(world.database).list_for_monitor(view.id) == []
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))
    assert await scheduler.tick() == [view.id]
    await scheduler.idle()
    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert [run.scheduled_for for run in runs] == [datetime(2026, 11, 20, 14, 0, tzinfo=UTC)]


async def test_paused_monitors_and_those_of_gone_chats_are_not_due(world: World) -> None:
    service = world.service()
    chat = world.chats[0].id
    kept = await service.create_monitor(chat, "DeepSeek", schedule_text="hourly", sources="hn")
    paused = await service.create_monitor(chat, "Mistral", schedule_text="hourly", sources="hn")
    await service.pause(paused.id, chat_id=chat)
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))

    assert await due_monitor_ids(MonitorRepository(world.database), world.clock()) == [kept.id]


async def test_a_run_abandoned_by_a_crash_does_not_leave_the_monitor_stuck(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    due = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)
    await RunRepository(world.database).open_run(view.id, due, now=due)  # the process died mid-run
    world.clock.set(due + timedelta(minutes=10))

    scheduler = MonitorScheduler(service, world.database, clock=world.clock)
    await scheduler.start()  # fails the abandoned run, then ticks: the 14:00 run exists, so the monitor moves on
    try:
        await _until(lambda: _next_run(world, view.id), due + timedelta(hours=1))
    finally:
        await scheduler.stop()

    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert [run.status for run in runs] == [RunStatus.FAILED]


async def test_a_running_scheduler_sees_changes_made_here_and_by_another_process(world: World) -> None:
    world.clock.set(datetime.now(UTC))  # the loop sleeps in real time: let the monitors' clock be real too
    service = world.service()
    monitors = MonitorRepository(world.database)
    scheduler = MonitorScheduler(service, world.database, clock=world.clock, poll_seconds=0.3)
    await scheduler.start()
    try:
        assert scheduler.running
        here = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
        elsewhere = await service.create_monitor(world.chats[1].id, "Mistral", schedule_text="daily", sources="hn")
        # due now: one changed through the service (it wakes the scheduler), one straight in the database, as
        # `lookout monitors add` in another process would (seen by the poll)
        world.clock.set(datetime.now(UTC))
        await monitors.update(here.id, next_run_at=world.clock() - timedelta(hours=3))
        await service.notify(here.id)
        await monitors.update(elsewhere.id, next_run_at=world.clock() - timedelta(minutes=1))

        for monitor_id in (here.id, elsewhere.id):
            runs = await _runs_when_finished(world, monitor_id)
            assert len(runs) == 1 and runs[0].status is RunStatus.SUCCEEDED, runs
    finally:
        await scheduler.stop()
    assert not scheduler.running


async def test_stopping_cancels_the_runs_under_way_and_marks_them_failed(world: World) -> None:
    gate = asyncio.Event()

    async def stuck_pipeline(*_arguments: object, **_options: object) -> object:
        await gate.wait()
        raise AssertionError("never released")

    world.clock.set(datetime.now(UTC))
    service = world.service(pipeline=stuck_pipeline)  # type: ignore[arg-type]
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    await MonitorRepository(world.database).update(view.id, next_run_at=world.clock() - timedelta(minutes=1))
    scheduler = MonitorScheduler(service, world.database, clock=world.clock, poll_seconds=0.3)
    await scheduler.start()
    await _until(lambda: _statuses(world, view.id), [RunStatus.RUNNING])
    await scheduler.stop()

    assert await _statuses(world, view.id) == [RunStatus.FAILED]


async def test_file_locks_grant_one_holder_until_it_lets_go(tmp_path: Path) -> None:
    locks = FileLocks(tmp_path / "lookout.db")
    held = await locks.try_hold("scheduler")
    assert held is not None and await held.still_held()
    assert await FileLocks(tmp_path / "lookout.db").try_hold("scheduler") is None  # another process's view
    assert await locks.try_hold("telegram:polling") is not None  # another duty, another file
    await held.release()
    again = await FileLocks(tmp_path / "lookout.db").try_hold("scheduler")
    assert again is not None
    await again.release()
    memory = FileLocks(None)  # a database in memory belongs to one process: always granted
    assert await memory.try_hold("scheduler") is not None and await memory.try_hold("scheduler") is not None


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


async def _next_run(world: World, monitor_id: int) -> datetime | None:
    monitor = await MonitorRepository(world.database).get(monitor_id)
    return monitor.next_run_at if monitor is not None else None


async def _statuses(world: World, monitor_id: int) -> list[RunStatus]:
    return [run.status for run in await RunRepository(world.database).list_for_monitor(monitor_id)]


async def _until(read: Callable[[], Awaitable[object]], expected: object, *, within: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while (value := await read()) != expected:
        assert asyncio.get_running_loop().time() < deadline, f"still {value!r}, expected {expected!r}"
        await asyncio.sleep(0.05)


async def _runs_when_finished(world: World, monitor_id: int, *, within: float = 120.0) -> list[RunRecord]:
    """The monitor's runs once one exists and none is running (a loaded machine can take many seconds)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        runs = await RunRepository(world.database).list_for_monitor(monitor_id)
        finished = bool(runs) and all(run.status is not RunStatus.RUNNING for run in runs)
        if finished or asyncio.get_running_loop().time() > deadline:
            return runs
        await asyncio.sleep(0.05)
