"""A duty only one process may do at a time (Telegram long polling, scheduling monitors), led through a lock that
every process on the database agrees on: a PostgreSQL advisory lock, or a file lock next to a SQLite file.

Every process that could do the duty tries the lock every `check_seconds`; the one that gets it starts the duty
and checks every `check_seconds` that its lock's session is alive, stopping the duty at once if not. A leader
that stops (SIGTERM) stops the duty and lets go; one that is killed loses its session, and with it the lock, at
once (or within `storage.KEEPALIVE_SECONDS` when its machine vanished). Another process takes over within
`check_seconds` after that: 5 s after a kill, 25 s after a machine is lost, with the default settings. A process
that finds the duty led elsewhere says so once (`standby`), and again only after it led and lost it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from storage import Held, TriedLocks

__all__ = ["Leadership"]

logger = logging.getLogger(__name__)


class Leadership:
    """Runs `start`/`stop` of one duty while this process holds the lock `name` (see the module docstring)."""

    def __init__(
        self,
        locks: TriedLocks,
        name: str,
        *,
        start: Callable[[], Awaitable[None]],
        stop: Callable[[], Awaitable[None]],
        check_seconds: float = 5.0,
        standby: Callable[[], object] | None = None,
    ) -> None:
        self._locks = locks
        self.name = name
        self._start, self._stop = start, stop
        self._check_seconds = check_seconds
        self._standby = standby
        self.leading = False
        self.led_elsewhere = False
        """Whether the last try found another process leading (told once through `standby`)."""

    async def run(self, stop: asyncio.Event) -> None:
        """Lead whenever possible until `stop` is set; the duty is stopped and the lock let go on the way out."""
        while not stop.is_set():
            held: Held | None = None
            try:
                held = await self._locks.try_hold(self.name)
            except Exception as error:  # the database is unreachable: nobody can lead through it now
                logger.warning("%s: could not reach the database to lead (%s)", self.name, error)
            else:
                if held is None and not self.led_elsewhere and self._standby is not None:
                    self._standby()
                self.led_elsewhere = held is None
            if held is not None:
                await self._lead(held, stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._check_seconds)

    async def _lead(self, held: Held, stop: asyncio.Event) -> None:
        logger.info("%s: this process leads now", self.name)
        try:
            await self._start()
            self.leading = True
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self._check_seconds)
                if not await held.still_held():
                    logger.warning("%s: lost the lock; stopping so another process can lead", self.name)
                    break
        except Exception as error:  # the duty could not start (e.g. the platform is not connected yet)
            logger.warning("%s: could not start (%s); trying again", self.name, error)
        finally:
            self.leading = False
            try:
                await self._stop()
            except Exception:
                logger.exception("%s: stopping failed", self.name)
            await held.release()
            logger.info("%s: this process no longer leads", self.name)
