"""The sharing commands through `Conversation.respond` with the real chat agent settling answers: /share, /browse
(buttons that carry /subscribe), /subscribe, /unsubscribe, /transfer, /track's offer, /briefing, /deliver,
/export monitors and /import (a document, or a path in the terminal), and who may do what."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.access import AccessPolicy
from agent.messages import IncomingFile
from bots.telegram.render import markdown_to_telegram_html
from storage import Database, DeliveryMode
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository
from tests.agent.commands.router_world import CHAT, OTHER_CHAT, RouterWorld, open_world
from tests.fakes.hostile_xml import MARKER, hostile_document
from tests.fakes.http_server import FakeHTTPServer

PAYLOADS = Path(__file__).resolve().parents[2] / "monitors" / "payloads"
THIRD_CHAT = "3003"


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path, real_chat_agent=True) as opened:
        yield opened


async def test_share_browse_press_subscribe_and_monitors_shows_owned_apart(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn")
    refused = await world.say("/share 1", chat=OTHER_CHAT)
    shared = await world.say("/share 1")

    browsed = await world.say("/browse", chat=OTHER_CHAT)
    (reply,) = browsed.replies
    (button,) = reply.buttons
    pressed = await world.say(button.label, chat=OTHER_CHAT, callback_data=button.callback_data)
    listed_there = await world.say("/monitors", chat=OTHER_CHAT)
    listed_here = await world.say("/monitors")

    assert refused.text.startswith("There is no monitor #1 in this chat")
    assert shared.text.startswith("**#1 DeepSeek** is shared: other chats find it with `/browse`")
    assert "**#1 DeepSeek** — every day at 08:00 (UTC)" in reply.text and "1 subscriber" in reply.text
    assert (button.label, button.callback_data) == ("Subscribe #1", "/subscribe 1")
    assert pressed.text.startswith("This chat now receives **#1 DeepSeek**")
    assert "**Subscribed from other chats** (1)" in listed_there.text
    assert "**Owned by this chat**" not in listed_there.text
    assert "**Owned by this chat** (1)" in listed_here.text and "· shared · 1 other chat subscribed" in listed_here.text
    again = await world.say("/browse", chat=OTHER_CHAT)
    assert again.replies[0].buttons == () and "✓ this chat receives it" in again.text


async def test_unshare_counts_the_chats_that_keep_it_from_any_chat(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)
    by_owner = await world.say("/unshare 1")
    await world.say("/share 1")
    # an admin in a third chat, which does not receive it: both the owner and the subscriber keep it
    by_admin = await world.say("/unshare 1", chat=THIRD_CHAT, is_admin=True)

    assert by_owner.text.endswith("The 1 chat already subscribed keep it.")
    assert by_admin.text.endswith("The 2 chats already subscribed keep it."), by_admin.text


async def test_unsubscribe_and_transfer(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)
    await ChatRepository(world.database).update((await world.chat(OTHER_CHAT)).id, title="Research team")

    own = await world.say("/unsubscribe 1")
    listed = await world.say("/transfer 1")
    unknown = await world.say("/transfer 1 Marketing")
    handed = await world.say("/transfer 1 research team")
    left = await world.say("/unsubscribe 1")

    assert own.text.startswith("This chat owns monitor #1: `/untrack 1` deletes it")
    assert f"- `telegram:{OTHER_CHAT}` Research team" in listed.text
    assert unknown.text.startswith("I cannot tell which chat you mean: no subscriber of it is called that.")
    assert handed.text.startswith("**#1 DeepSeek** now belongs to Research team, who was told.")
    assert left.text.startswith("This chat no longer receives **#1 DeepSeek**")
    (notice,) = await world.deliver()
    assert notice.chat.external_id == OTHER_CHAT and "You now own monitor #1" in notice.text
    [monitor] = await MonitorRepository(world.database).list_all()
    assert monitor.owner_chat_id == (await world.chat(OTHER_CHAT)).id


async def test_track_offers_the_shared_monitor_and_yes_subscribes(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn,news")
    await world.say("/share 1")

    offered = await world.say("/track deepseek every 6 hours from hn", chat=OTHER_CHAT)
    answered = await world.say("yes", chat=OTHER_CHAT)

    (reply,) = offered.replies
    assert reply.text.startswith("A shared monitor already follows this: **#1 DeepSeek** — every day at 08:00 (UTC)")
    assert "it runs every day at 08:00 (UTC) (you asked for every 6 hours); it also searches news." in reply.text
    assert "reply **yes** for the first or **no** to create your own monitor “deepseek” instead" in reply.text
    assert [button.label for button in reply.buttons] == ["Subscribe to #1", "Create my own"]
    assert answered.text.startswith("This chat now receives **#1 DeepSeek**")
    assert len(await MonitorRepository(world.database).list_all()) == 1


async def test_track_offer_declined_creates_the_own_monitor(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")

    offered = await world.say("/track DeepSeek from hn", chat=OTHER_CHAT)
    create_button = offered.replies[0].buttons[1]
    declined = await world.say(create_button.label, chat=OTHER_CHAT, callback_data=create_button.callback_data)

    assert offered.text.endswith("(open for 10 minutes).") and "It does exactly what you asked." in offered.text
    assert declined.text.startswith("Created monitor **#2 DeepSeek**")
    assert len(await MonitorRepository(world.database).list_all()) == 2


async def test_a_subscriber_pause_is_its_own_and_the_owner_still_gets_digests(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)

    paused = await world.say("/pause 1", chat=OTHER_CHAT)
    summary = await world.services.monitors.runs.run_monitor(1, world.clock())
    delivered = await world.deliver()

    assert "paused for this chat only" in paused.text
    assert summary is not None and summary.deliveries == 1
    assert [sent.chat.external_id for sent in delivered] == [CHAT]
    assert "your delivery: ⏸ paused" in (await world.say("/monitors", chat=OTHER_CHAT)).text


async def test_briefing_and_deliver(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/track Mistral from hn")

    none_yet = await world.say("/briefing")
    too_early = await world.say("/deliver 1 briefing")
    bad = await world.say("/briefing every 5 minutes")
    set_it = await world.say("/briefing daily at 08:00")
    kept = await world.say("/deliver 2 now")
    shown = await world.say("/briefing")
    listed = await world.say("/monitors")
    off = await world.say("/briefing off")

    assert none_yet.text.startswith("This chat has no briefing")
    assert too_early.text.startswith("This chat has no briefing yet; set one first")
    assert bad.text.endswith("Usage: /briefing <schedule>|off|to <url>")
    assert set_it.text.startswith("Briefing set: every day at 08:00 (UTC); next 2026-11-21 08:00 UTC. It covers 2")
    assert kept.text == "**#2 Mistral** now comes here after each run, even when this chat has a briefing."
    assert shown.text.startswith("This chat's briefing: every day at 08:00 (UTC)")
    assert "your delivery: in the briefing" in listed.text and "kept out of the briefing" in listed.text
    assert off.text.startswith("Briefing off")
    subscription = await SubscriptionRepository(world.database).get(2, (await world.chat()).id)
    assert subscription is not None and subscription.delivery is DeliveryMode.NOW


async def test_a_chat_outside_the_allowlists_can_neither_browse_nor_subscribe(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # the person may talk to the bot (ALLOWED_USERS), but the group they write in is not allowed
    policy = AccessPolicy(allowed_users=["7"], allowed_chats=[CHAT])
    async with open_world(database, fake_server, tmp_path, real_chat_agent=True, access=policy) as world:
        await world.say("/track DeepSeek from hn")
        await world.say("/share 1")
        browsed = await world.say("/browse", chat="-100555", is_private=False)
        subscribed = await world.say("/subscribe 1", chat="-100555", is_private=False)
        offered = await world.say("/track DeepSeek from hn", chat="-100555", is_private=False)
        in_private = await world.say("/subscribe 1", chat="7")

    assert browsed.text.startswith("This chat is not on this Lookout's allowlist")
    assert "(-100555)" in subscribed.text and subscribed.text.startswith("This chat is not on this Lookout's")
    assert offered.text.startswith("Tracking **DeepSeek** as monitor #2.")  # no offer of a shared monitor
    assert in_private.text.startswith("This chat now receives **#1 DeepSeek**")  # the allowed person's own chat


async def test_export_monitors_then_import_the_json_sent_as_a_document(world: RouterWorld) -> None:
    await world.say("/track DeepSeek weekdays at 07:30 from hn,rss:https://feeds.example.org/ai.xml")
    await world.say("/track Mistral every 6 hours from news")

    exported = await world.say("/export monitors")
    (reply,) = exported.replies
    document = reply.attachments[0].path.read_bytes()
    offered = await world.say(
        "/import", chat=OTHER_CHAT, file=IncomingFile(filename="monitors.json", size=len(document), content=document)
    )
    created = await world.say("yes", chat=OTHER_CHAT)

    assert reply.text.startswith("Exported 2 monitors of this chat: JSON with every setting, and OPML with their 1")
    assert [a.filename for a in reply.attachments] == ["lookout-monitors-2026-11-20.json",
                                                        "lookout-monitors-2026-11-20.opml"]  # fmt: skip
    assert offered.text.startswith("From monitors.json:\n\n**2 monitors to create:**")
    assert [button.label for button in offered.replies[0].buttons] == ["Create 2", "Cancel"]
    assert created.text.startswith("Created 2 monitors:\n- #3 DeepSeek\n- #4 Mistral")
    theirs = await MonitorRepository(world.database).list_owned((await world.chat(OTHER_CHAT)).id)
    assert [(m.topic, m.schedule, m.sources) for m in theirs] == [
        ("DeepSeek", "weekdays at 07:30 in UTC", ("hn", "rss:https://feeds.example.org/ai.xml")),
        ("Mistral", "every 6 hours in UTC", ("news",)),
    ]


async def test_an_imported_files_own_names_show_as_written(world: RouterWorld) -> None:
    opml = (
        b'<?xml version="1.0"?><opml version="2.0"><head><title>x</title></head><body>'
        b'<outline text="AI_news *daily*"><outline type="rss" text="Feed_one" xmlUrl="https://feeds.example.org/ai.xml"/>'
        b'</outline><outline text="old_stuff"><outline type="rss" text="gopher_feed_" xmlUrl="ftp://x.example/f"/>'
        b"</outline></body></opml>"
    )
    offered = await world.say("/import", file=IncomingFile(filename="feeds.opml", size=len(opml), content=opml))
    created = await world.say("yes")

    html = markdown_to_telegram_html(offered.text)
    assert "“AI_news *daily*”" in html and "“gopher_feed_”" in html and "<i>" not in html, html
    assert "“AI\\_news \\*daily\\*”" in offered.text
    assert created.text.startswith("Created 1 monitor:\n- #")
    assert "AI_news *daily*" in markdown_to_telegram_html(created.text)


async def test_a_subscribers_alerts_on_monitors_it_receives_are_exported_and_attached_again_where_received(
    world: RouterWorld,
) -> None:
    third = "3003"
    await world.say("/track DeepSeek daily at 08:00 from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)
    await world.say("/alert 1 when it releases a new model", chat=OTHER_CHAT)

    exported = await world.say("/export monitors", chat=OTHER_CHAT)
    (reply,) = exported.replies
    document = reply.attachments[0].path.read_bytes()

    def sent() -> IncomingFile:
        return IncomingFile(filename="monitors.json", size=len(document), content=document)

    offered = await world.say("/import", chat=third, file=sent())
    not_received = await world.say("yes", chat=third)
    await world.say("/subscribe 1", chat=third)
    await world.say("/import", chat=third, file=sent())
    attached = await world.say("yes", chat=third)
    await world.say("/import", chat=third, file=sent())
    twice = await world.say("yes", chat=third)
    moved = json.loads(document)
    moved["received"][0]["topic"] = "Mistral"  # another Lookout's monitor #1
    elsewhere = json.dumps(moved).encode()
    moved_file = IncomingFile(filename="m.json", size=len(elsewhere), content=elsewhere)
    await world.say("/import", chat="4004", file=moved_file)
    not_here = await world.say("yes", chat="4004")

    assert "its 1 alert on monitors it only receives are in the JSON too" in reply.text
    assert json.loads(document)["received"] == [
        {"monitor_id": 1, "topic": "DeepSeek",
         "alerts": [{"topic": "DeepSeek", "condition": "it releases a new model"}]}
    ]  # fmt: skip
    assert "**1 alert on monitors received, not owned:**\n- monitor #1 “DeepSeek”: when it releases a new model" in (
        offered.text
    )
    assert (
        "- not created: alert “it releases a new model” on monitor #1 “DeepSeek”: this chat does not receive that "
        "monitor; `/subscribe 1`, then `/alert 1 when …` sets it again" in not_received.text
    )
    assert "- attached alert “it releases a new model” on monitor #1 “DeepSeek”" in attached.text
    assert "attached" not in twice.text and "not created" not in twice.text  # the same alert is not made twice
    assert "that monitor is not on this Lookout" in not_here.text
    theirs = await world.services.monitors.alerts.list((await world.chat(third)).id)
    assert [(alert.monitor_id, alert.condition) for alert in theirs] == [(1, "it releases a new model")]


async def test_import_a_path_in_the_terminal_and_cancel(world: RouterWorld, tmp_path: Path) -> None:
    path = tmp_path / "inoreader.xml"
    path.write_bytes((PAYLOADS / "inoreader.xml").read_bytes())

    offered = await world.say(f"/import {path}", platform="terminal", chat="terminal")
    cancelled = await world.say("no", platform="terminal", chat="terminal")
    with_topic = await world.say(f"/import {path} as design", platform="terminal", chat="terminal")
    missing = await world.say(f"/import {tmp_path / 'nope.opml'}", platform="terminal", chat="terminal")
    elsewhere = await world.say(f"/import {path}")

    assert (
        "**1 monitor to create:**\n- “设计” — daily at 09:00 (the default) · rss:http://cdc.tencent.com/feed/"
        in offered.text
    )
    assert "**Not imported (1):**\n- feed “Guyskk的博客”: it is in no folder" in offered.text
    assert cancelled.text == "Cancelled; nothing was changed."
    assert "- “design” — daily at 09:00 (the default)" in with_topic.text
    assert missing.text.startswith("I cannot read ") and "No such file" in missing.text
    assert elsewhere.text.startswith("Send the file as a document with the caption `/import`")
    assert await MonitorRepository(world.database).list_all() == []


async def test_bad_documents_are_refused_with_the_reason(world: RouterWorld) -> None:
    garbage = await world.say("/import", file=IncomingFile(filename="x.json", size=5, content=b"{oops"))
    too_big = await world.say(
        "/import", file=IncomingFile(filename="huge.opml", size=5_000_000, problem="huge.opml is over the 1 MB limit.")
    )
    wrong = json.dumps({"format": "lookout.monitors", "version": 1, "monitors": [{"topic": ""}]}).encode()
    nothing = await world.say("/import", file=IncomingFile(filename="empty.json", size=len(wrong), content=wrong))

    assert (
        garbage.text == "Nothing was imported from x.json: That JSON is not a Lookout monitors export (not valid JSON)."
    )
    assert too_big.text == "huge.opml is over the 1 MB limit."
    assert markdown_to_telegram_html(nothing.text).startswith(
        "Nothing to import from empty.json.\n\n<b>Not imported (1):</b>\n• #1 “”: topic:"
    )


async def test_terminal_import_of_hostile_files_and_a_named_pipe(world: RouterWorld, tmp_path: Path) -> None:
    laughs = tmp_path / "laughs.opml"
    laughs.write_bytes(hostile_document("billion_laughs", "opml"))
    pipe = tmp_path / "pipe.opml"
    os.mkfifo(pipe)

    def write_50_mb() -> None:
        try:
            with pipe.open("wb") as stream:
                for _ in range(50_000_000 // 65_536):
                    stream.write(b" " * 65_536)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write_50_mb)
    writer.start()
    refused = await world.say(f"/import {laughs}", platform="terminal", chat="terminal")
    piped = await world.say(f"/import {pipe} as design", platform="terminal", chat="terminal")
    writer.join(timeout=10)

    assert refused.text == (
        "Nothing was imported from laughs.opml: That OPML file was refused: this file defines XML entities, "
        "which Lookout does not expand."
    )
    assert piped.text == "pipe.opml is over the 1 MB import limit."
    assert MARKER not in refused.text and not writer.is_alive()
    assert await MonitorRepository(world.database).list_all() == []
