"""Items are shared by every monitor: runs on the same sources write the same rows at once, from several processes.

What is pinned (on PostgreSQL, where rows are locked; SQLite has one writer at a time and checks only the results):
a run's transaction does not hold the shared items' rows, and two stores of the same rows in opposite orders queue
instead of deadlocking. The checks look at the server's lock table (`pg_stat_activity`, `pg_blocking_pids`), never
at the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from storage import ChatRecord, Database, ItemScore, RunOutcome, RunStatus
from storage.repositories import DeliveryRepository, ItemRepository, MonitorRepository, RunRepository
from tests.storage.conftest import T0
from tests.storage.test_runs_items import make_item

_STORES_WAITING = text(
    "SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity WHERE datname = current_database()"
    " AND wait_event_type = 'Lock' AND query LIKE :statement"
)


async def _waiting(observer: AsyncConnection, statement: str) -> dict[int, set[int]]:
    """The backends running `statement` (a LIKE pattern) that wait for a lock, and whom each waits for."""
    rows = (await observer.execute(_STORES_WAITING, {"statement": statement})).all()
    await observer.rollback()  # the server's activity view is read once per transaction: a new one for each look
    return {pid: set(blockers) for pid, blockers in rows}


async def _until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Polls `condition`; the bound only keeps a broken build from hanging the suite (nothing here is timed)."""
    for _ in range(1200):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {what}")


async def _hold(connection: AsyncConnection, *, sql: str) -> int:
    """Runs `sql` in the connection's open transaction (its locks held until rollback); returns its backend pid."""
    await connection.execute(text(sql))
    pid: int = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
    return pid


def _postgres_only(database: Database) -> None:
    if database.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL only (SQLite has one writer at a time)")


async def test_a_runs_transaction_does_not_hold_the_items_it_shares_with_other_runs(
    database: Database, chat: ChatRecord
) -> None:
    """While a run's transaction is held up after its items are stored (here: at its outbox row, by a lock on the
    chat), another run storing the same items goes through at once instead of waiting for that transaction."""
    _postgres_only(database)
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    run = await RunRepository(database).open_run(monitor.id, T0)
    assert run is not None
    ids = ["hn:1", "hn:2", "hn:3"]
    await ItemRepository(database).upsert_many([make_item(item_id) for item_id in ids])

    async with database.engine.connect() as blocker, database.engine.connect() as observer:
        await _hold(blocker, sql=f"SELECT id FROM chats WHERE id = {chat.id} FOR UPDATE")
        completing = asyncio.create_task(
            DeliveryRepository(database).complete_run(
                run.id,
                outcome=RunOutcome(finished_at=T0, digest={"headline": "x"}),
                items=[make_item(item_id) for item_id in ids],
                scores=[ItemScore(item_id=item_id, delivered=True) for item_id in ids],
            )
        )

        async def run_held_at_its_outbox_row() -> bool:
            return bool(await _waiting(observer, "INSERT INTO deliveries%"))

        await _until(run_held_at_its_outbox_row, "the run's transaction waiting at its outbox row")

        other = asyncio.create_task(
            ItemRepository(database).upsert_many([make_item(item_id, title="Refreshed") for item_id in reversed(ids)])
        )

        async def other_done_or_waiting() -> bool:
            return other.done() or bool(await _waiting(observer, "INSERT INTO items%"))

        await _until(other_done_or_waiting, "the other store finish or wait")
        stuck = await _waiting(observer, "INSERT INTO items%")
        assert not stuck, f"the other run's items wait for the open run's transaction: {stuck}"
        assert other.done() and not completing.done()
        assert await other == 0

        await blocker.rollback()
        rows = await completing
    assert [row.chat_id for row in rows] == [chat.id]
    stored = await RunRepository(database).get(run.id)
    assert stored is not None and stored.status is RunStatus.SUCCEEDED
    assert [item.title for item in await ItemRepository(database).get_many(ids)] == ["Refreshed"] * 3


async def test_two_stores_of_the_same_items_in_opposite_orders_queue_and_never_deadlock(database: Database) -> None:
    """Rows are locked in key order. Staged so that rows taken in the order given would deadlock: each store is
    first made to wait for its own first row, then the rows are let go one at a time."""
    _postgres_only(database)
    items = ItemRepository(database)
    await items.upsert_many([make_item("hn:a"), make_item("hn:b")])

    async with (
        database.engine.connect() as hold_a,
        database.engine.connect() as hold_b,
        database.engine.connect() as observer,
    ):
        holder_a = await _hold(hold_a, sql="SELECT id FROM items WHERE id = 'hn:a' FOR NO KEY UPDATE")
        await _hold(hold_b, sql="SELECT id FROM items WHERE id = 'hn:b' FOR NO KEY UPDATE")
        forward = asyncio.create_task(items.upsert_many([make_item("hn:a", title="1"), make_item("hn:b", title="1")]))

        def stores_waiting(count: int) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return len(await _waiting(observer, "INSERT INTO items%")) == count

            return check

        await _until(stores_waiting(1), "the first store waiting")
        backward = asyncio.create_task(items.upsert_many([make_item("hn:b", title="2"), make_item("hn:a", title="2")]))
        await _until(stores_waiting(2), "both stores waiting")

        await hold_a.rollback()

        async def nobody_waits_for_the_first_holder() -> bool:
            waiting = await _waiting(observer, "INSERT INTO items%")
            return len(waiting) == 2 and all(holder_a not in blockers for blockers in waiting.values())

        # In key order: one store holds hn:a and waits for hn:b, the other waits for it. In the order given, each
        # would now hold one row the other needs as soon as hn:b is let go.
        await _until(nobody_waits_for_the_first_holder, "hn:a let go")
        await hold_b.rollback()
        results = await asyncio.gather(forward, backward, return_exceptions=True)
    assert results == [0, 0], results  # a deadlock fails one of them with DeadlockDetectedError
    titles = {item.title for item in await items.get_many(["hn:a", "hn:b"])}
    assert len(titles) == 1  # both rows come from the store that went last, whichever it was


async def test_stores_in_any_order_leave_the_same_items(database: Database) -> None:
    """Sorting is invisible in the result: the same rows, counted new once, whatever the order given."""
    items = ItemRepository(database)
    batch = [make_item(f"hn:{n:03d}") for n in range(12)]
    assert await items.upsert_many(list(reversed(batch))) == 12
    assert await items.upsert_many(batch[::2] + batch[1::2]) == 0
    stored = await items.get_many([item.id for item in batch])
    assert [item.id for item in stored] == [item.id for item in batch]
