"""The outbox: a finished run and its rows are written atomically, then claimed, sent and retried."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from storage import (
    ChatRecord,
    Database,
    DeliveryRecord,
    DeliveryStatus,
    ItemScore,
    MonitorRecord,
    RunOutcome,
    RunStatus,
)
from storage.models import Delivery, RunItem
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    ItemRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
)
from storage.repositories.deliveries import RunNotOpenError
from tests.storage.conftest import T0
from tests.storage.test_runs_items import make_item


@pytest.fixture
async def monitor(database: Database, chat: ChatRecord) -> MonitorRecord:
    return await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")


async def _count(database: Database, model: type[Delivery] | type[RunItem]) -> int:
    async with database.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def _queued(database: Database, monitor: MonitorRecord, **kwargs: object) -> list[DeliveryRecord]:
    run = await RunRepository(database).open_run(monitor.id, T0)
    assert run is not None
    return await DeliveryRepository(database).complete_run(run.id, outcome=RunOutcome(finished_at=T0), **kwargs)  # type: ignore[arg-type]


async def test_complete_run_stores_outcome_items_and_one_row_per_recipient(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    chats, subscriptions = ChatRepository(database), SubscriptionRepository(database)
    subscribed = await chats.get_or_create("slack", "C1")
    paused = await chats.get_or_create("slack", "C2")
    asked = await chats.get_or_create("telegram", "77")
    for extra in (subscribed, paused):
        await subscriptions.subscribe(monitor.id, extra.id)
    await subscriptions.set_active_for_chat(paused.id, active=False)

    run = await RunRepository(database).open_run(monitor.id, T0)
    assert run is not None
    outcome = RunOutcome(
        finished_at=T0 + timedelta(minutes=3),
        stats={"collected": 143, "after_dedupe": 52},
        digest={"headline": "DeepSeek cuts prices", "developments": [{"text": "x [1]"}]},
        artifacts={"csv": "/data/exports/deepseek.csv"},
        input_tokens=1200,
        output_tokens=300,
        cost=0.0021,
    )
    rows = await DeliveryRepository(database).complete_run(
        run.id,
        outcome=outcome,
        items=[make_item("hn:1"), make_item("hn:2")],
        scores=[ItemScore(item_id="hn:1", score=0.9, rank=1, delivered=True), ItemScore(item_id="hn:2", rank=2)],
        extra_chat_ids=[asked.id, chat.id],
    )
    assert [(r.chat_id, r.status, r.attempts, r.next_attempt_at) for r in rows] == [
        (chat.id, DeliveryStatus.PENDING, 0, outcome.finished_at),
        (subscribed.id, DeliveryStatus.PENDING, 0, outcome.finished_at),
        (asked.id, DeliveryStatus.PENDING, 0, outcome.finished_at),
    ]
    stored = await RunRepository(database).get(run.id)
    assert stored is not None
    assert (stored.status, stored.finished_at, stored.stats, stored.digest, stored.artifacts) == (
        RunStatus.SUCCEEDED,
        outcome.finished_at,
        outcome.stats,
        outcome.digest,
        outcome.artifacts,
    )
    assert (stored.input_tokens, stored.output_tokens) == (1200, 300)
    assert stored.cost == pytest.approx(0.0021)
    assert [(r.item_id, r.delivered) for r in await RunRepository(database).items_of_run(run.id)] == [
        ("hn:1", True),
        ("hn:2", False),
    ]
    assert await DeliveryRepository(database).list_for_run(run.id) == rows

    with pytest.raises(RunNotOpenError):
        await DeliveryRepository(database).complete_run(run.id, outcome=outcome)


async def test_search_runs_deliver_to_the_chat_that_asked(database: Database, chat: ChatRecord) -> None:
    run = await RunRepository(database).open_search_run(chat_id=chat.id, query="DeepSeek")
    rows = await DeliveryRepository(database).complete_run(run.id, outcome=RunOutcome(finished_at=T0))
    assert [r.chat_id for r in rows] == [chat.id]


async def test_quiet_run_queues_nothing(database: Database, monitor: MonitorRecord) -> None:
    assert await _queued(database, monitor, deliver=False) == []
    assert await _count(database, Delivery) == 0


async def test_a_failure_inside_complete_run_writes_nothing(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    runs = RunRepository(database)
    run = await runs.open_run(monitor.id, T0)
    assert run is not None
    # The last step fails: an outbox row for a chat that does not exist violates its foreign key.
    with pytest.raises(IntegrityError):
        await DeliveryRepository(database).complete_run(
            run.id,
            outcome=RunOutcome(finished_at=T0, digest={"headline": "x"}),
            items=[make_item("hn:1")],
            scores=[ItemScore(item_id="hn:1", delivered=True)],
            extra_chat_ids=[chat.id + 999],
        )
    stored = await runs.get(run.id)
    assert stored is not None and (stored.status, stored.digest, stored.finished_at) == (RunStatus.RUNNING, None, None)
    # The item itself was stored before the run's transaction (items are shared by every monitor: their rows are
    # not held for a run's transaction), but nothing links it to the run, so no chat sees it.
    items = ItemRepository(database)
    assert await items.get("hn:1") is not None
    assert await items.search("Story", chat_id=chat.id) == []
    assert await _count(database, RunItem) == 0
    assert await _count(database, Delivery) == 0

    # A score for an item that was never stored fails the same way, and the run can still complete.
    with pytest.raises(IntegrityError):
        await DeliveryRepository(database).complete_run(
            run.id, outcome=RunOutcome(finished_at=T0), scores=[ItemScore(item_id="never-collected")]
        )
    assert await _count(database, Delivery) == 0
    rows = await DeliveryRepository(database).complete_run(run.id, outcome=RunOutcome(finished_at=T0))
    assert [r.chat_id for r in rows] == [chat.id]


async def test_claim_leases_rows_and_mark_sent(database: Database, chat: ChatRecord, monitor: MonitorRecord) -> None:
    deliveries = DeliveryRepository(database)
    [row] = await _queued(database, monitor)
    assert await deliveries.claim_due(T0 - timedelta(seconds=1)) == []  # not due yet

    [claimed] = await deliveries.claim_due(T0, lease=timedelta(minutes=5))
    assert (claimed.id, claimed.attempts, claimed.next_attempt_at) == (row.id, 1, T0 + timedelta(minutes=5))
    assert await deliveries.claim_due(T0 + timedelta(minutes=4)) == []  # leased

    # The worker died without reporting: the row comes back when the lease ends.
    [reclaimed] = await deliveries.claim_due(T0 + timedelta(minutes=5))
    assert reclaimed.attempts == 2

    sent = await deliveries.mark_sent(row.id, now=T0 + timedelta(minutes=6))
    assert sent is not None and (sent.status, sent.sent_at) == (DeliveryStatus.SENT, T0 + timedelta(minutes=6))
    assert await deliveries.claim_due(T0 + timedelta(days=1)) == []
    assert await deliveries.mark_sent(10_000) is None


async def test_claim_only_for_platforms_that_can_send(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    console = await ChatRepository(database).get_or_create("console", "terminal")
    await SubscriptionRepository(database).subscribe(monitor.id, console.id)
    deliveries = DeliveryRepository(database)
    rows = {row.chat_id: row for row in await _queued(database, monitor)}
    assert set(rows) == {chat.id, console.id}

    claimed = await deliveries.claim_due(T0, platforms={"telegram", "slack"})
    assert [row.chat_id for row in claimed] == [chat.id]
    assert await deliveries.claim_due(T0, platforms=set()) == []
    [left] = [row for row in await deliveries.list_for_run(rows[console.id].run_id) if row.chat_id == console.id]
    assert left.attempts == 0  # not claimed, so no attempt was spent
    [later] = await deliveries.claim_due(T0, platforms={"console"})
    assert later.chat_id == console.id


async def test_a_failure_is_retried_when_the_caller_says_or_ends_dead(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    deliveries = DeliveryRepository(database)
    [row] = await _queued(database, monitor)
    await deliveries.claim_due(T0, worker="w1")
    first = await deliveries.mark_failed(row.id, error="timeout", retry_at=T0 + timedelta(seconds=45))
    assert first is not None
    assert (first.status, first.last_error, first.next_attempt_at, first.claimed_by) == (
        DeliveryStatus.FAILED,
        "timeout",
        T0 + timedelta(seconds=45),
        None,
    )
    [again] = await deliveries.claim_due(T0 + timedelta(seconds=45), worker="w1")
    assert again.attempts == 2
    dead = await deliveries.mark_failed(row.id, error="still failing")
    assert dead is not None and dead.status == DeliveryStatus.DEAD
    assert await deliveries.claim_due(T0 + timedelta(days=30)) == []


async def test_parts_sent_are_stored_under_a_renewed_claim_and_dead_claimers_are_released(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    deliveries = DeliveryRepository(database)
    [row] = await _queued(database, monitor)
    lease = timedelta(seconds=30)
    [claimed] = await deliveries.claim_due(T0, worker="host:1:a", lease=lease)
    assert (claimed.claimed_by, claimed.parts_sent) == ("host:1:a", 0)

    pinned = {"language": "de", "timezone": "Europe/Berlin"}  # what the parts were rendered in
    assert await deliveries.record_parts_sent(row.id, 2, worker="host:1:a", until=T0 + timedelta(seconds=50), **pinned)
    assert not await deliveries.record_parts_sent(
        row.id, 3, worker="someone-else", until=T0 + timedelta(hours=1), **pinned
    )
    assert await deliveries.renew([row.id], worker="host:1:a", until=T0 + timedelta(seconds=70)) == 1
    assert await deliveries.renew([row.id], worker="someone-else", until=T0) == 0
    assert await deliveries.claim_due(T0 + timedelta(seconds=60)) == []  # the renewed claim holds
    assert await deliveries.claimants(T0 + timedelta(seconds=60)) == {"host:1:a"}

    # The claimer died: a worker that knows it released the claim, and the row is due at once, parts kept.
    assert await deliveries.release_claims({"host:1:a"}, now=T0 + timedelta(seconds=61)) == 1
    [resumed] = await deliveries.claim_due(T0 + timedelta(seconds=61), worker="host:2:b")
    assert (resumed.parts_sent, resumed.claimed_by, resumed.attempts) == (2, "host:2:b", 2)
    sent = await deliveries.mark_sent(row.id, now=T0 + timedelta(seconds=62), parts_sent=5)
    assert sent is not None and (sent.parts_sent, sent.claimed_by) == (5, None)


async def test_permanent_errors_and_blocked_chats_make_rows_dead(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    deliveries = DeliveryRepository(database)
    other = await ChatRepository(database).get_or_create("slack", "C1")
    await SubscriptionRepository(database).subscribe(monitor.id, other.id)
    first, _ = await _queued(database, monitor)

    blocked = await deliveries.mark_failed(first.id, error="403 bot was blocked", retry_at=None)
    assert blocked is not None and blocked.status == DeliveryStatus.DEAD

    assert await deliveries.give_up_for_chat(other.id, error="channel archived") == 1
    assert await deliveries.give_up_for_chat(other.id, error="channel archived") == 0
    assert [r.status for r in await deliveries.list_for_run(first.run_id)] == [DeliveryStatus.DEAD] * 2
    assert await deliveries.mark_failed(10_000, error="x") is None


async def test_concurrent_workers_never_claim_the_same_row(
    database_url: str, database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    chats, subscriptions = ChatRepository(database), SubscriptionRepository(database)
    for n in range(29):
        subscriber = await chats.get_or_create("telegram", f"sub-{n}")
        await subscriptions.subscribe(monitor.id, subscriber.id)
    rows = await _queued(database, monitor)
    assert len(rows) == 30

    workers = [Database(database_url) for _ in range(4)]
    try:
        batches = await asyncio.gather(
            *(DeliveryRepository(w).claim_due(T0, limit=4) for w in workers for _ in range(3))
        )
    finally:
        for worker in workers:
            await worker.dispose()
    # A claim may come back short when a row it saw was taken meanwhile; what is left is claimed now.
    leftovers = await DeliveryRepository(database).claim_due(T0, limit=100)
    claimed = [row.id for batch in [*batches, leftovers] for row in batch]
    assert sorted(claimed) == sorted(row.id for row in rows)  # every row exactly once
