"""The one retry rule of Lookout: Retry-After (seconds or HTTP-date), capped jittered exponential backoff, one
give-up rule. Every layer retries with it: sources' HTTP, model calls, platform senders, start-up, the outbox.

It lives in `kernel`, below every layer, so every package may use it; `storage` only stores the times it computes.
The loop is tenacity's (`AsyncRetrying`: attempts, waits, an injectable sleep); what is Lookout's own is the rule
(`Backoff.delay`) that both the loop and the outbox's stored next attempt use.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

__all__ = ["Backoff", "Sleep", "parse_retry_after"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

Sleep = Callable[[float], Awaitable[None]]
"""How a retry waits (`asyncio.sleep`; tests pass one that records and returns at once)."""


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or HTTP-date); `None` if absent or garbled."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """When to try again after a failure, and when to stop trying.

    Retry `n` (1 for the first retry) waits what the other side asked for (`Retry-After`), or else a jittered
    exponential delay: between half and all of `min(cap, base · 2^(n-1))` (jitter keeps many clients that
    failed together from coming back together). It gives up when `attempts` tries were made (None: never) or
    when the other side asks for longer than `max_wait` ("too long to wait": better to fail over or reschedule
    than to hold a task asleep).
    """

    attempts: int | None = 3
    """Tries in all, the first included; None retries for ever (a platform that is down at start)."""
    base: float = 1.0
    """Seconds before the first retry (before jitter); doubled each time."""
    cap: float = 60.0
    """No backoff is longer than this."""
    max_wait: float = 60.0
    """A Retry-After longer than this gives up at once."""
    jitter: bool = True

    def __post_init__(self) -> None:
        if (self.attempts is not None and self.attempts < 1) or self.base < 0 or self.cap < 0 or self.max_wait < 0:
            raise ValueError(f"invalid backoff: {self}")

    def delay(self, retry: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait before retry number `retry` (1 = the first retry), or None to give up."""
        if self.attempts is not None and retry >= self.attempts:
            return None
        if retry_after is not None:
            return max(0.0, retry_after) if retry_after <= self.max_wait else None
        ceiling = min(self.cap, self.base * 2.0 ** min(max(retry - 1, 0), 64))
        return ceiling / 2 + random.uniform(0, ceiling / 2) if self.jitter else ceiling

    async def call(
        self,
        work: Callable[[], Awaitable[_T]],
        *,
        retry_on: Callable[[BaseException], bool],
        retry_after: Callable[[BaseException], float | None] = lambda _error: None,
        sleep: Sleep = asyncio.sleep,
        what: str = "call",
    ) -> _T:
        """`await work()`, retrying failures `retry_on` accepts per this rule; the last failure is raised.

        `retry_after` reads the wait the failure asks for (a 429's Retry-After); `what` names the work in the
        one log line per retry.
        """

        def wait_for(state: RetryCallState) -> float | None:
            error = state.outcome.exception() if state.outcome is not None else None
            wanted = retry_after(error) if error is not None else None
            return self.delay(state.attempt_number, wanted)

        def log_retry(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            seconds = state.next_action.sleep if state.next_action is not None else 0.0
            logger.info("%s failed (%s); retry %d in %.1f s", what, _describe(error), state.attempt_number, seconds)

        retrying = AsyncRetrying(
            # Only failures: a cancellation (BaseException) always goes through at once.
            retry=retry_if_exception(lambda error: isinstance(error, Exception) and retry_on(error)),
            stop=lambda state: wait_for(state) is None,
            wait=lambda state: wait_for(state) or 0.0,
            sleep=sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        return await retrying(work)


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "no result"
    text = " ".join(str(error).split())[:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
