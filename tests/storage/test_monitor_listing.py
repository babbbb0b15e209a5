"""What `/monitors` lists is read in one statement however many monitors there are, and shows the same as reading
each monitor's pieces one by one (own subscription, receivers, latest run's stats), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from monitors.service import MonitorService
from storage import ChatRecord, Database, DeliveryMode, MonitorListing, RunOutcome
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
)
from tests.bots.slack_world import monitor_service
from tests.bots.test_turn_costs import counting
from tests.monitors.fakes import resolver
from tests.storage.conftest import T0


async def _world(database: Database, alice: ChatRecord) -> tuple[ChatRecord, list[int]]:
    """Alice owns two monitors (one ran twice, one failed) and subscribes, delivery paused, to one of Bob's;
    Bob owns that one, another Alice does not see, and receives Alice's first too."""
    bob = await ChatRepository(database).get_or_create("telegram", "1002", title="Bob")
    monitors, subscriptions = MonitorRepository(database), SubscriptionRepository(database)
    runs, deliveries = RunRepository(database), DeliveryRepository(database)
    ran = await monitors.create(owner_chat_id=alice.id, topic="open source LLM", schedule="daily at 9:00")
    for hours, stats in ((2, {"new_items": 1}), (1, {"new_items": 3, "source_errors": ["hn: timed out"]})):
        run = await runs.open_run(ran.id, T0 - timedelta(hours=hours), now=T0)
        assert run is not None
        await deliveries.complete_run(run.id, outcome=RunOutcome(finished_at=T0, stats=stats), deliver=False)
    await monitors.record_result(ran.id, status="ok", finished_at=T0)
    await subscriptions.subscribe(ran.id, bob.id)
    bobs = await monitors.create(owner_chat_id=bob.id, topic="rust releases", schedule="every 6 hours")
    await subscriptions.subscribe(bobs.id, alice.id)
    await subscriptions.update(bobs.id, alice.id, paused=True, delivery=DeliveryMode.BRIEFING)
    unseen = await monitors.create(owner_chat_id=bob.id, topic="chess", schedule="weekly on monday")
    failed = await monitors.create(owner_chat_id=alice.id, topic="solar", schedule="daily at 7:00")
    await monitors.record_result(failed.id, status="failed", finished_at=T0, error="every source failed")
    return bob, [ran.id, bobs.id, unseen.id, failed.id]


async def _one_by_one(database: Database, monitor_id: int, chat_id: int) -> MonitorListing:
    """The listing entry from the single-monitor reads (what `view_of` reads)."""
    subscriptions = SubscriptionRepository(database)
    record = await MonitorRepository(database).get(monitor_id)
    latest = await RunRepository(database).list_for_monitor(monitor_id, limit=1)
    assert record is not None
    return MonitorListing(
        monitor=record,
        subscription=await subscriptions.get(monitor_id, chat_id),
        receivers=(await subscriptions.counts([monitor_id])).get(monitor_id, 0),
        latest_run_stats=latest[0].stats if latest else None,
    )


async def test_the_listing_is_one_statement_and_matches_the_reads_one_by_one(
    database: Database, chat: ChatRecord
) -> None:
    _bob, (ran, bobs, unseen, failed) = await _world(database, chat)
    monitors = MonitorRepository(database)
    with counting(database) as counter:
        mine = await monitors.listing(chat.id)
    assert len(counter.statements) == 1, counter.statements
    assert [entry.monitor.id for entry in mine] == [ran, bobs, failed]
    assert mine == [await _one_by_one(database, monitor_id, chat.id) for monitor_id in (ran, bobs, failed)]
    first, paused, _failed = mine
    assert first.receivers == 2 and first.latest_run_stats == {"new_items": 3, "source_errors": ["hn: timed out"]}
    assert first.subscription is not None and not first.subscription.paused
    assert paused.receivers == 1  # Bob; Alice paused her delivery
    assert paused.subscription is not None and paused.subscription.paused
    assert paused.subscription.delivery is DeliveryMode.BRIEFING and paused.latest_run_stats is None

    with counting(database) as counter:
        every = await monitors.listing(chat.id, all_chats=True)
    assert len(counter.statements) == 1, counter.statements
    assert [entry.monitor.id for entry in every] == [ran, bobs, unseen, failed]
    assert every[2] == await _one_by_one(database, unseen, chat.id)
    assert every[2].subscription is None and every[2].receivers == 1


async def test_monitors_lists_what_each_monitor_shows_alone_in_one_read(
    database: Database, chat: ChatRecord, tmp_path: Path
) -> None:
    await _world(database, chat)
    service: MonitorService = monitor_service(database, resolver({}), tmp_path)
    with counting(database) as counter:
        views = await service.list_monitors(chat.id, chat=chat)
    assert len(counter.statements) == 1, counter.statements
    alone = [await service.get_monitor(view.id, chat_id=chat.id) for view in views]
    assert views == alone
    assert [view.last_result for view in views] == [
        "ok: 3 new items; 1 source failed: hn: timed out",
        "never run yet",
        "failed: every source failed",
    ]
    assert [(view.subscribed, view.delivery_paused, view.receivers) for view in views] == [
        (True, False, 2),
        (True, True, 1),
        (True, False, 1),
    ]


async def test_one_monitor_is_read_in_one_statement_and_matches_the_reads_one_by_one(
    database: Database, chat: ChatRecord, tmp_path: Path
) -> None:
    """`view_of` (every command that shows one monitor) reads the listing's statement narrowed to the monitor."""
    _bob, (ran, bobs, unseen, failed) = await _world(database, chat)
    monitors = MonitorRepository(database)
    for monitor_id in (ran, bobs, unseen, failed):
        with counting(database) as counter:
            alone = await monitors.listing_of(monitor_id, chat.id)
        assert len(counter.statements) == 1, counter.statements
        assert alone == await _one_by_one(database, monitor_id, chat.id)
    seen_by_bob = await monitors.listing_of(bobs, _bob.id)
    assert seen_by_bob is not None and seen_by_bob.subscription is not None  # the chat's own subscription:
    assert not seen_by_bob.subscription.paused and seen_by_bob.subscription.chat_id == _bob.id  # Alice paused hers
    assert await monitors.listing_of(failed + 100, chat.id) is None

    service: MonitorService = monitor_service(database, resolver({}), tmp_path)
    record = await monitors.get(ran)
    assert record is not None
    with counting(database) as counter:
        view = await service.view_of(record, chat)
    assert len(counter.statements) == 1, counter.statements
    assert (view.subscribed, view.delivery_paused, view.receivers, view.last_result) == (
        True,
        False,
        2,
        "ok: 3 new items; 1 source failed: hn: timed out",
    )
    await monitors.delete(ran)  # `/untrack` shows what the monitor was: the record given, nothing left to read
    gone = await service.view_of(record, chat)
    assert (gone.id, gone.topic, gone.subscribed, gone.receivers) == (ran, "open source LLM", False, 0)
