"""The scheduler: APScheduler 3 jobs, rebuilt from the database at start, that wake monitors when they are due.

The database's `next_run_at` is the truth; a job only wakes the monitor up. The job (`fire`) reads the monitor,
skips it when it is not due (paused, backing off, already run) and otherwise calls `MonitorService.run_monitor`
for the latest scheduled time that has passed, so a monitor that missed runs while the process was down runs
once, never a backlog, and a second firing for the same time finds its run taken.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger

from monitors.schedule import Schedule, ScheduleError
from monitors.service import MonitorService, schedule_of
from monitors.views import RunSummary
from storage import Database, MonitorRecord, MonitorRepository, RunRepository

logger = logging.getLogger(__name__)

MAX_JITTER_SECONDS = 60
"""Monitors sharing a minute are spread over up to this many seconds (a tenth of the gap for short ones)."""
MAX_MISFIRE_GRACE_SECONDS = 3600
BRIEFING_CHECK_SECONDS = 60
"""How often the scheduler looks for chats whose briefing is due."""
BRIEFINGS_JOB_ID = "briefings"


def job_id(monitor_id: int) -> str:
    return f"monitor:{monitor_id}"


def jitter_seconds(monitor_id: int, schedule: Schedule, *, max_seconds: int = MAX_JITTER_SECONDS) -> int:
    """A small, stable offset for this monitor: the same after every restart, different between monitors."""
    spread = min(max_seconds, schedule.min_gap_seconds() // 10)
    if spread <= 0:
        return 0
    digest = hashlib.sha256(f"monitor:{monitor_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (spread + 1)


def misfire_grace_seconds(schedule: Schedule) -> int:
    """How late a job may still run: half the gap between runs, at most an hour (APScheduler's default is 1 s)."""
    return max(1, min(schedule.min_gap_seconds() // 2, MAX_MISFIRE_GRACE_SECONDS))


class _OffsetTrigger(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no type hints
    """Fires `offset` seconds after every fire time of `inner` (a deterministic jitter)."""

    __slots__ = ("inner", "offset")

    def __init__(self, inner: BaseTrigger, offset: int) -> None:
        self.inner, self.offset = inner, timedelta(seconds=offset)

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        previous = previous_fire_time - self.offset if previous_fire_time is not None else None
        fire: datetime | None = self.inner.get_next_fire_time(previous, now - self.offset)
        return fire + self.offset if fire is not None else None

    def __str__(self) -> str:
        return f"{self.inner} +{int(self.offset.total_seconds())}s"


class MonitorScheduler:
    """Keeps one APScheduler job per active monitor, in the running event loop."""

    def __init__(
        self,
        service: MonitorService,
        database: Database,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        scheduler: AsyncIOScheduler | None = None,
        max_jitter_seconds: int = MAX_JITTER_SECONDS,
        fail_abandoned_runs: bool = True,
    ) -> None:
        self._service = service
        self._monitors = MonitorRepository(database)
        self._runs = RunRepository(database)
        self._clock = clock
        self._max_jitter = max_jitter_seconds
        self._fail_abandoned = fail_abandoned_runs
        self._scheduler = scheduler or AsyncIOScheduler(timezone=UTC)
        service.add_listener(self.sync_monitor)

    @property
    def running(self) -> bool:
        """Whether the scheduler is started (for /healthz)."""
        return bool(self._scheduler.running)

    async def start(self) -> int:
        """Fail runs a previous process left running, build every monitor's job, start; returns the job count.

        Must be called from the running event loop. Monitors whose next run passed while the process was down
        fire once, right away (spread by their jitter). Only one process should schedule a database's monitors;
        a second one (if any) passes `fail_abandoned_runs=False` so it does not fail the first one's runs.
        """
        if self._fail_abandoned:
            abandoned = await self._runs.fail_abandoned(
                started_before=self._clock(), error="abandoned: the process stopped during the run"
            )
            if abandoned:
                logger.warning("marked %d run(s) left running by a previous process as failed", abandoned)
        count = 0
        for monitor in await self._monitors.list_all(include_paused=False):
            count += await self._schedule(monitor)
        # Briefings are due per chat, not per monitor: one job looks every minute (a missed one is caught up at once).
        self._scheduler.add_job(
            self.send_briefings,
            IntervalTrigger(seconds=BRIEFING_CHECK_SECONDS, timezone=UTC),
            id=BRIEFINGS_JOB_ID,
            name="briefings",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=BRIEFING_CHECK_SECONDS,
            next_run_time=datetime.now(UTC) + timedelta(seconds=5),
        )
        self._scheduler.start()
        logger.info("scheduler started with %d monitor job(s)", count)
        return count

    def shutdown(self) -> None:
        """Stop firing (runs under way finish or are failed as abandoned at the next start)."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)

    def job(self, monitor_id: int) -> Job | None:
        """The monitor's job, if it has one (for status displays and tests)."""
        found: Job | None = self._scheduler.get_job(job_id(monitor_id))
        return found

    async def sync_monitor(self, monitor_id: int) -> None:
        """Make the monitor's job match the database: added, moved, or removed (deleted or paused)."""
        monitor = await self._monitors.get(monitor_id)
        if monitor is None or monitor.paused:
            self._remove(monitor_id)
            return
        await self._schedule(monitor)

    async def fire(self, monitor_id: int) -> RunSummary | None:
        """The job: run the monitor if it is due now (the thin wrapper over `MonitorService.run_monitor`)."""
        try:
            monitor = await self._monitors.get(monitor_id)
            if monitor is None or monitor.paused:
                self._remove(monitor_id)
                return None
            return await self._service.run_due(monitor_id)
        except Exception:  # the scheduler must keep going whatever one monitor does
            logger.exception("monitor %d: the scheduled job failed", monitor_id)
            return None

    async def send_briefings(self) -> int:
        """The briefings job: queue every chat's briefing that is due; returns how many were queued."""
        try:
            return len(await self._service.briefings.run_due())
        except Exception:  # the scheduler must keep going whatever happens here
            logger.exception("sending the due briefings failed")
            return 0

    async def _schedule(self, monitor: MonitorRecord) -> int:
        try:
            schedule = schedule_of(monitor)
        except ScheduleError as error:
            logger.error(
                "monitor %d has an unreadable schedule %r (%s); not scheduled", monitor.id, monitor.schedule, error
            )
            self._remove(monitor.id)
            return 0
        now = self._clock()
        if monitor.next_run_at is None:
            await self._monitors.set_next_run(monitor.id, schedule.next_run(now))
        offset = jitter_seconds(monitor.id, schedule, max_seconds=self._max_jitter)
        overdue = monitor.next_run_at is not None and monitor.next_run_at <= now
        options: dict[str, object] = {}
        if overdue:
            # APScheduler keeps real time, so the catch-up is placed on its clock; one firing, never a backlog.
            options["next_run_time"] = datetime.now(UTC) + timedelta(seconds=offset)
        self._scheduler.add_job(
            self.fire,
            _OffsetTrigger(schedule.trigger(), offset),
            args=(monitor.id,),
            id=job_id(monitor.id),
            name=f"monitor {monitor.id}: {monitor.topic[:40]}",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=misfire_grace_seconds(schedule),
            **options,
        )
        return 1

    def _remove(self, monitor_id: int) -> None:
        if self._scheduler.get_job(job_id(monitor_id)) is not None:
            self._scheduler.remove_job(job_id(monitor_id))
