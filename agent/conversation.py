"""One message in, replies out: confirmations first, then `/commands`, then free text for the chat agent."""

from __future__ import annotations

import logging
from typing import Protocol

from agent.commands.catalogue import START_TEXT, Command, parse_command
from agent.commands.grammar import CommandError, ParseOptions, visible
from agent.context import ConversationSettings, Turn
from agent.messages import Incoming
from kernel import Reply
from monitors import effective_timezone

__all__ = ["UNKNOWN_BUTTON_MESSAGE", "CommandHandler", "Conversation", "FreeTextHandler", "parse_options_for"]

logger = logging.getLogger(__name__)

UNKNOWN_BUTTON_MESSAGE = "That button is no longer active; send the command or your request again."


def nothing_to_read(incoming: Incoming) -> str:
    """The answer to a message for the bot with no text in it: what it could not read and what works instead."""
    if incoming.unreadable is None and incoming.mentions_bot and not incoming.is_private:
        # on every platform: the person is waiting for something, so say what Lookout does
        return f"You mentioned me without a question: write it in the same message as the mention.\n\n{START_TEXT}"
    if incoming.unreadable is None:
        return "That message looks empty to me: write what you want in words, or send /help."
    answer = f"I only read text, so I can't see {incoming.unreadable}. Write what you want in words, or send /help."
    if incoming.unreadable == "a file":
        answer += " To import feeds, send the file again with the caption /import."
    return answer


class CommandHandler(Protocol):
    """Executes a parsed command for the chat that sent it (`agent.commands.router.CommandRouter`)."""

    async def execute(self, command: Command, turn: Turn) -> list[Reply]: ...


class FreeTextHandler(Protocol):
    """The chat agent (`agent.chat.agent.ChatAgent`): answers free text and settles pending confirmations."""

    async def settle_confirmation(self, turn: Turn) -> list[Reply] | None:
        """The answer to a button press or a "yes"/"no" for a pending confirmation; None when the message
        is not one (then it is handled as a command or free text)."""
        ...

    async def reply(self, turn: Turn) -> list[Reply]: ...


def parse_options_for(turn: Turn, settings: ConversationSettings) -> ParseOptions:
    """How to parse this chat's commands: its timezone, the monitor interval floor, the bot's name."""
    return ParseOptions(
        timezone=effective_timezone(turn.chat, settings.default_timezone),
        min_interval_seconds=settings.min_interval_seconds,
        bot_username=settings.bot_username,
    )


class Conversation:
    """The platform-neutral conversation layer the dispatcher hands every accepted message to."""

    def __init__(self, *, commands: CommandHandler, free_text: FreeTextHandler, settings: ConversationSettings) -> None:
        self._commands = commands
        self._free_text = free_text
        self._settings = settings

    async def respond(self, turn: Turn) -> list[Reply]:
        """The replies to one message, in order; empty when the message is not for the bot (group chatter)."""
        settled = await self._free_text.settle_confirmation(turn)
        if settled is not None:
            return settled
        text = turn.incoming.text
        data = turn.incoming.callback_data
        if data is not None:
            if not data.startswith("/"):
                # A button press nothing here knows (an old message's, another bot's, or forged): its label is not
                # something the person wrote, so it is neither a command nor free text for the model.
                logger.info("chat %d: a press of an unknown button (%r) was not acted on", turn.chat.id,
                            data[:64])  # fmt: skip
                return [Reply(text=UNKNOWN_BUTTON_MESSAGE)]
            # A button may carry a command of its own (/browse's "Subscribe #3" is `/subscribe 3`): it is what the
            # person could have typed, so it goes through the same parser and access rules.
            text = data
        parsed = parse_command(text, options=parse_options_for(turn, self._settings))
        if isinstance(parsed, CommandError):
            return [Reply(text=parsed.text)]
        if parsed is not None:
            return await self._commands.execute(parsed, turn)
        if not turn.incoming.addressed_to_bot:
            return []
        if not visible(turn.incoming.text).strip():  # a sticker, a bare @mention, zero-width spaces: say why not
            return [Reply(text=nothing_to_read(turn.incoming))]
        return await self._free_text.reply(turn)
