"""Advisory locks across connections (PostgreSQL) and rate slots shared through the database (both backends)."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import OperationalError

from storage import AdvisoryLocks, Database, SlotLimit
from storage.locks import LockUnsupportedError
from storage.repositories import RateSlotRepository
from tests.fakes.postgres_proxy import postgres_proxy


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


async def test_a_pair_of_slots_advances_both_keys_in_one_call_and_a_throttled_chat_takes_only_its_own(
    database: Database,
) -> None:
    slots = RateSlotRepository(database)
    chat = SlotLimit("telegram:t:chat:7", interval=10.0, burst=2)
    overall = SlotLimit("telegram:t:overall", interval=5.0)
    assert await slots.reserve_pair(chat, overall) == (0.0, 0.0)
    chat_wait, overall_wait = await slots.reserve_pair(chat, overall)
    assert chat_wait == 0.0  # the chat's burst of two
    assert overall_wait is not None and 4.0 < overall_wait <= 5.0  # the first call moved the overall slot on
    chat_wait, overall_wait = await slots.reserve_pair(chat, overall)
    assert 9.0 < chat_wait <= 10.0  # the chat waits its turn ...
    assert overall_wait is None  # ... and takes no overall slot meanwhile
    # The overall limit was advanced twice, not three times: its next slot is two intervals on.
    assert 9.0 < await slots.reserve(overall.key, interval=overall.interval) <= 10.0
    # A chat without a burst (a group) that is free now: both slots at once, read before the statement took any.
    group = SlotLimit("telegram:t:chat:-100", interval=3.0)
    assert await slots.reserve_pair(group, SlotLimit("telegram:u:overall", interval=1.0)) == (0.0, 0.0)
    assert 2.0 < await slots.reserve(group.key, interval=group.interval) <= 3.0


async def test_pairs_reserved_at_once_never_share_a_slot_of_either_key(database: Database) -> None:
    slots = RateSlotRepository(database)
    overall = SlotLimit("overall", interval=1.0)
    pairs = await asyncio.gather(
        *(slots.reserve_pair(SlotLimit(f"chat:{n}", interval=60.0), overall) for n in range(12))
    )
    assert all(chat_wait == 0.0 for chat_wait, _ in pairs)  # twelve chats, each free
    waits = sorted(wait for _, wait in pairs if wait is not None)
    assert len(waits) == 12 and waits[0] == 0.0  # each took an overall slot in the same statement ...
    gaps = [later - earlier for earlier, later in itertools.pairwise(waits)]
    assert all(0.5 < gap < 1.5 for gap in gaps), gaps  # ... a different one, one interval apart


async def test_a_pair_of_slots_on_postgresql_is_one_round_trip_and_survives_a_dead_pooled_connection(
    database: Database,
) -> None:
    if database.dialect != "postgresql":
        pytest.skip("round trips to a PostgreSQL server")
    async with postgres_proxy(database.engine.url.render_as_string(hide_password=False)) as proxy:
        proxied = Database(proxy.url)
        try:
            slots = RateSlotRepository(proxied)
            await slots.reserve_pair(
                SlotLimit("chat:1", interval=0.001), SlotLimit("overall", interval=0.001)
            )  # prepares
            proxy.reset()
            await slots.reserve_pair(SlotLimit("chat:2", interval=0.001), SlotLimit("overall", interval=0.001))
            # the one statement: no liveness check before it, and autocommit (no BEGIN, no COMMIT)
            assert proxy.round_trips == 1 and proxy.executed[0].startswith("INSERT INTO rate_slots")
            await proxy.drop_connections()  # the pooled connection dies (a server restart)
            proxy.reset()
            chat = SlotLimit("chat:3", interval=60.0)
            assert await slots.reserve_pair(chat, SlotLimit("overall", interval=0.001)) == (0.0, 0.0)
            assert proxy.executed.count(proxy.executed[-1]) == 1  # run once, on the new connection
            assert 59.0 < await slots.reserve(chat.key, interval=chat.interval) <= 60.0  # and it took the slot
        finally:
            await proxied.dispose()


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


@pytest.mark.postgres
async def test_a_lock_is_taken_in_one_round_trip_and_still_taken_when_its_pooled_connection_died(
    postgres_session_url: str,
) -> None:
    """No check of a pooled connection before the lock statement: the statement is the check. A connection that
    died while pooled (dropped here, as a server restart drops it) is replaced, and the lock really is held."""
    async with postgres_proxy(postgres_session_url) as proxy:
        locks = AdvisoryLocks(proxy.url, pool_size=1, max_connections=1)
        observer = Database(postgres_session_url)  # another session, straight to the server

        async def free(name: str) -> bool:
            async with observer.engine.connect() as connection:
                taken = (await connection.execute(_TRY_LOCK, {"name": name})).scalar()
                if taken:
                    await connection.execute(
                        text("SELECT pg_advisory_unlock(hashtextextended(:name, 0))"), {"name": name}
                    )
                return bool(taken)

        try:
            async with locks.hold("conversation:1"):  # opens the pooled connection, prepares the statements
                pass
            proxy.reset()
            async with locks.hold("conversation:1"):
                assert not await free("conversation:1")
            assert proxy.round_trips == 2  # the lock and the unlock: no liveness check before them
            assert [query.split("(")[0] for query in proxy.executed] == [
                "SELECT pg_advisory_lock",
                "SELECT pg_advisory_unlock",
            ]
            assert await free("conversation:1")

            await proxy.drop_connections()  # the pooled connection is dead now
            async with locks.hold("conversation:1"):
                assert not await free("conversation:1")  # held, on the new connection
            assert await free("conversation:1")
            await proxy.drop_connections()
            leader = await locks.try_hold("telegram:polling")
            assert leader is not None and not await free("telegram:polling")
            await leader.release()
        finally:
            await locks.dispose()
            await observer.dispose()


_TRY_LOCK = text("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))")


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
