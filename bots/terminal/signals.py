"""Ctrl-C, SIGTERM and SIGHUP for the terminal chat: handled on the main thread, and never lost at the prompt.

CPython's readline waits for a key in `select()` without a timeout and only runs Python signal handlers when
that wait is interrupted. A signal that lands just after the prompt is drawn and just before the wait starts
would sit unhandled until the next keystroke (a SIGTERM, until someone types). So the C-level handler's
wakeup byte is watched from the event loop's thread: if the main thread has not handled a signal shortly
after it arrived, the signal is sent again to the main thread alone, which interrupts its wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from types import FrameType

__all__ = ["BLOCKED_OFF_MAIN_THREAD", "MainThreadSignals"]

logger = logging.getLogger(__name__)

BLOCKED_OFF_MAIN_THREAD = frozenset(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals other threads block, so the kernel hands them to the main thread (the one reading input)."""
RECHECK_SECONDS = 0.25
"""How long the main thread gets to run a handler before the signal is sent to it again."""


class MainThreadSignals:
    """Installs the handlers (Ctrl-C raises KeyboardInterrupt; SIGTERM and SIGHUP raise SystemExit(128 + n))
    and, in `watch()` on the event loop, re-sends a signal the main thread missed; see the module docstring."""

    def __init__(self) -> None:
        self._handled: Counter[int] = Counter()
        self._arrived: Counter[int] = Counter()
        self._resent: Counter[int] = Counter()
        self._reader: socket.socket | None = None
        self._main_thread = threading.main_thread().ident

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Handlers and the wakeup socket for the duration; a no-op off the main thread (tests, embedding)."""
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_kill"):
            yield
            return
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        previous = {sig: signal.signal(sig, self._handle) for sig in BLOCKED_OFF_MAIN_THREAD}
        previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._reader = reader
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._reader = None
            reader.close()
            writer.close()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self._handled[signum] += 1
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    async def watch(self) -> None:
        """Run on the event loop until cancelled: re-send each signal the main thread has not handled."""
        reader = self._reader
        if reader is None:
            return
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(reader, 64)
            except OSError:  # the socket closed under us: the chat is ending
                return
            if not data:
                return
            for signum in data:
                if signum not in BLOCKED_OFF_MAIN_THREAD:
                    continue
                if self._resent[signum]:
                    self._resent[signum] -= 1  # the byte of our own re-send, not a new signal
                    continue
                self._arrived[signum] += 1
                loop.call_later(RECHECK_SECONDS, self._recheck, signum)

    def _recheck(self, signum: int) -> None:
        if self._handled[signum] >= self._arrived[signum] or self._main_thread is None:
            return
        logger.info("signal %d is not handled yet: sending it to the main thread again", signum)
        self._resent[signum] += 1
        signal.pthread_kill(self._main_thread, signum)
        asyncio.get_running_loop().call_later(RECHECK_SECONDS, self._recheck, signum)
