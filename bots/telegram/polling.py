"""Long polling that confirms an update to Telegram only once Lookout stored it.

getUpdates confirms every update below the `offset` it is called with, and Telegram forgets them. python-telegram-
bot's updater moves the offset past a batch as soon as the batch is queued in memory, so an update whose storing
then failed (the database restarting) was gone for good. Here each update is handed over with a future that says
when it is stored (`Dispatcher.dispatch`'s admission); the offset moves only up to the oldest update not yet
stored. An update refused (its handling was cancelled, or failed before it was stored) is handed over again when
getUpdates returns it again, up to `MAX_HANDOVERS` times.

While an update waits to be stored, getUpdates returns it (and what follows it) at once instead of waiting: the loop
then waits for one of the waiting updates to be stored, or `RECHECK_SECONDS`, before asking again, so new updates
are read at most that much later. getUpdates returns at most 100 updates: with 100 updates waiting behind the
oldest unstored one, reading waits until it is stored (back-pressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from telegram import Bot, Update
from telegram.error import InvalidToken, RetryAfter, TelegramError

from kernel import Backoff

__all__ = ["MAX_HANDOVERS", "RECHECK_SECONDS", "ConfirmingPoller"]

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 1.0
"""While updates wait to be stored, how long before getUpdates is asked again (it answers at once meanwhile)."""
MAX_HANDOVERS = 5
"""An update refused this many times is confirmed anyway (logged): it would otherwise block every later one."""
POLL_BACKOFF = Backoff(attempts=None, base=1.0, cap=30.0, max_wait=300.0)
"""Waits between failed getUpdates calls (Telegram unreachable, another poller's 409): at most 30 s apart."""

TakeUpdate = Callable[[Update], Awaitable["asyncio.Future[None]"]]
"""Hands one update over; the future ends when it is stored (a result) or refused (an exception)."""


@dataclass
class _Progress:
    """What was read and what is stored, kept across polling sessions (leadership may stop and start them)."""

    highest: int = -1
    """The highest update id read."""
    waiting: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    """Handed over and not yet stored."""
    refused: dict[int, int] = field(default_factory=dict)
    """Refused update ids → times handed over; each is handed over again when read again."""

    def offset(self) -> int:
        """getUpdates' offset: below it everything is stored (or given up on)."""
        unstored = [*self.waiting, *self.refused]
        return min(unstored) if unstored else self.highest + 1

    def settle(self) -> None:
        """Move the updates whose futures ended out of `waiting`: stored ones are done, refused ones read again."""
        for update_id, future in list(self.waiting.items()):
            if not future.done():
                continue
            del self.waiting[update_id]
            if not future.cancelled() and future.exception() is None:
                self.refused.pop(update_id, None)  # stored at last
            else:
                times = self.refused.get(update_id, 0) + 1
                if times >= MAX_HANDOVERS:
                    logger.error("telegram: update %d was refused %d times; confirming it anyway", update_id, times)
                    self.refused.pop(update_id, None)
                else:
                    self.refused[update_id] = times


class ConfirmingPoller:
    """getUpdates in a loop, confirming only stored updates (see the module docstring)."""

    def __init__(
        self,
        bot: Bot,
        take: TakeUpdate,
        *,
        timeout: float,
        allowed_updates: Sequence[str],
        on_error: Callable[[TelegramError], None],
    ) -> None:
        self._bot = bot
        self._take = take
        self._timeout = timeout
        self._allowed = list(allowed_updates)
        self._on_error = on_error
        self._progress = _Progress()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def waiting(self) -> int:
        """Updates read and not yet stored (nor given up on)."""
        return len(self._progress.waiting) + len(self._progress.refused)

    def start(self) -> None:
        if not self.running:
            self._task = asyncio.create_task(self._run(), name="telegram polling")

    async def stop(self) -> None:
        """Stop reading; confirm what is stored so far (one getUpdates without waiting). Updates being handled go on
        and are confirmed by the next polling session (here or in the process that leads next)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self._progress.settle()
        with contextlib.suppress(TelegramError):
            offset = self._progress.offset()
            await self._bot.get_updates(offset=offset, timeout=0, limit=1, allowed_updates=self._allowed)

    async def _run(self) -> None:
        failures = 0
        webhook_deleted = False
        while True:
            try:
                if not webhook_deleted:
                    await self._bot.delete_webhook()  # getUpdates is refused while a webhook is set
                    webhook_deleted = True
                fresh = await self._read()
                failures = 0
            except InvalidToken:
                logger.error("telegram: the token was refused; polling stopped")
                raise
            except Exception as error:  # Telegram unreachable or refusing (TelegramError), or an unreadable answer
                failures += 1
                if isinstance(error, TelegramError):
                    self._on_error(error)
                else:
                    logger.exception("telegram: reading updates failed; retrying")
                wait = error.retry_after if isinstance(error, RetryAfter) else None
                seconds = POLL_BACKOFF.delay(failures, _seconds(wait)) or POLL_BACKOFF.cap
                await asyncio.sleep(seconds)
                continue
            if not fresh and self._progress.waiting:
                await asyncio.wait(set(self._progress.waiting.values()), timeout=RECHECK_SECONDS)
            elif not fresh and self._progress.refused:
                await asyncio.sleep(RECHECK_SECONDS)

    async def _read(self) -> int:
        """One getUpdates; hands over the updates not handed over already; returns how many it handed over."""
        progress = self._progress
        progress.settle()
        waiting = bool(progress.waiting or progress.refused)
        updates = await self._bot.get_updates(
            offset=progress.offset(),
            timeout=0 if waiting else int(self._timeout),
            allowed_updates=self._allowed,
        )
        fresh = 0
        for update in updates:
            update_id = update.update_id
            if update_id in progress.waiting:
                continue  # still being stored
            if update_id <= progress.highest and update_id not in progress.refused:
                continue  # stored, and confirmed with the next offset
            progress.highest = max(progress.highest, update_id)
            progress.waiting[update_id] = await self._take(update)
            if update_id in progress.refused:
                logger.info("telegram: handing over update %d again", update_id)
            fresh += 1
        return fresh


def _seconds(value: object) -> float | None:
    """A RetryAfter's wait in seconds (python-telegram-bot gives an int or a timedelta)."""
    if value is None:
        return None
    total = getattr(value, "total_seconds", None)
    return float(total()) if callable(total) else float(value)  # type: ignore[arg-type]
