"""The alert commands through `Conversation.respond`: /alert on a monitor number, on a topic the chat follows, on a
topic it does not (a monitor is created), on a monitor it only receives; /alerts; /alert off; bad input; and the chat
agent's create_alert proposal confirmed with "yes"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from monitors import MAX_TOPIC_CHARS
from storage import Database
from storage.repositories import AlertRepository, MonitorRepository
from tests.agent.commands.router_world import CHAT, OTHER_CHAT, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import ScriptedModel, call, say


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


async def test_alert_on_a_monitor_number_or_its_topic_lists_and_removes(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn")

    by_number = await world.say("/alert 1 when it releases a new model")
    by_topic = await world.say("/alert deepseek WHEN 3 or more outlets report an outage")
    listed = await world.say("/alerts")

    assert by_number.text.startswith(
        "Alert #1: I'll tell you here at once when “it releases a new model” on monitor #1 “DeepSeek”"
    )
    assert "No language model is configured: a story fires when it carries every word" in by_number.text
    assert "Alert #2" in by_topic.text and "on monitor #1 “DeepSeek”" in by_topic.text
    assert "created" not in by_topic.text  # the chat's monitor of that topic, not a new one
    assert "new stories only" in by_number.text
    assert "stories that gain reports (counting every outlet so far)" in by_topic.text  # a count looks further back
    assert "**Alerts of this chat** (2 of 20):" in listed.text
    assert "- **#1** DeepSeek: when it releases a new model — monitor #1 “DeepSeek”" in listed.text
    assert "- **#2** deepseek: when 3 or more outlets report an outage" in listed.text
    monitors = await world.say("/monitors")
    assert "your alert \\#1 when it releases a new model\nyour alert \\#2 when 3 or more outlets report an " in (
        monitors.text
    )

    other = await world.say("/alert off 1", chat=OTHER_CHAT)
    removed = await world.say("/alert off 1")
    again = await world.say("/alert off 1")

    assert other.text.startswith("This chat has no alert #1")
    assert removed.text == "Alert #1 removed; its monitor goes on as before."
    assert again.text.startswith("This chat has no alert #1")
    assert [entry.id for entry in await world.services.monitors.alerts.list((await world.chat()).id)] == [2]


async def test_an_alert_on_a_topic_without_a_monitor_creates_one(world: RouterWorld) -> None:
    said = await world.say("/alert Mistral when it raises money")

    monitors = await MonitorRepository(world.database).list_for_chat((await world.chat()).id)
    assert [(monitor.topic, monitor.schedule) for monitor in monitors] == [("Mistral", "every 2 hours in UTC")]
    assert "on monitor #1 “Mistral”" in said.text
    assert "This chat had no monitor of it, so I created **#1 Mistral** (every 2 hours)" in said.text


async def test_a_subscriber_may_alert_on_a_monitor_it_receives_but_not_on_one_it_does_not(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    await world.say("/share 1")

    refused = await world.say("/alert 1 when it releases a model", chat=OTHER_CHAT)
    await world.say("/subscribe 1", chat=OTHER_CHAT)
    allowed = await world.say("/alert 1 when it releases a model", chat=OTHER_CHAT)

    assert refused.text.startswith("There is no monitor #1 in this chat")
    assert allowed.text.startswith("Alert #1: I'll tell you here at once when “it releases a model” on monitor #1")
    stored = await AlertRepository(world.database).receiving_alerts(1)
    assert [alert.chat_id for alert in stored] == [(await world.chat(OTHER_CHAT)).id]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("/alert", "Say what to watch and when to tell you"),
        ("/alert DeepSeek", "Say what should happen after “when”"),
        ("/alert DeepSeek when", "Say what should happen after “when”"),
        ("/alert when it rains", "Say what to watch before “when”"),
        ("/alert off", "Give the alert's number after off"),
        ("/alert off two", "Give the alert's number after off"),
        ("/alert 0 when it rains", "Give the monitor's number"),
    ],
)
async def test_bad_alerts_are_refused_with_the_usage(world: RouterWorld, text: str, problem: str) -> None:
    said = await world.say(text)

    assert problem in said.text and "/alert <topic|monitor id> when <condition>" in said.text
    assert await AlertRepository(world.database).count_for_chat((await world.chat()).id) == 0


async def test_a_condition_too_long_is_refused_and_nothing_is_created(world: RouterWorld) -> None:
    said = await world.say("/alert Mistral when " + "it raises money " * 30)

    assert "Keep the condition under 300 characters" in said.text
    assert await MonitorRepository(world.database).list_for_chat((await world.chat()).id) == []


async def test_an_alert_topic_has_the_monitor_topic_limit(world: RouterWorld) -> None:
    """An alert's topic is a monitor's topic (it finds or creates that monitor): one limit for both."""
    longest = "x" * MAX_TOPIC_CHARS

    too_long = await world.say(f"/alert {longest}y when it ships")
    tracked_too_long = await world.say(f"/track {longest}y")
    fits = await world.say(f"/alert {longest} when it ships")

    assert f"Keep the topic under {MAX_TOPIC_CHARS} characters" in too_long.text
    assert f"keep it under {MAX_TOPIC_CHARS} characters" in tracked_too_long.text
    assert "I'll tell you here at once when" in fits.text, fits.text
    [created] = await MonitorRepository(world.database).list_for_chat((await world.chat()).id)
    assert created.topic == longest


async def test_the_chat_agent_proposes_an_alert_and_yes_creates_it(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    model = ScriptedModel(
        call("create_alert", topic="DeepSeek", condition="it releases a new model"),
        say("I'll ask you to confirm that alert."),
    )
    async with open_world(database, fake_server, tmp_path, light_model=model.model, real_chat_agent=True) as world:
        await world.say("/track DeepSeek from hn")
        proposed = await world.say("tell me when DeepSeek releases a new model")
        nothing_yet = await AlertRepository(world.database).count_for_chat((await world.chat(CHAT)).id)
        confirmed = await world.say("yes")

    assert "tell this chat at once when it releases a new model (monitor #1 “DeepSeek”)" in proposed.text
    assert nothing_yet == 0
    assert "Alert #1: I'll tell you here at once when “it releases a new model” on monitor #1" in confirmed.text


async def test_a_number_before_the_topic_names_the_chats_monitor_or_is_refused_clearly(world: RouterWorld) -> None:
    await world.say("/track DeepSeek daily at 08:00 from hn")

    on_monitor = await world.say("/alert 1 DeepSeek when it releases a new model")
    unknown = await world.say("/alert 2 Mistral when it raises money")
    quoted = await world.say('/alert "1984 remake" when it is announced')

    assert on_monitor.text.startswith(
        "Alert #1: I'll tell you here at once when “it releases a new model” on monitor #1 “DeepSeek”"
    )
    assert "created" not in on_monitor.text
    assert unknown.text == (
        "There is no monitor #2 in this chat; /monitors lists yours. A topic that starts with a number goes in "
        'quotes: /alert "2 Mistral" when …'
    )
    assert "I created **#2 1984 remake**" in quoted.text
    monitors = await MonitorRepository(world.database).list_for_chat((await world.chat()).id)
    assert [monitor.topic for monitor in monitors] == ["DeepSeek", "1984 remake"]  # no "1 DeepSeek", no "2 Mistral"
    alerts = await world.services.monitors.alerts.list((await world.chat()).id)
    assert [(entry.topic, entry.monitor_id) for entry in alerts] == [("DeepSeek", 1), ("1984 remake", 2)]


async def test_a_number_before_the_topic_of_a_monitor_the_chat_does_not_receive_is_refused(
    world: RouterWorld,
) -> None:
    await world.say("/track DeepSeek from hn")

    refused = await world.say("/alert 1 DeepSeek when it releases a model", chat=OTHER_CHAT)

    assert refused.text.startswith("There is no monitor #1 in this chat")
    assert await MonitorRepository(world.database).list_for_chat((await world.chat(OTHER_CHAT)).id) == []
    assert await AlertRepository(world.database).count_for_chat((await world.chat(OTHER_CHAT)).id) == 0


async def test_an_alert_with_its_own_topic_on_another_monitor_names_that_topic(world: RouterWorld) -> None:
    """`/alert 1 Mistral when …` on a DeepSeek monitor: the confirmation, the no-model note, /alerts and /monitors name
    Mistral, the topic whose words a story must carry."""
    await world.say("/track DeepSeek daily at 08:00 from hn")

    said = await world.say("/alert 1 Mistral when 3 or more outlets")
    same = await world.say("/alert 1 deepseek when it releases a model")
    listed = await world.say("/alerts")
    monitors = await world.say("/monitors")

    assert said.text.startswith(
        "Alert #1: I'll tell you here at once when “3 or more outlets” in stories about “Mistral” on monitor #1 "
        "“DeepSeek”"
    )
    assert "a story fires when it carries every word of “Mistral”, and 3 or more outlets report it." in said.text
    assert "stories about" not in same.text  # the monitor's own topic, however written, narrows nothing
    assert "- **#1** Mistral: when 3 or more outlets — monitor #1 “DeepSeek”" in listed.text
    assert "your alert \\#1 about Mistral when 3 or more outlets\nyour alert \\#2 when it releases" in monitors.text
