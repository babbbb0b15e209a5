"""Benchmark chat throughput: C concurrent chats × M messages through the real Telegram frontend.

Everything between the Bot API and the model is the real code: `TelegramFrontend` (python-telegram-bot's
Application, long polling) against `tests.fakes.telegram.FakeTelegram` (no rate ceiling: this measures our
side), the `Dispatcher` (access, de-duplication in SQLite, per-conversation locks), the `Conversation` with the
real `CommandRouter` and `ChatAgent` (memory stored and loaded each turn, rolling summaries, usage recorded),
and the `TelegramSender` (markdown → HTML, typing indicator). The model is a pydantic-ai `FunctionModel` that
answers at once, so the times are Lookout's own plus the HTTP round trips to the fake.

Two runs:
- closed loop: each chat sends its next message when the answer to the previous one arrived (people waiting
  for answers), all chats at once;
- burst: every chat's messages are queued at once (a backlog after downtime, or a flood).

Latency is measured by the fake: from the moment getUpdates handed an update to the bot to the moment the
answer's sendMessage arrived. Peak RSS is the whole process (the fake server runs in it too).

Run: uv run python bench/chat.py [--chats 50] [--messages 20] [--memory-turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import platform
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.access import AccessPolicy
from agent.chat.agent import ChatAgent
from agent.commands.router import CommandRouter
from agent.context import ConversationSettings, Services
from agent.conversation import Conversation
from bots.dispatcher import Dispatcher
from bots.telegram import TelegramSender, build_bot
from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from monitors.service import MonitorService
from sources.base import Source
from sources.http import HttpClient
from storage import Database, upgrade_database
from tests.fakes.telegram import FakeTelegram, SentMessage

FIRST_CHAT = 10_000


def echo(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    """The instant model: repeats the newest thing the person said (also writes the memory summaries)."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return ModelResponse(parts=[TextPart(f"echo: {part.content}")])
    return ModelResponse(parts=[TextPart("summary: nothing to keep")])


def no_sources(specs: Sequence[str]) -> list[Source]:
    raise ValueError("no sources in this benchmark")


@dataclass
class Run:
    """What one run measured."""

    name: str
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    in_order: bool = True


class Replies:
    """Answers as they arrive at the fake, per chat, woken on the bot's loop."""

    def __init__(self, fake: FakeTelegram, loop: asyncio.AbstractEventLoop) -> None:
        self.by_chat: dict[str, list[SentMessage]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._loop = loop
        fake.on_message(self._arrived)

    def _arrived(self, sent: SentMessage) -> None:  # on the fake's thread
        if sent.kind == "text" and (sent.text or "").startswith("echo: "):
            self._loop.call_soon_threadsafe(self._store, sent)

    def _store(self, sent: SentMessage) -> None:
        self.by_chat.setdefault(sent.chat_id, []).append(sent)
        self.event(sent.chat_id).set()

    def event(self, chat_id: str) -> asyncio.Event:
        return self._events.setdefault(chat_id, asyncio.Event())

    async def wait_for(self, chat_id: str, count: int) -> None:
        while len(self.by_chat.get(chat_id, [])) < count:
            event = self.event(chat_id)
            event.clear()
            await event.wait()


async def closed_loop(fake: FakeTelegram, replies: Replies, *, chats: int, messages: int, tag: str) -> Run:
    run = Run(f"closed loop: {chats} chats × {messages} messages, next after each answer")
    sent: dict[str, int] = {}

    async def person(chat: int) -> None:
        chat_id = str(chat)
        before = len(replies.by_chat.get(chat_id, []))
        for n in range(messages):
            text = f"{tag} {chat} {n}"
            sent[text] = fake.push_text(chat, text)
            await replies.wait_for(chat_id, before + n + 1)

    start = time.perf_counter()
    await asyncio.gather(*(person(FIRST_CHAT + chat) for chat in range(chats)))
    run.seconds = time.perf_counter() - start
    _measure(run, fake, replies, sent, tag)
    return run


async def burst(fake: FakeTelegram, replies: Replies, *, chats: int, messages: int, tag: str) -> Run:
    run = Run(f"burst: {chats * messages} messages queued at once ({chats} chats)")
    sent: dict[str, int] = {}
    before = {str(FIRST_CHAT + chat): len(replies.by_chat.get(str(FIRST_CHAT + chat), [])) for chat in range(chats)}
    start = time.perf_counter()
    for n in range(messages):
        for chat in range(chats):
            text = f"{tag} {FIRST_CHAT + chat} {n}"
            sent[text] = fake.push_text(FIRST_CHAT + chat, text)
    await asyncio.gather(*(replies.wait_for(chat_id, count + messages) for chat_id, count in before.items()))
    run.seconds = time.perf_counter() - start
    _measure(run, fake, replies, sent, tag)
    return run


def _measure(run: Run, fake: FakeTelegram, replies: Replies, sent: dict[str, int], tag: str) -> None:
    for chat_messages in replies.by_chat.values():
        ours = [m for m in chat_messages if (m.text or "").startswith(f"echo: {tag} ")]
        numbers = [int((m.text or "").rsplit(" ", 1)[1]) for m in ours]
        run.in_order = run.in_order and numbers == sorted(numbers)
        for message in ours:
            update_id = sent[(message.text or "").removeprefix("echo: ")]
            run.latencies.append(message.at - fake.served_at[update_id])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def bench(args: argparse.Namespace) -> None:
    fake = FakeTelegram(long_poll_cap=1.0)
    fake.start()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'lookout.db'}"
        await upgrade_database(url)
        database = Database(url)
        client = HttpClient(user_agent="LookoutBench/0.1")
        model = FunctionModel(echo, model_name="instant")
        service = MonitorService(
            database, resolve_sources=no_sources, light_model=None, heavy_model=None, out_dir=Path(tmp) / "exports"
        )
        services = Services(
            database=database,
            monitors=service,
            resolve_sources=no_sources,
            http=client,
            light_model=model,
            heavy_model=None,
            settings=ConversationSettings(exports_dir=Path(tmp) / "exports", memory_turns=args.memory_turns),
        )
        conversation = Conversation(
            commands=CommandRouter(services), free_text=ChatAgent(services), settings=services.settings
        )
        dispatcher = Dispatcher(database, conversation, AccessPolicy())
        options = TelegramOptions(token=fake.token, api_url=fake.url, poll_timeout=10.0)
        sender = TelegramSender(build_bot(fake.token, api_url=fake.url, poll_timeout=10.0))
        frontend = TelegramFrontend(options, dispatcher, sender)
        replies = Replies(fake, asyncio.get_running_loop())
        await frontend.start()
        try:
            runs = [
                await closed_loop(fake, replies, chats=args.chats, messages=args.messages, tag="closed"),
                await burst(fake, replies, chats=args.chats, messages=args.messages, tag="burst"),
            ]
        finally:
            await frontend.stop()
            await client.aclose()
            await database.dispose()
            fake.stop()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\nchat — Python {platform.python_version()} on {platform.machine()}, SQLite, instant scripted model, "
        f"MEMORY_TURNS={args.memory_turns}\n"
    )
    print("| run | messages | wall time | messages/s | p50 latency | p99 latency | max | replies in order |")
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        count = len(run.latencies)
        print(
            f"| {run.name} | {count:,} | {run.seconds:.1f} s | {count / run.seconds:.0f} "
            f"| {percentile(run.latencies, 0.5) * 1000:.0f} ms | {percentile(run.latencies, 0.99) * 1000:.0f} ms "
            f"| {max(run.latencies) * 1000:.0f} ms | {'yes' if run.in_order else 'NO'} |"
        )
    mean = statistics.fmean(latency for run in runs for latency in run.latencies)
    print(f"\npeak RSS (whole process, fake included): {rss_mib:.0f} MiB")
    print(f"mean latency over both runs: {mean * 1000:.0f} ms")
    print(f"Bot API calls answered by the fake: {len(fake.calls):,} ({len(fake.calls_to('sendChatAction')):,} typing)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument(
        "--memory-turns", type=int, default=10, help="MEMORY_TURNS: beyond it each turn folds old ones into a summary"
    )
    args = parser.parse_args()
    if args.chats < 1 or args.messages < 1:
        parser.error("need at least one chat and one message")
    logging.basicConfig(level=logging.WARNING)
    # The fake's long polls are cut off when the bot disconnects at the end; aiohttp reports each one.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
