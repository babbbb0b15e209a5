"""What the one-shot CLI commands print: markdown drawn by the terminal's renderer (styled and wrapped to the
terminal, or plain and never wrapped in a pipe), status lines on stderr. One renderer for the chat and the CLI."""

from __future__ import annotations

import shutil
import sys
from typing import TextIO

_MAX_WIDTH = 120
_DIM = "\x1b[2m"
_YELLOW = "\x1b[33m"
_RESET = "\x1b[0m"


class CliOutput:
    """One output stream of a command (stdout by default, stderr with `err=True`), read when the command runs."""

    def __init__(self, *, err: bool = False, stream: TextIO | None = None) -> None:
        self._stream = stream or (sys.stderr if err else sys.stdout)
        try:
            self.styled = self._stream.isatty()
        except (AttributeError, ValueError):
            self.styled = False

    def markdown(self, text: str) -> None:
        """Lookout's own markdown (the chat's replies, digests, listings), drawn for this stream."""
        from bots import render_markdown  # at first output, so `lookout --help` loads no platform library

        self._write(render_markdown(text, styled=self.styled, width=self._columns()))

    def line(self, text: str, *, tone: str = "") -> None:
        """One plain line (a path, a status); `tone` "dim" or "warn" colours it on a terminal only."""
        from bots import terminal_safe

        safe = terminal_safe(text)
        colour = {"dim": _DIM, "warn": _YELLOW}.get(tone, "")
        self._write(f"{colour}{safe}{_RESET}\n" if self.styled and colour else f"{safe}\n")

    def _columns(self) -> int:
        return min(shutil.get_terminal_size((100, 24)).columns, _MAX_WIDTH)

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()
