"""One Telegram `Bot` per process, built by the composition root with python-telegram-bot's rate limiter, carries
answers, status edits and digests alike; the fake Bot API enforces Telegram's limits and never has to say 429."""

from __future__ import annotations

import asyncio
import gc
import socket
from datetime import UTC, datetime
from pathlib import Path

from telegram.ext import AIORateLimiter, ExtBot

from app.frontends import platform_senders
from app.service import run_service
from app.settings import load_settings
from bots.telegram import TelegramLimits
from kernel import ProgressUpdate, Reply
from monitors.delivery import NOTICE_KIND
from storage import Database, RunOutcome, upgrade_database
from storage.repositories import ChatRepository, DeliveryRepository, RunRepository
from tests.fakes.telegram import RateLimit, running_fake_telegram
from tests.kit import eventually

GROUP = -100777


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_one_lookout_run_has_exactly_one_telegram_bot_for_answers_and_digests(tmp_path: Path) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'lookout.db'}"
    await upgrade_database(db_url)
    database = Database(db_url)
    with running_fake_telegram() as fake:
        settings = load_settings(
            _env_file=None,
            data_dir=tmp_path,
            database_url=db_url,
            http_port=_free_port(),
            telegram_bot_token=fake.token,
            telegram_api_url=fake.url,
            llm_model="",
            delivery_poll_seconds=0.2,
        )
        stop = asyncio.Event()
        service = asyncio.create_task(run_service(settings, stop=stop))
        try:
            await eventually(lambda: bool(fake.calls_to("getUpdates")), what="polling")
            gc.collect()  # what earlier tests left behind is not this process's wiring
            bots = [bot for bot in gc.get_objects() if isinstance(bot, ExtBot) and bot.base_url.startswith(fake.url)]
            assert len(bots) == 1  # not one for the frontend and another for digests
            limiter = bots[0].rate_limiter
            assert isinstance(limiter, AIORateLimiter)
            # Telegram's flood limits from FACTS: ~30 messages/s overall, 20 a minute per group.
            assert (limiter._base_limiter.max_rate, limiter._base_limiter.time_period) == (30, 1)  # type: ignore[union-attr]
            assert (limiter._group_max_rate, limiter._group_time_period) == (20, 60)

            fake.push_text(4242, "/help")  # an answer, through the frontend
            chat = await ChatRepository(database).get_or_create("telegram", "4243")
            run = await RunRepository(database).open_search_run(chat_id=chat.id, query="notice")
            await DeliveryRepository(database).complete_run(
                run.id,
                outcome=RunOutcome(
                    finished_at=datetime.now(UTC), stats={"kind": NOTICE_KIND, "text": "A digest-like notice."}
                ),
            )  # a delivery, through the worker
            await eventually(lambda: bool(fake.texts(4242)) and bool(fake.texts(4243)), what="answer and delivery")
        finally:
            stop.set()
            await asyncio.wait_for(service, timeout=60)
            await database.dispose()
    assert len(fake.calls_to("getMe")) == 1  # one Bot, initialized once
    assert "/track" in (fake.texts(4242)[0].text or "")
    assert fake.texts(4243)[0].text == "A digest-like notice."


async def test_60_messages_to_one_group_are_paced_at_20_per_period_with_no_429(tmp_path: Path) -> None:
    # Telegram's group limit over 3 s instead of a minute, at the limiter and at the fake alike, so the pacing
    # shows in seconds; the overall 30/s is the real one. The fake forgives a quarter second of scheduling
    # jitter between the client's clock and its own (a loaded machine delays some sends and bunches them up).
    period = 3.0
    limit = RateLimit(
        per_second=30, burst=30, per_chat_per_second=None, group_messages=20, group_period=period, tolerance=0.25
    )
    with running_fake_telegram(rate_limit=limit) as fake:
        settings = load_settings(
            _env_file=None, data_dir=tmp_path, telegram_bot_token=fake.token, telegram_api_url=fake.url
        )
        senders = platform_senders(settings, telegram_limits=TelegramLimits(group_period=period))
        telegram = senders.telegram
        assert telegram is not None and set(senders.by_platform()) == {"telegram"}
        group = await _group_chat(tmp_path)

        async def answer(n: int) -> None:  # what the frontend does with a reply
            await telegram.send_replies(str(GROUP), [Reply(text=f"answer {n}")], events=_NoEvents())

        async def status(n: int) -> None:  # a status line: its first update posts the message
            await telegram.status_line(str(GROUP))(ProgressUpdate(text=f"status {n}"))

        async def digest(n: int) -> None:  # what the delivery worker does with a digest
            for part in telegram.parts(Reply(text=f"**digest {n}**\n\nNews.", purpose="digest")):
                await telegram.send_part(group, part)

        try:
            await asyncio.gather(*(work(n) for n in range(20) for work in (answer, status, digest)))
        finally:
            await senders.close()

    sent = fake.sent(GROUP)
    assert len(sent) == 60 and fake.throttled == 0 and fake.rejected == 0
    assert {m.text.split()[0] for m in sent if m.text} == {"answer", "⏳", "<b>digest"}
    # Paced, not bursted: 20 may go at once, each further one waits for a token (period/20 s).
    arrival = sorted(m.at for m in sent)
    assert arrival[-1] - arrival[0] >= (60 - 20) * period / 20 * 0.9


async def _group_chat(tmp_path: Path):  # type: ignore[no-untyped-def]
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'group.db'}"
    await upgrade_database(db_url)
    database = Database(db_url)
    try:
        return await ChatRepository(database).get_or_create("telegram", str(GROUP))
    finally:
        await database.dispose()


class _NoEvents:
    async def chat_gone(self, platform: str, external_id: str, *, reason: str) -> None:
        raise AssertionError("the group is reachable")

    async def chat_moved(self, platform: str, old_external_id: str, new_external_id: str) -> None:
        raise AssertionError("the group did not move")
