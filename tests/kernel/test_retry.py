"""The one retry rule: Retry-After in seconds or as an HTTP-date, capped jittered backoff, one give-up rule."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from kernel import Backoff, parse_retry_after


def test_parse_retry_after() -> None:
    now = datetime(2026, 11, 22, 8, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120
    assert parse_retry_after(" 0 ") == 0
    assert parse_retry_after("Sun, 22 Nov 2026 08:00:30 GMT", now=now) == 30
    assert parse_retry_after("Sun, 22 Nov 2026 07:00:00 GMT", now=now) == 0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    assert parse_retry_after("1e999") is None
    assert parse_retry_after(None) is None


def test_backoff_doubles_within_jitter_and_stops_at_the_cap() -> None:
    random.seed(7)
    backoff = Backoff(attempts=None, base=1.0, cap=8.0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (40, 8.0)]:
        waits = [backoff.delay(retry) for _ in range(50)]
        assert all(w is not None and ceiling / 2 <= w <= ceiling for w in waits), (retry, waits)
        assert len(set(waits)) > 1  # jittered, so clients that failed together do not return together
    assert Backoff(base=1.0, cap=8.0, jitter=False).delay(2) == 2.0


def test_a_retry_after_is_honoured_unless_it_is_too_long_to_wait() -> None:
    backoff = Backoff(attempts=5, max_wait=30.0)
    assert backoff.delay(1, retry_after=12.0) == 12.0
    assert backoff.delay(1, retry_after=31.0) is None
    assert backoff.delay(5) is None  # the attempts are used up
    assert backoff.delay(4) is not None


async def test_call_retries_what_it_is_told_and_raises_the_last_failure() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("reset")
        return "ok"

    backoff = Backoff(attempts=3, base=1.0, jitter=False)
    assert await backoff.call(flaky, retry_on=lambda e: isinstance(e, ConnectionError), sleep=sleep) == "ok"
    assert slept == [1.0, 2.0]

    async def refused() -> str:
        raise ValueError("bad input")

    slept.clear()
    with pytest.raises(ValueError, match="bad input"):
        await backoff.call(refused, retry_on=lambda e: isinstance(e, ConnectionError), sleep=sleep)
    assert slept == []  # not a failure worth retrying

    class Throttled(Exception):
        retry_after = 600.0

    async def throttled() -> str:
        raise Throttled

    with pytest.raises(Throttled):
        await backoff.call(
            throttled, retry_on=lambda e: True, retry_after=lambda e: getattr(e, "retry_after", None), sleep=sleep
        )
    assert slept == []  # ten minutes is too long to wait: given up at once
