"""/filter through `Conversation.respond`: the grammar (each kind, quotes, clear), who may set rules (the owner and
any subscriber, each for its own chat), a hostile pattern refused in one sentence, /monitors and /help showing them,
and a filtered digest delivered to one chat while the other's stays whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.commands.catalogue import parse_command
from agent.commands.filters import FilterCommand
from agent.commands.grammar import CommandError
from research import ReaderRules
from storage import Database
from tests.agent.commands.router_world import OTHER_CHAT, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer

THIRD_CHAT = "3003"


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/filter 3", FilterCommand(monitor_id=3)),
        ("/filter #3 include ai, chips", FilterCommand(monitor_id=3, kind="include", values=("ai", "chips"))),
        (
            '/filter 3 exclude "celebrity chef", gossip',
            FilterCommand(monitor_id=3, kind="exclude", values=("celebrity chef", "gossip")),
        ),
        (r'/filter 3 regex "\bGPT-?5\b"', FilterCommand(monitor_id=3, kind="regex", values=(r"\bGPT-?5\b",))),
        (r"/filter 3 regex \bGPT, 5\b", FilterCommand(monitor_id=3, kind="regex", values=(r"\bGPT, 5\b",))),
        (
            "/filter 3 exclude-regex /sponsored|advert/",
            FilterCommand(monitor_id=3, kind="exclude-regex", values=("sponsored|advert",)),
        ),
        (
            "/filter 3 block https://www.example.com/x",
            FilterCommand(monitor_id=3, kind="block", values=("https://www.example.com/x",)),
        ),
        ("/filter 3 allow example.com, hn", FilterCommand(monitor_id=3, kind="allow", values=("example.com", "hn"))),
        ("/filter 3 max 5", FilterCommand(monitor_id=3, kind="max", values=("5",))),
        ("/filter 3 min-relevance 0.4", FilterCommand(monitor_id=3, kind="min-relevance", values=("0.4",))),
        ("/filter 3 clear", FilterCommand(monitor_id=3, clear=True)),
        ("/filter 3 clear exclude", FilterCommand(monitor_id=3, kind="exclude", clear=True)),
        ("/filter 3 clear include ai", FilterCommand(monitor_id=3, kind="include", values=("ai",), clear=True)),
    ],
)
def test_the_filter_grammar(text: str, parsed: FilterCommand) -> None:
    assert parse_command(text) == parsed


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("/filter", "/filter needs a monitor number"),
        ("/filter x include ai", "Give the monitor's number"),
        ("/filter 3 mention ai", '"mention" is no kind of rule; say one of include, exclude, regex'),
        ("/filter 3 include", "Say what to include after `include`"),
        ("/filter 3 regex", "Say what to regex after `regex`, like /filter 3 regex"),
    ],
)
def test_filter_mistakes_say_what_is_wrong(text: str, reason: str) -> None:
    error = parse_command(text)
    assert isinstance(error, CommandError) and error.reason.startswith(reason)
    assert "Usage: /filter <id> [include|exclude|regex" in error.text


async def test_owner_and_subscriber_each_set_their_own_rules(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn")
    await world.say("/share 1")
    await world.say("/subscribe 1", chat=OTHER_CHAT)

    none_yet = await world.say("/filter 1")
    owner_set = await world.say("/filter 1 exclude celebrity, gossip")
    subscriber_set = await world.say(r"/filter 1 regex \bGPT-?5\b", chat=OTHER_CHAT)
    capped = await world.say("/filter 1 max 5", chat=OTHER_CHAT)
    stranger = await world.say("/filter 1 max 5", chat=THIRD_CHAT)
    hostile = await world.say(r"/filter 1 regex (a+)\1", chat=OTHER_CHAT)
    too_long = await world.say("/filter 1 exclude-regex " + "a|" * 200 + "b", chat=OTHER_CHAT)
    listed_owner = await world.say("/monitors")
    listed_subscriber = await world.say("/monitors", chat=OTHER_CHAT)
    one_removed = await world.say("/filter 1 clear exclude gossip")
    cleared = await world.say("/filter 1 clear", chat=OTHER_CHAT)

    assert none_yet.text.startswith("Your rules on monitor #1 “DeepSeek”: none: this chat gets its whole digest.")
    assert owner_set.text.startswith("Your rules on monitor #1 “DeepSeek” now:\n- exclude celebrity, gossip")
    assert "- regex /\\\\bGPT-?5\\\\b/" in subscriber_set.text  # markdown-escaped backslashes
    assert "- regex" in capped.text and "- max 5" in capped.text
    assert stranger.text.startswith("There is no monitor #1 in this chat")
    assert hostile.text.startswith("RE2 refuses the pattern") and "Your rules are unchanged." in hostile.text
    assert "back-references" in hostile.text and "Usage: /filter" in hostile.text
    assert too_long.text.startswith("That pattern is 401 characters long; at most 300 are allowed.")
    assert "your rules: exclude celebrity, gossip (`/filter 1`)" in listed_owner.text
    assert "your rules: regex /\\\\bGPT-?5\\\\b/ · max 5 (`/filter 1`)" in listed_subscriber.text
    assert one_removed.text.startswith("Your rules on monitor #1 “DeepSeek” now:\n- exclude celebrity\n")
    assert cleared.text.startswith("Your rules on monitor #1 “DeepSeek”: cleared")
    _view, owner_rules = await world.services.monitors.rules.of(1, chat_id=(await world.chat()).id)
    assert owner_rules == ReaderRules(exclude=("celebrity",))


async def test_help_filter_documents_the_grammar(world: RouterWorld) -> None:
    overview = await world.say("/help")
    detail = await world.say("/help filter")

    assert "`/filter <id> [include|exclude|regex|exclude-regex|allow|block|max|min-relevance|clear] [values]`" in (
        overview.text
    )
    for example in ("/filter 3 include ai, chips", "/filter 3 min-relevance 0.4", "/filter 3 clear exclude"):
        assert example in detail.text
