"""The terminal chat: a REPL on the dispatcher that prints replies, progress and delivered digests."""

from bots.terminal.chat import ConsoleSender, SessionFactory, TerminalChat, run_terminal_chat

__all__ = ["ConsoleSender", "SessionFactory", "TerminalChat", "run_terminal_chat"]
