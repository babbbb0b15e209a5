"""Telegram's flood limits kept by every process that sends with one bot token, through slots in the database.

python-telegram-bot paces each call through its bot's `BaseRateLimiter`; its `AIORateLimiter` counts in process
memory, so two workers would each send 30 messages a second. `SharedRateLimiter` reserves every call's slot in
the database instead (`storage.RateSlotRepository`, on the database's clock): one key for the whole token, one
per group or channel, one per private chat, a call's chat slot and overall slot taken in one statement when its
chat's slot is free (`reserve_pair`). However many processes send,
the token stays under the limits, and the processes need not know of one another.

Which calls count is AIORateLimiter's rule: every call naming a `chat_id` counts against the overall limit;
groups and channels (negative ids, `@names`) against their own limit too. A private chat gets a gentler one
(about one message per period, a burst of three), as Telegram asks. A 429 that slips through anyway (another
bot on the token, a limit Telegram changed) is waited out and retried up to `max_retries` times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from bots.shared_limits import SlotLimit, SlotReserver
from bots.telegram.limits import TelegramLimits

__all__ = ["SharedRateLimiter"]

logger = logging.getLogger(__name__)

JSONDict = dict[str, Any]


class SharedRateLimiter(BaseRateLimiter[int]):
    """A `BaseRateLimiter` whose slots every process shares (see the module docstring)."""

    def __init__(self, slots: SlotReserver, *, token_key: str, limits: TelegramLimits, max_retries: int = 3) -> None:
        self._slots = slots
        self._key = f"telegram:{token_key}"
        self._limits = limits
        self._max_retries = max_retries

    async def initialize(self) -> None:
        """Nothing to open: the slots live in the database."""

    async def shutdown(self) -> None:
        """Nothing to close."""

    async def process_request(
        self,
        callback: Any,
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> bool | JSONDict | list[JSONDict]:
        chat_id = data.get("chat_id")
        retries = rate_limit_args if rate_limit_args is not None else self._max_retries
        for attempt in range(retries + 1):
            if chat_id is not None:
                await self._wait_for_slot(chat_id)
            try:
                call: Coroutine[Any, Any, bool | JSONDict | list[JSONDict]] = callback(*args, **kwargs)
                return await call
            except RetryAfter as error:
                if attempt == retries:
                    raise
                wait = error.retry_after if isinstance(error.retry_after, int | float) else 1.0
                logger.warning("telegram: %s hit a flood limit; waiting %.1f s", endpoint, float(wait))
                await asyncio.sleep(float(wait) + 0.1)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _wait_for_slot(self, chat_id: object) -> None:
        limits = self._limits
        numeric: int | None = None
        with contextlib.suppress(TypeError, ValueError):
            numeric = int(str(chat_id))
        if numeric is None or numeric < 0:  # a group, supergroup or channel (@name)
            chat = SlotLimit(f"{self._key}:chat:{chat_id}", interval=limits.group_interval)
        else:
            chat = SlotLimit(f"{self._key}:chat:{chat_id}", interval=limits.period, burst=limits.private_burst)
        overall = SlotLimit(f"{self._key}:overall", interval=limits.overall_interval)
        # The overall slot is taken only once the chat's slot has come: a group waiting its turn must not hold
        # a slot every other chat could use meanwhile. When the chat's slot is free now (nearly always for a
        # private chat), one statement takes both.
        chat_wait, overall_wait = await self._slots.reserve_pair(chat, overall)
        if chat_wait > 0:
            await asyncio.sleep(chat_wait)
            # An overall slot taken with a chat slot still to come (another process took the chat's slot in the
            # same instant) is left unused: the slot for the send is the one taken now.
            overall_wait = await self._slots.reserve(overall.key, interval=overall.interval)
        elif overall_wait is None:  # the chat's slot came between the statement's reading and its writing
            overall_wait = await self._slots.reserve(overall.key, interval=overall.interval)
        if overall_wait > 0:
            await asyncio.sleep(overall_wait)
