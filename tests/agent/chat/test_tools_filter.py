"""The chat agent's filter_monitor tool: a reader's rules asked for in words wait for confirmation, apply to this
chat only, and a pattern RE2 refuses goes back to the model with the reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from research import ReaderRules
from storage import ChatRecord, Database
from tests.agent.chat.test_chat_confirmations import retried
from tests.agent.chat_world import ChatWorld, make_world
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import FakeClock, ScriptedModel, call, say


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path)
    yield built
    await built.http.aclose()


async def test_rules_asked_for_in_words_wait_for_yes(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", sources=["hn"])
    model = ScriptedModel(
        call("filter_monitor", monitor_id=view.id, kind="exclude", values=["celebrity", "gossip"]),
        say("Shall I leave those out?"),
    )
    agent = world.agent(model.model)

    proposed = await agent.reply(world.turn("leave celebrity gossip out of my Rust digest"))
    before = (await world.monitors.rules.of(view.id, chat_id=world.chat.id))[1]
    settled = await agent.settle_confirmation(world.turn("yes"))
    after = (await world.monitors.rules.of(view.id, chat_id=world.chat.id))[1]

    assert "exclude celebrity, gossip" in proposed[0].text and proposed[0].buttons
    assert before.empty
    assert settled is not None and "- exclude celebrity, gossip" in settled[0].text
    assert after == ReaderRules(exclude=("celebrity", "gossip"))


async def test_a_pattern_re2_refuses_goes_back_to_the_model(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", sources=["hn"])
    model = ScriptedModel(
        call("filter_monitor", monitor_id=view.id, kind="regex", values=[r"(a+)\1"]),
        say("RE2 cannot take that pattern."),
    )

    replies = await world.agent(model.model).reply(world.turn("only stories matching (a+)\\1"))

    assert replies[0].buttons == ()
    retry = retried(model.requests[1])
    assert retry and "RE2 refuses the pattern" in str(retry[0].content)
    assert (await world.monitors.rules.of(view.id, chat_id=world.chat.id))[1].empty
