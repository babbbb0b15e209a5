"""Monitor runs and deliveries as procrastinate jobs on PostgreSQL (JOB_QUEUE=procrastinate).

Any number of `lookout run` processes share the work through the queue; every effect keeps Lookout's own
idempotency key, so at-least-once jobs give once-only effects:

- `lookout.tick` (periodic, once a minute; the database defers each minute's tick once, however many workers
  run) defers one `lookout.run_monitor` job per monitor that is due. A worker also ticks once when it starts.
- `lookout.run_monitor` runs one monitor's due run. Its lock (`monitor:<id>`) keeps two runs of one monitor
  from running at once, its queueing lock keeps at most one waiting, and the run's unique (monitor, scheduled
  time) stays the last guard. A worker that dies during a run stops sending heartbeats; `lookout.retry_stalled`
  hands its job back and the next worker runs the run again (`left_running="take_over"`), so it never stays
  "running"; one that killed its workers `MAX_RUN_ATTEMPTS` times is marked failed.
- `lookout.deliver` sends one chat's due outbox rows in order. Its lock (`chat:<id>`) keeps that chat's
  messages in order across workers; the outbox stays the source of truth (claims, attempts, backoff, parts
  already delivered), the job only says "look at this chat now". Every process runs a `DeliveryJobs` loop that
  defers the job for each chat with rows due (at once when a run queued rows, else every few seconds), so
  retries after a backoff and rows left by a dead process are picked up.
- `lookout.briefings` (periodic, once a minute) queues the briefings that are due; each chat's is claimed by a
  conditional update of its next briefing time, so a repeated job sends nothing twice.
- `lookout.retry_stalled` (periodic, every 10 seconds) is procrastinate's documented recipe: jobs of workers
  whose heartbeat is older than three heartbeat intervals go back to the queue.

procrastinate talks to PostgreSQL through psycopg 3 with its own small pool, opened from the same
DATABASE_URL as SQLAlchemy's (which keeps asyncpg): the two libraries could not share one pool anyway, so
moving Lookout's own queries to psycopg would buy nothing but a changed DATABASE_URL for every deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from procrastinate import App, JobContext, PsycopgConnector
from procrastinate.exceptions import AlreadyEnqueued, JobAborted, UniqueViolation
from procrastinate.jobs import Job, Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from sqlalchemy.engine import make_url

from app.settings import Settings
from kernel import Backoff, Clock, utc_now
from monitors import DeliveryWorker, MonitorService, due_monitor_ids
from storage import Database
from storage.repositories import DeliveryRepository, MonitorRepository, RunRepository

__all__ = [
    "DELIVER",
    "MAX_RUN_ATTEMPTS",
    "RUN_MONITOR",
    "TICK",
    "DeliveryJobs",
    "JobQueue",
    "QueueSnapshot",
    "WorkerDuties",
    "process_name",
    "psycopg_conninfo",
]

logger = logging.getLogger(__name__)

TICK = "lookout.tick"
RUN_MONITOR = "lookout.run_monitor"
DELIVER = "lookout.deliver"
RETRY_STALLED = "lookout.retry_stalled"
BRIEFINGS = "lookout.briefings"
MAX_RUN_ATTEMPTS = 3
"""A run whose worker died this many times in a row is marked failed instead of tried again."""
ABANDONED_AFTER = timedelta(hours=6)
"""A run still "running" this long was left by a process that died outside any job (a `/digest` in a web
process); the hourly tick marks it failed. Runs inside jobs are taken over long before."""
PRUNE_FINISHED_AFTER_HOURS = 72
"""Succeeded jobs older than this are deleted (hourly, by the tick); failed ones stay for `lookout jobs`."""
DELIVERY_SWEEP_SECONDS = 5.0
"""How often every process looks for chats with outbox rows due (retries after a backoff, rows left behind)."""
WORKER_BACKOFF = Backoff(attempts=None, base=1.0, cap=5.0)
"""When procrastinate's worker stopped by itself (the database went away), how long before it starts again: at
most 5 s apart, so a worker runs jobs again within seconds of the database's return."""
WORKER_STEADY_SECONDS = 60.0
"""A worker that ran this long before it stopped starts again after the shortest wait (its backoff starts over)."""
URGENT, PROMPT = 20, 10
"""Job priorities (higher runs first): housekeeping (the tick, stalled jobs) before deliveries, deliveries before
runs, so a digest goes out as soon as its run finished, not after every run of a busy minute."""


def psycopg_conninfo(database_url: str) -> str:
    """The libpq URL procrastinate's psycopg pool opens, from Lookout's SQLAlchemy DATABASE_URL."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def process_name(role: str) -> str:
    """Who this process is, in job listings and logs: host, pid and role."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}"


class _HandBackOnShutdown(BaseRetryStrategy):
    """A job cut short by its worker's shutdown goes back to the queue at once (another worker takes it);
    a job that failed by itself is not retried: Lookout's runs and deliveries record their own failures."""

    def __init__(self, max_attempts: int) -> None:
        self.max_attempts = max_attempts

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if not isinstance(exception, asyncio.CancelledError | JobAborted) or job.attempts >= self.max_attempts:
            return None
        return RetryDecision(retry_in={"seconds": 0})


@dataclass(frozen=True)
class QueueSnapshot:
    """What `lookout jobs` prints: jobs per task and status, the workers and the failed jobs."""

    tasks: list[dict[str, object]]
    workers: list[dict[str, object]]
    failed: list[Job]
    running: list[Job]


@dataclass
class WorkerDuties:
    """What a worker process runs jobs with: the monitor service and the delivery worker of its stack."""

    database: Database
    service: MonitorService
    delivery: DeliveryWorker
    clock: Clock = field(default=utc_now)


class JobQueue:
    """One process's procrastinate app: every role defers jobs through it; workers also run them."""

    def __init__(self, settings: Settings, *, name: str) -> None:
        self._settings = settings
        self.name = name
        self.app = App(
            connector=PsycopgConnector(
                conninfo=psycopg_conninfo(settings.database_url),
                min_size=1,
                max_size=max(4, settings.worker_concurrency // 2 + 2),
                name=f"lookout-jobs-{name}",
            )
        )
        self._worker_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> JobQueue:
        await self.app.open_async()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.app.close_async()

    # ---- deferring (every role) -------------------------------------------------------------------------

    async def defer_run(self, monitor_id: int) -> bool:
        """Queue the monitor's due run; False when one is already waiting (its queueing lock)."""
        return await _defer_run(self.app, monitor_id)

    async def defer_due_runs(self, monitor_ids: Iterable[int]) -> int:
        """Queue a run for each due monitor that has none waiting or under way (what the minute tick does)."""
        return await _defer_due_runs(self.app, monitor_ids)

    async def defer_delivery(self, chat_id: int) -> bool:
        """Have a worker deliver the chat's due rows; False when a job for that chat is already waiting."""
        deferrer = self.app.configure_task(
            name=DELIVER,
            lock=f"chat:{chat_id}",
            queueing_lock=f"deliver:{chat_id}",
            queue="deliveries",
            priority=PROMPT,
        )
        try:
            await deferrer.defer_async(chat_id=chat_id)
        except AlreadyEnqueued:
            return False
        return True

    async def healthy(self) -> bool:
        """For /healthz: the queue's database answers (and, in a worker, the worker runs)."""
        if self._worker_task is not None and self._worker_task.done():
            return False
        return bool(await self.app.check_connection_async())

    async def snapshot(self, *, failed_limit: int = 20) -> QueueSnapshot:
        """Jobs per task and status, the registered workers with their heartbeats, running and failed jobs."""
        manager = self.app.job_manager
        tasks = [dict(row) for row in await manager.list_tasks_async()]
        running = list(await manager.list_jobs_async(status="doing"))
        failed = sorted(await manager.list_jobs_async(status="failed"), key=lambda job: job.id or 0)[-failed_limit:]
        rows = await self.app.connector.execute_query_all_async(
            "SELECT id, last_heartbeat, now() - last_heartbeat AS silent_for FROM procrastinate_workers ORDER BY id"
        )
        return QueueSnapshot(tasks=tasks, workers=[dict(row) for row in rows], failed=failed, running=running)

    # ---- working (worker role) --------------------------------------------------------------------------

    def register(self, duties: WorkerDuties) -> None:
        """Define the jobs this process runs (a worker); call before `work`."""
        _register_tasks(self.app, duties, heartbeat=self._settings.worker_heartbeat_seconds)

    async def work(self, stop: asyncio.Event) -> None:
        """Run jobs until `stop` is set; jobs under way get SHUTDOWN_GRACE_SECONDS to finish, then go back to the
        queue for another worker.

        procrastinate's worker stops for good when the database goes away (its LISTEN connection, heartbeat or job
        fetch fails: "Side task … failed"); it is started again here, after `WORKER_BACKOFF`, until `stop` is set.
        Jobs it had under way are handed back by their own retry rule, or (when the database could not record
        that) found stalled by `lookout.retry_stalled` once it is back."""
        retry = 0
        while not stop.is_set():
            started = time.monotonic()
            failure = await self._run_worker(stop)
            if stop.is_set():
                return
            retry = 1 if time.monotonic() - started > WORKER_STEADY_SECONDS else retry + 1
            delay = WORKER_BACKOFF.delay(retry) or WORKER_BACKOFF.cap
            logger.warning(
                "the job worker stopped (%s); starting it again in %.1f s (restart %d)",
                failure or "after a failure procrastinate logged above",
                delay,
                retry,
            )
            await _wait_any(stop, seconds=delay)

    async def _run_worker(self, stop: asyncio.Event) -> str | None:
        """One life of procrastinate's worker: until `stop` is set or it ends by itself (then what ended it)."""
        settings = self._settings
        heartbeat = settings.worker_heartbeat_seconds
        worker = asyncio.create_task(
            self.app.run_worker_async(
                name=self.name,
                concurrency=settings.worker_concurrency,
                install_signal_handlers=False,
                shutdown_graceful_timeout=settings.shutdown_grace_seconds,
                update_heartbeat_interval=heartbeat,
                stalled_worker_timeout=3 * heartbeat,
                fetch_job_polling_interval=5.0,
            ),
            name="job worker",
        )
        self._worker_task = worker
        try:
            await self._tick_now()
        except Exception as error:  # the database is away at start: the worker's own start fails the same way
            logger.warning("could not queue the start-up tick (%s)", error)
        stopping = asyncio.ensure_future(stop.wait())
        failure: str | None = None
        try:
            await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not worker.done():
                worker.cancel()  # procrastinate stops fetching, waits for jobs under way, then hands them back
            try:
                await worker
            except asyncio.CancelledError:
                pass
            except Exception as error:  # the database went away under it; told to the caller, which restarts it
                first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
                failure = f"{type(error).__name__}: {first_line[:200]}"
        return failure

    async def _tick_now(self) -> None:
        """A worker that starts looks for due monitors at once instead of at the next minute."""
        deferrer = self.app.configure_task(name=TICK, queueing_lock="tick:start", queue="monitors", priority=URGENT)
        with contextlib.suppress(AlreadyEnqueued):
            await deferrer.defer_async(timestamp=int(datetime.now(UTC).timestamp()))


async def _job_locks(app: App, task: str, *statuses: str) -> set[str]:
    """The queueing locks of the task's jobs in these statuses (one query per status, instead of one refused
    insert per job when thousands wait)."""
    locks: set[str] = set()
    for status in statuses:
        jobs = await app.job_manager.list_jobs_async(task=task, status=status)
        locks.update(job.queueing_lock for job in jobs if job.queueing_lock)
    return locks


async def _defer_due_runs(app: App, monitor_ids: Iterable[int]) -> int:
    """Defer a run job for each of the monitors that has none waiting or under way; returns how many."""
    # Waiting: deferring again would be refused. Under way: procrastinate's queueing lock no longer covers it, and
    # a second job would only find nothing due (the run moves the monitor's next run on when it finishes).
    busy = await _job_locks(app, RUN_MONITOR, "todo", "doing")
    deferred = 0
    for monitor_id in monitor_ids:
        if f"monitor:{monitor_id}" not in busy:
            deferred += await _defer_run(app, monitor_id)
    return deferred


async def _defer_run(app: App, monitor_id: int) -> bool:
    key = f"monitor:{monitor_id}"
    deferrer = app.configure_task(name=RUN_MONITOR, lock=key, queueing_lock=key, queue="monitors")
    try:
        await deferrer.defer_async(monitor_id=monitor_id)
    except AlreadyEnqueued:
        return False
    return True


def _register_tasks(app: App, duties: WorkerDuties, *, heartbeat: float) -> None:
    monitors, runs = MonitorRepository(duties.database), RunRepository(duties.database)

    @app.periodic(cron="* * * * *", periodic_id="minute", priority=URGENT)
    @app.task(name=TICK, queue="monitors", queueing_lock="tick", pass_context=False)
    async def tick(timestamp: int) -> int:
        """Defer a run job for every monitor that is due; returns how many were deferred."""
        now = duties.clock()
        due = await due_monitor_ids(monitors, now)
        deferred = await _defer_due_runs(app, due)
        if due:
            logger.info("tick: %d monitor(s) due, %d run job(s) deferred", len(due), deferred)
        if datetime.fromtimestamp(timestamp, UTC).minute == 0:  # hourly housekeeping
            await app.job_manager.delete_old_jobs(nb_hours=PRUNE_FINISHED_AFTER_HOURS, include_failed=False)
            abandoned = await runs.fail_abandoned(
                started_before=now - ABANDONED_AFTER, error="abandoned: the process running it stopped"
            )
            if abandoned:
                logger.warning("tick: marked %d run(s) left running for hours as failed", abandoned)
        try:
            await duties.service.check_pending_alerts()  # alerts a stopped worker left unchecked
        except Exception:  # the tick has deferred what is due; the next one tries again
            logger.exception("tick: checking the pending alerts failed")
        return deferred

    @app.periodic(cron="* * * * *", periodic_id="briefings", priority=PROMPT)
    @app.task(name=BRIEFINGS, queue="monitors", queueing_lock="briefings", pass_context=False)
    async def briefings(timestamp: int) -> int:
        """Queue every chat's briefing that is due (each chat claimed by a conditional update, so once)."""
        return len(await duties.service.briefings.run_due())

    @app.task(name=RUN_MONITOR, pass_context=True, retry=_HandBackOnShutdown(MAX_RUN_ATTEMPTS + 1))
    async def run_monitor(context: JobContext, monitor_id: int) -> str:
        """Run the monitor's due run (taking over one its previous worker left running)."""
        attempts = context.job.attempts
        summary = await duties.service.runs.run_due(
            monitor_id, left_running="take_over" if attempts < MAX_RUN_ATTEMPTS else "fail"
        )
        return "nothing due" if summary is None else f"run {summary.run_id}: {summary.status}"

    @app.task(name=DELIVER, pass_context=False, retry=_HandBackOnShutdown(20))
    async def deliver(chat_id: int) -> str:
        """Send the chat's due outbox rows, in order."""
        report = await duties.delivery.run_chat(chat_id)
        return f"{report.sent} sent, {report.retrying} to retry, {report.dead} given up"

    @app.periodic(cron="* * * * * */10", periodic_id="stalled", priority=URGENT)
    @app.task(name=RETRY_STALLED, queueing_lock="retry_stalled", pass_context=False)
    async def retry_stalled(timestamp: int) -> int:
        """Hand the jobs of workers that stopped sending heartbeats back to the queue."""
        stalled = list(await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=3 * heartbeat))
        for job in stalled:
            logger.warning("job %s (%s) was running on a worker that stopped; retrying it", job.id, job.task_name)
            try:
                await app.job_manager.retry_job(job)
            except UniqueViolation:
                # The same work is already waiting under the job's queueing lock (the tick deferred the monitor
                # again meanwhile): that job does it; this one ends, which frees the lock the other waits for.
                assert job.id is not None
                await app.job_manager.finish_job_by_id_async(job.id, status=Status.ABORTED, delete_job=False)
        return len(stalled)

    del tick, run_monitor, deliver, retry_stalled  # registered on the app; nothing calls them by name here


class DeliveryJobs:
    """Every process's link from the outbox to the queue: defers `lookout.deliver` for each chat with rows due.

    `wake()` (a run just queued rows) sweeps at once; otherwise every `DELIVERY_SWEEP_SECONDS`. Chats whose job
    is already waiting are skipped by the queueing lock, so sweeping from every process is cheap.
    """

    def __init__(
        self,
        database: Database,
        queue: JobQueue,
        *,
        worker: DeliveryWorker,
        clock: Clock = utc_now,
        sweep_seconds: float = DELIVERY_SWEEP_SECONDS,
    ) -> None:
        self._deliveries = DeliveryRepository(database)
        self._queue = queue
        self._worker = worker
        self._platforms = worker.platforms
        self._clock = clock
        self._sweep_seconds = sweep_seconds
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wake.set()

    async def sweep(self) -> int:
        """Defer delivery jobs for the chats with rows due now; returns how many were deferred."""
        if not self._platforms:
            return 0
        await self._worker.release_dead_claims()  # a dead worker's rows (on this host) are due again at once
        due = await self._deliveries.chats_due(self._clock(), platforms=self._platforms, limit=10_000)
        if not due:
            return 0
        # Only waiting jobs: one under way may have read the chat's rows before these were queued.
        waiting = await _job_locks(self._queue.app, DELIVER, "todo")
        deferred = 0
        for chat_id in due:
            if f"deliver:{chat_id}" not in waiting:
                deferred += await self._queue.defer_delivery(chat_id)
        return deferred

    async def run_forever(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sweep()
            except Exception:  # a database hiccup must not end delivery for good
                logger.exception("looking for due deliveries failed; trying again in %.0f s", self._sweep_seconds)
            await _wait_any(stop, self._wake, seconds=self._sweep_seconds)
            self._wake.clear()


async def _wait_any(*events: asyncio.Event, seconds: float) -> None:
    waiters: Iterable[asyncio.Future[bool]] = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(set(waiters), timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter


async def print_queue(settings: Settings, *, failed_limit: int, echo: Callable[[str], object]) -> None:
    """`lookout jobs`: queue depth per task, the workers and their heartbeats, running and failed jobs."""
    async with JobQueue(settings, name=process_name("cli")) as queue:
        snapshot = await queue.snapshot(failed_limit=failed_limit)
    echo(render_snapshot(snapshot))


def render_snapshot(snapshot: QueueSnapshot) -> str:
    """The snapshot as the plain text `lookout jobs` prints."""
    columns = ("todo", "doing", "failed", "aborted", "succeeded")
    headers = ("waiting", "running", "failed", "aborted", "done")
    lines = [f"{'task':<24}" + "".join(f"{header:>10}" for header in headers)]
    totals = dict.fromkeys(columns, 0)
    for task in sorted(snapshot.tasks, key=lambda row: str(row["name"])):
        counts = {column: _count(task.get(column)) for column in columns}
        for column, count in counts.items():
            totals[column] += count
        lines.append(f"{task['name']!s:<24}" + "".join(f"{counts[column]:>10}" for column in columns))
    lines.append(f"{'all':<24}" + "".join(f"{totals[column]:>10}" for column in columns))
    lines.append("")
    lines.append(f"Queue depth: {totals['todo']} waiting, {totals['doing']} running, {totals['failed']} failed.")
    if snapshot.workers:
        lines.append(f"Workers ({len(snapshot.workers)}):")
        for worker in snapshot.workers:
            silent = worker.get("silent_for")
            seconds = silent.total_seconds() if hasattr(silent, "total_seconds") else 0.0
            lines.append(f"  worker {worker['id']}: last heartbeat {seconds:.0f} s ago")
    else:
        lines.append("Workers: none running (start one with `lookout run --role worker`).")
    if snapshot.running:
        lines.append(f"Running ({len(snapshot.running)}):")
        lines += [f"  {_describe(job)} on worker {job.worker_id}" for job in snapshot.running]
    if snapshot.failed:
        lines.append(f"Failed (latest {len(snapshot.failed)}):")
        lines += [f"  {_describe(job)} after {job.attempts + 1} attempt(s)" for job in snapshot.failed]
    return "\n".join(lines)


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _describe(job: Job) -> str:
    arguments = ", ".join(f"{name}={value}" for name, value in sorted(job.task_kwargs.items()))
    return f"#{job.id} {job.task_name}({arguments})"
