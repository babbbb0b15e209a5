"""Reading the terminal chat's lines: readline editing and history on a terminal, plain lines from a pipe."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TextIO

__all__ = ["HISTORY_LENGTH", "LineReader"]

HISTORY_LENGTH = 1000
"""Lines of history kept between sessions."""


def _load_readline() -> ModuleType | None:
    try:
        import readline  # importing it changes input(): only on a terminal
    except ImportError:  # Windows without pyreadline: plain input() still works
        return None
    return readline


class LineReader:
    """One line at a time from the person; `read` returns None at the end (Ctrl-D, end of piped input).

    On a terminal it uses `input()` with readline (line editing, arrow-key history saved to `history_file`);
    Ctrl-C raises KeyboardInterrupt there, which the REPL turns into "drop this line".
    """

    def __init__(self, stream: TextIO, *, interactive: bool, history_file: Path | None = None) -> None:
        self._stream = stream
        # input() edits with readline only on the process's own stdin; other streams are read plainly.
        self._use_input = interactive and stream is sys.stdin
        self._readline = _load_readline() if self._use_input else None
        self._history_file = history_file if self._readline is not None else None
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, OSError):  # a stray invalid byte must not end the chat
                stream.reconfigure(errors="replace")
        if self._readline is not None and self._history_file is not None:
            self._readline.set_history_length(HISTORY_LENGTH)
            with contextlib.suppress(OSError):  # no history yet, or unreadable: start without
                self._readline.read_history_file(self._history_file)

    def read(self, prompt: str) -> str | None:
        """The next line without its newline, or None at the end of input."""
        if self._use_input:
            try:
                return input(prompt)
            except EOFError:
                return None
        line = self._stream.readline()
        return line.rstrip("\r\n") if line else None

    @contextlib.contextmanager
    def typing_held(self) -> Iterator[None]:
        """While work runs: keys typed are not echoed (they would land in the middle of the status line) but kept,
        so the next prompt shows them, as a shell shows type-ahead. Ctrl-C still interrupts (the terminal then
        discards what was typed, as it does for any program)."""
        if not self._use_input:
            yield
            return
        try:
            import termios

            fd = self._stream.fileno()
            saved = termios.tcgetattr(fd)
        except (ImportError, OSError, ValueError, io.UnsupportedOperation):  # not a real terminal, or not POSIX
            yield
            return
        quiet = list(saved)
        quiet[3] &= ~termios.ECHO  # lflag
        try:
            termios.tcsetattr(fd, termios.TCSANOW, quiet)  # TCSANOW: what was typed already stays queued
        except OSError:
            yield
            return
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                termios.tcsetattr(fd, termios.TCSANOW, saved)

    def line_buffer(self) -> str:
        """What has been typed at the prompt so far (for redrawing it under a message printed meanwhile)."""
        if self._readline is None:
            return ""
        try:
            buffer: str = self._readline.get_line_buffer()
        except Exception:  # redrawing is cosmetic
            return ""
        return buffer

    def close(self) -> None:
        """Save the history (readable by its owner only: people paste things into chats)."""
        if self._readline is None or self._history_file is None:
            return
        with contextlib.suppress(OSError):
            self._history_file.parent.mkdir(parents=True, exist_ok=True)
            self._history_file.touch(mode=0o600, exist_ok=True)
            self._readline.write_history_file(self._history_file)
