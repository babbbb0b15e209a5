"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from bots.dispatcher import Dispatcher, Dispatches, SharedLocks
    from bots.shared_limits import SlotReserver
    from bots.slack import CredentialsRefusedError, SlackFrontend, SlackSender, build_web_client
    from bots.telegram import (
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
        render_markdown,
        run_terminal_chat,
        terminal_safe,
    )

__all__ = [
    "TERMINAL_CHAT_ID",
    "ConsoleSender",
    "CredentialsRefusedError",
    "Dispatcher",
    "Dispatches",
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
    "build_bot",
    "build_web_client",
    "render_markdown",
    "run_terminal_chat",
    "terminal_safe",
]

_SUBMODULES = {
    "dispatcher": ["Dispatcher", "Dispatches", "SharedLocks"],
    "shared_limits": ["SlotReserver"],
    "slack": ["CredentialsRefusedError", "SlackFrontend", "SlackSender", "build_web_client"],
    "telegram": [
        "SharedRateLimiter",
        "TelegramFrontend",
        "TelegramLimits",
        "TelegramOptions",
        "TelegramSender",
        "build_bot",
    ],
    "terminal": [
        "ConsoleSender",
        "SessionFactory",
        "TERMINAL_CHAT_ID",
        "render_markdown",
        "run_terminal_chat",
        "terminal_safe",
    ],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
