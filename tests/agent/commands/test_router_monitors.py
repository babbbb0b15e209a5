"""The monitor commands through `Conversation.respond`: /track, /monitors, /pause, /resume, /untrack, /digest."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import Database
from storage.repositories import ChatRepository, DeliveryRepository, MonitorRepository, RunRepository
from tests.agent.commands.router_world import OTHER_CHAT, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer, FakeResponse


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


async def test_track_monitors_pause_resume_untrack_round_trip(world: RouterWorld) -> None:
    await world.say("/timezone Europe/Berlin")

    tracked = await world.say("/track DeepSeek daily at 08:30 from hn,news")

    assert tracked.text.startswith("Tracking **DeepSeek** as monitor #1.")
    assert "Schedule: every day at 08:30 (Europe/Berlin)" in tracked.text
    # 13:00 UTC is 14:00 in Berlin: the next 08:30 is tomorrow, shown in Berlin time
    assert "Next run: 2026-11-21 08:30 CET" in tracked.text
    assert "Sources: hn, news" in tracked.text
    [stored] = await MonitorRepository(world.database).list_all()
    assert (stored.topic, stored.sources, stored.timezone) == ("DeepSeek", ("hn", "news"), "Europe/Berlin")
    assert stored.owner_chat_id == (await world.chat()).id

    listed = await world.say("/monitors")
    assert "**#1 DeepSeek** — every day at 08:30 (Europe/Berlin)" in listed.text
    assert "next 2026-11-21 08:30 CET · sources: hn, news" in listed.text
    assert "last run: never run yet" in listed.text

    paused = await world.say("/pause 1")
    assert paused.text == "Monitor #1 “DeepSeek” is paused; `/resume 1` starts it again."
    assert (await MonitorRepository(world.database).get(1)).paused  # type: ignore[union-attr]
    assert "⏸ paused" in (await world.say("/monitors")).text
    assert "was already paused" in (await world.say("/pause #1")).text

    resumed = await world.say("/resume 1")
    assert resumed.text == "Monitor #1 “DeepSeek” is running again; next run 2026-11-21 08:30 CET."
    assert "was not paused" in (await world.say("/resume 1")).text

    untracked = await world.say("/untrack 1")
    assert untracked.text == "Deleted monitor #1 “DeepSeek”; no more digests from it."
    assert await MonitorRepository(world.database).list_all() == []
    empty = await world.say("/monitors")
    assert empty.text.startswith("No monitors in this chat yet — try `/track ")
    assert world.free_text.replied == []  # every message was a command


async def test_track_defaults_quoted_topic_and_rss_sources(world: RouterWorld) -> None:
    plain = await world.say('/track "open source LLM" every 6 hours')
    feed = f"{world.server.url}/feeds/tech.xml"
    with_feed = await world.say(f"/track Rust embedded from rss:{feed}")

    assert "Tracking **open source LLM** as monitor #1." in plain.text
    assert "Schedule: every 6 hours" in plain.text
    assert "Sources: hn, news, arxiv, github, wikipedia, web" in plain.text  # the default mix
    assert "Schedule: every day at 09:00 (UTC)" in with_feed.text  # the default schedule
    assert f"Sources: rss:{feed}" in with_feed.text
    assert "Next run: 2026-11-21 09:00 UTC" in with_feed.text


async def test_the_deployment_timezone_applies_until_the_chat_sets_one(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with open_world(database, fake_server, tmp_path, default_timezone="Asia/Shanghai") as world:
        tracked = await world.say("/track DeepSeek daily at 08:30")
        shown = await world.say("/timezone")

    assert "every day at 08:30 (Asia/Shanghai)" in tracked.text
    assert "Next run: 2026-11-21 08:30 CST" in tracked.text
    assert shown.text.startswith("This chat's timezone is Asia/Shanghai (now 2026-11-20 21:00 CST).")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("/track", "Say what to track"),
        ("/track DeepSeek every 5 minutes", "too often"),
        ("/track DeepSeek daily at 25:00", "25:00"),
        ("/track DeepSeek from hn,nosuchsource", "Unknown source"),
        (
            "/track DeepSeek from rss:ftp://example.org/feed",
            '"rss:ftp://example.org/feed": rss: needs an http(s) feed URL',
        ),
        ('/track "DeepSeek" banana', "After the quoted topic"),
    ],
)
async def test_bad_track_arguments_answer_with_the_usage_and_create_nothing(
    world: RouterWorld, text: str, reason: str
) -> None:
    said = await world.say(text)

    [reply] = said.replies
    assert reason in reply.text
    assert "Usage: /track <topic> [schedule] [from <sources>]" in reply.text
    assert await MonitorRepository(world.database).list_all() == []


async def test_the_service_refusing_a_track_is_a_clear_message_with_the_usage(world: RouterWorld) -> None:
    """Arguments the parser accepts but the service refuses (a topic over 200 characters, a source that is off)."""
    long_topic = await world.say("/track " + "word " * 60)
    switched_off = await world.say("/track DeepSeek from openalex")

    # The reason first, as a sentence; then what did not happen; then the usage line (#9.25).
    assert long_topic.text.startswith("That topic is too long")
    assert switched_off.text.startswith("openalex is off: OpenAlex needs a (free) API key")
    for said in (long_topic, switched_off):
        assert "No monitor was created: " not in said.text
        assert said.text.endswith(". No monitor was created.\nUsage: /track <topic> [schedule] [from <sources>]")
    assert await MonitorRepository(world.database).list_all() == []


async def test_another_chat_cannot_see_or_touch_a_monitor(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:30 from hn")

    answers = {
        command: (await world.say(f"/{command} 1", chat=OTHER_CHAT)).text
        for command in ("pause", "resume", "untrack", "digest", "export")
    }
    listed = await world.say("/monitors", chat=OTHER_CHAT)

    for command, text in answers.items():
        assert text == "There is no monitor #1 in this chat; /monitors lists yours.", command
    assert listed.text.startswith("No monitors in this chat yet")
    [monitor] = await MonitorRepository(world.database).list_all()
    assert not monitor.paused
    assert await RunRepository(world.database).list_for_monitor(1) == []
    assert world.server.requests == []  # /digest collected nothing for the other chat


async def test_unknown_monitor_numbers_are_a_true_sentence(world: RouterWorld) -> None:
    for command in ("pause", "resume", "untrack", "digest", "export"):
        said = await world.say(f"/{command} 42")
        assert said.text == "There is no monitor #42 in this chat; /monitors lists yours.", command
        assert said.progress == []


async def test_admins_list_and_manage_every_chat(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/track Mistral from news", chat=OTHER_CHAT)

    refused = await world.say("/monitors all")
    everything = await world.say("/monitors all", is_admin=True)
    paused = await world.say("/pause 2", is_admin=True)

    assert refused.text.startswith("Only admins can list every chat's monitors")
    assert "**Every chat's monitors** (2)" in everything.text
    assert "**#1 DeepSeek**" in everything.text and "**#2 Mistral**" in everything.text
    assert paused.text.startswith("Monitor #2 “Mistral” is paused")
    assert (await MonitorRepository(world.database).get(2)).paused  # type: ignore[union-attr]


async def test_digest_runs_now_and_queues_the_digest_with_files_for_this_chat(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:30 from hn,news")
    other = await ChatRepository(world.database).get_or_create("telegram", OTHER_CHAT)

    said = await world.say("/digest 1")

    [reply] = said.replies
    assert reply.text.startswith("Monitor #1 ran: ")
    assert reply.text.endswith("new — the digest follows.")
    lines = [update.text for update in said.progress]
    assert lines[0] == "running monitor #1 “DeepSeek”…"
    assert any("collecting 2 sources…" in line and " items" in line for line in lines), lines
    assert any("critiquing the top" in line for line in lines), lines
    assert said.progress[-1].done and said.progress[-1].text == "done — the digest follows"
    assert all(not update.done for update in said.progress[:-1])
    assert {"/hn/search_by_date", "/news/search"} <= {r.path for r in world.server.requests} | {"/hn/search"}

    # the digest is in the outbox for this chat only; the platform's sender delivers it
    chat = await world.chat()
    [run] = await RunRepository(world.database).list_for_monitor(1)
    rows = await DeliveryRepository(world.database).list_for_run(run.id)
    assert [row.chat_id for row in rows] == [chat.id] and other.id not in [row.chat_id for row in rows]
    [sent] = await world.deliver()
    assert sent.chat.external_id == "1001"
    assert sent.text.startswith("**DeepSeek**") and "monitor #1" in sent.text.splitlines()[0]
    assert "DeepSeek" in sent.text and "[1]" in sent.text
    assert [attachment.kind for attachment in sent.message.attachments] == ["document", "image"]
    csv_file = sent.message.attachments[0]
    assert csv_file.filename.endswith(".csv") and csv_file.path.is_file()
    assert "DeepSeek-V4: open weights, 1M context" in csv_file.path.read_text(encoding="utf-8-sig")
    monitors = (await world.say("/monitors")).text
    assert "last run: ok: " in monitors and "new item" in monitors


async def test_a_digest_whose_sources_all_fail_says_so(world: RouterWorld) -> None:
    world.server.route("GET", "/hn/search", FakeResponse(status=500, body="down"))
    world.server.route("GET", "/hn/search_by_date", FakeResponse(status=500, body="down"))
    await world.say("/track DeepSeek from hn")

    said = await world.say("/digest 1")

    assert said.text == "Monitor #1 failed: every source failed. Nothing was sent.\n- hn: HTTP 500"
    assert said.progress[-1].done and said.progress[-1].text == "failed"
    assert await world.deliver() == []


async def test_a_subscribed_chat_sees_the_monitor_pauses_only_its_own_delivery(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    subscriber = await world.chat(OTHER_CHAT)
    await world.services.monitors.subscribe(subscriber.id, 1)

    listed = await world.say("/monitors", chat=OTHER_CHAT)
    paused = await world.say("/pause 1", chat=OTHER_CHAT)
    resumed = await world.say("/resume 1", chat=OTHER_CHAT)
    left = await world.say("/untrack 1", chat=OTHER_CHAT)
    after = await world.say("/monitors", chat=OTHER_CHAT)
    again = await world.say("/untrack 1", chat=OTHER_CHAT)

    assert "**Subscribed from other chats** (1)" in listed.text and "**#1 DeepSeek**" in listed.text
    assert paused.text.startswith("Delivery of **#1 DeepSeek** is paused for this chat only;")
    assert resumed.text == "Delivery of **#1 DeepSeek** to this chat resumes."
    assert left.text == "This chat no longer receives monitor #1; it belongs to another chat, which keeps it."
    assert after.text.startswith("No monitors in this chat yet")
    assert again.text == "There is no monitor #1 in this chat; /monitors lists yours."
    [monitor] = await MonitorRepository(world.database).list_all()
    assert not monitor.paused  # the owner's monitor is untouched
    assert "**#1 DeepSeek**" in (await world.say("/monitors")).text


async def test_quiet_shows_and_sets_what_an_empty_run_sends(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    subscriber = await world.chat(OTHER_CHAT)
    await world.services.monitors.subscribe(subscriber.id, 1)

    shown = await world.say("/quiet 1")
    loud = await world.say("/quiet 1 off")
    refused = await world.say("/quiet 1 on", chat=OTHER_CHAT)
    listed = await world.say("/monitors")

    assert shown.text.startswith("Monitor #1 “DeepSeek”: a run that finds nothing new sends nothing")
    assert loud.text.startswith("Monitor #1 “DeepSeek”: a run that finds nothing new sends a short “nothing new” note")
    assert not (await MonitorRepository(world.database).get(1)).quiet  # type: ignore[union-attr]
    assert "belongs to another chat" in refused.text
    assert "**#1 DeepSeek** — every day at 09:00 (UTC) · notes when nothing is new" in listed.text


async def test_a_private_feed_is_refused_at_track_naming_the_setting(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    from bots.terminal.render import markdown_to_plain

    async with open_world(database, fake_server, tmp_path, allow_private_urls=False) as world:
        feed = f"{fake_server.url}/feeds/tech.xml"

        said = await world.say(f"/track DeepSeek daily from rss:{feed}")

        shown = markdown_to_plain(said.text)  # what a person reads
        assert shown.startswith(
            f"Lookout will not fetch rss {feed.removeprefix('http://')}: private address refused "
            "(allow with ALLOW_PRIVATE_URLS=true). No monitor was created."
        )
        assert await MonitorRepository(world.database).list_all() == []
        assert fake_server.received("/feeds/tech.xml") == [], "refused before any fetch"


async def test_a_topic_is_shown_as_typed_on_every_platform(world: RouterWorld) -> None:
    """Markdown marks in a person's words are their words (#9.2): `__init__` stays `__init__`, not bold "init"."""
    from bots.markdown import Styled, parse_markdown
    from bots.terminal.render import markdown_to_plain

    tracked = await world.say("/track __init__ internals daily from hn")
    bold = await world.say("/track <b>bold</b> *stars* daily from hn")
    listed = await world.say("/monitors")

    assert markdown_to_plain(tracked.text).startswith("Tracking __init__ internals as monitor #1.")
    assert markdown_to_plain(bold.text).startswith("Tracking <b>bold</b> *stars* as monitor #2.")
    assert "#1 __init__ internals — " in markdown_to_plain(listed.text)
    [title] = [block for block in parse_markdown(tracked.text)[:1]]
    assert not any(isinstance(node, Styled) and node.style == "i" for node in title.inlines)  # type: ignore[union-attr]
    topics = [monitor.topic for monitor in await MonitorRepository(world.database).list_all()]
    assert topics == ["__init__ internals", "<b>bold</b> *stars*"]  # stored as typed
