"""What real Telegram users send beyond plain text, through the real frontend against the fake Bot API: stickers,
voice notes and photos, a bare @mention, invisible characters pasted around a topic, markdown in a mistyped command,
a group upgraded to a supergroup; and a stop while a chat's messages wait their turn."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

from storage.repositories import ChatRepository, MonitorRepository
from tests.bots.telegram_world import telegram_world
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import ApiError, FakeTelegram
from tests.kit import ScriptedModel, eventually, replying

ALICE = 4401
GROUP = -100888


def without_text(fake: FakeTelegram, chat_id: int, **content: Any) -> dict[str, Any]:
    """A message from Alice carrying `content` (a sticker, a voice note…) and no text, as Telegram sends it."""
    update = fake.text_update(chat_id, "", user_id=ALICE)
    del update["message"]["text"]
    update["message"].update(content)
    return update


STICKER = {
    "file_id": "s1",
    "file_unique_id": "s1",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
    "emoji": "👍",
}


async def test_a_sticker_voice_note_or_bare_mention_gets_a_hint_not_silence(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        fake = world.fake
        fake.push_update(without_text(fake, ALICE, sticker=STICKER))
        fake.push_update(without_text(fake, ALICE, voice={"file_id": "v1", "file_unique_id": "v1", "duration": 3}))
        # In a group, a sticker replying to the bot is a reaction among people: not answered.
        await world.replies(ALICE, 2)
        fake.push_text(GROUP, "/help@lookout_test_bot", user_id=ALICE)
        [helped] = await world.replies(GROUP, 1)
        reaction = without_text(fake, GROUP, sticker=STICKER)
        reaction["message"]["reply_to_message"] = {
            "message_id": helped.message_id,
            "date": 0,
            "chat": reaction["message"]["chat"],
            "from": {"id": fake.bot_id, "is_bot": True, "first_name": "Lookout", "username": fake.bot_username},
            "text": "help",
        }
        fake.push_update(reaction)
        fake.push_text(GROUP, "@lookout_test_bot", user_id=ALICE)
        await world.replies(GROUP, 2)
        fake.push_text(GROUP, "@lookout_test_bot ping", user_id=ALICE)
        await eventually(lambda: len(fake.texts(GROUP)) == 3, what="the answer to the last group message")

    sticker, voice = (m.text or "" for m in fake.texts(ALICE))
    assert "sticker" in sticker and "text" in sticker and "/help" in sticker
    assert "voice message" in voice
    group = [m.text or "" for m in fake.texts(GROUP)]
    assert "mention" in group[1] and "/help" in group[1]
    assert group[2] == "echo: ping"  # the sticker reply got nothing; the next question its answer
    assert script.requests and all("ping" in str(request) for request in script.requests)  # no model call for those


async def test_invisible_characters_pasted_around_a_command_or_its_words_are_not_part_of_them(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        fake = world.fake
        # Copied from a web page or typed in a right-to-left keyboard: zero-width spaces, a BOM, direction marks.
        fake.push_text(ALICE, "/track \u200fDeepSeek\u200b daily from hn\u200e")
        fake.push_text(ALICE, "\ufeff/pause 1\u200b")
        fake.push_text(ALICE, "/help\u2060")
        await world.replies(ALICE, 3)
        chat = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert chat is not None
        topics = [monitor.topic for monitor in await MonitorRepository(world.database).list_for_chat(chat.id)]

    tracked, paused, helped = (m.text or "" for m in fake.texts(ALICE))
    assert tracked.startswith("Tracking <b>DeepSeek</b> as monitor #1")
    assert topics == ["DeepSeek"]
    assert paused.startswith("Monitor #1 “DeepSeek” is paused")
    assert "/track" in helped and "know the command" not in helped


async def test_messages_refused_at_stop_leave_no_never_retrieved_errors_in_the_log(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopping while a chat's messages wait behind a reply that Telegram keeps refusing (5xx): the waiting ones are
    left for Telegram to send again, quietly; asyncio must not log a traceback for each at shutdown."""
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True, seconds=0.2)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        fake = world.fake
        fake.fail("sendMessage", ApiError(500, "Internal Server Error"), chat_id=ALICE, times=50)
        for text in ("one", "two", "three"):
            fake.push_text(ALICE, text)
        await eventually(lambda: len(fake.calls_to("sendMessage")) >= 2, what="the refused reply's retries")
    del world
    gc.collect()

    assert not any("never retrieved" in record.getMessage() for record in caplog.records)
    assert fake.texts(ALICE) == []  # nothing got through: the test did stop with messages waiting


async def test_markdown_in_a_mistyped_command_is_quoted_as_written_not_rendered(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """The error quotes what was typed: in a group anyone could otherwise make the bot post a link labelled as they
    like (`/pause [your account](https://phish.example)`), and `*x*` came back in italics."""
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        fake = world.fake
        fake.push_text(GROUP, "/pause@lookout_test_bot [account](https://phish.example/login)", user_id=ALICE)
        fake.push_text(GROUP, "/language *de*", user_id=ALICE)
        fake.push_text(GROUP, "/help _track_", user_id=ALICE)
        fake.push_text(GROUP, "/tr*a*ck DeepSeek", user_id=ALICE)
        fake.push_text(GROUP, "/timezone [Berlin](https://t.co/x)", user_id=ALICE)
        await world.replies(GROUP, 5)

    link, language, helped, unknown, zone = (m.text or "" for m in fake.texts(GROUP))
    assert ">account</a>" not in link and 'not "[account](https://phish.example/login)"' in re.sub("<[^>]+>", "", link)
    assert 'not "*de*"' in language and "<i>" not in language
    assert "/_track_" in helped and "<i>" not in helped
    assert "/tr*a*ck" in unknown and "<i>" not in unknown
    assert ">Berlin</a>" not in zone and "is not a timezone" in zone


async def test_a_group_upgraded_to_a_supergroup_finds_its_monitors_from_the_first_message_there(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """Telegram announces the upgrade twice: `migrate_from_chat_id` opens the new supergroup, `migrate_to_chat_id`
    closes the old group. Whichever the bot reads first moves the chat, so a person writing in the supergroup at once
    does not meet an empty chat (which would then keep the monitors away from it for good)."""
    old, new = -4001, -1004001
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        fake = world.fake
        fake.push_text(old, "/track DeepSeek daily from hn", user_id=ALICE)
        await world.replies(old, 1)
        fake.push_update(without_text(fake, new, migrate_from_chat_id=old))
        fake.push_text(new, "/monitors", user_id=ALICE)
        await world.replies(new, 1)
        fake.push_update(without_text(fake, old, migrate_to_chat_id=new))
        fake.push_text(new, "/monitors", user_id=ALICE)
        await world.replies(new, 2)

    first, second = (m.text or "" for m in fake.texts(new))
    assert "#1 DeepSeek" in first and "#1 DeepSeek" in second


async def test_a_topic_with_markdown_marks_is_captioned_as_written_under_its_chart(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """A caption is plain text on Telegram: the topic goes there as the person typed it, not markdown-escaped."""
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        fake = world.fake
        fake.push_text(ALICE, "/track gpt_oss *weights* daily from hn")
        await world.replies(ALICE, 1)
        fake.push_text(ALICE, "/digest 1")
        [chart] = await world.replies(ALICE, 1, kind="photo")
        fake.push_text(ALICE, "/export 1")
        await world.replies(ALICE, 2, kind="document")  # the digest's CSV, then the export

    assert (chart.caption or "").startswith("gpt_oss *weights* · ")
    assert (fake.documents(ALICE)[-1].caption or "").startswith("Monitor #1 “gpt_oss *weights*”: ")


async def test_muting_an_outlet_with_markdown_marks_answers_with_it_as_written(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        fake = world.fake
        fake.push_text(ALICE, "/unmute [bank](https://t.co/x)")
        [answer] = await world.replies(ALICE, 1)

    assert ">bank</a>" not in (answer.text or "") and "was not muted" in (answer.text or "")


async def test_a_double_tap_on_a_button_is_acted_on_once_and_answered_once(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """Two presses of "Yes" a moment apart (a double tap, a slow network): one monitor, one answer, and both presses'
    spinners stopped, not "Created…" followed by "That confirmation is no longer open"."""

    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages[-1:] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart("Shall I?")])
        call = ToolCallPart("create_monitor", {"topic": "DeepSeek", "schedule": "daily at 08:00", "sources": ["hn"]})
        return ModelResponse(parts=[call])

    script = ScriptedModel(respond, repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        fake = world.fake
        fake.push_text(ALICE, "track DeepSeek every morning from hn")
        [question] = await world.replies(ALICE, 1)
        yes = question.reply_markup["inline_keyboard"][0][0]["callback_data"]
        fake.push_callback(question.message_id, yes)
        fake.push_callback(question.message_id, yes)
        await world.replies(ALICE, 2)
        await eventually(lambda: len(fake.answered_callbacks) == 2, what="both presses answered")
        await eventually(lambda: world.dispatcher.conversations_in_flight == 0, what="the turns to end")
        fake.push_text(ALICE, "/monitors")
        await world.replies(ALICE, 3)

    texts = [m.text or "" for m in fake.texts(ALICE)]
    assert len(texts) == 3 and texts[1].startswith("Created monitor") and "#1 DeepSeek" in texts[2]


async def test_a_message_of_only_invisible_characters_is_not_sent_to_the_model(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.push_text(ALICE, "\u200b\u2060\u200f")
        [answer] = await world.replies(ALICE, 1)

    assert "empty" in (answer.text or "") and "/help" in (answer.text or "")
    assert script.requests == []
