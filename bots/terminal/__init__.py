"""The terminal chat: a REPL on the dispatcher that prints replies, progress and delivered digests; its renderer
also draws the CLI's output."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from bots.terminal.chat import TERMINAL_CHAT_ID, ConsoleSender, SessionFactory, run_terminal_chat
    from bots.terminal.render import render_markdown, terminal_safe

__all__ = [
    "TERMINAL_CHAT_ID",
    "ConsoleSender",
    "SessionFactory",
    "render_markdown",
    "run_terminal_chat",
    "terminal_safe",
]

_SUBMODULES = {
    "chat": ["ConsoleSender", "SessionFactory", "TERMINAL_CHAT_ID", "run_terminal_chat"],
    "render": ["render_markdown", "terminal_safe"],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
