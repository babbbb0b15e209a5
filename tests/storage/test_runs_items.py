"""Runs (unique per monitor and scheduled time) and collected items (upsert, search, novelty)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from storage import ChatRecord, Database, ItemRecord, ItemScore, MonitorRecord, RunOutcome, RunStatus
from storage.repositories import DeliveryRepository, ItemRepository, MonitorRepository, RunRepository
from tests.storage.conftest import T0


def make_item(
    item_id: str, *, title: str = "", text: str = "", published: datetime | None = T0, **extra: object
) -> ItemRecord:
    fields: dict[str, object] = {
        "id": item_id,
        "source": "hn",
        "url": f"https://example.org/{item_id}",
        "title": title or f"Story {item_id}",
        "text": text,
        "published": published,
        "collected_at": T0 + timedelta(hours=1),
    }
    fields.update(extra)
    return ItemRecord(**fields)  # type: ignore[arg-type]


@pytest.fixture
async def monitor(database: Database, chat: ChatRecord) -> MonitorRecord:
    return await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")


async def test_open_run_is_unique_per_monitor_and_scheduled_time(database: Database, monitor: MonitorRecord) -> None:
    runs = RunRepository(database)
    run = await runs.open_run(monitor.id, T0, now=T0 + timedelta(seconds=2))
    assert run is not None
    assert (run.monitor_id, run.scheduled_for, run.status, run.started_at, run.finished_at) == (
        monitor.id,
        T0,
        RunStatus.RUNNING,
        T0 + timedelta(seconds=2),
        None,
    )
    assert await runs.open_run(monitor.id, T0) is None
    # The same instant written in another zone is the same scheduled time.
    assert await runs.open_run(monitor.id, T0.astimezone(ZoneInfo("Asia/Shanghai"))) is None
    later = await runs.open_run(monitor.id, T0 + timedelta(days=1))
    assert later is not None and later.id != run.id
    assert await runs.get(run.id) == run
    assert [r.id for r in await runs.list_for_monitor(monitor.id)] == [later.id, run.id]
    assert [r.id for r in await runs.list_for_monitor(monitor.id, limit=1)] == [later.id]


async def test_search_runs_have_no_monitor_and_never_collide(database: Database, chat: ChatRecord) -> None:
    runs = RunRepository(database)
    first = await runs.open_search_run(chat_id=chat.id, query="DeepSeek pricing", now=T0)
    second = await runs.open_search_run(chat_id=chat.id, query="DeepSeek pricing", now=T0)
    assert first.id != second.id
    assert (first.monitor_id, first.chat_id, first.query, first.scheduled_for) == (
        None,
        chat.id,
        "DeepSeek pricing",
        T0,
    )


async def test_fail_run_and_abandoned_runs(database: Database, monitor: MonitorRecord) -> None:
    runs = RunRepository(database)
    failed = await runs.open_run(monitor.id, T0, now=T0)
    stale = await runs.open_run(monitor.id, T0 + timedelta(hours=1), now=T0 + timedelta(hours=1))
    fresh = await runs.open_run(monitor.id, T0 + timedelta(hours=2), now=T0 + timedelta(hours=3))
    assert failed and stale and fresh

    assert await runs.fail_run(failed.id, error="boom", finished_at=T0 + timedelta(minutes=1)) is True
    assert await runs.fail_run(failed.id, error="again") is False  # not running any more
    stored = await runs.get(failed.id)
    assert stored is not None
    assert (stored.status, stored.error, stored.finished_at) == (RunStatus.FAILED, "boom", T0 + timedelta(minutes=1))

    assert await runs.fail_abandoned(started_before=T0 + timedelta(hours=2)) == 1
    abandoned, still_running = await runs.get(stale.id), await runs.get(fresh.id)
    assert abandoned is not None and (abandoned.status, abandoned.error) == (RunStatus.FAILED, "abandoned")
    assert still_running is not None and still_running.status == RunStatus.RUNNING

    assert await runs.delete(failed.id) is True
    assert await runs.get(failed.id) is None
    assert await runs.delete(failed.id) is False


async def test_upsert_counts_new_items_refreshes_known_ones_and_keeps_first_seen(database: Database) -> None:
    items = ItemRepository(database)
    assert await items.upsert_many([make_item("hn:1"), make_item("hn:2"), make_item("hn:1")]) == 2
    first = await items.get("hn:1")
    assert first is not None and first.first_seen_at is not None

    refreshed = make_item(
        "hn:1",
        title="Story 1 (updated)",
        engagement={"points": 120, "comments": 45, "likes": None},
        collected_at=T0 + timedelta(hours=5),
        author="pg",
        language="en",
    )
    assert await items.upsert_many([refreshed, make_item("hn:3")]) == 1
    stored = await items.get("hn:1")
    assert stored is not None
    assert (stored.title, stored.engagement, stored.author, stored.collected_at) == (
        "Story 1 (updated)",
        {"points": 120, "comments": 45, "likes": None},
        "pg",
        T0 + timedelta(hours=5),
    )
    assert stored.first_seen_at == first.first_seen_at
    assert [i.id for i in await items.get_many(["hn:3", "missing", "hn:1"])] == ["hn:3", "hn:1"]
    assert await items.get("missing") is None
    assert await items.upsert_many([]) == 0


async def test_upsert_many_handles_more_rows_than_one_statement(database: Database) -> None:
    items = ItemRepository(database)
    batch = [make_item(f"rss:{n}", text="x" * 50) for n in range(600)]
    assert await items.upsert_many(batch) == 600
    assert len(await items.get_many([i.id for i in batch])) == 600


async def test_search_by_words_dates_and_sources(database: Database) -> None:
    items = ItemRepository(database)
    await items.upsert_many(
        [
            make_item("hn:1", title="DeepSeek cuts API prices", published=T0 - timedelta(days=2)),
            make_item("hn:2", title="Mistral news", text="deepseek comparison with 100% gains", published=T0),
            make_item("news:3", title="DEEPSEEK R2 released", source="news", published=None),
            make_item("hn:4", title="Unrelated", text="nothing here"),
            make_item("hn:5", title="Cost 100_000 tokens", text="deepseek"),
        ]
    )
    assert [i.id for i in await items.search("deepseek")][0:1] == ["news:3"]  # collected T0+1h is newest
    assert {i.id for i in await items.search("deepseek")} == {"hn:1", "hn:2", "news:3", "hn:5"}
    assert {i.id for i in await items.search("DeepSeek prices")} == {"hn:1"}
    assert {i.id for i in await items.search("100%")} == {"hn:2"}  # % is literal, not a wildcard
    assert {i.id for i in await items.search("100_")} == {"hn:5"}
    assert {
        i.id for i in await items.search("deepseek", since=T0 - timedelta(days=1), until=T0 + timedelta(minutes=1))
    } == {
        "hn:2",
        "hn:5",
    }
    assert {i.id for i in await items.search("deepseek", sources=["news"])} == {"news:3"}
    assert len(await items.search("deepseek", limit=2)) == 2


async def test_count_by_day_groups_matches_by_local_day(database: Database) -> None:
    items = ItemRepository(database)
    await items.upsert_many(
        [
            make_item("hn:1", title="DeepSeek one", published=T0 - timedelta(days=1)),
            make_item("hn:2", title="DeepSeek two", published=T0),
            make_item("hn:3", title="DeepSeek three", published=T0 + timedelta(hours=15)),  # 00:00 next day UTC
            make_item("hn:4", title="Other", published=T0),
            make_item("hn:5", title="DeepSeek old", published=T0 - timedelta(days=30)),
        ]
    )
    since, until = T0 - timedelta(days=2), T0 + timedelta(days=2)
    assert await items.count_by_day("deepseek", since=since, until=until) == {
        date(2026, 2, 28): 1,
        date(2026, 3, 1): 1,
        date(2026, 3, 2): 1,
    }
    # Days are local: in Shanghai (UTC+8) the three land on the same dates; in New York (UTC-5)
    # midnight UTC on 2 March is still the evening of 1 March.
    shanghai = await items.count_by_day("deepseek", since=since, until=until, tz=ZoneInfo("Asia/Shanghai"))
    assert shanghai == {date(2026, 2, 28): 1, date(2026, 3, 1): 1, date(2026, 3, 2): 1}
    new_york = await items.count_by_day("deepseek", since=since, until=until, tz=ZoneInfo("America/New_York"))
    assert new_york == {date(2026, 2, 28): 1, date(2026, 3, 1): 2}


async def test_items_of_a_monitor_window_and_delivered_ids(database: Database, monitor: MonitorRecord) -> None:
    runs, deliveries, items = RunRepository(database), DeliveryRepository(database), ItemRepository(database)
    other = await MonitorRepository(database).create(
        owner_chat_id=monitor.owner_chat_id, topic="other", schedule="daily"
    )

    first = await runs.open_run(monitor.id, T0)
    assert first is not None
    await deliveries.complete_run(
        first.id,
        outcome=RunOutcome(finished_at=T0),
        items=[make_item("hn:old", published=T0 - timedelta(days=3)), make_item("hn:a")],
        scores=[
            ItemScore(item_id="hn:old", score=0.2, rank=2),
            ItemScore(item_id="hn:a", score=0.5, rank=1, delivered=True),
        ],
        deliver=False,
    )
    second = await runs.open_run(monitor.id, T0 + timedelta(days=1))
    assert second is not None
    await deliveries.complete_run(
        second.id,
        outcome=RunOutcome(finished_at=T0 + timedelta(days=1)),
        items=[make_item("hn:a"), make_item("hn:b", published=T0 + timedelta(hours=3))],
        scores=[
            ItemScore(item_id="hn:a", score=0.9, relevance=0.8, credibility=0.7, cluster_id="c1", rank=1),
            ItemScore(item_id="hn:b", score=0.4, cluster_id="c1", rank=2, delivered=True),
        ],
        deliver=False,
    )
    other_run = await runs.open_run(other.id, T0)
    assert other_run is not None
    await deliveries.complete_run(
        other_run.id,
        outcome=RunOutcome(finished_at=T0),
        items=[make_item("hn:x")],
        scores=[ItemScore(item_id="hn:x", delivered=True)],
        deliver=False,
    )

    window = await items.for_monitor(monitor.id, since=T0 - timedelta(days=1))
    assert [s.item.id for s in window] == ["hn:b", "hn:a"]
    latest_a = window[1].scores
    assert (latest_a.run_id, latest_a.score, latest_a.relevance, latest_a.credibility, latest_a.cluster_id) == (
        second.id,
        0.9,
        0.8,
        0.7,
        "c1",
    )
    assert [s.item.id for s in await items.for_monitor(monitor.id)] == ["hn:b", "hn:a", "hn:old"]
    assert [s.item.id for s in await items.for_monitor(monitor.id, until=T0)] == ["hn:old"]

    assert await items.delivered_ids(monitor.id) == {"hn:a", "hn:b"}
    assert await items.delivered_ids(monitor.id, since=T0 + timedelta(hours=1)) == {"hn:b"}
    assert [r.item_id for r in await runs.items_of_run(second.id)] == ["hn:a", "hn:b"]

    # Retention drops old items and their links to runs.
    assert await items.delete_collected_before(T0 + timedelta(hours=2)) == 4
    assert await items.get("hn:a") is None
    assert await runs.items_of_run(second.id) == []
