"""Answers, the status line and platform errors through TelegramSender's real `Bot` against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from telegram.ext import ExtBot

from agent.access import AccessPolicy
from bots.dispatcher import Dispatcher
from bots.telegram import TelegramLimits, TelegramSender, build_bot
from bots.telegram.typing_indicators import TypingIndicators
from kernel import Attachment, Backoff, Button, ProgressUpdate, Reply
from monitors import ChatService
from storage import Database
from storage.repositories import ChatRepository
from tests.bots.slack_world import copy_database, migrated_template
from tests.fakes.telegram import ApiError, FakeTelegram, running_fake_telegram
from tests.kit import eventually

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


class NoConversation:
    async def respond(self, turn: object) -> list[Reply]:
        raise AssertionError("no message is dispatched in these tests")


@pytest.fixture(scope="session")
def replies_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("replies-template"))


@pytest.fixture
async def database(tmp_path: Path, replies_db_template: Path) -> AsyncIterator[Database]:
    db = Database(copy_database(replies_db_template, tmp_path))
    yield db
    await db.dispose()


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[ExtBot[None]]:
    # No retries inside the rate limiter: these tests see how the sender handles each error itself.
    async with build_bot(fake.token, api_url=fake.url, limits=TelegramLimits(max_retries=0)) as telegram:
        yield telegram


@pytest.fixture
def dispatcher(database: Database) -> Dispatcher:
    return Dispatcher(ChatService(database), NoConversation(), AccessPolicy())


async def test_buttons_go_under_the_last_part_and_files_follow(
    fake: FakeTelegram, bot: ExtBot[None], dispatcher: Dispatcher, tmp_path: Path
) -> None:
    csv, png = tmp_path / "a.csv", tmp_path / "a.png"
    csv.write_bytes(b"title,url\n")
    png.write_bytes(PNG)
    reply = Reply(
        text="\n\n".join(f"Line {n} " + "x" * 300 for n in range(20)),
        attachments=(
            Attachment(path=csv, filename="deepseek-2026-11-20.csv", caption="All 12 items"),
            Attachment(path=png, filename="deepseek-2026-11-20.png", kind="image", caption="Items per day"),
        ),
        buttons=(Button(label="Yes, do it", callback_data="c:1"), Button(label="Cancel", callback_data="x:1")),
    )
    await TelegramSender(bot).send_replies("42", [reply, Reply(text="after")], events=dispatcher)

    sent = fake.sent(42)
    assert [m.kind for m in sent] == ["text", "text", "document", "photo", "text"]
    assert sent[0].reply_markup is None
    yes, cancel = {"text": "Yes, do it", "callback_data": "c:1"}, {"text": "Cancel", "callback_data": "x:1"}
    assert sent[1].reply_markup == {"inline_keyboard": [[yes, cancel]]}
    assert (sent[2].filename, sent[2].caption) == ("deepseek-2026-11-20.csv", "All 12 items")
    assert (sent[3].content, sent[3].caption) == (PNG, "Items per day")
    assert sent[4].text == "after"


async def test_an_unparsable_part_is_resent_as_plain_text(
    fake: FakeTelegram, bot: ExtBot[None], dispatcher: Dispatcher
) -> None:
    fake.fail("sendMessage", ApiError.cant_parse_entities())
    await TelegramSender(bot).send_replies("42", [Reply(text="**bold** & <b>")], events=dispatcher)
    [message] = fake.texts(42)
    assert (message.text, message.parse_mode) == ("bold & <b>", None)


async def test_network_errors_are_retried_with_backoff(
    fake: FakeTelegram, bot: ExtBot[None], dispatcher: Dispatcher
) -> None:
    fake.fail("sendMessage", ApiError(500, "Internal Server Error"), times=2)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    backoff = Backoff(attempts=5, base=0.5, jitter=False)
    await TelegramSender(bot, backoff=backoff, sleep=sleep).send_replies("42", [Reply(text="hello")], events=dispatcher)
    assert [m.text for m in fake.texts(42)] == ["hello"]
    assert waits == [0.5, 1.0]


async def test_429_waits_what_telegram_asks_and_gives_up_on_absurd_waits(
    fake: FakeTelegram, bot: ExtBot[None], dispatcher: Dispatcher
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    sender = TelegramSender(bot, backoff=Backoff(attempts=5, max_wait=60), sleep=sleep)
    fake.fail("sendMessage", ApiError.retry_after(7))
    await sender.send_replies("42", [Reply(text="one")], events=dispatcher)
    fake.fail("sendMessage", ApiError.retry_after(3600))
    await sender.send_replies("42", [Reply(text="two")], events=dispatcher)
    assert waits == [7.0]
    assert [m.text for m in fake.texts(42)] == ["one"]


async def test_a_migrated_group_moves_the_stored_chat_and_gets_the_rest(
    fake: FakeTelegram, bot: ExtBot[None], dispatcher: Dispatcher, database: Database
) -> None:
    chats = ChatRepository(database)
    stored = await chats.get_or_create("telegram", "-555", title="Team")
    fake.fail("sendMessage", ApiError.migrated(-100555), chat_id=-555)
    await TelegramSender(bot).send_replies("-555", [Reply(text="first"), Reply(text="second")], events=dispatcher)

    assert [m.text for m in fake.texts(-100555)] == ["first", "second"]
    moved = await chats.find("telegram", "-100555")
    assert moved is not None and moved.id == stored.id


async def test_progress_is_one_message_edited_in_place(fake: FakeTelegram, bot: ExtBot[None]) -> None:
    status = TelegramSender(bot).status_line("42", interval=0.05)
    for text in ["collecting 6 sources…", "collecting 6 sources…", "143 items", "52 after dedupe", "critiquing…"]:
        await status(ProgressUpdate(text=text))
    await status.close()

    [message] = fake.sent(42)
    assert message.text == "⏳ critiquing…"  # the latest state is what the message shows
    edits = [call.params["text"] for call in fake.calls_to("editMessageText")]
    assert edits[-1] == "⏳ critiquing…" and len(edits) < 4  # intermediate updates were folded together
    assert all(before != after for before, after in zip(["⏳ collecting 6 sources…", *edits], edits, strict=False))
    assert {call.params["message_id"] for call in fake.calls_to("editMessageText")} == {str(message.message_id)}


async def test_a_failing_progress_edit_is_not_an_error(fake: FakeTelegram, bot: ExtBot[None]) -> None:
    status = TelegramSender(bot).status_line("42", interval=0.01)
    await status(ProgressUpdate(text="one"))
    fake.fail("editMessageText", ApiError.retry_after(5))
    await status(ProgressUpdate(text="two"))
    await status.close()
    await status(ProgressUpdate(text="three"))
    await status.close()
    assert fake.sent(42)[0].text == "⏳ three"
    await status(ProgressUpdate(text="finished", done=True))
    assert fake.sent(42)[0].text == "✅ finished"  # the final "done" always shows


async def test_a_group_keeps_its_20_calls_a_minute_for_answers(fake: FakeTelegram, bot: ExtBot[None]) -> None:
    # The status line of a group is edited at most every 6 s, whatever interval is asked for…
    status = TelegramSender(bot).status_line("-100555", interval=0.01)
    await status(ProgressUpdate(text="one"))
    await asyncio.sleep(0.05)
    await status(ProgressUpdate(text="two"))
    await asyncio.sleep(0.3)
    assert fake.sent(-100555)[0].text == "⏳ one" and fake.calls_to("editMessageText") == []
    await status.close()  # …and the held line still shows before the answer
    assert fake.sent(-100555)[0].text == "⏳ two"

    # …and "typing…" is said once in a group, repeated in a private chat.
    typing = TypingIndicators(bot, every=0.02, after=0.0)
    async with typing.in_chat("-100555"), typing.in_chat("42"):
        await asyncio.sleep(0.3)
    assert fake.chat_actions.count(("-100555", "typing")) == 1
    assert fake.chat_actions.count(("42", "typing")) >= 2


async def test_an_answer_before_the_indicator_is_due_sends_no_typing(fake: FakeTelegram, bot: ExtBot[None]) -> None:
    typing = TypingIndicators(bot, after=3600.0)

    def typing_tasks() -> list[asyncio.Task[object]]:
        return [task for task in asyncio.all_tasks() if task.get_name() == "telegram typing"]

    async with typing.in_chat("42"), typing.in_chat("42"):  # two messages of one chat share one indicator
        assert typing_tasks() == []  # waiting costs a timer, not a task
    await asyncio.sleep(0.05)
    assert fake.chat_actions == []
    # and once the last message is done the chat starts afresh: a later slow message still shows "typing…"
    slow = TypingIndicators(bot, after=0.0)
    async with slow.in_chat("42"):
        await eventually(lambda: bool(fake.chat_actions), what="typing in a slow answer")
    assert fake.chat_actions == [("42", "typing")]
