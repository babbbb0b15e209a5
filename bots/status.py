"""The one status-line throttler every platform shares: progress shown in one message edited in place, at most
one platform call per interval, the latest line always shown within an interval (trailing flush), and a final
"done". Guarantee: the line shown never lags the work by more than one interval, and a failing call never
fails the work it reports on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from kernel import ProgressUpdate

__all__ = ["DONE_MARK", "WORKING_MARK", "StatusLine", "StatusOff", "StatusSurface"]

logger = logging.getLogger(__name__)

WORKING_MARK = "⏳"
DONE_MARK = "✅"
_MAX_FAILURES = 3
"""Failed calls in a row after which a status line gives up: each try costs a platform call, and a platform that
refused three in a row is not going to show the next."""


class StatusOff(Exception):
    """The platform will never show this status (no access to the channel): stop trying."""


class StatusSurface(Protocol):
    """Where a platform shows a status line: the first call posts the message, later ones edit it."""

    async def show(self, text: str, *, done: bool) -> None:
        """Show `text` (marked done or working); raise `StatusOff` to give up for good, anything else to fail
        this call only (the line is tried again with the next update or flush)."""
        ...


class StatusLine:
    """A `ProgressSink` that shows the latest progress on a `StatusSurface`.

    The first update is shown at once. Later ones at most once per `interval` seconds: one arriving sooner is
    held, and shown when the interval ends (a trailing flush) unless a newer one replaces it first; a text
    already shown is never sent again. A "done" update is shown at once. `close()` shows a held line now (call
    it before the replies go out). A failed call keeps the line to try again; after `_MAX_FAILURES` failures in
    a row, or a `StatusOff`, the line stops trying.
    """

    def __init__(
        self,
        surface: StatusSurface,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        name: str = "status",
    ) -> None:
        self._surface = surface
        self._interval = interval
        self._clock = clock
        self._sleep = sleep
        self._name = name
        self._shown: tuple[str, bool] | None = None
        self._pending: tuple[str, bool] | None = None
        self._last_call = float("-inf")
        self._failures = 0
        self._off = False
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def shown(self) -> str | None:
        """The text on screen now (None before the first successful call)."""
        return self._shown[0] if self._shown is not None else None

    async def __call__(self, update: ProgressUpdate) -> None:
        if self._off:
            return
        self._pending = (update.text, update.done)
        wait = self._last_call + self._interval - self._clock()
        if update.done or wait <= 0:
            await self._flush()
        else:
            self._schedule(wait)

    async def close(self) -> None:
        """Show the line held back by the throttle now, and stop the trailing flush (no retries after this)."""
        self._closed = True
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self._flush()

    def _schedule(self, wait: float) -> None:
        """A trailing flush in `wait` seconds, unless one is pending already (or the line is closed)."""
        if self._closed:
            return
        flusher = self._flusher
        if flusher is not None and not flusher.done() and flusher is not asyncio.current_task():
            return
        self._flusher = asyncio.create_task(self._flush_after(wait), name=f"{self._name} flush")

    async def _flush_after(self, wait: float) -> None:
        await self._sleep(wait)
        await self._flush()
        newer = self._pending is not None and self._pending != self._shown
        if newer and not self._off and self._flusher is asyncio.current_task():
            self._schedule(self._interval)  # a newer line came in during the call

    async def _flush(self) -> None:
        async with self._lock:
            line = self._pending
            if self._off or line is None or line == self._shown:
                return
            self._last_call = self._clock()
            try:
                await self._surface.show(line[0], done=line[1])
            except StatusOff as error:
                self._off = True
                logger.info("%s is off: %s", self._name, error)
                return
            except Exception as error:  # best effort: the work goes on, the line is tried again
                self._failures += 1
                self._off = self._failures >= _MAX_FAILURES
                logger.info(
                    "%s not shown (%s: %s)%s",
                    self._name, type(error).__name__, error, "; giving up" if self._off else "",
                )  # fmt: skip
                if not self._off:
                    self._schedule(self._interval)
                return
            self._failures = 0
            self._shown = line
            if self._pending == line:
                self._pending = None
