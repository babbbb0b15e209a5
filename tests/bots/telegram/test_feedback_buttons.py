"""Feedback buttons under a Telegram digest, pressed through the fake Bot API: a row per story, a press recorded
and acknowledged in its own row (the other rows kept), undo, and a press for a digest the chat never received
changing nothing. On both storage backends."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from storage import Database
from storage.repositories import ChatRepository, FeedbackRepository, MonitorRepository, RunRepository
from tests.bots.telegram_world import T0, TelegramWorld, telegram_world
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import SentMessage
from tests.kit import eventually

ALICE = 4301
BOB = 4302


@pytest.fixture
def db_url(database: Database) -> str:
    """The test's database, on SQLite and (with TEST_DATABASE_URL) PostgreSQL, where the ids the store hands out
    are not 1: the tests read them from the store."""
    return database.engine.url.render_as_string(hide_password=False)


def _rows(message: SentMessage) -> list[list[dict[str, Any]]]:
    markup = message.reply_markup or {}
    rows: list[list[dict[str, Any]]] = markup.get("inline_keyboard", [])
    return rows


async def _digest(world: TelegramWorld) -> tuple[SentMessage, int, int]:
    """Track and run a monitor in ALICE's chat; the digest message with its keyboard, the run and the monitor."""
    world.fake.push_text(ALICE, "/track DeepSeek daily at 08:30 from hn")
    await world.replies(ALICE, 1)
    chat = await ChatRepository(world.database).find("telegram", str(ALICE))
    assert chat is not None
    [monitor] = await MonitorRepository(world.database).list_for_chat(chat.id)
    world.fake.push_text(ALICE, f"/digest {monitor.id}")
    await world.replies(ALICE, 1, kind="document")
    [digest] = [m for m in world.fake.texts(ALICE) if _rows(m) and "/more 1 run" in str(m.reply_markup)]
    [run] = await RunRepository(world.database).list_for_monitor(monitor.id)
    return digest, run.id, monitor.id


async def test_a_press_is_recorded_and_acknowledged_in_its_own_row_and_undo_restores_it(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        digest, run, monitor = await _digest(world)
        before = _rows(digest)
        stories = len(re.findall(r"^\d+\. ", re.sub(r"<[^>]+>", "", digest.text or ""), re.M))
        sent_before = len(world.fake.texts(ALICE))
        world.fake.push_callback(digest.message_id, f"/less 1 run {run}")
        await eventually(lambda: len(world.fake.texts(ALICE)) > sent_before, what="the answer to the press")
        after = _rows(digest)
        chat = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert chat is not None
        marks = await FeedbackRepository(world.database).marks(monitor, chat.id)
        answer = world.fake.texts(ALICE)[-1].text or ""

        sent_before = len(world.fake.texts(ALICE))
        world.fake.push_callback(digest.message_id, f"/unmark 1 run {run}")
        await eventually(lambda: len(world.fake.texts(ALICE)) > sent_before, what="the answer to undo")
        undone = _rows(digest)
        marks_after_undo = await FeedbackRepository(world.database).marks(monitor, chat.id)

    assert len(before) == stories >= 1
    assert [b["text"] for b in before[0]] == ["1. 👍", "👎", "🔇 outlet", "fewer like this", "why?"]
    assert [b["callback_data"] for b in before[0]][:2] == [f"/more 1 run {run}", f"/less 1 run {run}"]
    assert [(m.kind, m.story, m.run_id) for m in marks] == [("less", 1, run)]
    assert "Recorded 👎 less like this on story 1" in answer
    assert [b["text"] for b in after[0]] == ["1. ✓ 👎 recorded", "undo"]
    assert after[1:] == before[1:]  # the other stories keep their buttons
    assert undone == before and marks_after_undo == []


async def test_a_press_for_a_digest_the_chat_never_received_changes_nothing(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        _, run, monitor = await _digest(world)
        world.fake.push_text(BOB, "/help")
        [helped] = await world.replies(BOB, 1)
        # Bob's client sends Alice's run in a press on Bob's own message (a forged or copied callback).
        world.fake.push_callback(helped.message_id, f"/less 1 run {run}")
        await world.replies(BOB, 2)
        answer = world.fake.texts(BOB)[1].text or ""
        bob = await ChatRepository(world.database).find("telegram", str(BOB))
        alice = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert bob is not None and alice is not None
        repository = FeedbackRepository(world.database)
        bob_marks = await repository.marks(monitor, bob.id)
        alice_marks = await repository.marks(monitor, alice.id)

    assert "never reached this chat" in answer
    assert bob_marks == [] and alice_marks == []


async def test_a_press_under_a_briefing_marks_its_sections_story_and_is_acknowledged_in_its_row(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """ALICE reads her monitor only in her 07:00 briefing: its message carries a row per story ("#3·2 👍" …), a press
    on story 2 is recorded on the section's story 2 and acknowledged in that row; BOB pressing the same callback on
    his own message changes nothing."""
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily at 08:30 from hn")
        world.fake.push_text(ALICE, "/briefing daily at 07:00")
        await world.replies(ALICE, 2)
        chats = ChatRepository(world.database)
        alice = await chats.find("telegram", str(ALICE))
        assert alice is not None
        [monitor] = await MonitorRepository(world.database).list_for_chat(alice.id)
        # the briefing came due at 07:00 and covers the day (the world's clock stands at T0, 13:00)
        await chats.update(alice.id, briefing_next_at=T0 - timedelta(hours=6), briefing_since=T0 - timedelta(days=1))
        summary = await world.services.monitors.runs.run_monitor(monitor.id, T0)
        [queued] = await world.services.monitors.briefings.run_due()

        def briefing() -> list[SentMessage]:
            return [m for m in world.fake.texts(ALICE) if f"#{monitor.id}·1 👍" in str(m.reply_markup)]

        await eventually(lambda: bool(briefing()), what="the briefing with its buttons")
        [message] = briefing()
        before = _rows(message)
        story = len(before)  # the section's last story
        callback = before[-1][1]["callback_data"]
        sent_before = len(world.fake.texts(ALICE))
        world.fake.push_callback(message.message_id, callback)
        await eventually(lambda: len(world.fake.texts(ALICE)) > sent_before, what="the answer to the press")
        after = _rows(message)
        answer = world.fake.texts(ALICE)[-1].text or ""
        marks = await FeedbackRepository(world.database).marks(monitor.id, alice.id)

        world.fake.push_text(BOB, "/help")
        [helped] = await world.replies(BOB, 1)
        world.fake.push_callback(helped.message_id, callback)  # a copied callback, on BOB's own message
        await world.replies(BOB, 2)
        bob_answer = world.fake.texts(BOB)[1].text or ""
        bob = await chats.find("telegram", str(BOB))
        assert bob is not None
        bob_marks = await FeedbackRepository(world.database).marks(monitor.id, bob.id)

    assert summary is not None and summary.deliveries == 0  # read in the briefing only
    text = re.sub(r"<[^>]+>", "", message.text or "")
    assert f"· monitor #{monitor.id}" in text and story == len(re.findall(r"^\d+\. ", text, re.M)) >= 1
    assert [row[0]["text"] for row in before] == [f"#{monitor.id}·{n} 👍" for n in range(1, story + 1)]
    assert callback.startswith(f"/less {story} run ")
    section_run = int(callback.rsplit(" ", 1)[1])
    assert section_run != queued.run_id  # the monitor's run the section read, not the briefing's own
    assert [(m.kind, m.story, m.run_id) for m in marks] == [("less", story, section_run)]
    assert f"Recorded 👎 less like this on story {story}" in answer
    assert [b["text"] for b in after[-1]] == [f"#{monitor.id}·{story} ✓ 👎 recorded", "undo"]
    assert after[:-1] == before[:-1]
    assert "never reached this chat" in bob_answer and bob_marks == []
