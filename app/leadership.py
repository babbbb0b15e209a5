"""A duty only one process of the cluster may do at a time (Telegram long polling), led through a PostgreSQL lock.

Every process that could do the duty tries the lock every `check_seconds`; the one that gets it starts the duty
and checks every `check_seconds` that its lock's session is alive, stopping the duty at once if not. A leader
that stops (SIGTERM) stops the duty and lets go; one that is killed loses its session, and with it the lock, at
once (or within `storage.KEEPALIVE_SECONDS` when its machine vanished). Another process takes over within
`check_seconds` after that: 5 s after a kill, 25 s after a machine is lost, with the default settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from storage import AdvisoryLocks, HeldLock

__all__ = ["Leadership"]

logger = logging.getLogger(__name__)


class Leadership:
    """Runs `start`/`stop` of one duty while this process holds the lock `name` (see the module docstring)."""

    def __init__(
        self,
        locks: AdvisoryLocks,
        name: str,
        *,
        start: Callable[[], Awaitable[None]],
        stop: Callable[[], Awaitable[None]],
        check_seconds: float = 5.0,
    ) -> None:
        self._locks = locks
        self.name = name
        self._start, self._stop = start, stop
        self._check_seconds = check_seconds
        self.leading = False

    async def run(self, stop: asyncio.Event) -> None:
        """Lead whenever possible until `stop` is set; the duty is stopped and the lock let go on the way out."""
        while not stop.is_set():
            held: HeldLock | None = None
            try:
                held = await self._locks.try_hold(self.name)
            except Exception as error:  # the database is unreachable: nobody can lead through it now
                logger.warning("%s: could not reach the database to lead (%s)", self.name, error)
            if held is not None:
                await self._lead(held, stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._check_seconds)

    async def _lead(self, held: HeldLock, stop: asyncio.Event) -> None:
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
