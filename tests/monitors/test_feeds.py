"""A monitor's feeds from its stored runs: feedparser reads every Atom entry with title, link and date; the JSON Feed
carries JSON Feed 1.1's required fields; hostile titles stay text; a new token revokes the old one. A chat's briefing
feed lists its stored briefings the same way."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import feedparser

from monitors import MonitorService
from monitors.schedule import parse_schedule
from sources.base import SearchQuery
from tests.monitors.conftest import T0, World
from tests.monitors.test_briefings import topic_source
from tests.research.fake_sources import RecordingSource, make_item

BASE = "https://lookout.example.org"
HOSTILE = '<script>alert("x")</script> &'


WORDS = (
    ("benchmark leaderboard", "chips export", "funding round"),
    ("lawsuit filed", "smartphone assistant", "translation model"),
    ("weather forecast", "protein folding", "robotics startup"),
)
"""Each round's stories in words of their own: the novelty filter clusters similar titles as one story."""


def rounds_source(rounds: list[int]) -> RecordingSource:
    """New stories each round (so every run has something new), the first of each with a hostile title."""

    def answer(query: SearchQuery) -> list[Any]:
        r = rounds[0]
        return [
            make_item(
                "hn",
                f"r{r}-{n}",
                title=f"{HOSTILE} {WORDS[r][n]}" if n == 0 else WORDS[r][n],
                text="DeepSeek",
                points=50 - n,
                hours_ago=0.5 - 24 * r,  # each round a day after the one before, as the runs are
            )
            for n in range(3)
        ]

    return RecordingSource("hn", answer)


async def two_digests(world: World) -> tuple[MonitorService, int]:
    rounds = [0]
    world.sources["hn"] = rounds_source(rounds)
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="daily at 09:00", sources="hn")
    first = await service.runs.run_monitor(view.id, T0)
    rounds[0] = 1
    world.clock.advance(days=1)
    second = await service.runs.run_monitor(view.id, T0 + timedelta(days=1))
    assert first is not None and second is not None
    assert first.status == second.status == "ok"
    return service, view.id


async def test_atom_feed_has_every_digest_with_title_link_date_and_escaped_content(world: World) -> None:
    service, monitor_id = await two_digests(world)
    token = await service.feeds.token(monitor_id)

    document = await service.feeds.document(token, "atom", base_url=BASE + "/")
    assert document is not None
    parsed = feedparser.parse(document.body)

    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    assert parsed.feed.title == "Lookout: DeepSeek"
    assert {link.href for link in parsed.feed.links} == {f"{BASE}/feeds/{token}.atom", f"{BASE}/feeds/{token}.json"}
    assert len(parsed.entries) == 2
    for entry in parsed.entries:
        assert entry.title and entry.link.startswith("https://example.com/hn/r") and entry.updated_parsed
        assert entry.id.startswith("tag:lookout.example.org,")
    newest, oldest = parsed.entries
    assert newest.updated_parsed > oldest.updated_parsed
    assert "smartphone assistant" in newest.content[0].value and "chips export" in oldest.content[0].value
    # The digest's sources are links; the hostile title is text in the HTML, not a tag.
    assert '<a href="https://example.com/hn/r1-1">smartphone assistant</a>' in newest.content[0].value
    assert '<a href="https://example.com/hn/r0-0">&lt;script&gt;' in oldest.content[0].value
    assert (
        b"<script" not in document.body and b"&amp;lt;script&amp;gt;" in document.body
    )  # escaped in HTML, then in XML
    assert document.media_type.startswith("application/atom+xml")
    assert document.last_modified == T0 + timedelta(days=1)


async def test_json_feed_has_json_feed_1_1_fields(world: World) -> None:
    service, monitor_id = await two_digests(world)
    token = await service.feeds.token(monitor_id)

    document = await service.feeds.document(token, "json", base_url=BASE)
    assert document is not None
    feed = json.loads(document.body)

    assert feed["version"] == "https://jsonfeed.org/version/1.1"
    assert feed["title"] == "Lookout: DeepSeek"
    assert feed["feed_url"] == f"{BASE}/feeds/{token}.json"
    assert len(feed["items"]) == 2
    assert len({item["id"] for item in feed["items"]}) == 2
    for item in feed["items"]:
        assert isinstance(item["id"], str) and item["content_html"] and item["title"]
        assert item["url"].startswith("https://example.com/hn/")
        assert item["date_published"].endswith("Z")
        assert "<script" not in item["content_html"]
    assert "&lt;script&gt;alert" in feed["items"][1]["content_html"]
    assert document.media_type.startswith("application/feed+json")


async def test_same_runs_same_etag_and_a_new_digest_changes_it(world: World) -> None:
    service, monitor_id = await two_digests(world)
    token = await service.feeds.token(monitor_id)
    before = await service.feeds.document(token, "atom", base_url=BASE)
    again = await service.feeds.document(token, "atom", base_url=BASE)
    assert before is not None and again is not None and before.etag == again.etag

    # a third run with new stories adds an entry, so the validator changes
    world.sources["hn"] = rounds_source([2])
    world.clock.advance(days=1)
    assert await service.runs.run_monitor(monitor_id, T0 + timedelta(days=2)) is not None
    after = await service.feeds.document(token, "atom", base_url=BASE)
    assert after is not None and after.etag != before.etag
    assert len(feedparser.parse(after.body).entries) == 3


async def test_a_new_token_revokes_the_old_and_asking_again_keeps_it(world: World) -> None:
    service, monitor_id = await two_digests(world)
    token = await service.feeds.token(monitor_id)
    assert await service.feeds.token(monitor_id) == token

    rotated = await service.feeds.token(monitor_id, rotate=True)

    assert rotated != token and len(rotated) >= 32
    assert await service.feeds.document(token, "atom", base_url=BASE) is None
    assert await service.feeds.document(token, "json", base_url=BASE) is None
    assert await service.feeds.document(rotated, "atom", base_url=BASE) is not None
    assert await service.feeds.document("not-a-token", "json", base_url=BASE) is None


async def test_a_monitor_without_digests_has_an_empty_valid_feed(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "Nothing yet", sources="hn")
    token = await service.feeds.token(view.id)

    document = await service.feeds.document(token, "atom", base_url=BASE)

    assert document is not None
    parsed = feedparser.parse(document.body)
    assert not parsed.bozo and parsed.entries == [] and parsed.feed.title == "Lookout: Nothing yet"


async def test_a_run_with_nothing_new_adds_no_entry(world: World) -> None:
    service, monitor_id = await two_digests(world)
    await service.update_monitor(monitor_id, chat_id=world.chats[0].id, quiet=False)  # the chat gets a note
    token = await service.feeds.token(monitor_id)
    before = await service.feeds.document(token, "atom", base_url=BASE)

    world.sources["hn"] = rounds_source([1])  # the same stories as the last run
    world.clock.advance(days=1)
    empty = await service.runs.run_monitor(monitor_id, T0 + timedelta(days=2))
    after = await service.feeds.document(token, "atom", base_url=BASE)

    assert empty is not None and empty.status == "empty" and empty.deliveries == 1
    assert before is not None and after is not None and after.body == before.body


async def test_a_chats_briefing_feed_lists_its_briefings(world: World) -> None:
    world.sources["hn"] = topic_source("hn")
    service = world.service()
    reader, other = world.chats[0], world.chats[1]
    await service.briefings.set_briefing(
        reader.id, parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
    )
    world.clock.advance(minutes=1)
    for topic in ("DeepSeek", "Mistral"):
        view = await service.create_monitor(reader.id, topic, sources="hn")
        assert await service.runs.run_monitor(view.id, T0) is not None
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))
    assert len(await service.briefings.run_due()) == 1

    token = await service.feeds.briefing_token(reader.id)
    document = await service.feeds.document(token, "atom", base_url=BASE)
    as_json = await service.feeds.document(token, "json", base_url=BASE)
    others = await service.feeds.briefing_token(other.id)
    empty = await service.feeds.document(others, "atom", base_url=BASE)

    assert document is not None and as_json is not None and empty is not None
    parsed = feedparser.parse(document.body)
    assert not parsed.bozo and parsed.feed.title == "Lookout briefing: chat 0"
    [entry] = parsed.entries
    assert entry.title == "Briefing of 2026-11-20 14:00 (2 topics)"
    assert entry.link == f"{BASE}/feeds/{token}.atom#briefing-3" and entry.updated_parsed
    assert "<strong>DeepSeek</strong>" in entry.content[0].value and "Mistral" in entry.content[0].value
    [item] = json.loads(as_json.body)["items"]
    assert item["title"] == entry.title and item["content_html"].strip() == entry.content[0].value.strip()
    assert feedparser.parse(empty.body).entries == []
    assert token not in {others, await service.feeds.token(1)}
    rotated = await service.feeds.briefing_token(reader.id, rotate=True)
    assert await service.feeds.document(token, "atom", base_url=BASE) is None
    assert await service.feeds.document(rotated, "atom", base_url=BASE) is not None


async def test_a_deleted_monitors_feed_is_gone(world: World) -> None:
    service, monitor_id = await two_digests(world)
    token = await service.feeds.token(monitor_id)

    await service.delete(monitor_id, chat_id=world.chats[0].id)
    # SQLite may give the next monitor the same id: the token went with the old one (cascade), so it finds nothing
    await service.create_monitor(world.chats[1].id, "Another chat's topic", sources="hn")

    assert await service.feeds.document(token, "atom", base_url=BASE) is None
    assert await service.feeds.document(token, "json", base_url=BASE) is None
