"""The terminal chat: a REPL on the dispatcher that prints replies, progress and delivered digests; its renderer
also draws the CLI's output."""

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
