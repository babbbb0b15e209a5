"""Items scoped to a chat: only what runs of its monitors, its active subscriptions and its searches collected."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

import pytest

from storage import ChatRecord, Database, ItemRecord, ItemScore, RunOutcome
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    ItemRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
)
from tests.storage.conftest import T0

SINCE, UNTIL = T0 - timedelta(days=5), T0 + timedelta(days=5)


def make_item(item_id: str, published: datetime) -> ItemRecord:
    return ItemRecord(
        id=item_id,
        source="hn",
        url=f"https://example.org/{item_id}",
        title=f"DeepSeek story {item_id}",
        published=published,
        collected_at=T0,
    )


async def store(database: Database, run_id: int, *items: ItemRecord) -> None:
    await DeliveryRepository(database).complete_run(
        run_id,
        outcome=RunOutcome(finished_at=T0),
        items=list(items),
        scores=[ItemScore(item_id=item.id) for item in items],
        deliver=False,
    )


@dataclass(frozen=True)
class Chats:
    a: ChatRecord
    b: ChatRecord
    c: ChatRecord


@pytest.fixture
async def chats(database: Database, chat: ChatRecord) -> Chats:
    """Chat A owns monitor MA, chat B owns MB and subscribes to MA; chat C's subscription to MB is paused.
    A and B each ran a one-off search; one item was seen by both monitors; one item belongs to no run."""
    repository = ChatRepository(database)
    b = await repository.get_or_create("slack", "T1:C2", title="Team B")
    c = await repository.get_or_create("telegram", "3003", title="Carol")
    monitors, runs = MonitorRepository(database), RunRepository(database)
    subscriptions = SubscriptionRepository(database)
    ma = await monitors.create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    mb = await monitors.create(owner_chat_id=b.id, topic="DeepSeek", schedule="daily")
    await subscriptions.subscribe(ma.id, b.id)
    await subscriptions.subscribe(mb.id, c.id)
    await subscriptions.set_active_for_chat(c.id, active=False)

    ma_run, mb_run = await runs.open_run(ma.id, T0), await runs.open_run(mb.id, T0)
    assert ma_run is not None and mb_run is not None
    shared = make_item("both:1", T0 - timedelta(days=1))
    await store(database, ma_run.id, make_item("ma:1", T0), shared)
    await store(database, mb_run.id, make_item("mb:1", T0 - timedelta(days=2)), shared)
    a_search = await runs.open_search_run(chat_id=chat.id, query="DeepSeek", now=T0)
    await store(database, a_search.id, make_item("sa:1", T0 + timedelta(days=1)))
    b_search = await runs.open_search_run(chat_id=b.id, query="DeepSeek", now=T0)
    await store(database, b_search.id, make_item("sb:1", T0 + timedelta(days=2)))
    await ItemRepository(database).upsert_many([make_item("free:1", T0)])
    return Chats(chat, b, c)


async def test_search_returns_only_what_was_collected_for_the_chat(database: Database, chats: Chats) -> None:
    items = ItemRepository(database)
    a = [i.id for i in await items.search("deepseek", chat_id=chats.a.id)]
    b = [i.id for i in await items.search("deepseek", chat_id=chats.b.id)]
    assert a == ["sa:1", "ma:1", "both:1"]  # newest first, the shared item once
    assert b == ["sb:1", "ma:1", "both:1", "mb:1"]  # B follows A's monitor, not A's search
    assert await items.search("deepseek", chat_id=chats.c.id) == []  # a paused subscription shows nothing
    # The other filters still apply inside the scope, and no chat means every item (other callers).
    assert [i.id for i in await items.search("deepseek", chat_id=chats.b.id, since=T0, limit=2)] == ["sb:1", "ma:1"]
    assert {i.id for i in await items.search("deepseek")} == {"ma:1", "mb:1", "both:1", "sa:1", "sb:1", "free:1"}


async def test_count_by_day_counts_only_what_was_collected_for_the_chat(database: Database, chats: Chats) -> None:
    items = ItemRepository(database)
    assert await items.count_by_day("deepseek", since=SINCE, until=UNTIL, chat_id=chats.a.id) == {
        date(2026, 2, 28): 1,
        date(2026, 3, 1): 1,
        date(2026, 3, 2): 1,
    }
    assert await items.count_by_day("deepseek", since=SINCE, until=UNTIL, chat_id=chats.b.id) == {
        date(2026, 2, 27): 1,
        date(2026, 2, 28): 1,
        date(2026, 3, 1): 1,
        date(2026, 3, 3): 1,
    }
    assert await items.count_by_day("deepseek", since=SINCE, until=UNTIL, chat_id=chats.c.id) == {}
    assert sum((await items.count_by_day("deepseek", since=SINCE, until=UNTIL)).values()) == 6
