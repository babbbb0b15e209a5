"""Executes every `/command` for the chat that sent it: the catalogue's action of that name runs it."""

from __future__ import annotations

import logging

from agent.commands.catalogue import Command, action_named
from agent.context import Services, Turn
from kernel import Reply

__all__ = ["CommandRouter"]

logger = logging.getLogger(__name__)


class CommandRouter:
    """The `CommandHandler` of `agent.conversation.Conversation`: runs a parsed command for `turn.chat`.

    Expected refusals (unknown monitor, another chat's monitor, bad schedule or sources) come back as a short
    reply; anything unexpected propagates to the dispatcher's error boundary.
    """

    def __init__(self, services: Services) -> None:
        self._services = services

    async def execute(self, command: Command, turn: Turn) -> list[Reply]:
        """The replies to one parsed command, acting only on `turn.chat` (admins on any monitor)."""
        logger.info("chat %d: /%s", turn.chat.id, command.name)
        action = action_named(command.name)
        if action is None:  # only a parser of this catalogue makes commands
            raise LookupError(f"no action /{command.name}")
        return await action.perform(self._services, turn, command)
