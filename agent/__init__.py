"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

from agent.access import AccessPolicy
from agent.chat import ChatAgent
from agent.command_parser import ParseOptions, parse_command, parse_command_words, parse_prefixed
from agent.commands import COMMAND_SPECS, Command, CommandError, bot_commands, help_text
from agent.memory import ConversationMemory, MemoryWindow
from agent.messages import Attachment, Button, Incoming, Outgoing, ProgressUpdate, Reply
from agent.router import CommandRouter

__all__ = [
    "COMMAND_SPECS",
    "AccessPolicy",
    "Attachment",
    "Button",
    "ChatAgent",
    "Command",
    "CommandError",
    "CommandRouter",
    "ConversationMemory",
    "Incoming",
    "MemoryWindow",
    "Outgoing",
    "ParseOptions",
    "ProgressUpdate",
    "Reply",
    "bot_commands",
    "help_text",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
]
