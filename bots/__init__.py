"""Platform adapters (Telegram, Slack, terminal) that turn platform updates into neutral messages and render replies."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
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

_SUBMODULE_OF = {
    "Deliver": "dispatcher",
    "Dispatcher": "dispatcher",
    "Dispatches": "dispatcher",
    "SharedLocks": "dispatcher",
    "SlotReserver": "shared_limits",
    "CredentialsRefusedError": "slack",
    "SlackFrontend": "slack",
    "SlackSender": "slack",
    "build_web_client": "slack",
    "FloodLimits": "telegram",
    "SharedRateLimiter": "telegram",
    "TelegramFrontend": "telegram",
    "TelegramLimits": "telegram",
    "TelegramOptions": "telegram",
    "TelegramSender": "telegram",
    "build_bot": "telegram",
    "TERMINAL_CHAT_ID": "terminal",
    "ConsoleSender": "terminal",
    "SessionFactory": "terminal",
    "TerminalChat": "terminal",
    "markdown_to_plain": "terminal",
    "render_markdown": "terminal",
    "run_terminal_chat": "terminal",
    "terminal_safe": "terminal",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
