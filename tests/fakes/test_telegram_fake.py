"""The fake Telegram Bot API answers python-telegram-bot's real requests in the real format."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from telegram import Bot, BotCommand
from telegram.error import Forbidden, RetryAfter

from bots.telegram.api import retry_after_seconds
from tests.fakes.telegram import ApiError, FakeTelegram, RateLimit, running_fake_telegram


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as server:
        yield server


async def test_get_me_and_send_message_round_trip(fake: FakeTelegram) -> None:
    async with Bot(fake.token, base_url=fake.api_url, base_file_url=fake.file_url) as bot:
        me = await bot.get_me()
        sent = await bot.send_message(42, "<b>hi</b> &amp; bye", parse_mode="HTML")
        await bot.set_my_commands([BotCommand("track", "Track a topic")])

    assert (me.username, me.is_bot) == ("lookout_test_bot", True)
    assert sent.chat.id == 42 and sent.text == "<b>hi</b> &amp; bye"
    [message] = fake.texts(42)
    assert (message.text, message.parse_mode, message.message_id) == ("<b>hi</b> &amp; bye", "HTML", sent.message_id)
    assert fake.commands == [{"command": "track", "description": "Track a topic"}]


async def test_get_updates_serves_queued_updates_and_honours_the_offset(fake: FakeTelegram) -> None:
    first = fake.push_text(7, "/start")
    fake.push_text(7, "hello")
    async with Bot(fake.token, base_url=fake.api_url) as bot:
        updates = await bot.get_updates(timeout=0)
        confirmed = await bot.get_updates(offset=first + 1, timeout=0)
        drained = await bot.get_updates(offset=confirmed[-1].update_id + 1, timeout=1)

    assert [u.message.text for u in updates if u.message] == ["/start", "hello"]
    assert [u.message.text for u in confirmed if u.message] == ["hello"]
    assert drained == ()


async def test_scripted_errors_reach_the_client_as_telegram_errors(fake: FakeTelegram) -> None:
    fake.fail("sendMessage", ApiError.retry_after(7), chat_id=5)
    fake.fail("sendMessage", ApiError.blocked(), chat_id=6)
    async with Bot(fake.token, base_url=fake.api_url) as bot:
        with pytest.raises(RetryAfter) as waited:
            await bot.send_message(5, "one")
        with pytest.raises(Forbidden, match="blocked"):
            await bot.send_message(6, "two")
        await bot.send_message(5, "three")  # the script is used up

    assert waited.value.retry_after == 7
    assert [m.text for m in fake.texts(5)] == ["three"] and fake.rejected == 2


async def test_uploads_keep_their_filename_and_bytes(fake: FakeTelegram) -> None:
    async with Bot(fake.token, base_url=fake.api_url) as bot:
        await bot.send_document(9, document=b"a,b\n1,2\n", filename="deepseek-2026-11-20.csv")

    [document] = fake.documents(9)
    assert (document.filename, document.content) == ("deepseek-2026-11-20.csv", b"a,b\n1,2\n")


async def test_the_rate_ceiling_answers_429_beyond_the_per_chat_burst() -> None:
    with running_fake_telegram(rate_limit=RateLimit(per_chat_per_second=0.01, per_chat_burst=2)) as fake:
        async with Bot(fake.token, base_url=fake.api_url) as bot:
            await bot.send_message(3, "a")
            await bot.send_message(3, "b")
            with pytest.raises(RetryAfter):
                await bot.send_message(3, "c")
            await bot.send_message(4, "another chat is not held back")

    assert [m.text for m in fake.texts(3)] == ["a", "b"] and fake.throttled == 1


async def test_a_group_gets_its_20_messages_per_period_and_a_429_with_retry_after_beyond() -> None:
    limit = RateLimit(per_chat_per_second=None, group_messages=20, group_period=60, tolerance=0)
    with running_fake_telegram(rate_limit=limit) as fake:
        async with Bot(fake.token, base_url=fake.api_url) as bot:
            for n in range(20):
                await bot.send_message(-100123, f"m{n}")
            with pytest.raises(RetryAfter) as refused:
                await bot.send_message(-100123, "one too many")
            await bot.send_message(-100456, "another group is not held back")
            await bot.send_message(42, "nor is a private chat")

    assert len(fake.texts(-100123)) == 20 and fake.throttled == 1
    assert retry_after_seconds(refused.value) == 3  # one token of a group comes back every 60/20 s


async def test_answers_can_be_slow_while_the_message_is_already_delivered() -> None:
    with running_fake_telegram(answer_delay=0.3) as fake:
        async with Bot(fake.token, base_url=fake.api_url) as bot:
            sending = asyncio.ensure_future(bot.send_message(7, "in flight"))
            for _ in range(100):
                if fake.texts(7):
                    break
                await asyncio.sleep(0.01)
            assert [m.text for m in fake.texts(7)] == ["in flight"] and not sending.done()
            await sending


async def test_edit_message_text_changes_the_recorded_message(fake: FakeTelegram) -> None:
    async with Bot(fake.token, base_url=fake.api_url) as bot:
        status = await bot.send_message(8, "collecting 6 sources…")
        await bot.send_chat_action(8, "typing")
        edited = await bot.edit_message_text("143 items, 52 after dedupe…", chat_id=8, message_id=status.message_id)

    assert edited.text == "143 items, 52 after dedupe…"  # type: ignore[union-attr]
    assert [m.text for m in fake.texts(8)] == ["143 items, 52 after dedupe…"]
    assert len(fake.edits) == 1 and fake.chat_actions == [("8", "typing")]
