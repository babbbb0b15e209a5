"""What the Telegram tests share: the app as `lookout run` builds it, against the fake Bot API.

`telegram_world(...)` builds the process through the composition root (`app.service.assemble`) from settings,
as users run it: one Telegram Bot with its rate limiter for the frontend, answers and digests; the dispatcher
and conversation; the monitor stack whose sources point at a local fake server (Hacker News answers there; the
other sources reach nothing); the delivery worker. Then it starts the frontend (long polling or webhook) and
the worker on the test's event loop. The clock is pinned at `T0`; the chat model is whatever the test scripts
(`tests.kit.ScriptedModel`) or None. Wiring defects (a second Bot, a second model set) show up here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic_ai.models import Model

from agent.context import Services
from app.service import assemble
from app.settings import load_settings
from bots.dispatcher import Dispatcher, SharedLocks
from bots.telegram.frontend import TelegramFrontend
from monitors.delivery import DeliveryWorker
from research import ModelSet
from storage import Database
from tests.bots.slack_world import T0, fake_source_urls, serve_hacker_news
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import FakeTelegram, SentMessage, running_fake_telegram
from tests.kit import eventually

__all__ = [
    "T0",
    "TelegramWorld",
    "telegram_world",
]

WEBHOOK_SECRET = "webhook-secret-for-tests"


@dataclass
class TelegramWorld:
    fake: FakeTelegram
    database: Database
    services: Services
    dispatcher: Dispatcher
    frontend: TelegramFrontend
    worker: DeliveryWorker

    async def replies(self, chat_id: int, count: int, *, kind: str | None = None) -> list[SentMessage]:
        """The first `count` messages the chat received (of `kind`), waiting for them to arrive."""

        def arrived() -> list[SentMessage]:
            return [m for m in self.fake.sent(chat_id) if kind is None or m.kind == kind]

        await eventually(lambda: len(arrived()) >= count, what=f"{count} message(s) in chat {chat_id}")
        return arrived()[:count]


@asynccontextmanager
async def telegram_world(
    *,
    db_url: str,
    sources: FakeHTTPServer,
    out_dir: Path,
    model: Model | None = None,
    webhook: bool = False,
    fake: FakeTelegram | None = None,
    shared_locks: SharedLocks | None = None,
) -> AsyncIterator[TelegramWorld]:
    serve_hacker_news(sources)
    database = Database(db_url)
    async with _fake(fake) as telegram:
        settings = load_settings(
            _env_file=None,
            data_dir=out_dir,
            database_url=db_url,
            telegram_bot_token=telegram.token,
            telegram_api_url=telegram.url,
            telegram_webhook_url="https://lookout.example.org/telegram/webhook" if webhook else None,
            telegram_webhook_secret=WEBHOOK_SECRET if webhook else None,
            llm_model="",
            allow_private_urls=True,
            delivery_poll_seconds=0.2,
            **fake_source_urls(sources),
        )
        async with assemble(
            settings, database, clock=lambda: T0, models=ModelSet.of(model, None), shared_locks=shared_locks
        ) as process:
            frontend = process.frontends.running["telegram"]
            assert isinstance(frontend, TelegramFrontend)
            worker = process.stack.worker
            stop = asyncio.Event()
            delivering = asyncio.create_task(worker.run_forever(stop))
            await frontend.start()
            try:
                yield TelegramWorld(telegram, database, process.services, process.dispatcher, frontend, worker)
            finally:
                await frontend.stop()
                stop.set()
                await delivering
    await database.dispose()


@asynccontextmanager
async def _fake(fake: FakeTelegram | None) -> AsyncIterator[FakeTelegram]:
    if fake is not None:
        yield fake
        return
    with running_fake_telegram() as started:
        yield started
