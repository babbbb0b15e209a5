"""/feed through `Conversation.respond`: the owner and a subscriber get the same feed links, only the owner replaces
them (and the old ones stop working), a chat that does not receive the monitor gets nothing, and without PUBLIC_URL
the reply gives the paths and says to set it. `/feed briefing` gives each chat its own briefing's feed."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import Database
from tests.agent.commands.router_world import OTHER_CHAT, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer

PUBLIC = "https://lookout.example.org"
LINK = re.compile(r"`(?P<base>[^`]*)/feeds/(?P<token>[A-Za-z0-9_-]{32,})\.atom`")


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path, real_chat_agent=True, public_url=PUBLIC) as opened:
        yield opened


def token_in(text: str) -> str:
    match = LINK.search(text)
    assert match is not None, text
    assert match["base"] == PUBLIC
    assert f"{PUBLIC}/feeds/{match['token']}.json" in text
    return match["token"]


async def test_owner_and_subscriber_share_the_feed_and_only_the_owner_replaces_it(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn")
    feeds = world.services.monitors.feeds

    stranger = await world.say("/feed 1", chat=OTHER_CHAT)
    owner = await world.say("/feed 1")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)
    subscriber = await world.say("/feed 1", chat=OTHER_CHAT)
    refused = await world.say("/feed 1 new", chat=OTHER_CHAT)
    token = token_in(owner.text)
    rotated = await world.say("/feed 1 NEW")

    assert stranger.text.startswith("There is no monitor #1 in this chat") and "/feeds/" not in stranger.text
    assert owner.text.startswith("The feed of monitor #1 “DeepSeek”, one entry per digest:")
    assert "`/feed 1 new` replaces them." in owner.text and "PUBLIC_URL" not in owner.text
    assert token_in(subscriber.text) == token and "/feed 1 new" not in subscriber.text
    assert refused.text.startswith("Only the chat that owns monitor #1 can replace its feed links")
    assert "/feeds/" not in refused.text
    new_token = token_in(rotated.text)
    assert new_token != token and rotated.text.startswith("New feed links for monitor #1")
    assert await feeds.document(token, "atom", base_url=PUBLIC) is None
    assert await feeds.document(new_token, "atom", base_url=PUBLIC) is not None
    assert token_in((await world.say("/feed 1", chat=OTHER_CHAT)).text) == new_token


async def test_each_chat_has_its_own_briefing_feed(world: RouterWorld) -> None:
    before = await world.say("/feed briefing")
    await world.say("/briefing daily at 08:00")
    after = await world.say("/feed Briefing")
    rotated = await world.say("/feed briefing new")
    theirs = await world.say("/feed briefing", chat=OTHER_CHAT)
    token = token_in(before.text)

    assert before.text.startswith("The feed of this chat's briefing, one entry per briefing:")
    assert "This chat has no briefing yet" in before.text and "`/feed briefing new` replaces them." in before.text
    assert token_in(after.text) == token and "no briefing yet" not in after.text
    assert rotated.text.startswith("New feed links for this chat's briefing") and token_in(rotated.text) != token
    assert token_in(theirs.text) not in {token, token_in(rotated.text)}
    feeds = world.services.monitors.feeds
    assert await feeds.document(token, "atom", base_url=PUBLIC) is None
    document = await feeds.document(token_in(rotated.text), "json", base_url=PUBLIC)
    assert document is not None and b'"items": []' in document.body


async def test_bad_arguments_get_the_usage(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")

    missing = await world.say("/feed")
    extra = await world.say("/feed 1 old")
    too_many = await world.say("/feed 1 new now")

    assert "/feed needs a monitor number" in missing.text and "Usage: /feed <id>|briefing [new]" in missing.text
    assert "only `new` may follow" in extra.text and "/feeds/" not in extra.text
    assert "/feed needs a monitor number" in too_many.text


async def test_without_public_url_the_reply_gives_paths_and_says_to_set_it(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    async with open_world(database, fake_server, tmp_path) as world:
        await world.say("/track DeepSeek from hn")
        said = await world.say("/feed 1")

    match = re.search(r"Atom: `/feeds/([A-Za-z0-9_-]{32,})\.atom`", said.text)
    assert match is not None, said.text
    assert f"JSON Feed: `/feeds/{match[1]}.json`" in said.text
    assert "PUBLIC_URL is not set" in said.text
