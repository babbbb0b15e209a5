"""TelegramSender (parts and their errors) through the real python-telegram-bot `Bot` against the fake Bot API,
and with the delivery worker."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.monitor_service import build_monitor_service
from bots.telegram import TelegramLimits, TelegramSender, build_bot
from kernel import Attachment, ChatGone, ChatMoved, Reply, RetryLater
from monitors import DeliveryWorker
from monitors.service import MonitorService
from research.pipeline import run_pipeline
from sources.base import SearchQuery
from storage import ChatRecord, Database, DeliveryStatus, upgrade_database
from storage.repositories import ChatRepository, DeliveryRepository, SubscriptionRepository
from tests.bots.telegram_html import utf16_units
from tests.fakes.telegram import ApiError, FakeTelegram, running_fake_telegram
from tests.kit import FakeClock
from tests.monitors.fakes import resolver
from tests.research.fake_sources import RecordingSource, make_item

T0 = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def chat(external_id: str) -> ChatRecord:
    return ChatRecord(
        id=1,
        platform="telegram",
        external_id=external_id,
        title=None,
        timezone="UTC",
        language=None,
        profile=None,
        active=True,
        created_at=T0,
    )


def long_digest() -> str:
    """About 6,000 characters of markdown with characters HTML must escape."""
    paragraphs = [
        f"{n}. **Development {n}**: Q&A with the team about <script>alert({n})</script> and what changed in the "
        f"release; analysts compare price & latency across providers, and the thread keeps going for a while."
        for n in range(1, 41)
    ]
    return "**DeepSeek weekly**\n\n" + "\n\n".join(paragraphs)


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as server:
        yield server


@pytest.fixture
async def sender(fake: FakeTelegram) -> AsyncIterator[TelegramSender]:
    # No retries inside the rate limiter: these tests see each error the way the worker does.
    bot = build_bot(fake.token, api_url=fake.url, limits=TelegramLimits(max_retries=0))
    async with TelegramSender(bot) as telegram:
        yield telegram


async def send_all(sender: TelegramSender, to: ChatRecord, message: Reply) -> None:
    """Every part in order, as the delivery worker sends them."""
    for part in sender.parts(message):
        await sender.send_part(to, part)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Attachment, Attachment]:
    csv_path, png_path = tmp_path / "items.csv", tmp_path / "chart.png"
    csv_path.write_bytes(b"title,url\nR2 lands,https://example.com/r2\n")
    png_path.write_bytes(PNG)
    return (
        Attachment(path=csv_path, filename="deepseek-2026-11-20.csv", kind="document"),
        Attachment(path=png_path, filename="deepseek-2026-11-20.png", kind="image", caption="DeepSeek · 2026-11-20"),
    )


async def test_a_long_digest_arrives_as_escaped_html_parts_within_the_limit(
    fake: FakeTelegram, sender: TelegramSender
) -> None:
    text = long_digest()
    assert len(text) > 4500
    await send_all(sender, chat("42"), Reply(text=text, run_id=1))

    parts = fake.texts(42)
    assert len(parts) >= 2
    assert all(part.parse_mode == "HTML" for part in parts)
    assert fake.calls_to("sendMessage")[0].json_param("link_preview_options") == {"is_disabled": True}
    assert all(utf16_units(html.unescape(_strip_tags(part.text or ""))) <= 4096 for part in parts)
    joined = "".join(part.text or "" for part in parts)
    assert "<script>" not in joined and "&lt;script&gt;alert(40)&lt;/script&gt;" in joined
    assert "Q&amp;A" in joined and "Q&A" not in joined
    assert "Development 1<" in parts[0].text and "Development 40<" in parts[-1].text  # type: ignore[operator]


async def test_the_csv_arrives_as_a_document_and_the_chart_as_a_photo(
    fake: FakeTelegram, sender: TelegramSender, files: tuple[Attachment, Attachment]
) -> None:
    await send_all(sender, chat("42"), Reply(text="**DeepSeek** · 2026-11-20\n\nNews.", attachments=files))

    assert [m.kind for m in fake.sent(42)] == ["text", "document", "photo"]
    [document], [photo] = fake.documents(42), fake.photos(42)
    assert (document.filename, document.content) == ("deepseek-2026-11-20.csv", files[0].path.read_bytes())
    assert photo.content == PNG and photo.caption == "DeepSeek · 2026-11-20"


async def test_429_becomes_retry_later_with_the_wait(fake: FakeTelegram, sender: TelegramSender) -> None:
    fake.fail("sendMessage", ApiError.retry_after(17))
    with pytest.raises(RetryLater) as raised:
        await send_all(sender, chat("42"), Reply(text="hello"))
    assert raised.value.retry_after == 17
    assert fake.texts(42) == []


async def test_403_blocked_becomes_chat_gone(fake: FakeTelegram, sender: TelegramSender) -> None:
    fake.fail("sendMessage", ApiError.blocked(), chat_id=42)
    with pytest.raises(ChatGone, match="blocked"):
        await send_all(sender, chat("42"), Reply(text="hello"))


async def test_a_migrated_group_becomes_chat_moved_with_the_new_id(fake: FakeTelegram, sender: TelegramSender) -> None:
    fake.fail("sendMessage", ApiError.migrated(-1001234567890), chat_id=-4242)
    with pytest.raises(ChatMoved) as raised:
        await send_all(sender, chat("-4242"), Reply(text="hello"))
    assert raised.value.new_external_id == "-1001234567890"


async def test_a_part_telegram_cannot_parse_is_resent_as_plain_text(fake: FakeTelegram, sender: TelegramSender) -> None:
    fake.fail("sendMessage", ApiError.cant_parse_entities())
    await send_all(sender, chat("42"), Reply(text="**Bold** & [a link](https://example.com/a)"))

    [plain] = fake.texts(42)
    assert plain.parse_mode is None
    assert plain.text == "Bold & a link (https://example.com/a)"


# ---- end to end: a monitor run queued in storage, delivered by the worker through the sender --------------


@pytest.fixture(scope="module")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("telegram-template") / "lookout.db"
    asyncio.run(upgrade_database(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture
async def database(tmp_path: Path, migrated_template: Path) -> AsyncIterator[Database]:
    path = tmp_path / "lookout.db"
    path.write_bytes(migrated_template.read_bytes())
    db = Database(f"sqlite+aiosqlite:///{path}")
    yield db
    await db.dispose()


def story_source(name: str) -> RecordingSource:
    def answer(query: SearchQuery) -> list:  # type: ignore[type-arg]
        return [
            make_item(name, f"{name}-{n}", title=f"DeepSeek story {n} <b>& more</b>", text="DeepSeek", points=10)
            for n in range(3)
        ]

    return RecordingSource(name, answer)


def monitor_service(database: Database, clock: FakeClock, tmp_path: Path) -> MonitorService:
    return build_monitor_service(
        database,
        resolve_sources=resolver({"hn": story_source("hn")}),
        light_model=None,
        heavy_model=None,
        out_dir=tmp_path / "exports",
        clock=clock,
        pipeline=run_pipeline,
    )


async def test_the_worker_delivers_a_monitor_run_and_a_blocked_chat_goes_inactive(
    fake: FakeTelegram, sender: TelegramSender, database: Database, tmp_path: Path
) -> None:
    clock = FakeClock(T0)
    chats = ChatRepository(database)
    owner = await chats.get_or_create("telegram", "100")
    blocker = await chats.get_or_create("telegram", "200")
    service = monitor_service(database, clock, tmp_path)
    monitor = await service.create_monitor(owner.id, "DeepSeek", sources="hn")
    await service.subscribe(blocker.id, monitor.id)
    summary = await service.runs.run_monitor(monitor.id, T0)
    assert summary is not None and summary.run_id is not None and summary.deliveries == 2
    fake.fail("sendMessage", ApiError.blocked(), chat_id=200)

    report = await DeliveryWorker(database, {"telegram": sender}, clock=clock).run_once()

    assert (report.sent, report.dead) == (1, 1)
    assert [m.kind for m in fake.sent(100)] == ["text", "document", "photo"]
    [text] = fake.texts(100)
    assert text.parse_mode == "HTML" and "DeepSeek" in (text.text or "") and "&lt;b&gt;" in (text.text or "")
    [document] = fake.documents(100)
    assert (document.filename or "").endswith(".csv") and b"DeepSeek story 0" in (document.content or b"")
    assert fake.sent(200) == []
    gone = await chats.get(blocker.id)
    assert gone is not None and not gone.active
    assert not any(s.active for s in await SubscriptionRepository(database).for_chat(blocker.id))
    statuses = {row.chat_id: row.status for row in await DeliveryRepository(database).list_for_run(summary.run_id)}
    assert statuses == {owner.id: DeliveryStatus.SENT, blocker.id: DeliveryStatus.DEAD}


async def test_a_retried_delivery_does_not_repeat_the_parts_confirmed_sent(
    fake: FakeTelegram, sender: TelegramSender, database: Database, tmp_path: Path
) -> None:
    clock = FakeClock(T0)
    owner = await ChatRepository(database).get_or_create("telegram", "100")
    service = monitor_service(database, clock, tmp_path)
    monitor = await service.create_monitor(owner.id, "DeepSeek", sources="hn")
    summary = await service.runs.run_monitor(monitor.id, T0)
    assert summary is not None and summary.run_id is not None
    fake.fail("sendDocument", ApiError.retry_after(1))
    worker = DeliveryWorker(database, {"telegram": sender}, clock=clock)

    assert (await worker.run_once()).retrying == 1
    [row] = await DeliveryRepository(database).list_for_run(summary.run_id)
    assert row.parts_sent == 1  # the text went; the stored count says so
    clock.advance(seconds=1)
    assert (await worker.run_once()).sent == 1

    assert [m.kind for m in fake.sent(100)] == ["text", "document", "photo"]  # nothing twice
    [photo] = fake.photos(100)
    assert (photo.caption or "").startswith("DeepSeek · 2026-11-20")


def _strip_tags(markup: str) -> str:
    return re.sub(r"<[^>]+>", "", markup)
