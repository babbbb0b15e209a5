"""Alerts in storage (SQLite and, with TEST_DATABASE_URL, PostgreSQL): a chat's alerts listed with their monitor and
how often they fired, removed only by their chat, checked only for chats that still receive the monitor, and a firing
written once per (alert, story key) together with its notice and outbox row."""

from __future__ import annotations

import pytest

from storage import ChatRecord, Database
from storage.repositories import (
    AlertRepository,
    ChatRepository,
    DeliveryRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
)
from tests.storage.conftest import T0


async def test_alerts_are_listed_removed_and_fired_once_per_story(database: Database, chat: ChatRecord) -> None:
    other = await ChatRepository(database).get_or_create("telegram", "2002")
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    await SubscriptionRepository(database).subscribe(monitor.id, other.id)
    alerts = AlertRepository(database)
    mine = await alerts.create(chat_id=chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="a release", now=T0)
    theirs = await alerts.create(chat_id=other.id, monitor_id=monitor.id, topic="DeepSeek", condition="an outage")

    first = await alerts.fire(mine, story_key="news:1", item_ids=["news:1", "hn:2"], text="🔔 one", stats={}, now=T0)
    again = await alerts.fire(mine, story_key="news:1", item_ids=["news:1"], text="🔔 two", stats={}, now=T0)

    assert first is not None and again is None
    notice = await RunRepository(database).get(first)
    assert notice is not None and notice.stats["text"] == "🔔 one" and notice.monitor_id is None
    [row] = await DeliveryRepository(database).list_for_run(first)
    assert row.chat_id == chat.id
    assert await alerts.fired_items([mine.id, theirs.id]) == {mine.id: {"news:1", "hn:2"}, theirs.id: set()}
    listed = await alerts.list_for_chat(chat.id)
    assert [(a.id, a.monitor_topic, a.condition, a.fired) for a in listed] == [(mine.id, "DeepSeek", "a release", 1)]
    assert [a.id for a in await alerts.receiving_alerts(monitor.id)] == [mine.id, theirs.id]

    await SubscriptionRepository(database).update(monitor.id, other.id, paused=True)
    assert [a.id for a in await alerts.receiving_alerts(monitor.id)] == [mine.id]
    assert await alerts.remove(mine.id, chat_id=other.id) is False
    assert await alerts.remove(mine.id, chat_id=chat.id) is True
    assert await alerts.count_for_chat(chat.id) == 0


async def test_a_runs_pending_alert_check_is_written_with_the_run_and_gone_once_checked(
    database: Database, chat: ChatRecord
) -> None:
    from datetime import timedelta

    from storage import RunOutcome
    from storage.repositories.deliveries import RunNotOpenError

    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    runs, deliveries, alerts = RunRepository(database), DeliveryRepository(database), AlertRepository(database)
    run = await runs.open_run(monitor.id, T0, now=T0)
    assert run is not None
    stories = [{"key": "news:1", "items": ["news:1"], "earlier": [], "grown": False}]
    outcome = RunOutcome(finished_at=T0, stats={"kind": "digest"}, alert_stories=stories)

    await deliveries.complete_run(run.id, outcome=outcome)
    # a second completion fails as a whole: nothing of it is written, the first pending check stays the only one
    with pytest.raises(RunNotOpenError):
        await deliveries.complete_run(run.id, outcome=outcome)
    quiet = await runs.open_run(monitor.id, T0 + timedelta(hours=1), now=T0)
    assert quiet is not None
    await deliveries.complete_run(quiet.id, outcome=RunOutcome(finished_at=T0))  # no stories: nothing pending

    assert await alerts.pending_checks(created_before=T0 - timedelta(seconds=1)) == []
    [pending] = await alerts.pending_checks(created_before=T0)
    assert (pending.run_id, pending.monitor_id, pending.stories) == (run.id, monitor.id, stories)
    await alerts.checked(run.id)
    assert await alerts.pending_checks(created_before=T0 + timedelta(days=1)) == []
