"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

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
        ChatGone,
        ChatMoved,
        ChatSender,
        DeliveryError,
        Incoming,
        IncomingFile,
        Outgoing,
        ProgressSink,
        ProgressUpdate,
        Reply,
        RetryLater,
        new_error_id,
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
    "ChatGone",
    "ChatMoved",
    "ChatSender",
    "Command",
    "CommandError",
    "CommandRouter",
    "Conversation",
    "ConversationMemory",
    "ConversationSettings",
    "DeliveryError",
    "Incoming",
    "IncomingFile",
    "MemoryWindow",
    "Outgoing",
    "ParseOptions",
    "ProgressSink",
    "ProgressUpdate",
    "Reply",
    "RetryLater",
    "Services",
    "Turn",
    "bot_commands",
    "help_text",
    "ignore_progress",
    "is_instant_command",
    "new_error_id",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
    "slack_commands",
]

_SUBMODULES = {
    "access": ["AccessPolicy"],
    "chat.agent": ["ChatAgent"],
    "commands": [
        "CATALOGUE",
        "Command",
        "CommandError",
        "CommandRouter",
        "ParseOptions",
        "bot_commands",
        "help_text",
        "is_instant_command",
        "parse_command",
        "parse_command_words",
        "parse_prefixed",
        "slack_commands",
    ],
    "context": ["AfterReply", "ConversationSettings", "Services", "Turn", "ignore_progress"],
    "conversation": ["Conversation"],
    "memory": ["ConversationMemory", "MemoryWindow"],
    "messages": [
        "Attachment",
        "Button",
        "CALLBACK_DATA_MAX_BYTES",
        "ChatGone",
        "ChatMoved",
        "ChatSender",
        "DeliveryError",
        "Incoming",
        "IncomingFile",
        "MAX_INCOMING_FILE_BYTES",
        "Outgoing",
        "ProgressSink",
        "ProgressUpdate",
        "Reply",
        "RetryLater",
        "new_error_id",
    ],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
