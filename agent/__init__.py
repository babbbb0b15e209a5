"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from agent.access import AccessPolicy
    from agent.chat.agent import ChatAgent
    from agent.commands import (
        CATALOGUE,
        Command,
        CommandError,
        CommandRouter,
        ParseOptions,
        bot_commands,
        help_text,
        is_instant_command,
        parse_command,
        parse_command_words,
        parse_prefixed,
        slack_commands,
    )
    from agent.context import AfterReply, ConversationSettings, Services, Turn, ignore_progress
    from agent.conversation import Conversation
    from agent.memory import ConversationMemory, MemoryWindow
    from agent.messages import (
        CALLBACK_DATA_MAX_BYTES,
        MAX_INCOMING_FILE_BYTES,
        Attachment,
        Button,
        Incoming,
        IncomingFile,
        Outgoing,
        ProgressSink,
        ProgressUpdate,
        Reply,
    )

__all__ = [
    "CALLBACK_DATA_MAX_BYTES",
    "CATALOGUE",
    "MAX_INCOMING_FILE_BYTES",
    "AccessPolicy",
    "AfterReply",
    "Attachment",
    "Button",
    "ChatAgent",
    "Command",
    "CommandError",
    "CommandRouter",
    "Conversation",
    "ConversationMemory",
    "ConversationSettings",
    "Incoming",
    "IncomingFile",
    "MemoryWindow",
    "Outgoing",
    "ParseOptions",
    "ProgressSink",
    "ProgressUpdate",
    "Reply",
    "Services",
    "Turn",
    "bot_commands",
    "help_text",
    "ignore_progress",
    "is_instant_command",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
    "slack_commands",
]

_SUBMODULE_OF = {
    "AccessPolicy": "access",
    "ChatAgent": "chat.agent",
    "CATALOGUE": "commands",
    "Command": "commands",
    "CommandError": "commands",
    "CommandRouter": "commands",
    "ParseOptions": "commands",
    "bot_commands": "commands",
    "help_text": "commands",
    "is_instant_command": "commands",
    "parse_command": "commands",
    "parse_command_words": "commands",
    "parse_prefixed": "commands",
    "slack_commands": "commands",
    "AfterReply": "context",
    "ConversationSettings": "context",
    "Services": "context",
    "Turn": "context",
    "ignore_progress": "context",
    "Conversation": "conversation",
    "ConversationMemory": "memory",
    "MemoryWindow": "memory",
    "Attachment": "messages",
    "Button": "messages",
    "CALLBACK_DATA_MAX_BYTES": "messages",
    "Incoming": "messages",
    "IncomingFile": "messages",
    "MAX_INCOMING_FILE_BYTES": "messages",
    "Outgoing": "messages",
    "ProgressSink": "messages",
    "ProgressUpdate": "messages",
    "Reply": "messages",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
