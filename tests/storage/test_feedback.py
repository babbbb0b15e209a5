"""Feedback storage on SQLite and PostgreSQL: one story mark per (chat, digest, story), undo, mutes, the view a chat
was shown (replaced until a part went out), and the last digest a chat received."""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import ChatRecord, Database, FeedbackMarkRecord, MonitorRecord, RunOutcome
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    FeedbackRepository,
    MonitorRepository,
    RunRepository,
)
from tests.storage.conftest import T0


@pytest.fixture
async def monitor(database: Database, chat: ChatRecord) -> MonitorRecord:
    return await MonitorRepository(database).create(owner_chat_id=chat.id, topic="news", schedule="daily")


async def _delivered_run(database: Database, monitor: MonitorRecord, when: timedelta, *, sent: bool) -> int:
    run = await RunRepository(database).open_run(monitor.id, T0 + when)
    assert run is not None
    [row] = await DeliveryRepository(database).complete_run(run.id, outcome=RunOutcome(finished_at=T0 + when))
    if sent:
        worker = "test:1:a"
        [claimed] = await DeliveryRepository(database).claim_due(
            T0 + when + timedelta(minutes=1), worker=worker, limit=1, lease=timedelta(seconds=30)
        )
        assert claimed.id == row.id
        await DeliveryRepository(database).record_parts_sent(
            row.id, 1, worker=worker, until=T0 + when + timedelta(minutes=2), language="", timezone="UTC"
        )
    return run.id


def _mark(
    monitor: MonitorRecord, chat: ChatRecord, kind: str, run: int | None, story: int | None
) -> FeedbackMarkRecord:
    return FeedbackMarkRecord(
        monitor_id=monitor.id, chat_id=chat.id, kind=kind, run_id=run, story=story, title="t",
        outlets=("example.com",), terms={"gpu": 0.8, "chip": 0.6},
    )  # fmt: skip


async def test_marks_views_and_the_last_received_digest(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    repository = FeedbackRepository(database)
    other = await ChatRepository(database).get_or_create("slack", "C9")
    first = await _delivered_run(database, monitor, timedelta(0), sent=True)
    second = await _delivered_run(database, monitor, timedelta(days=1), sent=False)
    await repository.save_view(first, chat.id, {"kept": [{"index": 0}]})
    await repository.save_view(first, chat.id, {"kept": [{"index": 1}]})  # replaced before anything went out
    await repository.save_view(second, chat.id, {"kept": []})

    await repository.add(_mark(monitor, chat, "more", first, 1))
    await repository.add(_mark(monitor, chat, "less", first, 1))  # the latest press on a story wins
    await repository.add(_mark(monitor, chat, "fewer", first, 2))
    await repository.add(_mark(monitor, chat, "mute", None, None))
    await repository.add(_mark(monitor, chat, "mute", None, None))  # muting twice keeps one mute
    kinds = [(m.kind, m.story) for m in await repository.marks(monitor.id, chat.id)]
    undone = await repository.undo_story(monitor.id, chat.id, first, 2)
    unmuted = await repository.unmute(chat.id, "EXAMPLE.com")

    assert kinds == [("less", 1), ("fewer", 2), ("mute", None)]
    assert [m.kind for m in undone] == ["fewer"] and unmuted == 1
    assert [(m.kind, m.terms) for m in await repository.marks(monitor.id, chat.id)] == [
        ("less", {"gpu": 0.8, "chip": 0.6})
    ]
    assert await repository.marks(monitor.id, other.id) == []
    [last] = await repository.last_views(chat.id)
    assert (last.run_id, last.monitor_id, last.view) == (first, monitor.id, {"kept": [{"index": 1}]})
    assert await repository.view(second, chat.id) is None  # not received yet
    assert await repository.view(first, other.id) is None  # never this chat's
    assert await repository.pending_view(second, chat.id) == {"kept": []}


async def test_a_digest_preview_is_a_received_digest_of_the_monitor_its_view_names(
    database: Database, chat: ChatRecord, monitor: MonitorRecord
) -> None:
    """A `/digest` preview is a run of no monitor; its view names the monitor, so a press on it (by run) and the
    chat's "last digest" (of that monitor or any) find it as a digest of that monitor."""
    repository = FeedbackRepository(database)
    deliveries = DeliveryRepository(database)
    scheduled = await _delivered_run(database, monitor, timedelta(0), sent=True)
    await repository.save_view(scheduled, chat.id, {"kept": [{"index": 0}]})
    preview = await RunRepository(database).open_search_run(chat_id=chat.id, query="news", now=T0 + timedelta(hours=1))
    [row] = await deliveries.complete_run(preview.id, outcome=RunOutcome(finished_at=T0 + timedelta(hours=1)))
    await repository.save_view(preview.id, chat.id, {"monitor_id": monitor.id, "kept": []})
    worker = "test:1:b"
    claimed = await deliveries.claim_due(T0 + timedelta(hours=2), worker=worker, limit=5, lease=timedelta(seconds=30))
    assert row.id in [one.id for one in claimed]
    await deliveries.record_parts_sent(
        row.id, 1, worker=worker, until=T0 + timedelta(hours=3), language="", timezone="UTC"
    )

    pressed = await repository.view(preview.id, chat.id)
    [last] = await repository.last_views(chat.id)
    [last_of_monitor] = await repository.last_views(chat.id, monitor_id=monitor.id)

    assert pressed is not None and pressed.monitor_id == monitor.id
    assert (last.run_id, last.monitor_id) == (preview.id, monitor.id)
    assert last_of_monitor.run_id == preview.id
    assert await repository.last_views(chat.id, monitor_id=monitor.id + 1) == []
