"""The engine's SQLite settings, `Database.ping`, the UTC datetime column type, and what a pooled connection is
left in."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from storage import ChatRecord, Database, UsageEntry, is_unreachable
from storage.engine import create_engine
from storage.models import Base, Chat
from storage.repositories import ChatRepository, TurnRepository, UsageRepository
from storage.types import UTCDateTime
from tests.fakes.postgres_proxy import postgres_proxy
from tests.storage.conftest import T0


async def test_sqlite_file_gets_wal_foreign_keys_busy_timeout_and_its_directory(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "deeper" / "lookout.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.connect() as connection:
            journal = (await connection.exec_driver_sql("PRAGMA journal_mode")).scalar()
            foreign_keys = (await connection.exec_driver_sql("PRAGMA foreign_keys")).scalar()
            busy_timeout = (await connection.exec_driver_sql("PRAGMA busy_timeout")).scalar()
    finally:
        await engine.dispose()
    assert path.parent.is_dir()
    assert (journal, foreign_keys) == ("wal", 1)
    assert busy_timeout is not None and busy_timeout >= 5000


async def test_sqlite_enforces_foreign_keys(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'fk.db'}")
    try:
        async with engine.begin() as connection:
            await connection.run_sync(Base.metadata.create_all)
        with pytest.raises(Exception, match="FOREIGN KEY"):
            async with engine.begin() as connection:
                await connection.execute(
                    text(
                        "INSERT INTO subscriptions (monitor_id, chat_id, active, created_at)"
                        " VALUES (1, 1, 1, '2026-01-01')"
                    )
                )
    finally:
        await engine.dispose()


async def test_ping_reports_a_reachable_database(database: Database) -> None:
    assert await database.ping() is True


async def test_ping_is_false_when_postgres_is_unreachable() -> None:
    database = Database("postgresql+asyncpg://nobody:secret@127.0.0.1:1/nothing")
    try:
        assert await database.ping() is False
    finally:
        await database.dispose()


async def test_a_database_that_is_away_is_told_from_a_statement_it_refused(tmp_path: Path) -> None:
    # Real errors, as the drivers raise them: a server nobody listens for, SQLite's lock held past the busy
    # timeout by another writer (retry later) against a statement the database refused (retrying would not help).
    away = Database("postgresql+asyncpg://nobody:secret@127.0.0.1:1/nothing")
    try:
        with pytest.raises(Exception) as refused_connection:
            async with away.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await away.dispose()
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with pytest.raises(sqlite3.OperationalError) as locked:
            waiter.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as wrong:
            waiter.execute("SELECT nothing FROM nowhere")
    finally:
        waiter.close()
        holder.execute("COMMIT")
        holder.close()
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'ok.db'}")
    try:
        with pytest.raises(Exception) as refused_statement:
            await database.read(lambda connection: connection.execute(text("SELECT * FROM no_such_table")))
    finally:
        await database.dispose()
    assert is_unreachable(refused_connection.value) and is_unreachable(locked.value)
    assert not is_unreachable(wrong.value) and not is_unreachable(refused_statement.value)


async def test_a_connection_the_server_dropped_is_unreachable_on_postgresql(database: Database) -> None:
    if database.dialect != "postgresql":
        pytest.skip("a PostgreSQL server's connections")
    async with postgres_proxy(database.engine.url.render_as_string(hide_password=False)) as proxy:
        proxied = Database(proxy.url)
        try:
            async with proxied.engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
                await proxy.drop_connections()  # what a restart does to its clients
                with pytest.raises(Exception) as dropped:
                    await connection.execute(text("SELECT 1"))
        finally:
            await proxied.dispose()
    assert is_unreachable(dropped.value)


@pytest.mark.parametrize("offset_hours", [-7, 0, 8])
async def test_datetimes_come_back_aware_in_utc(database: Database, offset_hours: int) -> None:
    zone = timezone(timedelta(hours=offset_hours))
    local = datetime(2026, 3, 29, 1, 30, 15, 123456, tzinfo=zone)
    chats = ChatRepository(database)
    chat = await chats.get_or_create("slack", "C1")
    async with database.transaction() as session:
        row = await session.get(Chat, chat.id)
        assert row is not None
        row.created_at = local
    stored = await chats.get(chat.id)
    assert stored is not None
    assert stored.created_at == local
    assert stored.created_at.tzinfo == UTC


def test_naive_datetimes_are_refused() -> None:
    from sqlalchemy.dialects import sqlite

    with pytest.raises(ValueError, match="naive"):
        UTCDateTime().process_bind_param(datetime(2026, 1, 1), sqlite.dialect())


async def test_sqlite_reads_do_not_queue_behind_an_open_write_transaction(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}")
    try:
        async with database.engine.begin() as connection:
            await connection.run_sync(Base.metadata.create_all)
        chats = ChatRepository(database)
        await chats.get_or_create("telegram", "1")
        async with database.transaction() as session:
            session.add(Chat(platform="telegram", external_id="2"))
            await session.flush()  # the write lock is held until this block ends
            # Under BEGIN IMMEDIATE this read would wait for the lock (busy_timeout: 30 s) and time out here.
            seen = await asyncio.wait_for(chats.list_chats(), timeout=10)
        assert [chat.external_id for chat in seen] == ["1"]  # a snapshot from before the uncommitted write
        assert len(await chats.list_chats()) == 2
    finally:
        await database.dispose()


async def test_a_read_runs_whole_and_never_waits_for_an_open_write(database: Database) -> None:
    await ChatRepository(database).get_or_create("telegram", "1")

    def external_ids(connection: Connection) -> list[str]:
        return list(connection.execute(text("SELECT external_id FROM chats ORDER BY id")).scalars())

    async with database.transaction() as session:
        session.add(Chat(platform="telegram", external_id="2"))
        await session.flush()  # on SQLite the write lock is held until this block ends
        seen = await asyncio.wait_for(database.read(external_ids), timeout=10)
    assert seen == ["1"]  # a snapshot from before the uncommitted write
    assert await database.read(external_ids) == ["1", "2"]  # and what was committed since


async def test_sqlite_writers_of_one_process_take_turns_in_the_order_they_asked(tmp_path: Path) -> None:
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'queue.db'}")
    try:
        async with database.engine.begin() as connection:
            await connection.run_sync(Base.metadata.create_all)
        order: list[int] = []
        inside = 0

        async def writer(number: int) -> None:
            nonlocal inside
            async with database.begin() as connection:
                inside += 1
                assert inside == 1  # one writing transaction at a time, none failing on SQLite's lock
                await connection.execute(
                    text(
                        "INSERT INTO chats (platform, external_id, timezone, active, created_at)"
                        " VALUES ('telegram', :id, 'UTC', 1, '2026-03-01 09:00:00')"
                    ),
                    {"id": str(number)},
                )
                await asyncio.sleep(0.01)  # the lock is held across awaits, as in a real turn
                order.append(number)
                inside -= 1

        await asyncio.gather(*(writer(number) for number in range(30)))

        assert order == list(range(30))
        assert len(await ChatRepository(database).list_chats()) == 30
    finally:
        await database.dispose()


async def test_a_turns_write_alone_leaves_its_pooled_connection_idle_unlocked_and_transactional(
    database: Database, chat: ChatRecord
) -> None:
    """On PostgreSQL a turn's write runs in autocommit (`Database.write_alone`). The connection it used goes back to
    the pool with no transaction open and no lock held, and not in autocommit: the next `begin()` on that very
    connection (a pool of one) still rolls back."""
    postgres = database.dialect == "postgresql"
    single = Database(create_async_engine(database.engine.url, pool_size=1, max_overflow=0)) if postgres else database
    try:
        spent = [UsageEntry(kind="chat", input_tokens=5)]
        for n in range(3):
            assert (
                await TurnRepository(single).finish(
                    chat.id, "", now=T0, day=T0.date(), changes={"messages": b"m%d" % n}, usage=spent
                )
                == n + 1
            )
        if postgres:
            async with database.engine.connect() as observer:
                others = (
                    await observer.execute(
                        text(
                            "SELECT a.state, a.backend_xid IS NULL,"
                            " (SELECT count(*) FROM pg_locks l WHERE l.pid = a.pid) FROM pg_stat_activity a"
                            " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
                            " AND a.backend_type = 'client backend'"
                        )
                    )
                ).all()
            assert [tuple(row) for row in others] == [("idle", True, 0)]  # the pool's one connection, at rest

        with pytest.raises(RuntimeError, match="undone"):
            async with single.begin() as connection:
                await connection.execute(text("DELETE FROM usage"))
                raise RuntimeError("undone")
        totals = await UsageRepository(database).by_kind(chat.id, T0.date(), T0.date())
        assert totals["chat"].input_tokens == 15  # the DELETE was rolled back, not committed as it ran
    finally:
        if postgres:
            await single.dispose()
