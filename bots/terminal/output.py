"""What the terminal chat prints: replies as rendered markdown, digests, saved files, one live status line.

Output comes from two threads (the prompt's and the event loop's, which also delivers digests while the
person types), so every write goes through one lock. On a terminal the prompt and the status line are
redrawn under anything printed in between, so a digest arriving mid-sentence does not garble the line.
"""

from __future__ import annotations

import io
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console

from bots.terminal.render import render_markdown, terminal_safe
from kernel import Button, ProgressUpdate, Reply

__all__ = ["ConsoleOutput", "attachment_label", "button_hint", "save_attachment"]

_CLEAR_LINE = "\r\x1b[K"
_DIM = "\x1b[2m"
_RESET = "\x1b[0m"
_UNSAFE_FILENAME = re.compile(r"[^\w.\-]+")
_MAX_WIDTH = 120


def save_attachment(path: Path, filename: str, exports_dir: Path) -> Path:
    """The file's absolute path under `exports_dir`: as is when it is already there, else a copy named `filename`.

    Research and monitor runs write into DATA_DIR/exports already; anything else is copied there, so every
    file the chat mentions sits in one place the person knows. Raises OSError when the file cannot be read.
    """
    source = path.resolve()
    target_dir = exports_dir.resolve()
    if source.is_relative_to(target_dir):
        if not source.is_file():
            raise FileNotFoundError(f"{source} is gone")
        return source
    target_dir.mkdir(parents=True, exist_ok=True)
    name = _UNSAFE_FILENAME.sub("_", Path(filename).name).strip("._") or source.name
    target = target_dir / name
    counter = 1
    while target.exists():  # never overwrite an earlier export of the same name
        target = target_dir / f"{Path(name).stem}-{counter}{Path(name).suffix}"
        counter += 1
    shutil.copyfile(source, target)
    return target


def attachment_label(filename: str, *, image: bool) -> str:
    """How a saved file is introduced: `CSV`, `JSON`, `Chart` or `File`."""
    suffix = Path(filename).suffix.lower()
    if suffix == ".csv":
        return "CSV"
    if suffix == ".json":
        return "JSON"
    return "Chart" if image else "File"


def button_hint(buttons: Sequence[Button]) -> str:
    """Buttons as a terminal can offer them: numbered choices, or yes/no for a confirmation."""
    choices = "   ".join(f"[{number}] {button.label}" for number, button in enumerate(buttons, start=1))
    return f"{choices}\n(reply with a number or the button's words; yes or no works for a confirmation)"


class ConsoleOutput:
    """Writes to the terminal (or a pipe) for both threads; see the module docstring.

    `styled` renders markdown with colours and keeps one status line updated in place; unstyled output is
    the plain text, progress as plain lines, which is what pipes, logs and tests want.
    """

    def __init__(self, stream: TextIO, *, exports_dir: Path, styled: bool, width: int | None = None) -> None:
        self._stream = stream
        self._exports_dir = exports_dir
        self._styled = styled
        self._width = width
        self._lock = threading.RLock()
        self._prompt: str | None = None
        self._status: str | None = None
        self.line_buffer: Callable[[], str] = lambda: ""
        """What the person has typed so far at the prompt (readline's buffer), redrawn after a message."""

    @property
    def styled(self) -> bool:
        return self._styled

    # ---- the prompt and the status line ----------------------------------------------------------------

    def prompt_started(self, prompt: str) -> None:
        """The prompt is on screen and waiting: messages printed meanwhile redraw it below them."""
        with self._lock:
            self._prompt = prompt

    def prompt_interrupted(self) -> None:
        """Ctrl-C at the prompt: `^C` after what was typed and a fresh line for the next prompt (as bash does)."""
        with self._lock:
            self._prompt = None
            self._write("^C\n" if self._styled else "\n")

    def prompt_ended(self) -> None:
        with self._lock:
            self._prompt = None

    async def progress(self, update: ProgressUpdate) -> None:
        """The `ProgressSink` of the terminal: one line edited in place, or plain lines when not a terminal."""
        with self._lock:
            if not self._styled:
                self._write(f"… {terminal_safe(update.text)}\n")
                return
            self._status = None if update.done else update.text
            self._write(_CLEAR_LINE + (self._status_line() if self._status else ""))

    def working(self) -> None:
        """Show that the message is being handled until the first progress line or reply replaces it."""
        if self._styled:
            with self._lock:
                self._status = "working…"
                self._write(_CLEAR_LINE + self._status_line())

    def clear_status(self) -> None:
        with self._lock:
            if self._status is not None:
                self._status = None
                self._write(_CLEAR_LINE)

    # ---- what is printed ---------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        """A line of the chat itself (greeting, "Cancelled."), printed as is."""
        self._emit(text.rstrip("\n") + "\n")

    def reply(self, reply: Reply) -> None:
        """A reply: its text, then where its files were saved, then its buttons as choices."""
        parts = [self._markdown(reply.text)] if reply.text.strip() else []
        parts += [self._saved(a.path, a.filename, image=a.kind == "image") for a in reply.attachments]
        if reply.buttons:
            parts.append(self._dim(button_hint(reply.buttons)) + "\n")
        self._emit("".join(parts) + "\n")

    def digest(self, message: Reply) -> None:
        """A digest delivered through the outbox (a monitor's schedule or /digest), with its files."""
        rule = "── delivered " + "─" * 30
        parts = [self._dim(rule) + "\n", self._markdown(message.text)]
        parts += [self._saved(a.path, a.filename, image=a.kind == "image") for a in message.attachments]
        self._emit("".join(parts) + "\n")

    # ---- helpers -------------------------------------------------------------------------------------------

    def _saved(self, path: Path, filename: str, *, image: bool) -> str:
        label = attachment_label(filename, image=image)
        try:
            saved = save_attachment(path, filename, self._exports_dir)
        except OSError as error:
            return f"{label}: {filename} could not be saved ({error.strerror or error})\n"
        return f"{label}: {saved}\n"

    def _markdown(self, text: str) -> str:
        # The reply's structure drawn for this terminal (or plain for a pipe); its words are never re-read as markup.
        return render_markdown(text, styled=self._styled, width=self._columns())

    def _dim(self, text: str) -> str:
        if not self._styled:
            return text
        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=True, width=self._columns(), highlight=False, emoji=False)
        console.print(terminal_safe(text), style="dim", markup=False, soft_wrap=True)
        return buffer.getvalue().rstrip("\n")

    def _columns(self) -> int:
        return self._width or min(shutil.get_terminal_size((100, 24)).columns, _MAX_WIDTH)

    def _status_line(self) -> str:
        if not self._status:
            return ""
        # One physical line, or "\r" + clear-line could not erase it: no newlines, cut to the terminal's width.
        text = " ".join(f"… {terminal_safe(self._status)}".split())
        limit = max(self._columns() - 1, 10)
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        return f"{_DIM}{text}{_RESET}"

    def _emit(self, block: str) -> None:
        with self._lock:
            if self._styled and (self._prompt is not None or self._status is not None):
                self._write(_CLEAR_LINE)
            self._write(block)
            if self._styled and self._status is not None:
                self._write(self._status_line())
            elif self._prompt is not None:
                # Redraw what the person was typing, so a digest arriving mid-line does not swallow it.
                self._write(self._prompt + (self.line_buffer() if self._styled else ""))

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away (closed pty, broken pipe): nothing to tell
            pass
