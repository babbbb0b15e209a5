"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.dispatcher import Deliver, Dispatcher, Dispatches, SharedLocks
from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender
from bots.telegram import TelegramFrontend, TelegramOptions, TelegramSender
from bots.terminal import ConsoleSender, SessionFactory, TerminalChat, run_terminal_chat

__all__ = [
    "ConsoleSender",
    "CredentialsRefusedError",
    "Deliver",
    "Dispatcher",
    "Dispatches",
    "SessionFactory",
    "SharedLocks",
    "SlackFrontend",
    "SlackSender",
    "TelegramFrontend",
    "TelegramOptions",
    "TelegramSender",
    "TerminalChat",
    "run_terminal_chat",
]
