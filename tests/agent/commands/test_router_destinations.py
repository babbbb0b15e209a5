"""The destination commands through `Conversation.respond`: /subscribe <id> to <url>, /briefing to <url>,
/destinations, /destination test|remove — who may do what, URLs masked in every reply, and the briefing copy
reaching a webhook through the outbox."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest

from agent.commands.destinations import NOT_SET_UP
from monitors import DeliveryWorker
from storage import Database
from storage.repositories import DestinationRepository, SubscriptionRepository
from tests.agent.commands.router_world import CHAT, OTHER_CHAT, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer, FakeResponse


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


def webhook(world: RouterWorld, path: str = "/hook/s3cr3t-path") -> str:
    world.server.route("POST", path, FakeResponse(status=200))
    return f"webhook+{world.server.url}{path}"


async def deliver(world: RouterWorld) -> None:
    destinations = world.services.monitors.destinations
    assert destinations is not None
    senders = {"telegram": world.sender, **destinations.senders.by_platform()}
    await DeliveryWorker(world.database, senders, clock=world.clock).run_once()


async def test_subscribe_to_a_webhook_list_test_and_remove_it(world: RouterWorld) -> None:
    url = webhook(world)
    await world.say("/track DeepSeek daily at 08:00 from hn")

    added = await world.say(f"/subscribe 1 to {url}")
    listed = await world.say("/destinations")
    tested = await world.say("/destination test 1")
    elsewhere = await world.say("/destination test 1", chat=OTHER_CHAT)
    removed = await world.say("/destination remove 1")
    after = await world.say("/destinations")

    label = f"webhook+http://127.0.0.1:{world.server.port}/…"
    assert added.text.startswith(f"The destination #1 `{label}`. Its signing secret, shown only now: `")
    assert "now receives monitor #1 “DeepSeek” after each run" in added.text
    assert f"- #1 webhook `{label}`: #1" in listed.text
    assert tested.text == f"Test sent to destination #1 `{label}`: it went through."
    assert elsewhere.text.startswith("There is no destination #1 added from this chat")
    assert removed.text.startswith(f"Destination #1 `{label}` removed")
    assert after.text.startswith("This chat has added no destination.")
    every_reply = " ".join(said.text for said in (added, listed, tested, elsewhere, removed, after))
    assert "s3cr3t-path" not in every_reply
    [post] = world.server.received("/hook/s3cr3t-path", "POST")
    assert json.loads(post.body)["event"] == "test" and post.headers["x-lookout-signature"].startswith("v1=")
    assert await DestinationRepository(world.database).all() == []


async def test_only_the_owner_or_an_admin_sends_a_monitor_to_a_destination(world: RouterWorld) -> None:
    url = webhook(world)
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)

    subscriber = await world.say(f"/subscribe 1 to {url}", chat=OTHER_CHAT)
    stranger = await world.say(f"/subscribe 1 to {url}", chat="3003")
    admin = await world.say(f"/subscribe 1 to {url}", chat="3003", is_admin=True)

    assert subscriber.text.startswith("Monitor #1 belongs to another chat; only its owner (or an admin)")
    assert stranger.text.startswith("There is no monitor #1")
    assert "now receives monitor #1" in admin.text
    [destination] = await DestinationRepository(world.database).all()
    assert [s.monitor_id for s in await SubscriptionRepository(world.database).for_chat(destination.chat_id)] == [1]


async def test_a_bad_url_gets_one_sentence_and_the_usage(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")

    malformed = await world.say("/subscribe 1 to mailto://")
    two_words = await world.say("/subscribe 1 to ntfy://a ntfy://b")
    stray = await world.say("/subscribe 1 at ntfy://topic")

    assert malformed.text.startswith("Apprise cannot read that mailto:// URL")
    assert malformed.text.endswith("Usage: /subscribe <id> [to <url>]")
    assert two_words.text.startswith("Give one destination URL after `to`")
    assert stray.text.startswith("Write /subscribe <id>, or /subscribe <id> to <destination URL>.")
    assert await DestinationRepository(world.database).all() == []


async def test_a_private_url_is_refused_without_allow_private_urls(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with open_world(database, fake_server, tmp_path, allow_private_urls=False) as world:
        await world.say("/track DeepSeek from hn")
        refused = await world.say(f"/subscribe 1 to webhook+{fake_server.url}/hook")
        assert refused.text.startswith("127.0.0.1 is a private or loopback address; destinations there need")
        assert await DestinationRepository(world.database).all() == []


async def test_the_briefing_reaches_a_destination_too(world: RouterWorld) -> None:
    url = webhook(world, "/briefing-hook")
    await world.say("/track DeepSeek daily at 07:00 from hn")
    await world.say("/briefing daily at 08:00")
    copied = await world.say(f"/briefing to {url}")
    assert "receives this chat's briefing too" in copied.text

    monitors = world.services.monitors
    chat = await world.chat(CHAT)
    world.clock.advance(minutes=1)  # the run finishes after the briefing was set
    await monitors.runs.run_monitor(1, world.clock())
    world.clock.advance(hours=19, minutes=14)  # 08:15 the next day: the briefing no longer waits for the 07:00 run
    queued = await monitors.briefings.run_due()
    assert [q.chat_id for q in queued] == [chat.id]

    await deliver(world)

    [post] = world.server.received("/briefing-hook", "POST")
    document = json.loads(post.body)
    assert document["event"] == "briefing" and "DeepSeek" in document["markdown"]
    assert post.headers["x-lookout-event"] == "briefing"
    schema = json.loads((Path(__file__).resolve().parents[3] / "docs/schemas/webhook-message.schema.json").read_text())
    jsonschema.validate(document, schema)
    assert any(sent.message.purpose == "briefing" for sent in world.sender.sent)  # the chat got it too


async def test_without_destinations_every_destination_command_says_so_and_stores_nothing(world: RouterWorld) -> None:
    # a process built without destination senders (not `lookout run`) has no DestinationService
    world.services.monitors.destinations = None
    url = webhook(world)
    await world.say("/track DeepSeek daily at 08:00 from hn")

    answers = [
        await world.say(text)
        for text in (f"/subscribe 1 to {url}", f"/briefing to {url}", "/destinations", "/destination test 1")
    ]

    assert [answer.text for answer in answers] == [NOT_SET_UP] * 4
    assert await DestinationRepository(world.database).all() == []
