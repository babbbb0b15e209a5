"""Slack payloads (slash commands, mentions, direct messages, button presses) as neutral `Incoming` messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agent import Incoming
from bots.slack.manifest import SLASH_COMMANDS, UMBRELLA_COMMAND
from bots.slack.render import ActionsBlock, button_element, escape_mrkdwn
from kernel import CALLBACK_DATA_MAX_BYTES, Button

_ENTITY = re.compile(r"<([^<>\n]*)>")
_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast"})
"""Message subtypes that are still a person's message: a shared file, a thread reply also sent to the channel."""
_DIRECT_CHANNEL = "directmessage"
"""`channel_name` Slack sends for slash commands used in a direct message."""


def slack_text_to_plain(text: str, *, bot_user_id: str | None = None) -> str:
    """Slack's wire text as the person typed it: the bot's own mention removed, `<@U1|ann>` as `@ann`,
    `<#C1|general>` as `#general`, `<https://x|x>` as the URL, and `&amp;`/`&lt;`/`&gt;` unescaped."""

    def entity(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            if bot_user_id is not None and target[1:] == bot_user_id:
                return ""
            return "@" + (label or target[1:])
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            special = target[1:].split("^", 1)[0]
            return label or ("@" + special)
        if target.startswith("mailto:"):
            return label or target.removeprefix("mailto:")
        return target  # a link: the URL itself, which the label may hide

    plain = _ENTITY.sub(entity, text)
    plain = plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", plain).strip()


def command_text(command: str, text: str) -> str:
    """The neutral command text: `/lookout track X daily` → `/track X daily` (empty → `/help`);
    `/track X daily` stays itself."""
    rest = text.strip()
    if command != UMBRELLA_COMMAND:
        return f"{command} {rest}".strip()
    if not rest:
        return "/help"
    return rest if rest.startswith("/") else f"/{rest}"


def _is_direct(channel_id: str, channel_type: str | None = None) -> bool:
    return channel_type == "im" or (channel_type is None and channel_id.startswith("D"))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _truncated(value: str | None, limit: int) -> str | None:
    return value[:limit] if value else None


def incoming_from_command(body: Mapping[str, Any]) -> Incoming:
    """A slash command (`/lookout …`, `/track …`) as a command message; raises ValueError when malformed."""
    channel = _str(body.get("channel_id"))
    channel_name = _str(body.get("channel_name"))
    direct = channel_name == _DIRECT_CHANNEL or channel.startswith("D")
    return _incoming(
        chat_external_id=channel,
        user_external_id=_str(body.get("user_id")),
        text=command_text(_str(body.get("command")), slack_text_to_plain(_str(body.get("text")))),
        is_private=direct,
        user_display_name=_truncated(_str(body.get("user_name")), 256),
        chat_title=None if direct or channel_name in {"", "privategroup"} else _truncated(f"#{channel_name}", 256),
    )


def incoming_from_event(body: Mapping[str, Any], *, bot_user_id: str | None) -> Incoming | None:
    """An `app_mention` or direct `message` event as free text; None for events that are no person's message
    (edits, deletions, bot posts, joins).

    Memory follows Slack's threads: a mention starts (or continues) the thread under it, so its thread key is
    the thread's ts, or the mention's own ts at the top level; the bot replies in that thread. A direct
    message at the top level of the DM is one running conversation (thread key ""), as people expect of a DM;
    inside a thread of the DM, the thread is its own conversation.
    """
    event = body.get("event")
    if not isinstance(event, Mapping):
        return None
    kind = event.get("type")
    subtype = event.get("subtype")
    if kind not in {"app_mention", "message"} or (subtype is not None and subtype not in _PERSON_SUBTYPES):
        return None
    if event.get("bot_id") or not event.get("user"):
        return None
    channel = _str(event.get("channel"))
    direct = _is_direct(channel, _str(event.get("channel_type")) or None)
    if kind == "app_mention" and direct:
        return None  # a mention inside a DM also arrives as message.im: handle it once
    if kind == "message" and not direct:
        return None  # the app subscribes to message.im only; anything else is not for it
    ts = _str(event.get("ts"))
    thread_ts = _str(event.get("thread_ts"))
    thread_key = thread_ts if direct else (thread_ts or ts)
    event_id = _str(body.get("event_id")) or None
    text = slack_text_to_plain(_str(event.get("text")), bot_user_id=bot_user_id)
    if event.get("files"):  # Slack cannot start a message with a slash: a shared file's "import" is /import
        text = _import_text(text) or text
    return _incoming(
        chat_external_id=channel,
        user_external_id=_str(event.get("user")),
        thread_key=thread_key,
        text=text,
        message_id=ts or None,
        event_id=event_id,
        is_private=direct,
        mentions_bot=kind == "app_mention",
    )


_IMPORT_TEXT = re.compile(r"/?(?:lookout\s+)?import\b(?P<rest>.*)", re.IGNORECASE | re.DOTALL)
"""A shared file's message that asks to import it: "import", "/import as AI safety", "lookout import"."""


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A file a person shared with a message asking to import it."""

    name: str
    size: int
    url: str
    """Its `url_private_download`: only the bot token opens it."""


def _import_text(text: str) -> str | None:
    """The `/import …` command a file's message asks for, or None when it asks for something else."""
    match = _IMPORT_TEXT.fullmatch(text.strip())
    return f"/import{match['rest']}".strip() if match else None


def file_to_import(body: Mapping[str, Any], *, bot_user_id: str | None) -> SharedFile | None:
    """The first file of a person's message event whose text asks to import it (see `incoming_from_event`)."""
    event = body.get("event")
    if not isinstance(event, Mapping) or not isinstance(event.get("files"), list) or not event["files"]:
        return None
    if _import_text(slack_text_to_plain(_str(event.get("text")), bot_user_id=bot_user_id)) is None:
        return None
    first = event["files"][0]
    if not isinstance(first, Mapping):
        return None
    url = _str(first.get("url_private_download")) or _str(first.get("url_private"))
    size = first.get("size")
    if not url:
        return None
    return SharedFile(name=_str(first.get("name")) or "file", size=size if isinstance(size, int) else 0, url=url)


def incoming_from_action(body: Mapping[str, Any]) -> Incoming | None:
    """A press on one of our buttons as a message carrying its callback data; None for other actions."""
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
        return None
    action = actions[0]
    value = _str(action.get("value"))
    if not value or len(value.encode()) > CALLBACK_DATA_MAX_BYTES:
        return None
    label_object = action.get("text")
    label = _str(label_object.get("text")) if isinstance(label_object, Mapping) else ""
    channel_object = body.get("channel")
    container = body.get("container")
    message = body.get("message")
    channel = _str(channel_object.get("id")) if isinstance(channel_object, Mapping) else ""
    if not channel and isinstance(container, Mapping):
        channel = _str(container.get("channel_id"))
    thread_ts = ""
    if isinstance(container, Mapping):
        thread_ts = _str(container.get("thread_ts"))
    if not thread_ts and isinstance(message, Mapping):
        thread_ts = _str(message.get("thread_ts"))
    user = body.get("user")
    user_id = _str(user.get("id")) if isinstance(user, Mapping) else ""
    user_name = _str(user.get("username") or user.get("name")) if isinstance(user, Mapping) else ""
    return _incoming(
        chat_external_id=channel,
        user_external_id=user_id,
        thread_key=thread_ts,
        text=label or value,
        callback_data=value,
        is_private=_is_direct(channel),
        user_display_name=_truncated(user_name, 256),
    )


@dataclass(frozen=True, slots=True)
class AnsweredButtons:
    """The message whose button was pressed, rewritten without its buttons: who chose what instead."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]


def answered_buttons(body: Mapping[str, Any]) -> AnsweredButtons | None:
    """The pressed message with its actions block replaced by "@ann chose *Yes*", so a choice is made once and
    everyone in the channel sees it; None when the payload does not carry the message."""
    message = body.get("message")
    container = body.get("container")
    actions = body.get("actions")
    user = body.get("user")
    if not isinstance(message, Mapping) or not isinstance(actions, list) or not actions:
        return None
    channel = _str(container.get("channel_id")) if isinstance(container, Mapping) else ""
    ts = _str(message.get("ts"))
    if not channel or not ts:
        return None
    action = actions[0] if isinstance(actions[0], Mapping) else {}
    label_object = action.get("text")
    label = _str(label_object.get("text")) if isinstance(label_object, Mapping) else ""
    user_id = _str(user.get("id")) if isinstance(user, Mapping) else ""
    raw_blocks = message.get("blocks")
    kept = [dict(b) for b in raw_blocks or [] if isinstance(b, Mapping) and b.get("type") != "actions"]
    who = f"<@{user_id}>" if user_id else "Someone"
    choice = {"type": "mrkdwn", "text": f"{who} chose *{escape_mrkdwn(label or 'an option')}*"}
    kept.append({"type": "context", "elements": [choice]})
    return AnsweredButtons(channel=channel, ts=ts, text=_str(message.get("text")) or label or " ", blocks=kept)


def pressed_in_rows(body: Mapping[str, Any]) -> bool:
    """Whether the press was on a message with a row of buttons per story (a digest's feedback): its answer says
    what the pressed row becomes (`Reply.pressed_row`); the other rows stay."""
    message = body.get("message")
    blocks = message.get("blocks") if isinstance(message, Mapping) else None
    rows = [b for b in blocks or [] if isinstance(b, Mapping) and b.get("type") == "actions"]
    return len(rows) > 1


def row_answered(body: Mapping[str, Any], row: tuple[Button, ...]) -> AnsweredButtons | None:
    """The pressed message with the pressed button's row replaced by `row` (its other blocks as they were); None
    when nothing changes (an empty `row`) or the payload does not carry the message and the pressed block."""
    message = body.get("message")
    container = body.get("container")
    actions = body.get("actions")
    if not row or not isinstance(message, Mapping) or not isinstance(actions, list) or not actions:
        return None
    channel = _str(container.get("channel_id")) if isinstance(container, Mapping) else ""
    ts = _str(message.get("ts"))
    action = actions[0] if isinstance(actions[0], Mapping) else {}
    pressed_block = _str(action.get("block_id"))
    blocks = [dict(b) for b in message.get("blocks") or [] if isinstance(b, Mapping)]
    if not channel or not ts or not any(b.get("block_id") == pressed_block for b in blocks):
        return None
    replacement = ActionsBlock(type="actions", elements=[button_element(button, n) for n, button in enumerate(row)])
    replacement["block_id"] = pressed_block
    updated = [dict(replacement) if b.get("block_id") == pressed_block else b for b in blocks]
    return AnsweredButtons(channel=channel, ts=ts, text=_str(message.get("text")) or " ", blocks=updated)


def _incoming(**fields: Any) -> Incoming:
    try:
        return Incoming(platform="slack", **fields)
    except ValidationError as error:
        raise ValueError(f"malformed Slack payload: {error.error_count()} invalid field(s)") from error


__all__ = [
    "SLASH_COMMANDS",
    "UMBRELLA_COMMAND",
    "AnsweredButtons",
    "SharedFile",
    "answered_buttons",
    "command_text",
    "file_to_import",
    "incoming_from_action",
    "incoming_from_command",
    "incoming_from_event",
    "pressed_in_rows",
    "row_answered",
    "slack_text_to_plain",
]
