"""Monitors (schedule state, plan, results, due queries) and their subscriptions."""

from __future__ import annotations

from datetime import timedelta

from storage import ChatRecord, Database
from storage.repositories import (
    ChatRepository,
    MonitorRepository,
    RunRepository,
    SourceFailureRepository,
    SubscriptionRepository,
)
from tests.storage.conftest import T0


async def test_create_reads_back_every_field_and_subscribes_the_owner(database: Database, chat: ChatRecord) -> None:
    monitors = MonitorRepository(database)
    created = await monitors.create(
        owner_chat_id=chat.id,
        topic="open source LLM",
        schedule="every 6 hours",
        timezone="Europe/Paris",
        sources=["hn", "news", "rss:https://example.org/feed.xml"],
        extra_queries=["llama release"],
        include_keywords=["weights"],
        exclude_keywords=["crypto"],
        lookback_hours=48,
        language="fr",
        quiet=True,
        next_run_at=T0,
        now=T0 - timedelta(days=1),
    )
    assert created == await monitors.get(created.id)
    assert created.sources == ("hn", "news", "rss:https://example.org/feed.xml")
    assert (created.extra_queries, created.include_keywords, created.exclude_keywords) == (
        ("llama release",),
        ("weights",),
        ("crypto",),
    )
    assert (created.timezone, created.lookback_hours, created.language, created.quiet, created.paused) == (
        "Europe/Paris",
        48,
        "fr",
        True,
        False,
    )
    assert (created.next_run_at, created.created_at, created.consecutive_failures) == (
        T0,
        T0 - timedelta(days=1),
        0,
    )
    assert created.plan is None and created.last_run_at is None
    assert [c.id for c in await SubscriptionRepository(database).subscribers(created.id)] == [chat.id]


async def test_update_changes_only_what_is_given(database: Database, chat: ChatRecord) -> None:
    monitors = MonitorRepository(database)
    monitor = await monitors.create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily", sources=["hn"])

    updated = await monitors.update(monitor.id, topic="DeepSeek R2", sources=("arxiv", "news"), paused=True)
    assert updated is not None
    assert (updated.topic, updated.sources, updated.paused, updated.schedule) == (
        "DeepSeek R2",
        ("arxiv", "news"),
        True,
        "daily",
    )
    assert updated.updated_at >= monitor.updated_at
    assert await monitors.get(monitor.id) == updated
    assert await monitors.update(10_000, topic="x") is None


async def test_plan_next_run_and_results(database: Database, chat: ChatRecord) -> None:
    monitors = MonitorRepository(database)
    monitor = await monitors.create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")

    plan = {"queries": {"hn": ["DeepSeek"], "news": ["DeepSeek AI"]}, "keywords": ["R1", "V3"]}
    await monitors.set_plan(monitor.id, plan, now=T0)
    await monitors.set_next_run(monitor.id, T0 + timedelta(days=1))
    stored = await monitors.get(monitor.id)
    assert stored is not None
    assert (stored.plan, stored.plan_updated_at, stored.next_run_at) == (plan, T0, T0 + timedelta(days=1))

    first = await monitors.record_result(monitor.id, status="failed", finished_at=T0, error="all sources down")
    second = await monitors.record_result(monitor.id, status="failed", finished_at=T0 + timedelta(hours=1))
    assert first is not None and second is not None
    assert (first.consecutive_failures, first.last_error, first.last_status) == (1, "all sources down", "failed")
    assert second.consecutive_failures == 2
    await monitors.update(monitor.id, failure_notified_at=T0)

    recovered = await monitors.record_result(
        monitor.id, status="ok", finished_at=T0 + timedelta(hours=2), next_run_at=T0 + timedelta(days=2)
    )
    assert recovered is not None
    assert (recovered.consecutive_failures, recovered.last_error, recovered.failure_notified_at) == (0, None, None)
    assert (recovered.last_run_at, recovered.next_run_at) == (T0 + timedelta(hours=2), T0 + timedelta(days=2))

    await monitors.set_plan(monitor.id, None, now=T0)
    cleared = await monitors.get(monitor.id)
    assert cleared is not None and (cleared.plan, cleared.plan_updated_at) == (None, None)
    assert await monitors.record_result(10_000, status="ok", finished_at=T0) is None


async def test_due_lists_unpaused_monitors_of_active_chats_earliest_first(database: Database, chat: ChatRecord) -> None:
    monitors = MonitorRepository(database)
    chats = ChatRepository(database)
    blocked = await chats.get_or_create("telegram", "blocked")
    late = await monitors.create(owner_chat_id=chat.id, topic="late", schedule="daily", next_run_at=T0)
    early = await monitors.create(
        owner_chat_id=chat.id, topic="early", schedule="daily", next_run_at=T0 - timedelta(hours=3)
    )
    await monitors.create(
        owner_chat_id=chat.id, topic="future", schedule="daily", next_run_at=T0 + timedelta(seconds=1)
    )
    await monitors.create(owner_chat_id=chat.id, topic="unscheduled", schedule="daily")
    paused = await monitors.create(owner_chat_id=chat.id, topic="paused", schedule="daily", next_run_at=T0)
    await monitors.update(paused.id, paused=True)
    await monitors.create(owner_chat_id=blocked.id, topic="blocked chat", schedule="daily", next_run_at=T0)
    await chats.update(blocked.id, active=False)

    assert [m.id for m in await monitors.due(T0)] == [early.id, late.id]
    assert [m.id for m in await monitors.due(T0, limit=1)] == [early.id]
    assert len(await monitors.list_all()) == 6
    assert paused.id not in {m.id for m in await monitors.list_all(include_paused=False)}


async def test_list_for_chat_includes_owned_and_subscribed(database: Database, chat: ChatRecord) -> None:
    monitors = MonitorRepository(database)
    other = await ChatRepository(database).get_or_create("slack", "C1")
    own = await monitors.create(owner_chat_id=chat.id, topic="mine", schedule="daily")
    theirs = await monitors.create(owner_chat_id=other.id, topic="theirs", schedule="daily")
    await monitors.create(owner_chat_id=other.id, topic="not shared", schedule="daily")
    await SubscriptionRepository(database).subscribe(theirs.id, chat.id)

    listed = await monitors.list_for_chat(chat.id)
    assert [m.topic for m in listed] == [own.topic, theirs.topic]
    # read through one Core statement, every field comes back as the ORM's `get` reads it (lists, aware times)
    assert listed == [await monitors.get(own.id), await monitors.get(theirs.id)]


async def test_delete_removes_subscriptions_and_runs(database: Database, chat: ChatRecord) -> None:
    monitors, runs = MonitorRepository(database), RunRepository(database)
    monitor = await monitors.create(owner_chat_id=chat.id, topic="x", schedule="daily")
    run = await runs.open_run(monitor.id, T0)
    assert run is not None

    assert await monitors.delete(monitor.id) is True
    assert await monitors.get(monitor.id) is None
    assert await runs.get(run.id) is None
    assert await SubscriptionRepository(database).for_chat(chat.id) == []
    assert await monitors.delete(monitor.id) is False


async def test_subscribers_pause_resume_and_unsubscribe(database: Database, chat: ChatRecord) -> None:
    chats, subscriptions = ChatRepository(database), SubscriptionRepository(database)
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="x", schedule="daily")
    second = await chats.get_or_create("slack", "C2")
    third = await chats.get_or_create("telegram", "3")
    for subscriber in (second, third):
        record = await subscriptions.subscribe(monitor.id, subscriber.id)
        assert (record.monitor_id, record.chat_id, record.active) == (monitor.id, subscriber.id, True)
    assert [c.id for c in await subscriptions.subscribers(monitor.id)] == [chat.id, second.id, third.id]

    # The bot was blocked in `second`: its subscriptions pause.
    assert await subscriptions.set_active_for_chat(second.id, active=False) == 1
    assert await subscriptions.set_active_for_chat(second.id, active=False) == 0
    assert [s.active for s in await subscriptions.for_chat(second.id)] == [False]
    # An inactive chat receives nothing even with an active subscription.
    await chats.update(third.id, active=False)
    assert [c.id for c in await subscriptions.subscribers(monitor.id)] == [chat.id]

    assert await subscriptions.set_active_for_chat(second.id, active=True) == 1
    assert second.id in {c.id for c in await subscriptions.subscribers(monitor.id)}

    await subscriptions.set_active_for_chat(second.id, active=False)
    again = await subscriptions.subscribe(monitor.id, second.id)  # subscribing again re-activates
    assert again.active is True

    assert await subscriptions.unsubscribe(monitor.id, second.id) is True
    assert await subscriptions.unsubscribe(monitor.id, second.id) is False
    assert await subscriptions.for_chat(second.id) == []


async def test_source_failures_count_a_streak_back_off_and_are_forgotten_on_recovery(
    database: Database, chat: ChatRecord
) -> None:
    monitors, failures = MonitorRepository(database), SourceFailureRepository(database)
    monitor = await monitors.create(owner_chat_id=chat.id, topic="x", schedule="hourly", timezone="UTC", sources=[])
    other = await monitors.create(owner_chat_id=chat.id, topic="y", schedule="hourly", timezone="UTC", sources=[])
    feed = "rss:https://example.org/" + "long/" * 400 + "feed.xml"  # longer than an index would take as is

    first = await failures.failed(monitor.id, feed, reason="HTTP 500", now=T0)
    second = await failures.failed(monitor.id, feed, reason="timed out", now=T0 + timedelta(hours=1))
    await failures.failed(monitor.id, "hn", reason="cannot connect", now=T0 + timedelta(hours=1))
    await failures.failed(other.id, feed, reason="HTTP 500", now=T0)
    await failures.back_off(monitor.id, feed, retry_at=T0 + timedelta(hours=3))
    await failures.notified(monitor.id, [feed], now=T0 + timedelta(hours=1))

    assert (first.failures, second.failures) == (1, 2)
    listed = await failures.for_monitor(monitor.id)
    assert [(r.spec, r.failures, r.last_reason) for r in listed] == [
        (feed, 2, "timed out"),
        ("hn", 1, "cannot connect"),
    ]
    assert listed[0].first_failed_at == T0 and listed[0].retry_at == T0 + timedelta(hours=3)
    assert listed[0].notified_at == T0 + timedelta(hours=1) and listed[1].notified_at is None

    assert await failures.recovered(monitor.id, [feed, "news"]) == 1
    assert [r.spec for r in await failures.for_monitor(monitor.id)] == ["hn"]
    assert [r.spec for r in await failures.for_monitor(other.id)] == [feed], "another monitor's streak stays"
    await monitors.delete(monitor.id)
    assert await failures.for_monitor(monitor.id) == []
