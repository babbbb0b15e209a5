"""The neutral messages: what adapters may build, and what they are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from agent.messages import Incoming, Outgoing
from kernel import Attachment, Button, ProgressUpdate, Reply


def incoming(**changes: object) -> Incoming:
    fields: dict[str, object] = {
        "platform": "telegram",
        "chat_external_id": "-1001",
        "user_external_id": "42",
        "text": "hello",
    }
    return Incoming.model_validate(fields | changes)


@pytest.mark.parametrize(
    ("changes", "addressed"),
    [
        ({"is_private": True}, True),
        ({}, False),
        ({"mentions_bot": True}, True),
        ({"reply_to_bot": True}, True),
        ({"callback_data": "confirm:7"}, True),
    ],
)
def test_free_text_in_groups_is_for_the_bot_only_when_addressed(changes: dict[str, object], addressed: bool) -> None:
    assert incoming(**changes).addressed_to_bot is addressed


def test_incoming_is_keyed_by_platform_chat_and_thread_and_frozen() -> None:
    message = incoming(platform="slack", chat_external_id="C1", thread_key="1700000000.000100", event_id="Ev1")
    assert message.conversation_key == ("slack", "C1", "1700000000.000100")
    with pytest.raises(ValidationError):
        message.text = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    "changes",
    [{"platform": "irc"}, {"chat_external_id": ""}, {"user_external_id": ""}, {"unknown_field": 1}],
)
def test_incoming_refuses_malformed_fields(changes: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        incoming(**changes)


def test_reply_needs_text_or_a_file() -> None:
    with pytest.raises(ValidationError):
        Reply(text="  ")
    chart = Attachment(path=Path("/tmp/chart.png"), filename="deepseek-2026-03-01.png", kind="image")
    assert Reply(attachments=(chart,)).attachments[0].kind == "image"
    assert Attachment(path=Path("/tmp/x.csv"), filename="x.csv").kind == "document"


def test_button_callback_data_fits_telegrams_64_bytes() -> None:
    assert Button(label="Yes", callback_data="c" * 64).callback_data == "c" * 64
    with pytest.raises(ValidationError):
        Button(label="Yes", callback_data="é" * 33)  # 33 characters, 66 bytes
    with pytest.raises(ValidationError):
        Button(label="", callback_data="x")


def test_outgoing_tells_replies_from_progress_updates() -> None:
    adapter: TypeAdapter[list[Outgoing]] = TypeAdapter(list[Outgoing])
    stream: list[Outgoing] = [
        ProgressUpdate(text="collecting 6 sources… 143 items"),
        Reply(text="**Created** monitor 3", buttons=(Button(label="Undo", callback_data="undo:3"),)),
    ]
    back = adapter.validate_json(adapter.dump_json(stream))
    assert back == stream
    assert [type(item) for item in back] == [ProgressUpdate, Reply]


def test_incoming_drops_nul_characters_postgresql_cannot_store() -> None:
    incoming = Incoming(
        platform="telegram", chat_external_id="1", user_external_id="2", text="/track Deep\x00Seek", chat_title="a\x00b"
    )
    assert incoming.text == "/track DeepSeek"
    assert incoming.chat_title == "ab"
