"""What every chat-agent tool gets through `RunContext`: the services, the turn, and what the run collects
(attachments for the reply, proposed monitor changes), plus the bridge from research progress to the chat."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from agent.commands.common import chat_exports_dir
from agent.commands.progress import fit_line
from agent.confirmations import MonitorAction
from agent.context import Services, Turn
from kernel import Attachment, ProgressUpdate

__all__ = ["ChatDeps"]

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
    offered_tools: frozenset[str] | None = None
    """The tools this turn is offered when they are chosen by its message (`agent.chat.tool_choice`); None: all."""

    @property
    def chat_id(self) -> int:
        return self.turn.chat.id

    @property
    def now(self) -> datetime:
        return self.services.clock()

    @property
    def exports_dir(self) -> Path:
        """Where this chat's files go: the chat's one folder, as for its commands (see `chat_exports_dir`)."""
        return chat_exports_dir(self.services, self.turn)

    def attach(self, attachment: Attachment) -> None:
        if all(existing.path != attachment.path for existing in self.attachments):
            self.attachments.append(attachment)

    async def say(self, text: str, *, done: bool = False) -> None:
        """Send one progress line to the chat; a failing display never breaks the tool."""
        try:
            await self.turn.progress(ProgressUpdate(text=fit_line(text), done=done))
        except Exception:
            logger.exception("progress sink failed")
