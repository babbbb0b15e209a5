"""The platform-neutral messages between chat adapters and the conversation layer: Incoming in, Reply out."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, field_validator, model_validator

__all__ = [
    "CALLBACK_DATA_MAX_BYTES",
    "MAX_INCOMING_FILE_BYTES",
    "Attachment",
    "AttachmentKind",
    "Button",
    "Incoming",
    "IncomingFile",
    "Outgoing",
    "Platform",
    "ProgressSink",
    "ProgressUpdate",
    "Reply",
]

Platform = Literal["telegram", "slack", "terminal"]
"""The chat platforms Lookout speaks; stored as `chats.platform`."""

AttachmentKind = Literal["document", "image"]
"""How an adapter sends a file: a document (CSV, JSON) or an image shown inline (a chart)."""

CALLBACK_DATA_MAX_BYTES = 64
"""Telegram's limit for inline-button callback data (Slack's action values allow more; the smaller wins)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


MAX_INCOMING_FILE_BYTES = 1_000_000
"""Documents sent to the bot are read up to this size (what /import accepts); larger ones are not downloaded."""


class IncomingFile(_Frozen):
    """A document that came with a message (a file to /import): its name, size and, when small enough, content."""

    filename: str = Field(default="file", max_length=255)
    size: int = Field(default=0, ge=0)
    """Bytes, as the platform reported them."""
    content: bytes | None = Field(default=None, max_length=MAX_INCOMING_FILE_BYTES)
    """None when it was too large to download or the download failed (see `problem`)."""
    problem: str | None = Field(default=None, max_length=300)
    """Why there is no content, in a sentence for the person."""


class Incoming(_Frozen):
    """One message (or button press) from a person, as every adapter hands it to the dispatcher."""

    platform: Platform
    """Where it came from."""
    chat_external_id: str = Field(min_length=1, max_length=128)
    """The platform's chat id (Telegram chat id, Slack channel id, "terminal" for the REPL)."""
    user_external_id: str = Field(min_length=1, max_length=128)
    """The platform's id of the person who wrote (Telegram user id, Slack user id)."""
    thread_key: str = Field(default="", max_length=128)
    """The thread inside the chat ("" for chats without threads; Slack's thread_ts). Memory is per thread."""
    text: str = Field(default="", max_length=100_000)
    """The message text, bot mention already stripped by the adapter. For a button press: the button's label."""
    message_id: str | None = Field(default=None, max_length=128)
    """The platform's id of this message (Telegram message_id, Slack ts), for replying to it."""
    event_id: str | None = Field(default=None, max_length=128)
    """The platform's delivery id the dispatcher de-duplicates on (Telegram update_id, Slack event_id);
    None when the platform never redelivers (the terminal)."""
    callback_data: str | None = Field(default=None, max_length=CALLBACK_DATA_MAX_BYTES)
    """Set when the person pressed one of our buttons: the `Button.callback_data` we sent."""
    is_private: bool = False
    """A one-to-one chat with the bot (Telegram private chat, Slack DM, the terminal)."""
    mentions_bot: bool = False
    """The message @-mentions the bot (groups and channels)."""
    reply_to_bot: bool = False
    """The message replies to one of the bot's messages (groups)."""
    user_display_name: str | None = Field(default=None, max_length=256)
    """How the person is called, for greetings and logs; never used for access decisions."""
    chat_title: str | None = Field(default=None, max_length=256)
    """The group or channel name (None for private chats)."""
    file: IncomingFile | None = None
    """A document sent with the message (Telegram: a document whose caption is the command; Slack: a shared file)."""

    @field_validator("text", "user_display_name", "chat_title")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        # PostgreSQL text cannot hold NUL; a pasted NUL must not fail a /track or the memory write later on.
        return value.replace("\x00", "") if value is not None else None

    @property
    def addressed_to_bot(self) -> bool:
        """Whether free text in this message is meant for the bot: private chats always, groups only when
        the bot is mentioned or replied to (commands and button presses are always for the bot)."""
        return self.is_private or self.mentions_bot or self.reply_to_bot or self.callback_data is not None

    @property
    def conversation_key(self) -> tuple[str, str, str]:
        """`(platform, chat, thread)`: what the dispatcher locks on and memory is stored by."""
        return (self.platform, self.chat_external_id, self.thread_key)


class Attachment(_Frozen):
    """A file sent along with a reply."""

    path: Path
    """Where the file is on disk (written by research exports or the chart renderer)."""
    filename: str = Field(min_length=1, max_length=255)
    """The name the person sees, e.g. `deepseek-2026-03-01.csv`."""
    kind: AttachmentKind = "document"
    """Document (sent as a file) or image (shown inline, e.g. a chart)."""
    caption: str | None = Field(default=None, max_length=1024)
    """A short line shown with the file (Telegram captions stop at 1024 characters)."""


class Button(_Frozen):
    """A button under a reply, e.g. to confirm a monitor change; pressing it comes back as an `Incoming`
    whose `callback_data` is this button's."""

    label: str = Field(min_length=1, max_length=64)
    """What the button says ("Yes, create it")."""
    callback_data: str = Field(min_length=1, max_length=CALLBACK_DATA_MAX_BYTES)
    """Opaque data the conversation layer reads back; at most 64 bytes in UTF-8 (Telegram's limit)."""

    @model_validator(mode="after")
    def _fits_telegram(self) -> Button:
        if len(self.callback_data.encode()) > CALLBACK_DATA_MAX_BYTES:
            raise ValueError(f"callback_data is over {CALLBACK_DATA_MAX_BYTES} bytes in UTF-8")
        return self


class Reply(_Frozen):
    """A finished answer: markdown text, optional files and buttons. Adapters render it per platform."""

    kind: Literal["reply"] = "reply"
    """Tells replies from progress updates in an `Outgoing` stream."""
    text: str = ""
    """Markdown (bold, italics, links, lists, code); the adapter converts and splits it for the platform."""
    attachments: tuple[Attachment, ...] = ()
    """Files to send after the text, in order."""
    buttons: tuple[Button, ...] = Field(default=(), max_length=8)
    """Buttons shown under the text (confirmations); platforms without buttons show the labels as text."""

    @model_validator(mode="after")
    def _says_something(self) -> Reply:
        if not self.text.strip() and not self.attachments:
            raise ValueError("a reply needs text or an attachment")
        return self


class ProgressUpdate(_Frozen):
    """A status line while long work runs ("collecting 6 sources… 143 items"). Adapters show the latest one
    in a single status message they edit in place, instead of sending a new message each time."""

    kind: Literal["progress"] = "progress"
    """Tells progress updates from replies in an `Outgoing` stream."""
    text: str = Field(min_length=1, max_length=500)
    """The current state of the work, one short line."""
    done: bool = False
    """The work finished: the adapter may finalise or remove the status message."""


Outgoing = Annotated[Reply | ProgressUpdate, Discriminator("kind")]
"""Anything the conversation layer sends to a chat."""

ProgressSink = Callable[[ProgressUpdate], Awaitable[None]]
"""What the conversation layer calls to report progress; the adapter supplies it per message."""
