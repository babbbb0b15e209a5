"""Advisory locks across connections (PostgreSQL) and rate slots shared through the database (both backends)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

from storage import AdvisoryLocks, Database, LockUnsupportedError, RateSlotRepository


async def test_rate_slots_space_requests_by_the_interval_after_the_burst(database: Database) -> None:
    slots = RateSlotRepository(database)
    waits = [await slots.reserve("telegram:group:-100", interval=10.0, burst=2) for _ in range(4)]
    # Two go at once (the burst), then each waits one more interval than the one before.
    assert waits[0] == 0.0 and waits[1] == 0.0
    assert 9.0 < waits[2] <= 10.0
    assert 19.0 < waits[3] <= 20.0
    other = await slots.reserve("telegram:group:-200", interval=10.0)
    assert other == 0.0  # keys are independent


async def test_concurrent_reservations_never_share_a_slot(database: Database, backend: str) -> None:
    slots = RateSlotRepository(database)
    waits = await asyncio.gather(*(slots.reserve("overall", interval=1.0) for _ in range(20)))
    # Twenty reservations of a 1/s limit: twenty different slots, one second apart (within the test's runtime).
    ordered = sorted(waits)
    assert ordered[0] == 0.0
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered)]
    assert all(0.5 < gap < 1.5 for gap in gaps), gaps


@pytest.mark.postgres
async def test_an_advisory_lock_is_held_by_one_holder_at_a_time(postgres_session_url: str) -> None:
    locks = AdvisoryLocks(postgres_session_url)
    order: list[str] = []
    try:
        async with locks.hold("conversation:telegram:1"):
            waiter = asyncio.create_task(_hold_and_note(locks, "conversation:telegram:1", order, "second"))
            await asyncio.sleep(0.3)
            assert order == []  # still waiting: the first holder has it
            other = await locks.try_hold("conversation:telegram:2")  # another name is free
            assert other is not None
            await other.release()
            assert await locks.try_hold("conversation:telegram:1") is None
            order.append("first")
        await asyncio.wait_for(waiter, timeout=10)
        assert order == ["first", "second"]
    finally:
        await locks.dispose()


@pytest.mark.postgres
async def test_a_held_lock_is_freed_when_its_session_dies(postgres_session_url: str) -> None:
    first, second = AdvisoryLocks(postgres_session_url), AdvisoryLocks(postgres_session_url)
    try:
        leader = await first.try_hold("telegram:polling")
        assert leader is not None and await leader.still_held()
        assert await second.try_hold("telegram:polling") is None
        # The leader's session ends, as when its process is killed: PostgreSQL frees what it held.
        database = Database(postgres_session_url)
        try:
            async with database.engine.connect() as connection:
                await connection.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_locks "
                        "WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid() "
                        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                    )
                )
        finally:
            await database.dispose()
        assert not await leader.still_held()  # the leader notices it lost the lock
        taken = None
        for _ in range(50):
            taken = await second.try_hold("telegram:polling")
            if taken is not None:
                break
            await asyncio.sleep(0.1)
        assert taken is not None
        await taken.release()
    finally:
        await first.dispose()
        await second.dispose()


async def _hold_and_note(locks: AdvisoryLocks, name: str, order: list[str], note: str) -> None:
    async with locks.hold(name):
        order.append(note)


async def test_locks_held_at_once_never_take_more_connections_than_the_bound(postgres_session_url: str) -> None:
    # One lock per conversation in flight: unbounded, 50 chats on two processes opened a connection each and ran
    # PostgreSQL out of connections. Beyond the bound a holder waits for a connection, and every one gets its turn.
    locks = AdvisoryLocks(postgres_session_url, pool_size=1, max_connections=3)
    inside, most_inside = 0, 0
    release = asyncio.Event()

    async def hold(name: str) -> None:
        nonlocal inside, most_inside
        async with locks.hold(name):
            inside += 1
            most_inside = max(most_inside, inside)
            await release.wait()
            inside -= 1

    try:
        holders = [asyncio.create_task(hold(f"conversation:{n}")) for n in range(7)]
        await asyncio.sleep(1.0)  # every holder that can get a connection is inside by now
        assert inside == 3
        release.set()
        await asyncio.wait_for(asyncio.gather(*holders), timeout=30)
    finally:
        await locks.dispose()
    assert most_inside == 3


def test_advisory_locks_refuse_sqlite() -> None:
    with pytest.raises(LockUnsupportedError):
        AdvisoryLocks("sqlite+aiosqlite:///lookout.db")


async def test_a_reservation_leaves_its_limits_row_unlocked_as_soon_as_its_statement_has_run(
    database: Database,
) -> None:
    """A limit's row is shared by every send of every process: it is locked while the server runs the reservation,
    not until a COMMIT its process sends later. Checked from another connection the moment the statement returns,
    before the reserving code takes its next step."""
    if database.dialect != "postgresql":
        pytest.skip("row locks: PostgreSQL only")
    slots, key = RateSlotRepository(database), "telegram:overall"
    await slots.reserve(key, interval=0.01)  # the row exists: the next reservation updates it
    probe = create_engine(database.engine.url.set(drivername="postgresql+psycopg"))
    free: list[bool] = []

    def look(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.startswith("INSERT INTO rate_slots"):
            with probe.connect() as connection:
                try:
                    connection.execute(
                        text("SELECT key FROM rate_slots WHERE key = 'telegram:overall' FOR UPDATE NOWAIT")
                    )
                    free.append(True)
                except OperationalError:  # lock not available
                    free.append(False)

    event.listen(database.engine.sync_engine, "after_cursor_execute", look)
    try:
        await slots.reserve(key, interval=0.01)
    finally:
        event.remove(database.engine.sync_engine, "after_cursor_execute", look)
        probe.dispose()
    assert free == [True]
