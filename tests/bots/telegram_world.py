"""What the Telegram tests share: the real frontend, dispatcher and conversation against the fake Bot API.

`telegram_world(...)` starts, on the test's event loop: the fake Bot API (its own thread), the real
`TelegramFrontend` (python-telegram-bot's Application, long polling or webhook), a real `Dispatcher` and
`Conversation` (`CommandRouter` + `ChatAgent`) over a migrated SQLite file, a `MonitorService` whose `hn`
source reads a local fake Algolia server, and a `DeliveryWorker` sending the outbox through `TelegramSender`.
The chat model is whatever the test scripts (a pydantic-ai `FunctionModel`) or None.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.access import AccessPolicy
from agent.chat.agent import ChatAgent
from agent.commands.router import CommandRouter
from agent.context import ConversationSettings, Services
from agent.conversation import Conversation
from bots.dispatcher import Dispatcher
from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from bots.telegram.sender import TelegramSender
from monitors.delivery import DeliveryWorker
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research import ModelSet
from storage import Database
from tests.bots.slack_world import T0, hn_resolver, http_client, serve_hacker_news
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import FakeTelegram, SentMessage, running_fake_telegram

__all__ = [
    "T0",
    "TelegramWorld",
    "eventually",
    "eventually_async",
    "last_user_text",
    "scripted_model",
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


async def eventually(condition: Callable[[], bool], *, what: str, timeout: float = 30.0) -> None:
    """Wait until `condition()` holds (polling); fail the test with `what` after a generous timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def eventually_async(condition: Callable[[], Awaitable[bool]], *, what: str, timeout: float = 30.0) -> None:
    """`eventually` for a condition that must be awaited (a database query)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def last_user_text(messages: list[ModelMessage]) -> str:
    """The newest thing the person said, as the model received it."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


@dataclass
class ScriptedModel:
    """A `FunctionModel` that answers each message with `answer(text)` and keeps what it was sent."""

    answer: Callable[[str], str]
    requests: list[list[ModelMessage]] = field(default_factory=list)
    seconds: float = 0.0
    """How long each answer takes."""

    def model(self) -> FunctionModel:
        async def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
            self.requests.append(list(messages))
            await asyncio.sleep(self.seconds)
            return ModelResponse(parts=[TextPart(self.answer(last_user_text(messages)))])

        return FunctionModel(respond, model_name="scripted")


def scripted_model(answer: Callable[[str], str], *, seconds: float = 0.0) -> ScriptedModel:
    return ScriptedModel(answer, seconds=seconds)


@asynccontextmanager
async def telegram_world(
    *,
    db_url: str,
    sources: FakeHTTPServer,
    out_dir: Path,
    model: Model | None = None,
    access: AccessPolicy | None = None,
    webhook: bool = False,
    fake: FakeTelegram | None = None,
) -> AsyncIterator[TelegramWorld]:
    serve_hacker_news(sources)
    client = http_client()
    database = Database(db_url)
    resolve = hn_resolver(sources, client)
    workers: list[DeliveryWorker] = []
    service = MonitorService(
        database,
        resolve_sources=resolve,
        light_model=None,
        heavy_model=None,
        out_dir=out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=lambda: T0,
        on_deliveries_queued=lambda: [worker.wake() for worker in workers] and None,
    )
    services = Services(
        database=database,
        monitors=service,
        resolve_sources=resolve,
        http=client,
        models=ModelSet.of(model, None),
        settings=ConversationSettings(exports_dir=out_dir / "chat", min_interval_seconds=900),
        clock=lambda: T0,
    )
    conversation = Conversation(
        commands=CommandRouter(services), free_text=ChatAgent(services), settings=services.settings
    )
    dispatcher = Dispatcher(database, conversation, access or AccessPolicy(), clock=lambda: T0)
    async with _fake(fake) as telegram:
        sender = TelegramSender(telegram.token, base_url=telegram.api_url, base_file_url=telegram.file_url)
        worker = DeliveryWorker(database, {"telegram": sender}, clock=lambda: T0, poll_seconds=0.2)
        workers.append(worker)
        options = TelegramOptions(
            token=telegram.token,
            api_url=telegram.url,
            poll_timeout=1.0,
            progress_interval=0.2,
            webhook_url="https://lookout.example.org/telegram/webhook" if webhook else None,
            webhook_secret=WEBHOOK_SECRET if webhook else None,
        )
        frontend = TelegramFrontend(options, dispatcher)
        stop = asyncio.Event()
        delivering = asyncio.create_task(worker.run_forever(stop))
        await frontend.start()
        try:
            yield TelegramWorld(telegram, database, services, dispatcher, frontend, worker)
        finally:
            await frontend.stop()
            stop.set()
            await delivering
            await sender.close()
            await client.aclose()
            await database.dispose()


@asynccontextmanager
async def _fake(fake: FakeTelegram | None) -> AsyncIterator[FakeTelegram]:
    if fake is not None:
        yield fake
        return
    with running_fake_telegram() as started:
        yield started
