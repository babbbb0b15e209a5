"""The long-running process behind `lookout run`: one event loop for the HTTP server, the frontends and the jobs.

Embedded (the default): one process does everything: its scheduler ticks over the database while it leads
scheduling there (another process on the same database, e.g. `lookout chat`, may lead instead), and its own
delivery worker sends. With
JOB_QUEUE=procrastinate, processes share one PostgreSQL in roles: `web` serves HTTP and the frontends (one of
them leads Telegram long polling), `worker` runs monitor runs and deliveries as jobs, `all` does both.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent import Services
from app.assembly import build_dispatcher, build_services
from app.frontends import Frontends, build_frontends, describe_frontends
from app.heap import tune_garbage_collector
from app.http_server import HealthCheck, build_http_app, feed_routes, page_routes, serve_http
from app.monitoring import MARK_VECTORS_SECONDS, MonitorStack, monitor_stack, scheduling
from app.settings import Settings
from app.wiring import open_database
from bots import Dispatcher, SharedLocks, TelegramFrontend, TelegramLimits
from kernel import Clock, utc_now
from research import ModelSet
from storage import AdvisoryLocks, Database

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

logger = logging.getLogger(__name__)

Role = Literal["all", "web", "worker"]
"""all: everything in one process; web: HTTP (/healthz, webhooks, Slack events) and the chat frontends (one web
process leads Telegram long polling); worker: monitor runs and deliveries as jobs (JOB_QUEUE=procrastinate)."""


class RoleError(Exception):
    """The role cannot run with these settings; the message is one sentence."""


@dataclass(frozen=True)
class Component:
    """One part of the process and whether it runs, with the reason when it does not."""

    name: str
    on: bool
    reason: str


def plan_components(settings: Settings, *, role: Role = "all") -> list[Component]:
    """Say which parts will run and why the others will not; nothing here pretends to run."""
    llm_reason = settings.llm_unavailable_reason()
    frontends = describe_frontends(settings)
    serves, works = role in ("all", "web"), role in ("all", "worker")
    components = [Component("http", True, f"serving /healthz on {settings.http_host}:{settings.http_port}")]
    if serves:
        components += [Component(name, on, reason) for name, (on, reason) in frontends.items()]
    else:
        components += [Component(name, False, "the web processes receive messages") for name in frontends]
    if not settings.scaled_out:
        components.append(
            Component(
                "scheduler",
                True,
                "one tick over the database's next runs (one process per database schedules); the delivery worker "
                "sends the digests",
            )
        )
    else:
        components.append(
            Component(
                "jobs",
                True,
                (
                    f"procrastinate worker ({settings.worker_concurrency} at a time): monitor runs and deliveries"
                    if works
                    else "deferring monitor runs and deliveries to the workers (procrastinate)"
                ),
            )
        )
    components.append(
        Component(
            "llm",
            llm_reason is None,
            llm_reason
            or f"{settings.llm_model} / {settings.heavy_model}"
            + (f" ({problem}; LLM_MODEL does both)" if (problem := settings.heavy_model_problem()) else ""),
        )
    )
    return components


def _install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


_CLOSING_SECONDS = 3.0
"""Kept out of the grace for what follows the shutdown steps (closing the Bot's connections and the database,
leaving the interpreter), so the process as a whole exits within SHUTDOWN_GRACE_SECONDS."""


_HAND_BACK_SECONDS = 1.0
"""Of the budget (at most a quarter of it), kept from the jobs under way in a worker so that cancelling the ones
still running at the end and handing them back to the queue is done by the deadline."""


class _Grace:
    """The shutdown's deadline: SHUTDOWN_GRACE_SECONDS after `stop` is set, less `_CLOSING_SECONDS` (at most a
    third of the grace). Each step of the shutdown runs `within` it and is cut short (cancelled) at the deadline;
    the delivery worker stops after its part in flight by itself, so only a platform slower than the grace is cut."""

    def __init__(self, stop: asyncio.Event, seconds: float) -> None:
        self._seconds = max(0.0, seconds - min(_CLOSING_SECONDS, seconds / 3))
        self._deadline: float | None = None
        self._watch = asyncio.create_task(self._started(stop), name="shutdown grace")

    async def _started(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._deadline = asyncio.get_running_loop().time() + self._seconds

    @property
    def budget(self) -> float:
        """Seconds from the stop to the deadline."""
        return self._seconds

    def left(self) -> float:
        """Seconds until the deadline (the whole budget while `stop` is not set)."""
        if self._deadline is None:
            return self._seconds
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    async def within(self, step: Awaitable[object], what: str) -> None:
        try:
            await asyncio.wait_for(step, timeout=self.left())
        except TimeoutError:
            logger.warning("stopping: %s did not finish within the shutdown grace; cut short", what)


@dataclass(frozen=True)
class Process:
    """Everything one `lookout run` process is made of, built once by `assemble`."""

    stack: MonitorStack
    """Monitors, scheduler, delivery worker, sources, and the one sender per platform (one Telegram Bot)."""
    services: Services
    dispatcher: Dispatcher
    frontends: Frontends


@asynccontextmanager
async def assemble(
    settings: Settings,
    database: Database,
    *,
    clock: Clock = utc_now,
    models: ModelSet | None = None,
    telegram_limits: TelegramLimits | None = None,
    shared_locks: SharedLocks | None = None,
    on_deliveries_queued: Callable[[], None] | None = None,
) -> AsyncIterator[Process]:
    """The composition root of `lookout run`: the objects of one process, wired as users run them (nothing
    started yet). Tests build their worlds with it, pinning `clock` and scripting `models` (the process's one
    model set, shared by the chat and the monitors).

    One of several processes on PostgreSQL (JOB_QUEUE=procrastinate) passes `shared_locks` (one conversation
    answered one message at a time across processes) and `on_deliveries_queued` (the deferrer of delivery jobs);
    its platform rate limits are then kept through the database, and Telegram polls only where it leads."""
    scaled = shared_locks is not None
    async with monitor_stack(
        settings,
        database,
        models=models,
        telegram_limits=telegram_limits,
        on_deliveries_queued=on_deliveries_queued,
        shared_limits=scaled,
        clock=clock,
    ) as stack:
        services = build_services(settings, database=database, stack=stack, clock=clock)
        dispatcher = build_dispatcher(settings, services, shared_locks=shared_locks)
        frontends = build_frontends(settings, dispatcher, stack.senders, telegram_polls=not scaled)
        yield Process(stack=stack, services=services, dispatcher=dispatcher, frontends=frontends)


def published_routes(stack: MonitorStack, settings: Settings) -> list[BaseRoute]:
    """What `lookout run` publishes without a login, under PUBLIC_URL: the feeds and the digests' pages."""
    return [*feed_routes(stack.service.feeds, public_url=settings.public_url), *page_routes(stack.pages)]


async def run_service(
    settings: Settings, *, role: Role = "all", stop: asyncio.Event | None = None, tune_gc: bool = False
) -> None:
    """Migrate the database, then serve and run monitors until SIGINT/SIGTERM (or `stop` is set). `tune_gc`
    (the `lookout run` process, not tests that run the service in theirs): once assembled, the start-up heap is
    frozen and the garbage collector's young threshold raised (`app.heap`).

    With the embedded job queue one process does everything (`role` must be `all`); with JOB_QUEUE=procrastinate
    any number of processes share one PostgreSQL database, each in a role (see `Role`)."""
    stop = stop or asyncio.Event()
    _install_stop_signals(stop)
    if not settings.scaled_out and role != "all":
        raise RoleError(f"--role {role} needs JOB_QUEUE=procrastinate; with the embedded queue one process does all")
    async with open_database(settings) as database:
        for component in plan_components(settings, role=role):
            logger.info("%s: %s — %s", component.name, "on" if component.on else "off", component.reason)
        if role != "worker" and not (settings.allowed_users or settings.allowed_chats):
            logger.warning("ALLOWED_USERS and ALLOWED_CHATS are empty: anyone who finds the bot can use it")
        if settings.scaled_out:
            await _run_scaled(settings, database, role, stop, tune_gc=tune_gc)
        else:
            await _run_embedded(settings, database, stop, tune_gc=tune_gc)
    logger.info("stopped")


async def _run_embedded(settings: Settings, database: Database, stop: asyncio.Event, *, tune_gc: bool) -> None:
    """One process: frontends, the scheduler (while it leads scheduling on this database), the delivery worker and
    the HTTP server on one loop."""
    async with assemble(settings, database) as process, AsyncExitStack() as duties:
        if tune_gc:
            tune_garbage_collector()
        stack, frontends = process.stack, process.frontends
        duty = await duties.enter_async_context(scheduling(settings, stack, stop, standby=_scheduled_elsewhere))
        delivering = asyncio.create_task(stack.worker.run_forever(stop), name="delivery worker")

        async def scheduler_running() -> bool:
            return duty.healthy()

        async def delivery_running() -> bool:
            return not delivering.done()

        app = build_http_app(
            checks={
                "database": database.ping,
                "scheduler": scheduler_running,
                "delivery": delivery_running,
                **frontends.checks,
            },
            off={name: why for name, (on, why) in describe_frontends(settings).items() if not on},
            routes=[*frontends.routes, *published_routes(stack, settings)],
        )
        frontends.start_all()
        grace = _Grace(stop, settings.shutdown_grace_seconds)
        try:
            await serve_http(app, host=settings.http_host, port=settings.http_port, stop=stop, grace=grace.left)
        finally:
            stop.set()  # the scheduler stops when `duties` closes, after these
            # Deliveries end after the part in flight; what is left stays due in the outbox for the next process.
            await grace.within(delivering, "delivery")
            await grace.within(frontends.stop_all(), "the frontends")  # messages being answered finish
            await grace.within(process.dispatcher.finish_background(), "the memory")  # folds their answers left
            await _mark_vectors(process, grace)


async def _mark_vectors(process: Process, grace: _Grace) -> None:
    """The marks' vectors given in the background after the last presses, within the grace (and the stack's own
    bound, `MARK_VECTORS_SECONDS`); what is left is cancelled and logged, and the monitor's next run gives it."""
    await process.stack.service.feedback.vectors_settled(within=min(MARK_VECTORS_SECONDS, grace.left()))


def _scheduled_elsewhere() -> None:
    logger.info(
        "scheduler: another process on this database schedules the monitors (a `lookout chat` or another "
        "`lookout run`); this one delivers, and takes over if that one stops"
    )


async def _run_scaled(
    settings: Settings, database: Database, role: Role, stop: asyncio.Event, *, tune_gc: bool
) -> None:
    """One process of many on PostgreSQL: web (HTTP, frontends) and/or worker (jobs), sharing one job queue."""
    # Imported here: the job queue's libraries (procrastinate, psycopg) are not loaded by the one-process mode.
    from app.jobqueue import DeliveryJobs, JobQueue, WorkerDuties, process_name
    from app.leadership import Leadership

    serves, works = role in ("all", "web"), role in ("all", "worker")
    background: list[asyncio.Task[None]] = []
    locks = AdvisoryLocks(settings.database_url)
    grace = _Grace(stop, settings.shutdown_grace_seconds)
    # procrastinate's worker starts waiting for its jobs under way when `stop` is set: they get the budget, less what
    # handing back the ones still running takes, instead of a whole SHUTDOWN_GRACE_SECONDS of their own.
    jobs_grace = grace.budget - min(_HAND_BACK_SECONDS, grace.budget / 4)
    async with AsyncExitStack() as resources:
        resources.push_async_callback(locks.dispose)
        queue = await resources.enter_async_context(
            JobQueue(settings.model_copy(update={"shutdown_grace_seconds": jobs_grace}), name=process_name(role))
        )
        deliveries: list[DeliveryJobs] = []

        def deliveries_queued() -> None:
            for deferrer in deliveries:
                deferrer.wake()

        process = await resources.enter_async_context(
            assemble(settings, database, shared_locks=locks, on_deliveries_queued=deliveries_queued)
        )
        if tune_gc:
            tune_garbage_collector()
        stack, frontends = process.stack, process.frontends
        delivery_jobs = DeliveryJobs(database, queue, worker=stack.worker)
        deliveries.append(delivery_jobs)
        checks: dict[str, HealthCheck] = {"database": database.ping, "jobs": queue.healthy}
        if works:
            queue.register(WorkerDuties(database=database, service=stack.service, delivery=stack.worker))
            background.append(asyncio.create_task(queue.work(stop), name="job worker"))
            background.append(asyncio.create_task(stack.worker.keep_claims(stop), name="delivery claims"))
        background.append(asyncio.create_task(delivery_jobs.run_forever(stop), name="delivery jobs"))
        if serves:
            checks.update(frontends.checks)
            telegram = frontends.running.get("telegram")
            if isinstance(telegram, TelegramFrontend) and not settings.telegram_webhook_url:
                leadership = Leadership(
                    locks,
                    "telegram:polling",
                    start=telegram.start_polling,
                    stop=telegram.stop_polling,
                    check_seconds=settings.leader_check_seconds,
                )
                background.append(asyncio.create_task(leadership.run(stop), name="telegram polling leadership"))
            frontends.start_all()

        async def background_running() -> bool:
            return all(not task.done() for task in background)

        checks["background"] = background_running
        off = {name: why for name, (on, why) in describe_frontends(settings).items() if not on} if serves else {}
        routes = [*frontends.routes, *published_routes(stack, settings)]
        app = build_http_app(checks=checks, off=off, routes=routes if serves else ())
        try:
            await serve_http(app, host=settings.http_host, port=settings.http_port, stop=stop, grace=grace.left)
        finally:
            stop.set()
            if serves:
                await grace.within(frontends.stop_all(), "the frontends")  # messages being answered finish first
                await grace.within(process.dispatcher.finish_background(), "the memory")  # folds their answers
                await _mark_vectors(process, grace)
            # The worker finishes its jobs (or hands them back by the deadline); leadership lets go. A job that
            # ignores its cancellation is cut short with the worker (its heartbeat stops: another worker retries it).
            await grace.within(asyncio.wait(background), "the job worker")
            for task in background:
                task.cancel()  # no-op for the ones that ended
            results = await asyncio.gather(*background, return_exceptions=True)
            for task, result in zip(background, results, strict=True):
                if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                    logger.error("%s failed", task.get_name(), exc_info=result)
