"""The `/commands`: their table and typed forms, the parser, the router and one module per command family."""

from agent.commands.parser import ParseOptions, is_instant_command, parse_command, parse_command_words, parse_prefixed
from agent.commands.progress import ProgressRelay
from agent.commands.router import CommandRouter
from agent.commands.specs import (
    COMMAND_SPECS,
    Command,
    CommandError,
    bot_commands,
    help_text,
    usage_of,
)

__all__ = [
    "COMMAND_SPECS",
    "Command",
    "CommandError",
    "CommandRouter",
    "ParseOptions",
    "ProgressRelay",
    "bot_commands",
    "help_text",
    "is_instant_command",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
    "usage_of",
]
