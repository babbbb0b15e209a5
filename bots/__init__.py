"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.dispatcher import Deliver, Dispatcher, Dispatches
from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender
from bots.telegram import TelegramFrontend, TelegramOptions, TelegramSender
from bots.terminal import (
    TERMINAL_CHAT_ID,
    ConsoleSender,
    SessionFactory,
    TerminalChat,
    markdown_to_plain,
    render_markdown,
    run_terminal_chat,
    terminal_safe,
)

__all__ = [
    "TERMINAL_CHAT_ID",
    "ConsoleSender",
    "CredentialsRefusedError",
    "Deliver",
    "Dispatcher",
    "Dispatches",
    "SessionFactory",
    "SlackFrontend",
    "SlackSender",
    "TelegramFrontend",
    "TelegramOptions",
    "TelegramSender",
    "TerminalChat",
    "markdown_to_plain",
    "render_markdown",
    "run_terminal_chat",
    "terminal_safe",
]
