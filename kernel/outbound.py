"""What Lookout says to a chat, in one platform-neutral shape: a `Reply` (answer, digest, briefing, notice) with
its files and buttons, a `ProgressUpdate` for the status line, and the contract of a platform's one sender.

It lives in `kernel`, below every layer, so the delivery worker (`monitors`), the conversation (`agent`) and the
platforms (`bots`) speak the same type, and each platform has one sender for both: the frontends send answers with
it, the worker sends digests with it. A sender addresses a `Recipient` (what it reads of a chat); `storage`'s
`ChatRecord` is one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "CALLBACK_DATA_MAX_BYTES",
    "MAX_BUTTONS",
    "AddressedSender",
    "Attachment",
    "AttachmentKind",
    "Button",
    "ChatGone",
    "ChatMoved",
    "ChatSender",
    "DeliveryError",
    "ProgressSink",
    "ProgressUpdate",
    "Purpose",
    "Recipient",
    "Reply",
    "RetryLater",
]

AttachmentKind = Literal["document", "image"]
"""How an adapter sends a file: a document (CSV, JSON) or an image shown inline (a chart)."""

Purpose = Literal["answer", "digest", "briefing", "notice"]
"""Why Lookout says it: an answer to a message, a monitor's digest, a chat's briefing, a notice (a monitor that
keeps failing). Platforms may present them differently (a digest's first line is a header block on Slack)."""

CALLBACK_DATA_MAX_BYTES = 64
"""Telegram's limit for inline-button callback data (Slack's action values allow more; the smaller wins)."""


MAX_BUTTONS = 40
"""Buttons under one message: a digest's five per story for up to seven stories (Telegram allows 100, Slack 25 per
row and 50 blocks per message)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Attachment(_Frozen):
    """A file sent after a message's text: a CSV as a document, a chart as an image."""

    path: Path
    """Where the file is on disk (written by research exports or the chart renderer)."""
    filename: str = Field(min_length=1, max_length=255)
    """The name the person sees, e.g. `deepseek-2026-03-01.csv`, not the name on disk."""
    kind: AttachmentKind = "document"
    """Document (sent as a file) or image (shown inline, e.g. a chart)."""
    caption: str | None = Field(default=None, max_length=1024)
    """A short plain-text line shown with the file (Telegram captions stop at 1024 characters)."""


class Button(_Frozen):
    """A button under a message, e.g. to confirm a monitor change; pressing it comes back as an `Incoming`
    whose `callback_data` is this button's."""

    label: str = Field(min_length=1, max_length=64)
    """What the button says ("Yes, create it")."""
    callback_data: str = Field(min_length=1, max_length=CALLBACK_DATA_MAX_BYTES)
    """Opaque data the conversation layer reads back; at most 64 bytes in UTF-8 (Telegram's limit)."""
    row: int | None = None
    """Buttons with the same row sit on one line, in row order (a digest's row of feedback per story); None: the
    platform lays the buttons out its own way."""

    @model_validator(mode="after")
    def _fits_telegram(self) -> Button:
        if len(self.callback_data.encode()) > CALLBACK_DATA_MAX_BYTES:
            raise ValueError(f"callback_data is over {CALLBACK_DATA_MAX_BYTES} bytes in UTF-8")
        return self


class Reply(_Frozen):
    """One message Lookout sends to a chat — an answer, a digest, a briefing, a notice: markdown text, then any
    number of files in order, and buttons. Each platform's sender renders and splits it."""

    kind: Literal["reply"] = "reply"
    """Tells messages from progress updates in a stream of both."""
    text: str = ""
    """Markdown (bold, italics, links, lists, code); the sender converts and splits it for the platform."""
    attachments: tuple[Attachment, ...] = ()
    """Files to send after the text, in order (a digest's CSV and chart)."""
    buttons: tuple[Button, ...] = Field(default=(), max_length=MAX_BUTTONS)
    """Buttons shown under the text (confirmations, a digest's feedback rows); platforms without buttons show the
    labels as text."""
    pressed_row: tuple[Button, ...] | None = None
    """When answering a button press: what the pressed button's row becomes (an acknowledgment in place, e.g.
    "✓ 👎 recorded · undo"; empty: the row stays as it was), the message's other buttons kept; None: the pressed
    message's buttons are taken off."""
    purpose: Purpose = "answer"
    run_id: int | None = None
    """The run a digest or notice reports (for logs and tests); None for answers."""

    @model_validator(mode="after")
    def _says_something(self) -> Reply:
        if not self.text.strip() and not self.attachments:
            raise ValueError("a reply needs text or an attachment")
        return self


class ProgressUpdate(_Frozen):
    """A status line while long work runs ("collecting 6 sources… 143 items"). Adapters show the latest one
    in a single status message they edit in place, instead of sending a new message each time."""

    kind: Literal["progress"] = "progress"
    """Tells progress updates from messages in a stream of both."""
    text: str = Field(min_length=1, max_length=500)
    """The current state of the work, one short line."""
    done: bool = False
    """The work finished: the status line shows it as done."""


ProgressSink = Callable[[ProgressUpdate], Awaitable[None]]
"""What the conversation layer calls to report progress; the adapter supplies it per message."""


class DeliveryError(Exception):
    """A platform refused or failed to take a message; the subclass says what to do about it."""


class RetryLater(DeliveryError):
    """A transient failure (429, 5xx, network): try again, not before `retry_after` seconds if given."""

    def __init__(self, message: str = "try again later", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChatGone(DeliveryError):
    """A permanent failure: the bot was blocked, kicked, or the chat was deleted. Never retried."""


class ChatMoved(DeliveryError):
    """The chat has a new id on its platform (a Telegram group became a supergroup): resend there."""

    def __init__(self, new_external_id: str, message: str = "chat moved") -> None:
        super().__init__(message)
        self.new_external_id = new_external_id


class Recipient(Protocol):
    """The chat a message is sent to, as a sender reads it (`storage.ChatRecord` is one)."""

    @property
    def id(self) -> int:
        """Lookout's own id of the chat (a destination's row is found by it)."""
        ...

    @property
    def platform(self) -> str:
        """The platform the chat is on (`telegram`, `slack`, `terminal`, `apprise`, `webhook`)."""
        ...

    @property
    def external_id(self) -> str:
        """The platform's id of the chat (Telegram chat id, Slack channel id)."""
        ...


PartT = TypeVar("PartT")


class ChatSender(Protocol[PartT]):
    """A platform's one sender (implemented in bots/, registered by app): a message is cut into parts (text
    parts, then files), each sent by one platform call. The delivery worker stores how many parts of a digest
    were confirmed sent, so after a crash only the part in flight may arrive twice."""

    def parts(self, message: Reply) -> Sequence[PartT]:
        """The message as the platform calls that send it, in order (the same message gives the same parts)."""
        ...

    async def send_part(self, chat: Recipient, part: PartT) -> None:
        """Send one part; raise `RetryLater`, `ChatGone`, `ChatMoved` or `DeliveryError` on failure."""
        ...


@runtime_checkable
class AddressedSender(ChatSender[PartT], Protocol[PartT]):
    """A sender whose parts depend on the recipient, not only on the message (a destination: an email is one part,
    a Discord channel's text is cut at 2000 characters); the delivery worker asks it `parts_for` instead of `parts`."""

    async def parts_for(self, chat: Recipient, message: Reply) -> Sequence[PartT]:
        """The message as the calls that send it to this chat, in order (the same message and chat give the same
        parts)."""
        ...
