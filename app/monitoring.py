"""The standing-monitor stack built from settings: sources, monitor service, delivery worker and scheduler."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.settings import Settings
from app.wiring import SourceCatalog, language_models, open_http_client
from bots import TelegramSender
from monitors import ChatSender, DeliveryWorker, MonitorScheduler, MonitorService, MonitorSettings
from research import ModelSet
from storage import Database

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
    models: ModelSet
    """The process's one set of language models (the chat uses it too)."""


def delivery_senders(settings: Settings) -> dict[str, ChatSender]:
    """One sender per platform whose token is configured."""
    senders: dict[str, ChatSender] = {}
    if settings.telegram_bot_token is not None:
        api = settings.telegram_api_url.rstrip("/")
        senders["telegram"] = TelegramSender(
            settings.telegram_bot_token.get_secret_value(),
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            max_messages_per_second=TELEGRAM_MESSAGES_PER_SECOND,
        )
    return senders


@asynccontextmanager
async def monitor_stack(
    settings: Settings, database: Database, *, models: ModelSet | None = None
) -> AsyncIterator[MonitorStack]:
    """Build the stack on an upgraded database; closes the HTTP client and the senders on exit.

    `models` are the process's language models: built from settings unless given (a benchmark's scripted ones)."""
    client = open_http_client(settings, database=database)
    catalog = SourceCatalog.build(settings, client)
    senders = delivery_senders(settings)
    try:
        worker = DeliveryWorker(database, senders)
        models = models if models is not None else language_models(settings)
        service = MonitorService(
            database,
            resolve_sources=catalog.resolve,
            light_model=models.light,
            heavy_model=models.heavy,
            out_dir=settings.data_dir / "exports",
            settings=MonitorSettings(
                min_interval_seconds=settings.min_monitor_interval, default_timezone=settings.timezone
            ),
            on_deliveries_queued=worker.wake,
        )
        scheduler = MonitorScheduler(service, database)
        yield MonitorStack(
            database=database,
            service=service,
            worker=worker,
            scheduler=scheduler,
            catalog=catalog,
            models=models,
        )
    finally:
        for sender in senders.values():
            if isinstance(sender, TelegramSender):
                await sender.close()
        await client.aclose()
