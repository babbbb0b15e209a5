"""Monitors in and out: the JSON export round-trips exactly, OPML exports of real feed readers become monitors, and
bad files or entries are refused with reasons while good entries still go in."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import listparser
import pytest

from app.monitor_service import build_monitor_service
from monitors.portability import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_MONITORS,
    create_imported,
    export_monitors,
    plan_import,
    read_import_file,
    read_monitor_file,
)
from monitors.schedule import parse_schedule
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from sources.base import Source
from storage import ChatRecord, DeliveryMode
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository
from tests.fakes.hostile_xml import HOSTILE_NAMES, MARKER, hostile_document
from tests.monitors.conftest import T0, World

PAYLOADS = Path(__file__).parent / "payloads"


def any_feed_resolver(world: World):  # type: ignore[no-untyped-def]
    """hn and news from the fakes; any rss:<url> accepted (the feeds are never fetched here)."""

    def resolve(specs: list[str]) -> list[Source]:
        unknown = [s for s in specs if s not in world.sources and not s.startswith("rss:")]
        if unknown:
            raise ValueError(f"Unknown source(s): {', '.join(unknown)}.")
        return [world.sources.get(spec, world.sources["hn"]) for spec in specs]

    return resolve


def service_for(world: World) -> MonitorService:
    return build_monitor_service(
        world.database,
        resolve_sources=any_feed_resolver(world),
        light_model=None,
        heavy_model=None,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=world.clock,
    )


async def _fresh_chat(world: World, external_id: str) -> ChatRecord:
    return await ChatRepository(world.database).get_or_create("slack", external_id, title=f"#{external_id}")


async def test_export_then_import_then_export_again_gives_the_same_monitors(world: World) -> None:
    service = service_for(world)
    owner = world.chats[0]
    await service.create_monitor(
        owner.id,
        "DeepSeek",
        schedule_text="weekdays at 07:30",
        timezone="Europe/Berlin",
        sources=["hn", "rss:https://feeds.example.org/ai.xml?tag=llm,news"],
        extra_queries=["DeepSeek R2"],
        include_keywords=["model"],
        exclude_keywords=["stock"],
        lookback_hours=36,
        language="de",
        quiet=True,
    )
    second = await service.create_monitor(owner.id, "Mistral", schedule_text='cron "0 */6 * * *"', sources="news")
    await service.pause(second.id, chat_id=owner.id)
    await service.sharing.share(second.id, chat_id=owner.id)
    await service.briefings.set_briefing(owner.id, parse_schedule("daily at 08:00", timezone="UTC",
                                                                  min_interval_seconds=900))  # fmt: skip
    await SubscriptionRepository(world.database).update(second.id, owner.id, delivery=DeliveryMode.NOW)
    first = await export_monitors(service, owner, now=T0)

    target = await _fresh_chat(world, "C0IMPORT")
    plan = await plan_import(service, target, read_monitor_file(first.json))
    result = await create_imported(service, target.id, plan.entries)
    again = await export_monitors(service, target, now=T0)

    assert plan.refused == () and len(result.created) == 2 and result.failed == []
    assert json.loads(again.json)["monitors"] == json.loads(first.json)["monitors"]
    exported = json.loads(first.json)
    assert exported["format"] == "lookout.monitors" and exported["version"] == 1
    deepseek, mistral = exported["monitors"]
    assert deepseek == {
        "topic": "DeepSeek",
        "schedule": "weekdays at 07:30",
        "timezone": "Europe/Berlin",
        "sources": ["hn", "rss:https://feeds.example.org/ai.xml?tag=llm,news"],
        "extra_queries": ["DeepSeek R2"],
        "include_keywords": ["model"],
        "exclude_keywords": ["stock"],
        "lookback_hours": 36,
        "language": "de",
        "quiet": True,
        "paused": False,
        "shared": False,
        "delivery": "auto",
    }
    assert (mistral["paused"], mistral["shared"], mistral["delivery"]) == (True, True, "now")
    # the OPML carries the rss: feeds, one folder per monitor, and reads back as that monitor's feeds
    assert first.opml is not None and again.opml is not None
    parsed = listparser.parse(first.opml)
    assert [(feed.url, feed.categories) for feed in parsed.feeds] == [
        ("https://feeds.example.org/ai.xml?tag=llm,news", [["DeepSeek"]])
    ]
    from_opml = read_monitor_file(first.opml)
    assert [(e.topic, e.sources) for e in from_opml.entries] == [
        ("DeepSeek", ["rss:https://feeds.example.org/ai.xml?tag=llm,news"])
    ]


async def test_importing_the_same_file_twice_creates_nothing_twice(world: World) -> None:
    service = service_for(world)
    owner = world.chats[0]
    await service.create_monitor(owner.id, "DeepSeek", sources="hn")
    exported = await export_monitors(service, owner, now=T0)

    plan = await plan_import(service, owner, read_monitor_file(exported.json))

    assert plan.entries == ()
    assert [(r.label, r.reason) for r in plan.refused] == [("“DeepSeek”", "this chat already has that monitor")]


async def test_a_real_feedly_export_becomes_one_monitor_per_folder(world: World) -> None:
    service = service_for(world)
    target = await _fresh_chat(world, "C0FEEDLY")

    plan = await plan_import(service, target, read_monitor_file((PAYLOADS / "feedly.opml").read_bytes()))
    result = await create_imported(service, target.id, plan.entries)

    assert plan.kind == "opml" and plan.refused == ()
    topics = [entry.topic for entry in plan.entries]
    assert topics == ["news", "do it yourself", "business", "gaming", "data science", "essays", "politics", "tech",
                      "cinema", "books", "sports", "cooking", "design"]  # fmt: skip
    data_science = next(entry for entry in plan.entries if entry.topic == "data science")
    assert data_science.sources == [
        "rss:http://blog.kaggle.com/feed/",
        "rss:http://feeds.feedburner.com/kdnuggets-data-mining-analytics",
        "rss:http://blogs.wsj.com/numbersguy/feed/",
        "rss:http://www.fivethirtyeight.com/feeds/posts/default",
    ]
    assert len(result.created) == 13
    stored = await MonitorRepository(world.database).list_owned(target.id)
    assert sum(len(m.sources) for m in stored) == 36  # every feed of the file
    assert "13 monitors to create:" in plan.describe() and "“tech” — daily at 09:00 (the default)" in plan.describe()


async def test_an_inoreader_export_lists_feeds_outside_folders_with_the_reason(world: World) -> None:
    service = service_for(world)
    target = await _fresh_chat(world, "C0INO")
    content = (PAYLOADS / "inoreader.xml").read_bytes()

    by_folder = await plan_import(service, target, read_monitor_file(content))
    on_a_topic = await plan_import(service, target, read_monitor_file(content, topic="design systems"))

    assert [(e.topic, len(e.sources)) for e in by_folder.entries] == [("设计", 2)]
    (refused,) = by_folder.refused
    assert refused.label == "feed “Guyskk的博客”" and "in no folder" in refused.reason
    assert [(e.topic, len(e.sources)) for e in on_a_topic.entries] == [("design systems", 3)]
    assert on_a_topic.refused == ()


async def test_a_flat_stringer_export_needs_a_topic(world: World) -> None:
    service = service_for(world)
    target = await _fresh_chat(world, "C0STR")
    content = (PAYLOADS / "stringer.opml").read_bytes()

    plain = read_monitor_file(content)
    with_topic = await plan_import(service, target, read_monitor_file(content, topic="Rust"))

    assert plain.entries == () and len(plain.refused) == 5
    assert [e.topic for e in with_topic.entries] == ["Rust"]
    assert "rss:https://news.ycombinator.com/rss" in with_topic.entries[0].sources


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "neither a Lookout JSON export nor an OPML file"),
        (b"hello", "neither a Lookout JSON export nor an OPML file"),
        (b"{not json", "not valid JSON"),
        (b'{"format": "something.else", "version": 1, "monitors": []}', "not a Lookout monitors export"),
        (b'{"format": "lookout.monitors", "version": 2, "monitors": []}', "version"),
        (b"<html><body>not a list</body></html>", "not an OPML subscription list"),
        (
            b'<opml version="2.0"><body><outline text="caf\xe9" xmlUrl="https://x.example/f"/></body></opml>',
            "not UTF-8, and no other encoding declared",
        ),
    ],
)
def test_bad_files_are_refused_as_a_whole_with_a_reason(content: bytes, problem: str) -> None:
    plan = read_monitor_file(content)
    assert plan.entries == ()
    assert plan.problem is not None and problem in plan.problem


def test_limits_are_stated_and_kept() -> None:
    too_big = read_monitor_file(b"{" + b" " * MAX_IMPORT_BYTES + b"}")
    too_many = read_monitor_file(
        json.dumps(
            {
                "format": "lookout.monitors",
                "version": 1,
                "monitors": [{"topic": f"t{n}"} for n in range(MAX_IMPORT_MONITORS + 1)],
            }
        ).encode()
    )
    feeds = "".join(f'<outline type="rss" text="f{n}" xmlUrl="https://x.example/{n}.xml"/>' for n in range(51))
    crowded = read_monitor_file(
        f'<opml version="2.0"><body><outline text="All">{feeds}</outline></body></opml>'.encode()
    )

    assert too_big.problem == "The file is over the 1 MB limit."
    assert too_many.problem == f"The file holds {MAX_IMPORT_MONITORS + 1} monitors; at most 100 per import."
    assert crowded.entries == () and crowded.refused[0].reason == "51 feeds; a monitor searches at most 50"


async def test_invalid_entries_are_listed_with_reasons_and_valid_ones_still_imported(world: World) -> None:
    service = service_for(world)
    target = await _fresh_chat(world, "C0MIXED")
    document = {
        "format": "lookout.monitors",
        "version": 1,
        "monitors": [
            {"topic": "DeepSeek", "schedule": "daily at 08:00", "sources": ["hn"]},
            {"topic": "Too often", "schedule": "every 5 minutes"},
            {"topic": "Unknown source", "sources": ["myspace"]},
            {"topic": "Bad zone", "schedule": "daily at 08:00", "timezone": "Mars/Olympus"},
            {"topic": "Typo", "shedule": "daily"},
            "just a string",
            {"topic": "Mistral", "sources": ["news"], "quiet": True},
            {"topic": "Overflow", "feedback": [{"kind": "more", "terms": {"chips": 1e308}}]},
        ],
    }

    plan = await plan_import(service, target, read_monitor_file(json.dumps(document).encode()))
    result = await create_imported(service, target.id, plan.entries)

    assert [entry.topic for entry in plan.entries] == ["DeepSeek", "Mistral"]
    reasons = {refused.label: refused.reason for refused in plan.refused}
    assert "too often" in reasons["“Too often”"].lower()
    assert "myspace" in reasons["“Unknown source”"]
    assert "Mars/Olympus" in reasons["“Bad zone”"]
    assert reasons["#5 “Typo”"].startswith("shedule: Extra inputs are not permitted")
    assert "#6" in reasons
    assert reasons["#8 “Overflow”"].startswith("feedback.0.terms.chips: Input should be less than or equal to 1")
    assert [topic for _, topic in result.created] == ["DeepSeek", "Mistral"]
    description = plan.describe()
    assert "**2 monitors to create:**" in description and "**Not imported (6):**" in description


@pytest.mark.parametrize("encoding", ["utf-16", "iso-8859-1"])
def test_opml_in_another_declared_encoding_is_read(encoding: str) -> None:
    text = (
        f'<?xml version="1.0" encoding="{encoding}"?>\n<opml version="1.0"><body><outline text="Café">'
        '<outline type="rss" text="Le Monde" xmlUrl="https://www.lemonde.fr/rss/une.xml"/></outline></body></opml>'
    )
    plan = read_monitor_file(text.encode(encoding))
    assert [(e.topic, e.sources) for e in plan.entries] == [("Café", ["rss:https://www.lemonde.fr/rss/une.xml"])]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_opml_is_refused_by_name(name: str) -> None:
    plan = read_monitor_file(hostile_document(name, "opml"))

    assert plan.entries == () and plan.refused == ()
    assert plan.problem is not None and MARKER not in plan.problem
    expected = {
        "quadratic": "defines XML entities, which Lookout does not expand",
        "billion_laughs": "defines XML entities, which Lookout does not expand",
        "xxe": "declares an external XML entity, which Lookout does not fetch",
        "external_dtd": "uses XML entities it does not define (&send;)",
        "parameter_entity": "declares an external XML entity, which Lookout does not fetch",
        "deep_nesting": "nests elements over 200 deep",
        "50mb": "The file is over the 1 MB limit.",
    }[name]
    assert expected in plan.problem
    if name != "50mb":
        assert plan.problem.startswith("That OPML file was refused: this file ")


def test_a_named_pipe_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    pipe = tmp_path / "feeds.opml"
    os.mkfifo(pipe)
    written = [0]

    def write_50_mb() -> None:
        chunk = b" " * 65_536
        try:
            with pipe.open("wb") as stream:
                while written[0] < 50_000_000:
                    stream.write(chunk)
                    written[0] += len(chunk)
        except BrokenPipeError:
            pass  # the reader stopped: what this test wants

    writer = threading.Thread(target=write_50_mb)
    writer.start()
    with pytest.raises(ValueError, match=r"^feeds.opml is over the 1 MB import limit.$"):
        read_import_file(pipe)
    writer.join(timeout=10)

    assert pipe.stat().st_size == 0  # what the file system reports: the old check let it through
    assert not writer.is_alive() and written[0] < 3 * MAX_IMPORT_BYTES
