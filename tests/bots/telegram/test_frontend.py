"""The Telegram frontend end to end: the real python-telegram-bot Application, dispatcher and conversation,
against the fake Bot API (long polling unless said otherwise)."""

from __future__ import annotations

import html
import itertools
import logging
import re
import socket
from pathlib import Path

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo
from telegram.error import InvalidToken

from agent.access import AccessPolicy
from app.http_server import build_http_app
from bots.dispatcher import Dispatcher
from bots.telegram import TelegramSender, build_bot
from bots.telegram.frontend import TelegramFrontend, TelegramOptions
from storage import (
    AdvisoryLocks,
    ChatRepository,
    Database,
    InboundRepository,
    MonitorRepository,
    SubscriptionRepository,
)
from tests.bots.slack_world import copy_database, migrated_template
from tests.bots.telegram_html import utf16_units
from tests.bots.telegram_world import WEBHOOK_SECRET, TelegramWorld, telegram_world
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import ApiError, running_fake_telegram
from tests.kit import ScriptedModel, eventually, eventually_async, replying

ALICE = 4201
GROUP = -100777


@pytest.fixture(scope="session")
def telegram_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("telegram-template"))


@pytest.fixture
def db_url(tmp_path: Path, telegram_db_template: Path) -> str:
    return copy_database(telegram_db_template, tmp_path)


def status_ids(world: TelegramWorld) -> set[int]:
    """The progress status messages (sent as plain text, then edited)."""
    return {int(call.params["message_id"]) for call in world.fake.edits if call.method == "editMessageText"}


def strip_tags(markup: str) -> str:
    return re.sub(r"<[^>]+>", "", markup)


async def test_a_conversation_in_a_private_chat(db_url: str, fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    script = ScriptedModel(
        replying(lambda said: f"You said **{said}**."), repeat_last=True, seconds=0.8
    )  # long enough to show "typing…"
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        assert "track" in {command["command"] for command in world.fake.commands}
        world.fake.push_text(ALICE, "hello there")
        world.fake.push_text(ALICE, "and again")
        first, second = await world.replies(ALICE, 2)

    assert (first.text, first.parse_mode) == ("You said <b>hello there</b>.", "HTML")
    assert second.text == "You said <b>and again</b>."
    assert (str(ALICE), "typing") in world.fake.chat_actions
    assert len(world.fake.chat_actions) <= 2  # one loop per chat, not one per message
    # Memory: the second request to the model carries the first exchange.
    seen = " ".join(str(message) for message in script.requests[-1])
    assert "hello there" in seen and "You said **hello there**." in seen


async def test_track_then_digest_delivers_text_and_the_csv(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily at 08:30 from hn")
        [created] = await world.replies(ALICE, 1)
        chat = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert chat is not None
        [monitor] = await MonitorRepository(world.database).list_for_chat(chat.id)
        assert monitor.topic == "DeepSeek" and f"{monitor.id}" in (created.text or "")

        world.fake.push_text(ALICE, f"/digest {monitor.id}")
        [document] = await world.replies(ALICE, 1, kind="document")

    # Progress: one status message, edited in place, never with the same text twice in a row.
    status_edits = [call for call in world.fake.edits if call.method == "editMessageText"]
    assert status_edits and len({call.params["message_id"] for call in status_edits}) == 1
    shown = [call.params["text"] for call in status_edits]
    assert all(before != after for before, after in itertools.pairwise(shown))
    texts = [m.text or "" for m in world.fake.texts(ALICE)]
    [digest_index] = [i for i, text in enumerate(texts) if text.startswith("<b>DeepSeek</b> · ")]
    assert "DeepSeek-V4" in texts[digest_index]
    assert document.filename is not None and document.filename.endswith(".csv") and "deepseek" in document.filename
    assert document.content is not None and b"DeepSeek-V4" in document.content
    # Every text went as HTML; the digest came before its CSV.
    sent = world.fake.sent(ALICE)
    assert all(m.parse_mode == "HTML" for m in sent if m.kind == "text" and m.message_id not in status_ids(world))
    assert sent.index(document) > sent.index(world.fake.texts(ALICE)[digest_index])


async def test_a_long_answer_is_split_within_telegrams_limit(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    sentence = "the quick brown fox 🦊 jumps over the lazy dog; "
    paragraphs = [f"Paragraph {n}: {sentence * 6}end." for n in range(21)]
    answer = "\n\n".join(paragraphs)
    assert len(answer) > 4500
    script = ScriptedModel(replying(lambda _said: answer), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.push_text(ALICE, "tell me everything")
        await world.replies(ALICE, 2)
        await eventually(lambda: "Paragraph 20:" in (world.fake.texts(ALICE)[-1].text or ""), what="the last part")
        parts = world.fake.texts(ALICE)

    assert len(parts) >= 2
    assert all(utf16_units(html.unescape(strip_tags(part.text or ""))) <= 4096 for part in parts)
    # Cut between paragraphs, nothing lost or repeated.
    joined = "\n\n".join((part.text or "").strip() for part in parts)
    assert joined == html.escape(answer, quote=False)
    assert all((part.text or "").startswith("Paragraph") for part in parts)


async def test_html_in_answers_is_escaped(db_url: str, fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    script = ScriptedModel(replying(lambda _said: "Use <script>alert(1)</script> & **bold** R&D"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.push_text(ALICE, "show me")
        [reply] = await world.replies(ALICE, 1)

    assert reply.parse_mode == "HTML"
    assert reply.text == "Use &lt;script&gt;alert(1)&lt;/script&gt; &amp; <b>bold</b> R&amp;D"


async def test_a_429_is_waited_out_and_the_reply_still_arrives(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.fail("sendMessage", ApiError.retry_after(1), chat_id=ALICE)
        world.fake.push_text(ALICE, "ping")
        [reply] = await world.replies(ALICE, 1)

    assert reply.text == "echo: ping"
    attempts = [call for call in world.fake.calls_to("sendMessage") if call.chat_id == str(ALICE)]
    assert len(attempts) == 2  # refused once with retry_after, then sent


async def test_a_403_marks_the_chat_gone_until_the_person_writes_again(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily from hn")
        await world.replies(ALICE, 1)
        chats, subscriptions = ChatRepository(world.database), SubscriptionRepository(world.database)
        chat = await chats.find("telegram", str(ALICE))
        assert chat is not None and chat.active

        world.fake.fail("sendMessage", ApiError.blocked(), chat_id=ALICE)
        world.fake.push_text(ALICE, "/monitors")
        await eventually(lambda: world.fake.rejected >= 1, what="the refused reply")
        await eventually(lambda: world.dispatcher.conversations_in_flight == 0, what="the turn to end")
        gone = await chats.get(chat.id)
        assert gone is not None and not gone.active
        assert [s.active for s in await subscriptions.for_chat(chat.id)] == [False]
        refused = len(world.fake.calls_to("sendMessage"))

        # Unblocked: the next message reaches the bot again, and the chat and its subscriptions come back.
        world.fake.push_text(ALICE, "/monitors")
        await eventually(lambda: len(world.fake.texts(ALICE)) == 2, what="the answer after unblocking")
        back = await chats.get(chat.id)
        assert back is not None and back.active
        assert [s.active for s in await subscriptions.for_chat(chat.id)] == [True]
        assert len(world.fake.calls_to("sendMessage")) == refused + 1  # the refused reply was not retried


async def test_being_blocked_or_removed_pauses_the_chat_without_sending_anything(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily from hn")
        world.fake.push_text(GROUP, "/track OpenAI weekly from hn", user_id=ALICE)
        await world.replies(ALICE, 1)
        await world.replies(GROUP, 1)
        world.fake.push_membership(ALICE, "kicked")
        world.fake.push_membership(GROUP, "left", user_id=ALICE)
        chats, subscriptions = ChatRepository(world.database), SubscriptionRepository(world.database)

        async def inactive() -> list[bool]:
            found = [await chats.find("telegram", str(chat_id)) for chat_id in (ALICE, GROUP)]
            return [chat is not None and not chat.active for chat in found]

        async def both_inactive() -> bool:
            return await inactive() == [True, True]

        await eventually_async(both_inactive, what="both chats to go inactive")
        for chat_id in (ALICE, GROUP):
            chat = await chats.find("telegram", str(chat_id))
            assert chat is not None
            assert [s.active for s in await subscriptions.for_chat(chat.id)] == [False]
    assert len(world.fake.texts(ALICE)) == 1 and len(world.fake.texts(GROUP)) == 1


async def test_webhook_needs_the_secret_and_a_repeated_update_is_answered_once(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(
        db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model, webhook=True
    ) as world:
        assert world.fake.webhook == {
            "url": "https://lookout.example.org/telegram/webhook",
            "secret_token": WEBHOOK_SECRET,
        }
        assert world.fake.calls_to("getUpdates") == []  # no polling in webhook mode
        app = build_http_app(checks={}, routes=[world.frontend.webhook_route()])
        update = world.fake.text_update(ALICE, "via webhook")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://lookout") as client:
            wrong = await client.post(
                "/telegram/webhook", json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
            )
            missing = await client.post("/telegram/webhook", json=update)
            assert (wrong.status_code, missing.status_code) == (403, 403)

            headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
            first = await client.post("/telegram/webhook", json=update, headers=headers)
            again = await client.post("/telegram/webhook", json=update, headers=headers)  # Telegram retried
            assert (first.status_code, again.status_code) == (200, 200)
            [reply] = await world.replies(ALICE, 1)
            later = world.fake.text_update(ALICE, "second")
            await client.post("/telegram/webhook", json=later, headers=headers)
            await world.replies(ALICE, 2)

    assert reply.text == "echo: via webhook"
    assert [m.text for m in world.fake.texts(ALICE)] == ["echo: via webhook", "echo: second"]
    assert len(script.requests) == 2


async def test_a_webhook_update_that_cannot_take_its_place_is_refused_so_telegram_sends_it_again(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # The conversations' shared locks live in a PostgreSQL nobody can reach: the message cannot take its place in
    # its conversation's order, so the request gets 503 and Telegram sends the update again later (acknowledged
    # with 200 first, as before, it was dropped).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    unreachable = AdvisoryLocks(f"postgresql+asyncpg://lookout:lookout@127.0.0.1:{closed_port}/lookout")
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    try:
        async with telegram_world(
            db_url=db_url,
            sources=fake_server,
            out_dir=tmp_path,
            model=script.model,
            webhook=True,
            shared_locks=unreachable,
        ) as world:
            app = build_http_app(checks={}, routes=[world.frontend.webhook_route()])
            update = world.fake.text_update(ALICE, "while the database is away")
            headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://lookout") as client:
                refused = await client.post("/telegram/webhook", json=update, headers=headers)
    finally:
        await unreachable.dispose()
    assert refused.status_code == 503
    assert world.fake.texts(ALICE) == [] and script.requests == []  # nothing answered, nothing asked


async def test_in_groups_only_messages_for_the_bot_are_answered(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        chatter = world.fake.push_text(GROUP, "just chatting among ourselves", user_id=ALICE)
        other_bots = world.fake.push_text(GROUP, "/help@some_other_bot", user_id=ALICE)
        asked = world.fake.push_text(GROUP, "@lookout_test_bot what is new?", user_id=ALICE)
        [mentioned] = await world.replies(GROUP, 1)
        world.fake.push_text(GROUP, "and in Rust?", user_id=ALICE, reply_to_message_id=mentioned.message_id)
        helped = world.fake.push_text(GROUP, "/help@lookout_test_bot", user_id=ALICE)
        await world.replies(GROUP, 3)
        # What was not for the bot never reached the dispatcher: no turn (so no "typing…", no answer, no model
        # call) and no de-duplication mark, while the messages for the bot were marked as handled.
        inbound = InboundRepository(world.database)
        handled = {update: await inbound.seen_before("telegram", str(update)) for update in (chatter, other_bots)}
        handled |= {update: await inbound.seen_before("telegram", str(update)) for update in (asked, helped)}

    texts = [m.text or "" for m in world.fake.texts(GROUP)]
    assert texts[:2] == ["echo: what is new?", "echo: and in Rust?"]
    assert "/track" in texts[2]  # the help text
    assert len(texts) == 3 and len(script.requests) == 2
    assert handled == {chatter: False, other_bots: False, asked: True, helped: True}


async def test_a_button_press_round_trip(db_url: str, fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    def respond(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages[-1:] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart("Shall I? Press a button below.")])
        call = ToolCallPart("create_monitor", {"topic": "DeepSeek", "schedule": "daily at 08:00", "sources": ["hn"]})
        return ModelResponse(parts=[call])

    script = ScriptedModel(respond, repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.push_text(ALICE, "track DeepSeek every morning from hn")
        [question] = await world.replies(ALICE, 1)
        markup = question.reply_markup
        assert markup is not None, "the confirmation carries buttons"
        yes = markup["inline_keyboard"][0][0]
        chat = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert chat is not None and await MonitorRepository(world.database).list_for_chat(chat.id) == []

        update_id = world.fake.push_callback(question.message_id, yes["callback_data"])
        await world.replies(ALICE, 2)
        [monitor] = await MonitorRepository(world.database).list_for_chat(chat.id)

    assert update_id > 0 and monitor.topic == "DeepSeek"
    assert len(world.fake.answered_callbacks) == 1
    assert question.reply_markup in (None, {}, {"inline_keyboard": []})  # the pressed buttons were removed
    assert "DeepSeek" in (world.fake.texts(ALICE)[1].text or "")


async def test_a_failure_inside_the_conversation_gets_a_short_true_answer(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_said: str) -> str:
        raise RuntimeError("database password is hunter2 and the stack is deep")

    script = ScriptedModel(replying(broken), repeat_last=True)
    caplog.set_level(logging.ERROR)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.push_text(ALICE, "hello")
        [reply] = await world.replies(ALICE, 1)

    match = re.fullmatch(r"Something went wrong on my side \(error id ([0-9a-f]{6,})\)\. .+", reply.text or "")
    assert match is not None, reply.text
    assert "hunter2" not in (reply.text or "") and "RuntimeError" not in (reply.text or "")
    assert any(match[1] in record.getMessage() and record.exc_info for record in caplog.records)


async def test_polling_survives_a_bot_api_outage(db_url: str, fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model) as world:
        world.fake.fail("getUpdates", ApiError(502, "Bad Gateway"), times=2)
        await eventually(lambda: world.fake.rejected >= 2, what="two failed polls")
        world.fake.push_text(ALICE, "still there?")
        [reply] = await world.replies(ALICE, 1)
        assert await world.frontend.healthy()

    assert reply.text == "echo: still there?"


class _Unreachable:
    async def respond(self, turn: object) -> list[object]:
        raise AssertionError("nothing is dispatched when the token is wrong")


async def test_a_wrong_token_fails_start_and_leaves_nothing_running(db_url: str) -> None:
    database = Database(db_url)
    with running_fake_telegram() as fake:
        options = TelegramOptions(token="999999:not-the-token-of-this-bot-at-all", api_url=fake.url)
        sender = TelegramSender(build_bot(options.token, api_url=fake.url))
        frontend = TelegramFrontend(options, Dispatcher(database, _Unreachable(), AccessPolicy()), sender)  # type: ignore[arg-type]
        with pytest.raises(InvalidToken):
            await frontend.start()
        assert not await frontend.healthy()
        await frontend.stop()  # harmless after a failed start
    await database.dispose()
    assert fake.calls_to("getUpdates") == []


async def test_forged_updates_are_dropped_with_one_line_and_the_next_message_is_answered(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/help")
        [helped] = await world.replies(ALICE, 1)
        # a person whose first name is empty, and a button press that names no sender
        nameless = world.fake.text_update(ALICE, "/usage")
        nameless["message"]["from"]["first_name"] = ""
        world.fake.push_update(nameless)
        pressed = world.fake.callback_update(helped.message_id, "confirm:abc")
        del pressed["callback_query"]["from"]
        forged_press = world.fake.push_update(pressed)
        world.fake.push_text(ALICE, "/timezone")
        _, usage, timezone = await world.replies(ALICE, 3)

    # the nameless person is still a person: answered like anyone; the senderless press is dropped
    assert "Model usage of this chat" in strip_tags(usage.text or "")
    assert "This chat's timezone is" in strip_tags(timezone.text or "")
    dropped = [record for record in caplog.records if "dropped" in record.getMessage()]
    assert [record.getMessage() for record in dropped] == [
        f"update {forged_press}: a button press with no sender; dropped"
    ]
    assert not [record for record in caplog.records if record.exc_info], "no traceback anywhere"
