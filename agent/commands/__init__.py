"""The `/commands`: the catalogue of chat actions (one definition each, in its family's module), the parser and
router derived from it, and the progress relay long commands report through."""

from agent.commands.action import Action
from agent.commands.catalogue import ACTIONS, bot_commands, is_instant_command, slack_commands
from agent.commands.router import CommandRouter

__all__ = [
    "ACTIONS",
    "Action",
    "CommandRouter",
    "bot_commands",
    "is_instant_command",
    "slack_commands",
]
