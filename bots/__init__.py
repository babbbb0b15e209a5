"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.dispatcher import Deliver, Dispatcher, Dispatches
from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender, build_web_client
from bots.telegram import TelegramFrontend, TelegramLimits, TelegramOptions, TelegramSender, build_bot
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
    "TelegramLimits",
    "TelegramOptions",
    "TelegramSender",
    "TerminalChat",
    "build_bot",
    "build_web_client",
    "markdown_to_plain",
    "render_markdown",
    "run_terminal_chat",
    "terminal_safe",
]
