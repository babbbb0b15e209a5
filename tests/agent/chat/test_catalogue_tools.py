"""The chat tools that come from the catalogue of actions: the arguments model is the schema, a proposal stores the
action's name and arguments, "yes" runs the command's own `run`, and proposals stored by older versions still work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from agent.chat.tools import CHAT_TOOLS, TOOL_ORDER
from agent.chat.tools_catalogue import compact
from agent.commands import ACTIONS
from agent.commands.catalogue import CATALOGUE, help_text, parse_command
from agent.commands.grammar import CommandError
from agent.confirmations import CatalogueAction, PendingConfirmation
from bots.telegram.render import markdown_to_telegram_html
from monitors import ChatService
from storage import ChatRecord, Database
from storage.repositories import ChatRepository, ConversationRepository, MonitorRepository, SubscriptionRepository
from tests.agent.chat_world import ChatWorld, make_world
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import FakeClock, ScriptedModel, call, say, tool_returns


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path)
    yield built
    await built.http.aclose()


def test_a_catalogue_tool_takes_its_schema_from_the_arguments_model() -> None:
    tools = {tool.name: tool for tool in CHAT_TOOLS}
    pause = tools["pause_monitor"].tool_def

    assert pause.parameters_json_schema == {
        "type": "object",
        "properties": {"monitor_id": {"type": "integer", "description": "See list_monitors."}},
        "required": ["monitor_id"],
        "additionalProperties": False,
    }
    assert pause.description == CATALOGUE["pause"].tool.description  # type: ignore[union-attr]


async def test_a_proposal_stores_the_action_and_yes_runs_the_command(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", schedule_text="daily at 09:00", sources=["hn"])
    agent = world.agent(ScriptedModel(call("pause_monitor", monitor_id=view.id), say("Pause it?")).model)

    await agent.reply(world.turn("pause Rust"))
    record = await ConversationRepository(world.database).load(world.chat.id)
    stored = PendingConfirmation.stored(record, now=world.clock())
    done = await agent.settle_confirmation(world.turn("yes"))

    assert stored is not None and stored.actions == (
        CatalogueAction(description=f"pause monitor #{view.id} “Rust”", action="pause",
                        arguments={"monitor_id": view.id}),
    )  # fmt: skip
    # the same sentence /pause answers
    assert done is not None and done[0].text.startswith(f"Monitor #{view.id} “Rust” is paused; `/resume {view.id}`")
    assert (await MonitorRepository(world.database).get(view.id)).paused  # type: ignore[union-attr]


async def test_a_proposal_names_a_topic_with_markdown_characters_escaped(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "C++ *and* _Rust_", sources=["hn"])
    agent = world.agent(ScriptedModel(call("pause_monitor", monitor_id=view.id), say("Pause it?")).model)

    (proposal,) = await agent.reply(world.turn("pause it"))

    assert f"- pause monitor #{view.id} “C++ \\*and\\* \\_Rust\\_”\n" in proposal.text
    assert "C++ *and* _Rust_" in markdown_to_telegram_html(proposal.text)


async def _store(world: ChatWorld, action: dict[str, object]) -> None:
    pending = PendingConfirmation.model_validate(
        {
            "token": "t0ken",
            "chat_id": world.chat.id,
            "thread_key": "",
            "user_id": world.user.id,
            "is_admin": False,
            "actions": [action],
            "expires_at": (world.clock() + timedelta(minutes=5)).isoformat(),
        }
    )
    await pending.store(ChatService(world.database), now=world.clock())


async def test_a_pause_proposed_by_an_older_version_still_confirms(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", sources=["hn"])
    await _store(world, {"kind": "pause", "description": f"pause monitor #{view.id}", "monitor_id": view.id})

    done = await world.agent(ScriptedModel().model).settle_confirmation(world.turn("yes"))

    assert done is not None and f"Monitor #{view.id} “Rust” is paused" in done[0].text
    assert (await MonitorRepository(world.database).get(view.id)).paused  # type: ignore[union-attr]


async def test_a_stored_action_this_version_lacks_is_refused_in_a_sentence(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", sources=["hn"])
    await _store(world, {"kind": "action", "description": "frobnicate", "action": "frobnicate", "arguments": {}})

    done = await world.agent(ScriptedModel().model).settle_confirmation(world.turn("yes"))

    assert done is not None and done[0].text.startswith("This version of Lookout cannot do “frobnicate” any more")
    assert not (await MonitorRepository(world.database).get(view.id)).paused  # type: ignore[union-attr]


def test_optional_parameters_are_sent_without_their_null_branch() -> None:
    tools = {tool.name: tool for tool in CHAT_TOOLS}
    update = tools["update_monitor"].tool_def.parameters_json_schema["properties"]

    assert update["topic"] == {"type": "string", "description": "New topic."}
    assert update["sources"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "New full list of sources.",
    }
    # a required parameter whose null means something keeps it
    required = {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "When"}
    assert compact({"properties": {"when": required}}) == {"properties": {"when": {"anyOf": required["anyOf"]}}}


async def test_a_transfer_proposal_stores_the_chat_it_resolved_and_yes_hands_it_over(world: ChatWorld) -> None:
    other = await ChatRepository(world.database).get_or_create("slack", "C0OTHER", title="#research")
    view = await world.monitors.create_monitor(world.chat.id, "DeepSeek", sources=["hn"])
    await world.monitors.sharing.share(view.id, chat_id=world.chat.id)
    await world.monitors.sharing.subscribe(other.id, view.id)
    script = ScriptedModel(
        call("transfer_monitor", monitor_id=view.id, to_chat="nobody"),
        call("transfer_monitor", monitor_id=view.id, to_chat="Research"),
        say("Hand it over?"),
    )
    agent = world.agent(script.model)

    proposal = (await agent.reply(world.turn("give DeepSeek to research")))[0]
    record = await ConversationRepository(world.database).load(world.chat.id)
    stored = PendingConfirmation.stored(record, now=world.clock())
    done = await agent.settle_confirmation(world.turn("yes"))

    retry = str(script.requests[1][-1].parts[0].content)  # type: ignore[union-attr]
    assert "Name exactly one subscriber chat" in retry and "(slack:C0OTHER)" in retry
    assert "hand monitor" in proposal.text and "over to #research" in proposal.text
    assert stored is not None and stored.actions[0] == CatalogueAction(
        description=f"hand monitor #{view.id} “DeepSeek” over to #research", action="transfer",
        arguments={"monitor_id": view.id, "to_chat": "slack:C0OTHER"},
    )  # fmt: skip
    assert done is not None and "now belongs to #research" in done[0].text
    assert (await MonitorRepository(world.database).get(view.id)).owner_chat_id == other.id  # type: ignore[union-attr]


async def test_briefing_and_delivery_proposals_of_an_older_version_still_confirm(world: ChatWorld) -> None:
    other = await ChatRepository(world.database).get_or_create("slack", "C0OTHER", title="#research")
    theirs = await world.monitors.create_monitor(other.id, "DeepSeek", sources=["hn"])
    await world.monitors.sharing.share(theirs.id, chat_id=other.id)
    await world.monitors.sharing.subscribe(world.chat.id, theirs.id)
    agent = world.agent(ScriptedModel().model)

    await _store(world, {"kind": "briefing", "description": "brief me", "schedule_text": "weekdays at 07:30 in UTC"})
    briefed = await agent.settle_confirmation(world.turn("yes"))
    await _store(world, {"kind": "delivery", "description": "pause", "monitor_id": theirs.id, "paused": True})
    paused = await agent.settle_confirmation(world.turn("yes"))

    assert briefed is not None and briefed[0].text.startswith("Briefing set")
    chat = await ChatRepository(world.database).get(world.chat.id)
    assert chat is not None and chat.briefing_schedule == "weekdays at 07:30 in UTC"
    assert paused is not None
    subscription = await SubscriptionRepository(world.database).get(theirs.id, world.chat.id)
    assert subscription is not None and subscription.paused


async def test_create_and_update_proposals_of_an_older_version_still_confirm(world: ChatWorld) -> None:
    agent = world.agent(ScriptedModel().model)
    await _store(world, {"kind": "create", "description": "create", "topic": "Rust", "schedule_text":
                         "daily at 08:00 in UTC", "sources": ["hn"], "timezone": "UTC"})  # fmt: skip
    created = await agent.settle_confirmation(world.turn("yes"))
    [record] = await MonitorRepository(world.database).list_for_chat(world.chat.id)
    await _store(world, {"kind": "update", "description": "update", "monitor_id": record.id,
                         "schedule_text": "every 6 hours in UTC", "quiet": False})  # fmt: skip
    updated = await agent.settle_confirmation(world.turn("yes"))

    assert created is not None and created[0].text.startswith(f"Created monitor **#{record.id} Rust**")
    assert updated is not None and "every 6 hours" in updated[0].text
    changed = await MonitorRepository(world.database).get(record.id)
    assert changed is not None and changed.schedule == "every 6 hours in UTC" and changed.quiet is False


async def test_an_import_confirmed_from_an_older_version_still_creates_its_monitors(world: ChatWorld) -> None:
    entries = [{"topic": "Rust", "sources": ["hn"]}, {"topic": "Zig", "sources": ["hn"]}]
    await _store(world, {"kind": "import", "description": "create 2 monitors from a.json", "entries": entries})

    done = await world.agent(ScriptedModel().model).settle_confirmation(world.turn("yes"))

    assert done is not None and done[0].text.startswith("Created 2 monitors:")
    assert sorted(await world.monitor_topics()) == ["Rust", "Zig"]


def test_every_chat_tool_is_a_catalogue_actions_tool_and_the_look_ups_are_no_commands() -> None:
    tools = {action.tool.name: action for action in ACTIONS if action.tool is not None}

    assert [tool.name for tool in CHAT_TOOLS] == list(TOOL_ORDER)
    assert {tool.name for tool in CHAT_TOOLS} == set(tools)
    # where a command does the same thing, the tool is that command's action
    assert {name: tools[name].name for name in ("list_monitors", "run_monitor_now", "export_items")} == {
        "list_monitors": "monitors", "run_monitor_now": "digest", "export_items": "export",
    }  # fmt: skip
    assert tools["browse_shared_monitors"].name == "browse"
    for name in ("search_sources", "read_page", "collect", "search_history", "timeline", "export_monitors"):
        action = tools[name]
        assert not action.command and action.name not in CATALOGUE and action.run is None
        assert isinstance(parse_command(f"/{action.name} x"), CommandError)
        assert f"/{action.name} " not in help_text()


def test_a_commands_option_the_tool_does_not_offer_stays_out_of_its_schema() -> None:
    tools = {tool.name: tool for tool in CHAT_TOOLS}

    assert tools["list_monitors"].tool_def.parameters_json_schema == {
        "type": "object", "properties": {}, "additionalProperties": False,
    }  # fmt: skip
    assert tools["export_items"].tool_def.parameters_json_schema["properties"]["days"] == {
        "type": "integer", "default": 30, "description": "Window, 1-365.",
    }  # fmt: skip


async def test_a_tool_that_acts_at_once_answers_the_model_not_the_person(world: ChatWorld) -> None:
    view = await world.monitors.create_monitor(world.chat.id, "Rust", schedule_text="every 6 hours", sources=["hn"])
    model = ScriptedModel(call("list_monitors"), call("export_items", monitor_id=view.id + 99), say("One monitor."))

    replies = await world.agent(model.model).reply(world.turn("what do I track?"))

    listed = tool_returns(model.requests[1])[-1].content
    assert [(entry.id, entry.topic) for entry in listed] == [(view.id, "Rust")]  # type: ignore[union-attr]
    retried = tool_returns(model.requests[2])[-1]
    assert retried.outcome == "retried" and f"no monitor #{view.id + 99}" in str(retried.content)
    assert [reply.text for reply in replies] == ["One monitor."]
