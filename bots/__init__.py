"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from bots.dispatcher import Deliver, Dispatcher, Dispatches, SharedLocks
from bots.shared_limits import SlotReserver
from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender, build_web_client
from bots.telegram import (
    FloodLimits,
    SharedRateLimiter,
    TelegramFrontend,
    TelegramLimits,
    TelegramOptions,
    TelegramSender,
    build_bot,
)
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
    "FloodLimits",
    "SessionFactory",
    "SharedLocks",
    "SharedRateLimiter",
    "SlackFrontend",
    "SlackSender",
    "SlotReserver",
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
