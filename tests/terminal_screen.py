"""What a person sees: terminal output fed through a VT100 emulator (pyte), read back as the screen's lines."""

from __future__ import annotations

import pyte


class TerminalScreen:
    """A terminal of `columns` × `rows` that keeps every line scrolled off the top (so a test reads it all)."""

    def __init__(self, *, columns: int = 80, rows: int = 2000) -> None:
        self._screen = pyte.Screen(columns, rows)
        self._stream = pyte.Stream(self._screen)

    def feed(self, text: str) -> None:
        # A program writing to a terminal ends lines with "\n"; the tty turns that into CR LF (onlcr).
        self._stream.feed(text.replace("\r\n", "\n").replace("\n", "\r\n"))

    @property
    def lines(self) -> list[str]:
        """The screen's lines, trailing blanks removed, the empty rows after the last text left out."""
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def cursor_line(self) -> str:
        """The line the cursor is on, as shown."""
        return self._screen.display[self._screen.cursor.y].rstrip()

    def bold(self, text: str) -> bool:
        """Whether every character of the first occurrence of `text` on the screen is drawn bold."""
        for y, line in enumerate(self._screen.display):
            x = line.find(text)
            if x >= 0:
                return all(self._screen.buffer[y][x + n].bold for n in range(len(text)))
        raise AssertionError(f"{text!r} is not on the screen:\n{self.text}")


def screen_of(text: str, *, columns: int = 80) -> TerminalScreen:
    screen = TerminalScreen(columns=columns)
    screen.feed(text)
    return screen
