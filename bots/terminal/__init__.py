"""The terminal chat: a REPL on the dispatcher that prints replies, progress and delivered digests; its renderer
also draws the CLI's output."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from bots.terminal.chat import TERMINAL_CHAT_ID, ConsoleSender, SessionFactory, TerminalChat, run_terminal_chat
    from bots.terminal.render import markdown_to_plain, render_markdown, terminal_safe

__all__ = [
    "TERMINAL_CHAT_ID",
    "ConsoleSender",
    "SessionFactory",
    "TerminalChat",
    "markdown_to_plain",
    "render_markdown",
    "run_terminal_chat",
    "terminal_safe",
]

_SUBMODULE_OF = {
    "TERMINAL_CHAT_ID": "chat",
    "ConsoleSender": "chat",
    "SessionFactory": "chat",
    "TerminalChat": "chat",
    "run_terminal_chat": "chat",
    "markdown_to_plain": "render",
    "render_markdown": "render",
    "terminal_safe": "render",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
