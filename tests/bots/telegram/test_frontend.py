"""The Telegram frontend end to end: the real python-telegram-bot Application, dispatcher and conversation,
against the fake Bot API (long polling unless said otherwise)."""

from __future__ import annotations

import asyncio
import html
import itertools
import logging
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
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
from monitors import ChatService
from storage import AdvisoryLocks, Database, upgrade_database
from storage.repositories import ChatRepository, InboundRepository, MonitorRepository, SubscriptionRepository
from tests.bots.slack_world import T0
from tests.bots.telegram_html import utf16_units
from tests.bots.telegram_world import WEBHOOK_SECRET, TelegramWorld, telegram_world
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import ApiError, running_fake_telegram
from tests.kit import NameLookups, ScriptedModel, eventually, eventually_async, replying
from tests.private_postgres import postgres_binaries, private_postgres

ALICE = 4201
GROUP = -100777


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


async def test_a_webhook_update_waits_unacknowledged_for_the_database_and_is_refused_if_the_process_stops(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # The conversations' shared locks live in a PostgreSQL nobody can reach: the message cannot take its place in
    # its conversation's order. The request waits for the database, unanswered (acknowledged with 200 first, as
    # before, the update was dropped); when the process stops meanwhile it gets 503 and Telegram sends it again.
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
                request = asyncio.create_task(client.post("/telegram/webhook", json=update, headers=headers))
                await asyncio.sleep(1.5)  # three tries of the lock
                waited = not request.done()
                await world.frontend.stop()
                refused = await request
    finally:
        await unreachable.dispose()
    assert waited
    assert refused.status_code == 503
    assert world.fake.texts(ALICE) == [] and script.requests == []  # nothing answered, nothing asked


class _LocksAwayAWhile:
    """Shared locks whose database refuses connections for the first `failures` tries, then is always there."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.refused = 0

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        if self.refused < self.failures:
            self.refused += 1
            raise ConnectionRefusedError(111, f"Connect call failed for {name}")
        yield


def _offsets(world: TelegramWorld) -> list[int]:
    return [int(call.params.get("offset") or 0) for call in world.fake.calls_to("getUpdates")]


async def test_a_polled_update_is_confirmed_only_once_stored_and_answered_once_across_a_polling_handover(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # The database is away when the update is read: it waits, and every getUpdates meanwhile asks from it on (it
    # is not confirmed, so Telegram would give it to the next poller). Polling stops and starts again meanwhile
    # (another process led for a while): the update, read again, is not handled twice.
    locks = _LocksAwayAWhile(failures=4)
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    async with telegram_world(
        db_url=db_url, sources=fake_server, out_dir=tmp_path, model=script.model, shared_locks=locks
    ) as world:
        await world.frontend.start_polling()
        update_id = world.fake.push_text(ALICE, "while the database is away")
        await eventually(lambda: locks.refused >= 2, what="two refused tries")
        await world.frontend.stop_polling()
        await world.frontend.start_polling()
        await eventually(lambda: _offsets(world).count(update_id) >= 2, what="the update asked for again")
        waiting = _offsets(world)
        [reply] = await world.replies(ALICE, 1)
        await eventually(lambda: max(_offsets(world)) > update_id, what="the update confirmed")
        await asyncio.sleep(1.5)  # a second answer would have arrived by now

    assert locks.refused == 4
    assert max(waiting) == update_id  # never confirmed while it waited
    assert reply.text == "echo: while the database is away"
    assert len(world.fake.texts(ALICE)) == 1 and len(script.requests) == 1


async def test_a_message_waits_for_a_restarted_database_and_its_own_mark_does_not_make_it_a_duplicate(
    fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # A real PostgreSQL server of the test's own, stopped when the update arrives and started 2 s later. The
    # update's de-duplication mark is already stored with the time this turn began (as when the mark committed and
    # then the connection died): the retry recognises its own mark and answers; a mark of another time would
    # have been a duplicate.
    if postgres_binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True)
    with private_postgres() as server:
        await upgrade_database(server.url)
        async with telegram_world(
            db_url=server.url, sources=fake_server, out_dir=tmp_path, model=script.model
        ) as world:
            update = world.fake.text_update(ALICE, "are you there?")
            assert not await InboundRepository(world.database).seen_before("telegram", str(update["update_id"]), now=T0)
            await asyncio.to_thread(server.stop)
            world.fake.push_update(update)
            await asyncio.sleep(2)
            unanswered = world.fake.texts(ALICE) == []
            await asyncio.to_thread(server.start)
            [reply] = await world.replies(ALICE, 1)
            await asyncio.sleep(1)
    assert unanswered
    assert reply.text == "echo: are you there?" and len(world.fake.texts(ALICE)) == 1


async def test_a_turn_whose_database_went_away_while_the_model_thought_waits_for_it_and_answers(
    fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # The server stops while the model is answering and comes back 3 s later: the turn's last write (memory and
    # usage) waits for it instead of failing, so the person gets the answer, not "something went wrong".
    if postgres_binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    script = ScriptedModel(replying(lambda said: f"echo: {said}"), repeat_last=True, seconds=1.0)
    with private_postgres() as server:
        await upgrade_database(server.url)
        world_at = telegram_world(db_url=server.url, sources=fake_server, out_dir=tmp_path, model=script.model)
        async with world_at as world:
            world.fake.push_text(ALICE, "think about it")
            await eventually(lambda: len(script.requests) == 1, what="the model to be asked")
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(3)
            await asyncio.to_thread(server.start)
            [reply] = await world.replies(ALICE, 1)
    assert reply.text == "echo: think about it"


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
        frontend = TelegramFrontend(options, Dispatcher(ChatService(database), _Unreachable(), AccessPolicy()), sender)  # type: ignore[arg-type]
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


async def test_a_document_is_read_up_to_the_import_limit_whatever_size_telegram_reports(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path, no_internet_lookups: NameLookups
) -> None:
    # the import checks each feed's host before offering it; here, as on a machine without a network, none resolves
    no_internet_lookups.expected.update({"blog.guyskk.com", "cdc.tencent.com", "www.rologo.com"})
    opml = (Path(__file__).parents[2] / "monitors" / "payloads" / "inoreader.xml").read_bytes()
    padded = opml.replace(b"<head>", b"<head>" + b" " * 400_000)  # 400 KB, the feeds at the end: many chunks
    huge = b"<opml>" + b" " * 30_000_000
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        whole = world.fake.document_update(ALICE, "feeds.opml", padded, caption="/import as design", chunk_size=16_384)
        world.fake.push_update(whole)
        [offer] = await world.replies(ALICE, 1)
        # getFile and the update claim 600 bytes; the file endpoint streams 30 MB.
        lying = world.fake.document_update(
            ALICE, "huge.opml", huge, caption="/import", reported_size=600, chunk_size=65_536
        )
        world.fake.push_update(lying)
        [_, refused] = await world.replies(ALICE, 2)
        huge_id = lying["message"]["document"]["file_id"]
        await eventually(lambda: huge_id in world.fake.served_bytes, what="the download's end")

    assert (offer.text or "").startswith("From feeds.opml:"), offer.text
    assert "“design”" in (offer.text or "")
    assert world.fake.served_bytes[whole["message"]["document"]["file_id"]] == len(padded)
    assert "huge.opml is over the 1 MB limit for files" in (refused.text or ""), refused.text
    assert world.fake.served_bytes[huge_id] < 12_000_000  # the limit plus what socket buffers hold, not 30 MB


async def test_an_alert_reaches_the_chat_as_a_message_of_its_own(
    db_url: str, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily at 08:30 from hn")
        await world.replies(ALICE, 1)
        world.fake.push_text(ALICE, "/alert 1 when open weights are out")
        await world.replies(ALICE, 2)
        world.fake.push_text(ALICE, "/digest 1")
        await world.replies(ALICE, 1, kind="document")

        def alerts() -> list[str]:
            return [m.text or "" for m in world.fake.texts(ALICE) if (m.text or "").startswith("🔔")]

        await eventually(lambda: len(alerts()) == 1, what="the alert")
        world.fake.push_text(ALICE, "/digest 1")  # the same stories again: nothing new, no second alert
        await eventually(
            lambda: any("nothing new" in (m.text or "") for m in world.fake.texts(ALICE)), what="the second run"
        )
        await world.worker.run_once()  # anything the second run queued is sent

    [alert] = alerts()
    assert alert.startswith("🔔 <b>Alert #1</b> — DeepSeek: when open weights are out (monitor #1)")
    assert '<a href="https://api-docs.deepseek.com/news/news261120' in alert and "DeepSeek-V4: open weights" in alert
