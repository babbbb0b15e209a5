"""The chat agent shares, subscribes, chooses its delivery and sets the briefing from free text, each only after
the person confirms, like every other monitor change; browsing and exporting happen at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import models
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from storage import ChatRecord, Database, DeliveryMode
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository
from tests.agent.chat_world import ChatWorld, make_world
from tests.fakes.gemini import FakeGemini
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import FakeClock, ScriptedModel, call, say, tool_returns


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path)
    yield built
    await built.http.aclose()


async def _shared_by_another_chat(world: ChatWorld) -> tuple[ChatRecord, int]:
    other = await ChatRepository(world.database).get_or_create("slack", "C0OTHER", title="#research")
    view = await world.monitors.create_monitor(other.id, "DeepSeek", sources="hn")
    await world.monitors.sharing.share(view.id, chat_id=other.id)
    return other, view.id


async def test_browse_then_subscribe_only_after_yes(world: ChatWorld) -> None:
    _other, monitor_id = await _shared_by_another_chat(world)
    script = ScriptedModel(
        call("browse_shared_monitors", words="deepseek"),
        call("subscribe_to_monitor", monitor_id=monitor_id),
        say("There is a shared DeepSeek monitor; I can subscribe this chat once you confirm."),
    )
    agent = world.agent(script.model)

    proposal = (await agent.reply(world.turn("is anyone already tracking deepseek? subscribe me")))[0]
    before = await SubscriptionRepository(world.database).get(monitor_id, world.chat.id)
    done = await agent.settle_confirmation(world.turn("yes"))

    browsed = [info.model_dump() for info in tool_returns(script.requests[1])[0].content]
    assert browsed == [
        {"id": monitor_id, "topic": "DeepSeek", "schedule": "every day at 09:00 (UTC)", "sources": ["hn"],
         "owner": "#research", "subscribers": 1, "last_result": "never run yet", "this_chat_receives_it": False}
    ]  # fmt: skip
    assert "Needs your confirmation" in proposal.text
    assert f"subscribe to monitor #{monitor_id} “DeepSeek” (every day at 09:00 (UTC), by #research)" in proposal.text
    assert before is None
    assert done is not None and done[0].text.startswith(f"This chat now receives **#{monitor_id} DeepSeek**")


async def test_a_subscriber_pauses_its_delivery_and_chooses_now_through_the_agent(world: ChatWorld) -> None:
    _other, monitor_id = await _shared_by_another_chat(world)
    await world.monitors.sharing.subscribe(world.chat.id, monitor_id)
    await ChatRepository(world.database).update(world.chat.id, briefing_schedule="daily at 08:00 in UTC")
    script = ScriptedModel(
        call("pause_monitor", monitor_id=monitor_id),
        call("set_delivery", monitor_id=monitor_id, how="now"),
        say("Proposed."),
    )
    agent = world.agent(script.model)

    proposal = (await agent.reply(world.turn("pause deepseek here, and when it comes back, send it right away")))[0]
    done = await agent.settle_confirmation(world.turn("yes"))

    assert (
        "pause this chat's delivery of monitor" in proposal.text and "(it goes on for the other chats)" in proposal.text
    )
    assert done is not None
    subscription = await SubscriptionRepository(world.database).get(monitor_id, world.chat.id)
    assert subscription is not None and subscription.paused and subscription.delivery is DeliveryMode.NOW
    monitor = await MonitorRepository(world.database).get(monitor_id)
    assert monitor is not None and not monitor.paused  # the owner's monitor runs on


async def test_share_and_briefing_proposals_and_what_a_subscriber_may_not_do(world: ChatWorld) -> None:
    own = await world.monitors.create_monitor(world.chat.id, "Mistral", sources="hn")
    _other, theirs = await _shared_by_another_chat(world)
    await world.monitors.sharing.subscribe(world.chat.id, theirs)
    script = ScriptedModel(
        call("share_monitor", monitor_id=theirs),
        call("share_monitor", monitor_id=own.id),
        call("set_briefing", schedule="every morning"),
        call("set_briefing", schedule="weekdays at 07:30"),
        say("Proposed."),
    )
    agent = world.agent(script.model)

    proposal = (await agent.reply(world.turn("share my monitors and brief me on weekdays")))[0]
    done = await agent.settle_confirmation(world.turn("yes"))

    retries = [part for part in tool_returns(script.requests[-1]) if part.outcome == "retried"]
    assert any("belongs to another chat" in str(part.content) for part in retries)
    assert any(part.tool_name == "set_briefing" for part in retries)  # "every morning" is not the grammar
    assert f"share monitor #{own.id} “Mistral”" in proposal.text
    assert "send this chat one briefing weekdays at 07:30 (UTC) instead of a message per run" in proposal.text
    assert done is not None and "is shared" in done[0].text and "Briefing set" in done[0].text
    chat = await ChatRepository(world.database).get(world.chat.id)
    assert chat is not None and chat.briefing_schedule == "weekdays at 07:30 in UTC"


async def test_export_monitors_attaches_the_files_at_once(world: ChatWorld) -> None:
    await world.monitors.create_monitor(world.chat.id, "Mistral", sources="hn")
    script = ScriptedModel(call("export_monitors"), say("Here they are."))

    reply = (await world.agent(script.model).reply(world.turn("export my monitors")))[0]

    assert [attachment.filename for attachment in reply.attachments] == ["lookout-monitors-2026-03-01.json"]
    exported = json.loads(reply.attachments[0].path.read_bytes())
    assert [entry["topic"] for entry in exported["monitors"]] == ["Mistral"]


async def test_subscribing_through_the_real_gemini_client(world: ChatWorld, fake_server: FakeHTTPServer) -> None:
    _other, monitor_id = await _shared_by_another_chat(world)
    gemini = FakeGemini(fake_server)
    gemini.reply_function_call("subscribe_to_monitor", {"monitor_id": monitor_id})
    gemini.reply_text("I can subscribe this chat to the shared DeepSeek monitor; please confirm.")
    model = GoogleModel(gemini.model, provider=GoogleProvider(api_key=gemini.api_key, base_url=gemini.url))
    agent = world.agent(model)

    with models.override_allow_model_requests(True):
        proposal = (await agent.reply(world.turn("subscribe me to the shared deepseek monitor")))[0]
    done = await agent.settle_confirmation(world.turn("yes"))

    declared = {d["name"] for d in gemini.requests[0].function_declarations}
    assert {"browse_shared_monitors", "subscribe_to_monitor", "set_briefing"} <= declared
    assert [button.label for button in proposal.buttons] == ["Yes, do it", "Cancel"]
    assert done is not None and "now receives" in done[0].text
