"""A real `lookout` process on a pseudo-terminal, read through a terminal emulator: what a person sees."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.terminal_screen import TerminalScreen

LOOKOUT = str(Path(sys.executable).parent / "lookout")
QUIET_ENV_DROPPED = ("GEMINI_API_KEY", "DATABASE_URL", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN")


def person_env(**extra: str) -> dict[str, str]:
    """The environment of a person at a terminal: no test runner or CI markers (libraries behave differently
    under them), no keys unless given."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV_DROPPED and k not in ("PYTEST_VERSION", "CI")}
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update({"TERM": "xterm", **extra})
    return env


class PtyProcess:
    """`lookout <args>` on a pseudo-terminal that is its controlling terminal (so Ctrl-C sends SIGINT)."""

    def __init__(self, args: list[str], *, env: dict[str, str], cwd: Path, columns: int = 100) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.process = subprocess.Popen(
            [LOOKOUT, *args],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )  # fmt: skip
        os.close(slave)
        self.raw = ""
        self.screen = TerminalScreen(columns=columns)

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return
        try:
            chunk = os.read(self.master, 65536).decode(errors="replace")
        except OSError:  # the process ended and closed the terminal
            time.sleep(0.2)
            return
        self.raw += chunk
        self.screen.feed(chunk.replace("\r\n", "\n"))

    def wait_for(self, pattern: str, *, timeout: float = 90) -> None:
        """Read until `pattern` (a regex) is on the screen as a person sees it."""
        deadline = time.monotonic() + timeout
        while re.search(pattern, self.screen.text) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen.text}")
            self._read(0.2)

    def settle(self, seconds: float = 1.0) -> None:
        """Read whatever arrives for a moment (after a keystroke whose effect is nothing new appearing)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._read(0.1)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> int:
        try:
            return self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            os.close(self.master)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
