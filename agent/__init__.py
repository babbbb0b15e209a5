"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from agent.access import AccessPolicy
    from agent.chat.agent import ChatAgent
    from agent.commands import CommandRouter, bot_commands, is_instant_command, slack_commands
    from agent.context import AfterReply, ConversationSettings, Services, Turn, ignore_progress
    from agent.conversation import Conversation
    from agent.messages import MAX_INCOMING_FILE_BYTES, Incoming, IncomingFile

__all__ = [
    "MAX_INCOMING_FILE_BYTES",
    "AccessPolicy",
    "AfterReply",
    "ChatAgent",
    "CommandRouter",
    "Conversation",
    "ConversationSettings",
    "Incoming",
    "IncomingFile",
    "Services",
    "Turn",
    "bot_commands",
    "ignore_progress",
    "is_instant_command",
    "slack_commands",
]

_SUBMODULES = {
    "access": ["AccessPolicy"],
    "chat.agent": ["ChatAgent"],
    "commands": ["CommandRouter", "bot_commands", "is_instant_command", "slack_commands"],
    "context": ["AfterReply", "ConversationSettings", "Services", "Turn", "ignore_progress"],
    "conversation": ["Conversation"],
    "messages": ["Incoming", "IncomingFile", "MAX_INCOMING_FILE_BYTES"],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
