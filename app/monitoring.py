"""The standing-monitor stack built from settings: sources, monitor service, delivery worker and scheduler; and
the scheduling duty, which one process per database leads."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from app.frontends import PlatformSenders, platform_senders
from app.leadership import Leadership
from app.monitor_service import build_monitor_service
from app.settings import Settings
from app.wiring import Providers, SourceCatalog, item_embedder, language_models, open_http_client
from bots import TelegramLimits
from kernel import Clock, utc_now
from monitors import DeliveryWorker, DestinationSenders, DigestPages, MonitorScheduler, MonitorService, MonitorSettings
from research import ModelSet, PipelineRequest, PipelineResult, remove_orphan_dictionaries, run_pipeline
from storage import Database, ScheduleChanges, locks_for
from storage.repositories import RateSlotRepository

logger = logging.getLogger(__name__)

SCHEDULING_DUTY = "scheduler"
"""The lock name of the one process per database that schedules monitors."""

MARK_VECTORS_SECONDS = 5.0
"""How long closing the stack waits for the marks' vectors given in the background after a press (an embedding
request answers within a second or two): a hanging embedding server is cut then, and the monitor's next run gives
what was left."""


@dataclass(frozen=True)
class MonitorStack:
    """What runs monitors and delivers their digests; `scheduler` is started by the process that leads scheduling
    (every process's scheduler tells the others of the changes it makes, started or not)."""

    database: Database
    service: MonitorService
    worker: DeliveryWorker
    scheduler: MonitorScheduler
    catalog: SourceCatalog
    """The sources built from settings; `catalog.client` is the one HTTP client they share."""
    senders: PlatformSenders
    """The one sender per platform (one Telegram Bot): the worker delivers with them, the frontends answer."""
    models: ModelSet
    """The process's one set of language models (the chat uses it too)."""
    pages: DigestPages
    """The digests' pages under PUBLIC_URL: the worker links each digest to its page, the HTTP server serves them."""


@asynccontextmanager
async def monitor_stack(
    settings: Settings,
    database: Database,
    *,
    models: ModelSet | None = None,
    telegram_limits: TelegramLimits | None = None,
    clock: Clock = utc_now,
    on_deliveries_queued: Callable[[], None] | None = None,
    shared_limits: bool = False,
) -> AsyncIterator[MonitorStack]:
    """Build the stack on an upgraded database (first removing the dictionary folders of killed processes,
    `research.remove_orphan_dictionaries`); on exit waits for the marks' background vectors (at most
    `MARK_VECTORS_SECONDS`), then closes the HTTP client and the senders. `models` are the
    process's language models, built from settings unless given (tests and benchmarks script them); `clock` is the
    process's clock (tests pin it); `telegram_limits` default to the TELEGRAM_* flood limits. A run that queued
    outbox rows calls `on_deliveries_queued` (default: wake this process's delivery worker; with a job queue,
    the deferrer of delivery jobs). `shared_limits`: the platforms' rate limits are kept through the database,
    for every process that sends with the same tokens."""
    # A process killed before its exit hook left its private dictionary folder (49 MB) in the temporary folder.
    await asyncio.to_thread(remove_orphan_dictionaries)
    client = open_http_client(settings, database=database)
    catalog = SourceCatalog.build(settings, client)
    senders = platform_senders(
        settings,
        telegram_limits=telegram_limits,
        shared_slots=RateSlotRepository(database) if shared_limits else None,
    )

    try:
        pages = DigestPages(database, public_url=settings.public_url)
        destinations = DestinationSenders(
            database,
            http=client,
            clock=clock,
            pause_after=timedelta(days=settings.destination_pause_days),
            pages=pages,
        )
        providers: Providers = {}  # one Gemini client for the language models and the embedder
        models = models if models is not None else language_models(settings, providers=providers)
        embedder = item_embedder(settings, database, providers=providers)

        async def pipeline(request: PipelineRequest, **options: Any) -> PipelineResult:
            # Every monitor run groups its stories with the embedding model when one is configured.
            return await run_pipeline(request, embedder=embedder, **options)

        service = build_monitor_service(
            database,
            resolve_sources=catalog.resolve,
            light_model=models.light,
            heavy_model=models.heavy,
            out_dir=settings.exports_dir,
            settings=MonitorSettings(
                min_interval_seconds=settings.min_monitor_interval,
                default_timezone=settings.timezone,
                chat_daily_tokens=settings.chat_daily_tokens,
            ),
            on_deliveries_queued=on_deliveries_queued or (lambda: worker.wake()),
            clock=clock,
            pipeline=pipeline,
            destinations=destinations,
            http=client,
            embedder=embedder,  # each chat's feedback reads the stories' stored vectors
        )
        worker = DeliveryWorker(
            database,
            {**senders.by_platform(), **destinations.by_platform()},
            pages=pages,
            clock=clock,
            lease=timedelta(seconds=settings.delivery_lease_seconds),
            poll_seconds=settings.delivery_poll_seconds,
            feedback=service.feedback,
        )
        scheduler = MonitorScheduler(
            service,
            database,
            clock=clock,
            changes=ScheduleChanges(database, settings.database_url),
            poll_seconds=settings.scheduler_poll_seconds,
            concurrency=settings.worker_concurrency,
        )
        yield MonitorStack(
            database=database,
            service=service,
            worker=worker,
            scheduler=scheduler,
            catalog=catalog,
            senders=senders,
            models=models,
            pages=pages,
        )
        # Marks pressed just before the stop get their vectors now rather than at the monitor's next run.
        await service.feedback.vectors_settled(within=MARK_VECTORS_SECONDS)
    finally:
        await senders.close()
        await client.aclose()


@dataclass(frozen=True)
class Scheduling:
    """This process's part in scheduling: leading it (the scheduler ticks here) or standing by."""

    leadership: Leadership
    task: asyncio.Task[None]

    def healthy(self) -> bool:
        """Scheduling goes on: this process ticks, or stands by while another one does."""
        return not self.task.done()


@asynccontextmanager
async def scheduling(
    settings: Settings, stack: MonitorStack, stop: asyncio.Event, *, standby: Callable[[], object]
) -> AsyncIterator[Scheduling]:
    """Lead scheduling whenever no other process on the database does (advisory lock on PostgreSQL, a file lock
    next to a SQLite file): this process's scheduler ticks while it leads; `standby` is called once when another
    process leads (this one takes over within LEADER_CHECK_SECONDS of that one stopping). On exit (`stop` is set
    then) the scheduler stops and the lock is let go."""
    locks = locks_for(settings.database_url)
    leadership = Leadership(
        locks,
        SCHEDULING_DUTY,
        start=stack.scheduler.start,
        stop=stack.scheduler.stop,
        check_seconds=settings.leader_check_seconds,
        standby=standby,
    )
    task = asyncio.create_task(leadership.run(stop), name="scheduling leadership")
    try:
        yield Scheduling(leadership=leadership, task=task)
    finally:
        stop.set()
        try:
            await task
        finally:
            await locks.dispose()
