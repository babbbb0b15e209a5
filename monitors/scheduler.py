"""The scheduler: one tick over the database's `next_run_at`, the same for every deployment.

The database is the only schedule. A tick asks it which monitors are due (`due_monitor_ids`, the one definition
the job queue's tick uses too) and runs each one that this process is not running already; briefings are
looked for once a minute, and so are alert checks a stopped process left pending. Between ticks the scheduler
sleeps until the earliest `next_run_at`, but never longer
than its poll: a few seconds on SQLite, where it cannot be told of changes, a minute on PostgreSQL, where any
process that changes a monitor NOTIFYs and the scheduler wakes at once (`storage.ScheduleChanges`). A change in
this process wakes it directly. So a monitor added by `lookout monitors add`, a chat or another process is seen
within one poll at worst.

Guarantees: a run happens once per (monitor, scheduled time) — the database's unique run decides, whoever
ticks; a monitor that missed runs while nothing ran runs once, for the latest time that passed, never a
backlog (`MonitorService.run_due`). One process per database should tick (the caller's leadership: advisory
lock on PostgreSQL, a file lock next to a SQLite file); a second one would find the runs taken, not double them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from kernel import Clock, utc_now
from monitors.service import MonitorService
from monitors.views import RunSummary
from storage import Database, ScheduleChanges
from storage.repositories import MonitorRepository, RunRepository

__all__ = [
    "BRIEFING_CHECK_SECONDS",
    "POLL_SECONDS",
    "PUSHED_POLL_SECONDS",
    "MonitorScheduler",
    "due_monitor_ids",
]

logger = logging.getLogger(__name__)

POLL_SECONDS = 5.0
"""Longest sleep between ticks where changes are not pushed (SQLite): a change made elsewhere is seen this late."""
PUSHED_POLL_SECONDS = 60.0
"""Longest sleep between ticks where changes are pushed (PostgreSQL NOTIFY): only a safety net for a lost one."""
BRIEFING_CHECK_SECONDS = 60.0
"""How often the scheduler looks for chats whose briefing is due."""
DUE_LIMIT = 100_000
"""Monitors one tick reads at most (the earliest due first)."""


async def due_monitor_ids(monitors: MonitorRepository, now: datetime) -> list[int]:
    """What is due: unpaused monitors of active chats whose next run is at or before `now`, earliest first. The
    one definition every tick uses (this scheduler's, and the job queue's, which defers a job for each)."""
    return [monitor.id for monitor in await monitors.due(now, limit=DUE_LIMIT)]


class MonitorScheduler:
    """Ticks over the database while started: runs due monitors (at most `concurrency` at once) and briefings."""

    def __init__(
        self,
        service: MonitorService,
        database: Database,
        *,
        clock: Clock = utc_now,
        changes: ScheduleChanges | None = None,
        poll_seconds: float = 0.0,
        concurrency: int = 16,
        fail_abandoned_runs: bool = True,
    ) -> None:
        self._service = service
        self._monitors = MonitorRepository(database)
        self._runs = RunRepository(database)
        self._clock = clock
        self._changes = changes
        pushed = changes is not None and changes.pushes
        self.poll_seconds = poll_seconds or (PUSHED_POLL_SECONDS if pushed else POLL_SECONDS)
        """The longest sleep between two ticks (0 given: the default for the database)."""
        self._fail_abandoned = fail_abandoned_runs
        self._slots = asyncio.Semaphore(concurrency)
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._runs_under_way: dict[int, asyncio.Task[RunSummary | None]] = {}
        self._briefings_checked: float | None = None
        service.add_listener(self._changed)

    @property
    def running(self) -> bool:
        """Whether this process ticks now (started and its loop alive)."""
        return bool(self._tasks) and all(not task.done() for task in self._tasks)

    def wake(self) -> None:
        """Tick now (a monitor changed, or a notification said one did elsewhere)."""
        self._wake.set()

    async def start(self) -> None:
        """Fail runs a previous process left running, then tick until `stop()`. Call once per leadership."""
        if self._fail_abandoned:
            abandoned = await self._runs.fail_abandoned(
                started_before=self._clock(), error="abandoned: the process stopped during the run"
            )
            if abandoned:
                logger.warning("marked %d run(s) left running by a previous process as failed", abandoned)
        self._stop = asyncio.Event()
        self._briefings_checked = None
        self._tasks = [asyncio.create_task(self._loop(), name="scheduler")]
        if self._changes is not None and self._changes.pushes:
            listening = self._changes.listen(self.wake, self._stop)
            self._tasks.append(asyncio.create_task(listening, name="schedule changes"))
        logger.info("scheduler started: ticking over the database (poll %.0f s)", self.poll_seconds)

    async def stop(self) -> None:
        """Stop ticking; runs under way are cancelled (each is marked failed: the process stopped during it)."""
        self._stop.set()
        self._wake.set()
        for run in list(self._runs_under_way.values()):
            run.cancel()
        tasks, self._tasks = self._tasks, []
        for result in await asyncio.gather(*tasks, *self._runs_under_way.values(), return_exceptions=True):
            if isinstance(result, Exception):
                logger.error("the scheduler stopped with an error", exc_info=result)
        self._runs_under_way.clear()

    async def tick(self) -> list[int]:
        """Start a run for each monitor due now that this process is not running yet; returns their ids."""
        started = []
        for monitor_id in await due_monitor_ids(self._monitors, self._clock()):
            if monitor_id in self._runs_under_way:
                continue
            task = asyncio.create_task(self._run(monitor_id), name=f"monitor {monitor_id}")
            self._runs_under_way[monitor_id] = task
            task.add_done_callback(self._forget)
            started.append(monitor_id)
        if started:
            logger.info("tick: %d monitor(s) due: %s", len(started), ", ".join(map(str, started)))
        return started

    def _forget(self, task: asyncio.Task[RunSummary | None]) -> None:
        for monitor_id, under_way in list(self._runs_under_way.items()):
            if under_way is task:
                del self._runs_under_way[monitor_id]

    async def idle(self) -> None:
        """Wait until the runs under way have finished (tests, and a benchmark's clean end)."""
        while self._runs_under_way:
            await asyncio.gather(*self._runs_under_way.values(), return_exceptions=True)

    async def fire(self, monitor_id: int) -> RunSummary | None:
        """Run one monitor if it is due now (the thin wrapper over `MonitorService.run_due`); never raises."""
        try:
            return await self._service.runs.run_due(monitor_id)
        except Exception:  # the scheduler must keep going whatever one monitor does
            logger.exception("monitor %d: the scheduled run failed", monitor_id)
            return None

    async def send_briefings(self) -> int:
        """Queue every chat's briefing that is due; returns how many were queued."""
        try:
            return len(await self._service.briefings.run_due())
        except Exception:  # the scheduler must keep going whatever happens here
            logger.exception("sending the due briefings failed")
            return 0

    async def check_pending_alerts(self) -> int:
        """Check the alerts a stopped process left pending (`MonitorService.check_pending_alerts`); never raises."""
        try:
            return await self._service.check_pending_alerts()
        except Exception:  # the scheduler must keep going whatever happens here
            logger.exception("checking the pending alerts failed")
            return 0

    async def _run(self, monitor_id: int) -> RunSummary | None:
        async with self._slots:
            return await self.fire(monitor_id)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            self._wake.clear()
            sleep = self.poll_seconds
            try:
                await self.tick()
                if self._briefings_checked is None or loop.time() - self._briefings_checked >= BRIEFING_CHECK_SECONDS:
                    self._briefings_checked = loop.time()
                    await self.send_briefings()
                    await self.check_pending_alerts()
                sleep = await self._until_next_due(sleep)
            except Exception:  # a database hiccup must not end scheduling for good
                logger.exception("the scheduler's tick failed; trying again in %.0f s", sleep)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=sleep)

    async def _until_next_due(self, longest: float) -> float:
        """Seconds until the earliest next run still ahead (a little after it), at most `longest`."""
        now = self._clock()
        earliest = await self._monitors.next_due_after(now)
        if earliest is None:
            return longest
        return min(longest, (earliest - now).total_seconds() + 0.05)

    async def _changed(self, monitor_id: int) -> None:
        """A monitor changed in this process: tick here now, and tell the other processes on the database."""
        self.wake()
        if self._changes is not None:
            await self._changes.announce()
