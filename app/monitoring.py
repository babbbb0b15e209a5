"""The standing-monitor stack built from settings: sources, monitor service, delivery worker and scheduler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.settings import Settings
from app.wiring import SourceCatalog, open_http_client, pipeline_models
from bots import FloodLimits, SharedRateLimiter, TelegramSender
from monitors import ChatSender, DeliveryWorker, MonitorScheduler, MonitorService, MonitorSettings
from storage import Database, RateSlotRepository

TELEGRAM_MESSAGES_PER_SECOND = 25.0
"""Below Telegram's ~30 messages/s per bot, so a busy minute paces itself instead of collecting 429s."""


@dataclass(frozen=True)
class MonitorStack:
    """What runs monitors and delivers their digests; `scheduler` is started by the caller (it needs the loop)."""

    database: Database
    service: MonitorService
    worker: DeliveryWorker
    scheduler: MonitorScheduler
    catalog: SourceCatalog
    """The sources built from settings; `catalog.client` is the one HTTP client they share."""


def telegram_rate_limiter(settings: Settings, database: Database) -> SharedRateLimiter | None:
    """With several processes (JOB_QUEUE=procrastinate), Telegram's flood limits kept through the database for all
    of them; None for one process, which paces itself."""
    if not settings.scaled_out or settings.telegram_bot_token is None:
        return None
    bot_id = settings.telegram_bot_token.get_secret_value().split(":", 1)[0]  # the public part of the token
    limits = FloodLimits(
        overall=settings.telegram_max_messages,
        period=settings.telegram_rate_period,
        group=settings.telegram_group_max_messages,
        group_period=settings.telegram_group_rate_period,
    )
    return SharedRateLimiter(RateSlotRepository(database), token_key=bot_id, limits=limits)


def delivery_senders(settings: Settings, database: Database) -> dict[str, ChatSender]:
    """One sender per platform whose token is configured."""
    senders: dict[str, ChatSender] = {}
    if settings.telegram_bot_token is not None:
        api = settings.telegram_api_url.rstrip("/")
        senders["telegram"] = TelegramSender(
            settings.telegram_bot_token.get_secret_value(),
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            max_messages_per_second=TELEGRAM_MESSAGES_PER_SECOND,
            rate_limiter=telegram_rate_limiter(settings, database),
        )
    return senders


@asynccontextmanager
async def monitor_stack(
    settings: Settings, database: Database, *, on_deliveries_queued: Callable[[], None] | None = None
) -> AsyncIterator[MonitorStack]:
    """Build the stack on an upgraded database; closes the HTTP client and the senders on exit.

    A run that queued outbox rows calls `on_deliveries_queued` (default: wake this process's delivery worker;
    with a job queue, the deferrer of delivery jobs)."""
    client = open_http_client(settings, database=database)
    catalog = SourceCatalog.build(settings, client)
    senders = delivery_senders(settings, database)
    try:
        worker = DeliveryWorker(database, senders)
        pipeline_light, pipeline_heavy = pipeline_models(settings)
        service = MonitorService(
            database,
            resolve_sources=catalog.resolve,
            # Wrapped: retries, then the other model; the chat agent wraps the plain models itself.
            light_model=pipeline_light,
            heavy_model=pipeline_heavy,
            out_dir=settings.data_dir / "exports",
            settings=MonitorSettings(
                min_interval_seconds=settings.min_monitor_interval, default_timezone=settings.timezone
            ),
            on_deliveries_queued=on_deliveries_queued or worker.wake,
        )
        scheduler = MonitorScheduler(service, database)
        yield MonitorStack(
            database=database,
            service=service,
            worker=worker,
            scheduler=scheduler,
            catalog=catalog,
        )
    finally:
        for sender in senders.values():
            if isinstance(sender, TelegramSender):
                await sender.close()
        await client.aclose()
