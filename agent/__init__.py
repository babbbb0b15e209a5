"""The conversation: command router, the pydantic-ai chat agent, its tools, memory, quotas and usage."""

from agent.command_parser import ParseOptions, parse_command, parse_command_words, parse_prefixed
from agent.commands import COMMAND_SPECS, Command, CommandError, bot_commands, help_text
from agent.memory import ConversationMemory, MemoryWindow
from agent.messages import Attachment, Button, Incoming, Outgoing, ProgressUpdate, Reply

__all__ = [
    "COMMAND_SPECS",
    "Attachment",
    "Button",
    "Command",
    "CommandError",
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
