"""Slack payloads as neutral messages, the manifest against the code, and replies as Block Kit messages."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import yaml

from bots.slack.events import (
    SLASH_COMMANDS,
    command_text,
    incoming_from_action,
    incoming_from_command,
    incoming_from_event,
    slack_text_to_plain,
)
from bots.slack.manifest import manifest_text
from bots.slack.render import BLOCKS_PER_MESSAGE, BUTTON_ACTION_PREFIX, reply_messages
from kernel import Button
from tests.fakes.slack import BOT_USER_ID, action_body, command_body, event_body

MANIFEST = Path(__file__).parents[3] / "slack_app_manifest.yaml"


def form(body: bytes) -> dict[str, str]:
    return dict(parse_qsl(body.decode()))


# --- text ----------------------------------------------------------------------------------------------------


def test_the_bot_mention_is_stripped_and_slack_markup_undone() -> None:
    text = f"<@{BOT_USER_ID}> compare <https://a.example/x?y=1&amp;z=2|a.example> with <@U2|bob> in <#C1|general> &lt;3"

    plain = slack_text_to_plain(text, bot_user_id=BOT_USER_ID)

    assert plain == "compare https://a.example/x?y=1&z=2 with @bob in #general <3"


def test_slash_command_text_becomes_the_neutral_command() -> None:
    assert command_text("/lookout", "track DeepSeek daily at 9") == "/track DeepSeek daily at 9"
    assert command_text("/lookout", "  ") == "/help"
    assert command_text("/lookout", "/monitors") == "/monitors"
    assert command_text("/track", "DeepSeek daily") == "/track DeepSeek daily"
    assert command_text("/monitors", "") == "/monitors"


# --- payloads ------------------------------------------------------------------------------------------------


def test_a_slash_command_in_a_channel() -> None:
    body = form(command_body("/lookout", "digest 3", channel="C42", user="U7", response_url="https://x/r"))

    incoming = incoming_from_command(body)

    assert (incoming.platform, incoming.chat_external_id, incoming.user_external_id) == ("slack", "C42", "U7")
    assert incoming.text == "/digest 3" and incoming.thread_key == "" and not incoming.is_private
    assert incoming.chat_title == "#research" and incoming.user_display_name == "ann"


def test_a_slash_command_in_a_direct_message_is_private() -> None:
    body = form(command_body("/monitors", "", channel="D42", user="U7", response_url="https://x/r"))

    assert incoming_from_command(body).is_private


def test_a_top_level_mention_starts_a_thread_keyed_by_its_ts() -> None:
    event = {"type": "app_mention", "user": "U7", "text": f"<@{BOT_USER_ID}> hi", "ts": "111.1", "channel": "C42"}

    incoming = incoming_from_event(json.loads(event_body(event, event_id="Ev1")), bot_user_id=BOT_USER_ID)

    assert incoming is not None
    assert (incoming.thread_key, incoming.message_id, incoming.event_id) == ("111.1", "111.1", "Ev1")
    assert incoming.text == "hi" and incoming.mentions_bot and incoming.addressed_to_bot


def test_a_mention_inside_a_thread_belongs_to_that_thread() -> None:
    event = {"type": "app_mention", "user": "U7", "text": "more", "ts": "120.0", "thread_ts": "111.1", "channel": "C4"}

    incoming = incoming_from_event(json.loads(event_body(event, event_id="Ev2")), bot_user_id=BOT_USER_ID)

    assert incoming is not None and incoming.thread_key == "111.1"


def test_a_direct_message_is_private_free_text_with_one_running_conversation() -> None:
    event = {"type": "message", "channel_type": "im", "user": "U7", "text": "what's new?", "ts": "5.5", "channel": "D1"}

    incoming = incoming_from_event(json.loads(event_body(event, event_id="Ev3")), bot_user_id=BOT_USER_ID)

    assert incoming is not None and incoming.is_private and incoming.thread_key == ""
    assert incoming.addressed_to_bot


def test_edits_bot_posts_channel_chatter_and_mentions_in_dms_are_not_messages() -> None:
    base = {"user": "U7", "text": "x", "ts": "1.0"}
    ignored = [
        {**base, "type": "message", "channel_type": "im", "channel": "D1", "subtype": "message_changed"},
        {**base, "type": "message", "channel_type": "im", "channel": "D1", "bot_id": "B9"},
        {**base, "type": "message", "channel_type": "channel", "channel": "C1"},
        {**base, "type": "app_mention", "channel": "D1"},  # also arrives as message.im
    ]
    for event in ignored:
        assert incoming_from_event(json.loads(event_body(event, event_id="Ev")), bot_user_id=BOT_USER_ID) is None


def test_a_button_press_carries_its_callback_data_into_the_thread() -> None:
    payload = action_body(
        value="confirm:abc", label="Yes", channel="C42", user="U7", message_ts="9.9", thread_ts="111.1",
        response_url="https://x/r",
    )  # fmt: skip

    incoming = incoming_from_action(json.loads(form(payload)["payload"]))

    assert incoming is not None
    assert (incoming.callback_data, incoming.text, incoming.thread_key) == ("confirm:abc", "Yes", "111.1")
    assert incoming.chat_external_id == "C42" and incoming.user_external_id == "U7"


# --- rendering -----------------------------------------------------------------------------------------------


def test_buttons_become_an_actions_block_at_the_end_with_distinct_action_ids() -> None:
    buttons = (Button(label="Yes, create it", callback_data="c:1:yes"), Button(label="No", callback_data="c:1:no"))

    (message,) = reply_messages("Create **monitor**?", buttons=buttons)

    actions = message.blocks[-1]
    assert actions["type"] == "actions"
    elements = actions["elements"]  # type: ignore[typeddict-item]
    assert [e["value"] for e in elements] == ["c:1:yes", "c:1:no"]
    assert len({e["action_id"] for e in elements}) == 2
    assert all(e["action_id"].startswith(BUTTON_ACTION_PREFIX) for e in elements)
    assert "*monitor*" in message.text and "[Yes, create it]" in message.text


def test_buttons_after_a_full_message_go_into_a_message_of_their_own() -> None:
    text = "\n\n---\n\n".join(f"Part {n}" for n in range(30))  # 30 sections + 29 dividers = 59 blocks

    messages = reply_messages(text, buttons=(Button(label="OK", callback_data="ok"),))

    assert all(len(m.blocks) <= BLOCKS_PER_MESSAGE for m in messages)
    assert messages[-1].blocks[-1]["type"] == "actions"


# --- the manifest --------------------------------------------------------------------------------------------


def test_the_manifest_declares_exactly_the_commands_the_app_registers() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())

    declared = {entry["command"]: entry for entry in manifest["features"]["slash_commands"]}

    assert set(declared) == set(SLASH_COMMANDS)
    assert all(declared[name]["description"] == description for name, description in SLASH_COMMANDS.items())


def test_the_committed_manifest_is_what_the_catalogue_generates() -> None:
    # regenerate with `uv run python -m bots.slack.manifest > slack_app_manifest.yaml`
    assert MANIFEST.read_text() == manifest_text()
    slash = yaml.safe_load(manifest_text())["features"]["slash_commands"]
    assert [entry["command"] for entry in slash] == ["/lookout", "/track", "/monitors", "/digest", "/search", "/alert"]
    assert slash[0]["usage_hint"] == (
        "track DeepSeek daily at 9 | monitors | digest 3 | search DeepSeek R2 | alert DeepSeek when it releases a model"
        " | help"
    )


def test_the_manifest_subscribes_to_what_the_app_handles_with_the_scopes_it_needs() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())

    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {"app_mention", "message.im"}
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "chat:write", "commands", "files:write", "im:history"} <= scopes
    assert not {scope for scope in scopes if scope.startswith(("channels:", "groups:", "users:"))}
