"""What every chat-agent tool gets through `RunContext`: the services, the turn, and what the run collects
(attachments for the reply, proposed monitor changes), plus the bridge from research progress to the chat."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from agent.confirmations import MonitorAction
from agent.context import Services, Turn
from agent.messages import Attachment, ProgressSink, ProgressUpdate
from research import ProgressEvent

__all__ = ["ChatDeps", "ProgressRelay"]

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class ChatDeps:
    """The typed dependencies of one agent run (one free-text message)."""

    services: Services
    turn: Turn
    timezone: str
    """The chat's IANA timezone (see `chat_timezone`)."""
    summary: str | None = None
    """The conversation's rolling summary, shown in the instructions."""
    attachments: list[Attachment] = field(default_factory=list)
    """Files the tools produced (CSV, chart); sent with the reply."""
    proposals: list[MonitorAction] = field(default_factory=list)
    """Monitor changes the tools proposed; the reply asks the person to confirm them."""
    read_untrusted: bool = False
    """A tool handed the model fetched text in this run (proposals after it carry a warning)."""

    @property
    def chat_id(self) -> int:
        return self.turn.chat.id

    @property
    def now(self) -> datetime:
        return self.services.clock()

    @property
    def exports_dir(self) -> Path:
        """Where this chat's files go: one folder per chat, so names never clash across chats."""
        return self.services.settings.exports_dir / f"chat-{self.turn.chat.id}"

    def attach(self, attachment: Attachment) -> None:
        if all(existing.path != attachment.path for existing in self.attachments):
            self.attachments.append(attachment)

    async def say(self, text: str, *, done: bool = False) -> None:
        """Send one progress line to the chat; a failing display never breaks the tool."""
        try:
            await self.turn.progress(ProgressUpdate(text=_line(text), done=done))
        except Exception:
            logger.exception("progress sink failed")


def _line(text: str) -> str:
    flat = " ".join(text.split()) or "working…"
    return flat if len(flat) <= 500 else flat[:499] + "…"


class ProgressRelay:
    """Turns research's synchronous progress events into the chat's async progress updates.

    Events can arrive faster than a chat can edit a message; only the latest one is sent each time the relay
    gets to it (older ones are superseded), and the last one is flushed when the block ends.
    """

    def __init__(self, sink: ProgressSink, *, prefix: str = "") -> None:
        self._sink = sink
        self._prefix = prefix
        self._latest: str | None = None
        self._sent: str | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def __call__(self, event: ProgressEvent) -> None:
        counter = f" ({event.done}/{event.total})" if event.total else ""
        self._latest = _line(f"{self._prefix}{event.message}{counter}")
        self._wake.set()

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._forward())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._send_latest()

    async def _forward(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._send_latest()

    async def _send_latest(self) -> None:
        latest = self._latest
        if latest is None or latest == self._sent:
            return
        self._sent = latest
        try:
            await self._sink(ProgressUpdate(text=latest))
        except Exception:
            logger.exception("progress sink failed")
