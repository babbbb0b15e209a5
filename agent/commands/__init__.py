"""The `/commands`: the catalogue of chat actions (one definition each, in its family's module), the parser and
router derived from it, and the progress relay long commands report through."""

from agent.commands.action import Action
from agent.commands.catalogue import (
    ACTIONS,
    CATALOGUE,
    Command,
    action_named,
    bot_commands,
    help_text,
    is_instant_command,
    parse_command,
    parse_command_words,
    parse_prefixed,
    slack_commands,
    usage_of,
)
from agent.commands.grammar import CommandError, ParseOptions
from agent.commands.progress import ProgressRelay
from agent.commands.router import CommandRouter

__all__ = [
    "ACTIONS",
    "CATALOGUE",
    "Action",
    "Command",
    "CommandError",
    "CommandRouter",
    "ParseOptions",
    "ProgressRelay",
    "action_named",
    "bot_commands",
    "help_text",
    "is_instant_command",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
    "slack_commands",
    "usage_of",
]
