"""Concurrent writers: several engines at once lose nothing; races resolve in the database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date

from sqlalchemy import func, select

from storage import ChatRecord, Database, UsageEntry
from storage.models import Run
from storage.repositories import (
    ChatRepository,
    InboundRepository,
    ItemRepository,
    MonitorRepository,
    RunRepository,
    UsageRepository,
)
from tests.storage.conftest import T0
from tests.storage.test_runs_items import make_item


@asynccontextmanager
async def engines(url: str, count: int) -> AsyncIterator[list[Database]]:
    """`count` independent engines (separate connection pools) on one database, like separate processes."""
    databases = [Database(url) for _ in range(count)]
    try:
        yield databases
    finally:
        for database in databases:
            await database.dispose()


async def test_concurrent_writers_lose_nothing(database_url: str, database: Database, chat: ChatRecord) -> None:
    writers, rounds = 6, 10

    async def write(db: Database, writer: int) -> None:
        for n in range(rounds):
            await UsageRepository(db).add(
                chat.id, date(2026, 3, 1), UsageEntry(kind="chat", input_tokens=10, output_tokens=1)
            )
            await ItemRepository(db).upsert_many([make_item(f"w{writer}:{n}"), make_item("shared")])
            assert await InboundRepository(db).seen_before("telegram", f"{writer}-{n}") is False
            await ChatRepository(db).get_or_create("telegram", f"chat-{n}")

    async with engines(database_url, writers) as databases:
        await asyncio.gather(*(write(db, writer) for writer, db in enumerate(databases)))

    totals = await UsageRepository(database).for_day(chat.id, date(2026, 3, 1))
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (
        writers * rounds,
        writers * rounds * 10,
        writers * rounds,
    )
    ids = [f"w{w}:{n}" for w in range(writers) for n in range(rounds)]
    assert len(await ItemRepository(database).get_many([*ids, "shared"])) == writers * rounds + 1
    assert len(await ChatRepository(database).list_chats()) == rounds + 1  # one row per chat despite the race


async def test_double_firing_opens_exactly_one_run(database_url: str, database: Database, chat: ChatRecord) -> None:
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    async with engines(database_url, 8) as databases:
        opened = await asyncio.gather(
            *(RunRepository(db).open_run(monitor.id, T0) for db in databases for _ in range(2))
        )
    winners = [run for run in opened if run is not None]
    assert len(winners) == 1
    async with database.sessions() as session:
        assert await session.scalar(select(func.count()).select_from(Run)) == 1


async def test_racing_duplicates_of_one_event_are_processed_once(database_url: str) -> None:
    async with engines(database_url, 8) as databases:
        answers = await asyncio.gather(*(InboundRepository(db).seen_before("slack", "Ev42") for db in databases))
    assert sorted(answers) == [False] + [True] * 7
