"""Briefings: one message at the chat's time over every monitor it reads that way, assembled from stored runs, a
story told under two topics once, one catch-up after downtime, through the outbox."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta

from monitors.schedule import parse_schedule
from monitors.service import MonitorService
from sources.base import Item, SearchQuery
from storage.repositories import ChatRepository, DeliveryRepository, RunRepository
from tests.monitors.conftest import T0, World
from tests.research.fake_sources import RecordingSource, make_item

SHARED_STORY = "Open weights released for the new DeepSeek reasoning model"


def topic_source(name: str) -> RecordingSource:
    """Each topic has a story of its own; "DeepSeek" and "open models" also share one article (same URL)."""

    def answer(query: SearchQuery) -> list[Item]:
        text = query.text.lower()
        own = {"deepseek": "DeepSeek ships a faster tokenizer", "open": "Hugging Face adds licence filters to its hub",
               "mistral": "Mistral opens an office in Munich"}  # fmt: skip
        items = [
            make_item(name, f"{key}-own", title=title, text=title, points=50)
            for key, title in own.items()
            if key in text
        ]
        if "deepseek" in text or "open" in text:
            items.append(
                make_item(
                    name,
                    "shared",
                    title=SHARED_STORY,
                    text=SHARED_STORY,
                    points=80,
                    url="https://news.example.org/deepseek-open-weights?utm_source=feed",
                )
            )
        return items

    return RecordingSource(name, answer)


async def _briefing_at(world: World, service: MonitorService, chat_id: int, text: str) -> None:
    """Set the chat's briefing, then let a minute pass (what it covers starts now)."""
    await service.briefings.set_briefing(chat_id, parse_schedule(text, timezone="UTC", min_interval_seconds=900))
    world.clock.advance(minutes=1)


async def test_a_briefing_over_three_monitors_arrives_once_with_one_csv_and_one_chart(world: World) -> None:
    world.sources["hn"] = topic_source("hn")
    service = world.service()
    reader, other = world.chats[0], world.chats[1]
    await _briefing_at(world, service, reader.id, "daily at 14:00")
    deepseek = await service.create_monitor(reader.id, "DeepSeek", sources="hn")
    mistral = await service.create_monitor(reader.id, "Mistral", sources="hn")
    theirs = await service.create_monitor(other.id, "Open models", sources="hn")
    await service.sharing.share(theirs.id, chat_id=other.id)
    await service.sharing.subscribe(reader.id, theirs.id)

    summaries = [await service.runs.run_monitor(m.id, T0) for m in (deepseek, mistral, theirs)]
    before = await service.briefings.run_due()
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=T0.tzinfo))
    queued = await service.briefings.run_due()
    again = await service.briefings.run_due()
    await world.worker().run_once()

    # the runs went to the briefing, not one by one (the other chat owns "Open models" and gets it now)
    assert [s.deliveries for s in summaries if s is not None] == [0, 0, 1]
    assert before == [] and again == []
    assert [(q.chat_id, q.topics, q.with_news) for q in queued] == [(reader.id, 3, 3)]
    mine = [sent for sent in world.sender.sent if sent.chat.id == reader.id]
    assert len(mine) == 1
    message = mine[0].message
    assert message.text.startswith("**Your briefing · 2026-11-20 14:00 UTC**")
    for topic in ("**DeepSeek** · monitor #1", "**Mistral** · monitor #2", "**Open models** · monitor #3"):
        assert topic in message.text
    assert [a.kind for a in message.attachments] == ["document", "image"]
    assert [a.filename for a in message.attachments] == ["briefing-2026-11-20-1400.csv", "briefing-2026-11-20-1400.png"]
    with message.attachments[0].path.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {row["topic"] for row in rows} == {"DeepSeek", "Mistral", "Open models"}
    assert message.attachments[1].path.read_bytes().startswith(b"\x89PNG")
    # The chart's bars are split by topic, each item once: the story shared by DeepSeek and Open models is drawn
    # under DeepSeek only (a split by source would show one "hn" bar; a lost topic would be missing here).
    stored_briefing = await RunRepository(world.database).get(queued[0].run_id)
    assert stored_briefing is not None
    assert stored_briefing.stats["chart_topics"] == {"DeepSeek": 2, "Mistral": 1, "Open models": 1}
    assert sum(stored_briefing.stats["chart_topics"].values()) == len({row["url"] for row in rows})
    # assembled from stored runs: nothing was collected for it
    assert world.searches() == sum(len(s.queries) for s in world.sources.values())
    stored = await RunRepository(world.database).get(queued[0].run_id)
    assert stored is not None and stored.stats["kind"] == "briefing" and len(stored.stats["covers_runs"]) == 3
    chat = await ChatRepository(world.database).get(reader.id)
    assert chat is not None and chat.briefing_next_at == datetime(2026, 11, 21, 14, 0, tzinfo=T0.tzinfo)


async def test_a_story_reported_under_two_topics_appears_once(world: World) -> None:
    world.sources["hn"] = topic_source("hn")
    service = world.service()
    reader = world.chats[0]
    await _briefing_at(world, service, reader.id, "daily at 14:00")
    first = await service.create_monitor(reader.id, "DeepSeek", sources="hn")
    second = await service.create_monitor(reader.id, "Open models", sources="hn")
    for monitor in (first, second):
        await service.runs.run_monitor(monitor.id, T0)
    world.clock.set(datetime(2026, 11, 20, 14, 1, tzinfo=T0.tzinfo))

    await service.briefings.run_due()
    await world.worker().run_once()

    (sent,) = world.sender.sent
    text = sent.text
    body = text.split("**Sources**")[0]
    assert body.count(SHARED_STORY) == 1  # told under DeepSeek only
    assert "DeepSeek ships a faster tokenizer" in body and "Hugging Face adds licence filters to its hub" in body
    assert "_Also under Open models._" in body
    sources = text.split("**Sources**")[1]
    assert sources.count("news.example.org/deepseek-open-weights") == 1


async def test_downtime_over_two_briefing_times_gives_one_catch_up(world: World) -> None:
    service = world.service()
    reader = world.chats[0]
    await _briefing_at(world, service, reader.id, "daily at 14:00")
    monitor = await service.create_monitor(reader.id, "DeepSeek", sources="hn")
    await service.runs.run_monitor(monitor.id, T0)
    await service.runs.run_monitor(monitor.id, T0 + timedelta(days=1))
    world.clock.set(datetime(2026, 11, 22, 15, 0, tzinfo=T0.tzinfo))  # 14:00 on the 20th, 21st and 22nd passed

    queued = await service.briefings.run_due()
    later = await service.briefings.run_due()
    await world.worker().run_once()

    assert len(queued) == 1 and later == []
    (sent,) = world.sender.sent
    assert sent.text.startswith("**Your briefing · 2026-11-22 14:00 UTC**")  # the latest missed time
    chat = await ChatRepository(world.database).get(reader.id)
    assert chat is not None and chat.briefing_next_at == datetime(2026, 11, 23, 14, 0, tzinfo=T0.tzinfo)
    rows = await DeliveryRepository(world.database).list_for_run(queued[0].run_id)
    assert [row.chat_id for row in rows] == [reader.id]


async def test_a_briefing_waits_for_a_run_of_its_time_and_skips_what_digest_already_sent(world: World) -> None:
    service = world.service()
    reader = world.chats[0]
    monitor = await service.create_monitor(reader.id, "DeepSeek", schedule_text="daily at 14:00", sources="hn")
    await _briefing_at(world, service, reader.id, "daily at 14:00")
    world.clock.set(datetime(2026, 11, 20, 14, 0, 5, tzinfo=T0.tzinfo))

    waiting = await service.briefings.run_due()  # the monitor's 14:00 run has not happened yet
    await service.runs.run_monitor(monitor.id, datetime(2026, 11, 20, 14, 0, tzinfo=T0.tzinfo))
    ready = await service.briefings.run_due()

    assert waiting == [] and len(ready) == 1 and ready[0].with_news == 1


async def test_briefing_off_sends_digests_one_by_one_again(world: World) -> None:
    service = world.service()
    reader = world.chats[0]
    await _briefing_at(world, service, reader.id, "daily at 14:00")
    monitor = await service.create_monitor(reader.id, "DeepSeek", sources="hn")
    await service.briefings.set_briefing(reader.id, None)

    summary = await service.runs.run_monitor(monitor.id, T0)

    assert summary is not None and summary.deliveries == 1
    chat = await ChatRepository(world.database).get(reader.id)
    assert chat is not None and chat.briefing_schedule is None and chat.briefing_next_at is None
