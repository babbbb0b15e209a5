"""Telegram's flood limits through slots in the database (`SharedRateLimiter`), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from bots.telegram import SharedRateLimiter, TelegramLimits
from storage import Database
from storage.repositories import RateSlotRepository

OVERALL = "telegram:t:overall"


async def test_a_call_takes_its_chats_and_the_overall_slot_and_a_throttled_chat_takes_no_overall_slot(
    database: Database,
) -> None:
    slots = RateSlotRepository(database)
    # 60 messages a minute for the token (one a second), one a minute for a private chat (no burst).
    limiter = SharedRateLimiter(slots, token_key="t", limits=TelegramLimits(overall=60.0, period=60.0, private_burst=1))
    sent: list[str] = []

    async def send(text: str) -> bool:
        sent.append(text)
        return True

    async def call(chat_id: int, text: str) -> None:
        await limiter.process_request(send, (text,), {}, "sendMessage", {"chat_id": chat_id}, None)

    await call(5, "first")
    assert sent == ["first"]
    throttled = asyncio.create_task(call(5, "second"))  # chat 5's next slot is a minute away
    try:
        await asyncio.sleep(0.3)
        assert sent == ["first"] and not throttled.done()  # it waits for its chat's slot ...
        # ... holding no overall slot meanwhile: the token's next slot is the one after "first" alone (within a
        # second), not one more interval on. The first call had taken the overall slot as well as its chat's.
        assert 0.0 < await slots.reserve(OVERALL, interval=1.0) <= 1.0
        assert 59.0 < await slots.reserve("telegram:t:chat:5", interval=60.0) <= 120.0
    finally:
        throttled.cancel()
    await call(-100, "to a group")  # a group's slot is free: it goes
    assert sent == ["first", "to a group"]
