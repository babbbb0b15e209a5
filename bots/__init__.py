"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.dispatcher import Deliver, Dispatcher, Dispatches, SharedLocks
from bots.shared_limits import SlotReserver
from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender
from bots.telegram import (
    FloodLimits,
    SharedRateLimiter,
    TelegramFrontend,
    TelegramOptions,
    TelegramSender,
)
from bots.terminal import ConsoleSender, SessionFactory, TerminalChat, run_terminal_chat

__all__ = [
    "ConsoleSender",
    "CredentialsRefusedError",
    "Deliver",
    "Dispatcher",
    "Dispatches",
    "FloodLimits",
    "SessionFactory",
    "SharedLocks",
    "SharedRateLimiter",
    "SlackFrontend",
    "SlackSender",
    "SlotReserver",
    "TelegramFrontend",
    "TelegramOptions",
    "TelegramSender",
    "TerminalChat",
    "run_terminal_chat",
]
