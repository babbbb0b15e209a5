"""The test kit every package's tests share: a clock that moves only when told, and waiting for something that
happens in the background. Database URLs and throwaway databases: `tests/backends.py`; scripted models per
package (their scripts differ); real model requests are blocked for every test in `tests/conftest.py`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sources import SourceError, SourceErrorKind

__all__ = ["FakeClock", "eventually", "eventually_async"]

POLL_SECONDS = 0.02
"""How often `eventually` looks again: short against what tests wait for, long enough not to busy the loop."""


class FakeClock:
    """A clock that moves only when told to (call it for "now")."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, now: datetime) -> None:
        self.now = now


async def eventually(condition: Callable[[], bool], *, what: str = "the condition", timeout: float = 30.0) -> None:
    """Wait until `condition()` holds (polling); fail the test naming `what` after a generous timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def eventually_async(
    condition: Callable[[], Awaitable[bool]], *, what: str = "the condition", timeout: float = 30.0
) -> None:
    """`eventually` for a condition that must be awaited (a database query)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


@dataclass
class NameLookups:
    """What the name-lookup guard refused in one test, and the names the test expects refused (a test that checks
    what Lookout does offline lists them in `expected`)."""

    refused: list[str] = field(default_factory=list)
    expected: set[str] = field(default_factory=set)
    offline: bool = False
    """Set by a test of the whole app that checks many outside names (an imported feed reader's list): all of them
    are refused, as on a machine without a network, and none fails it."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def unexpected(self) -> list[str]:
        with self.lock:
            return [] if self.offline else sorted(set(self.refused) - self.expected)


async def offline_resolver(host: str, port: int) -> list[str]:
    """A test client's DNS (`HttpClient(resolver=...)`): the fake servers' names resolve, nothing else does (as on a
    machine without a network), so checking a feed's host (`HttpClient.check_untrusted`) never asks the internet."""
    if host in ("localhost", "127.0.0.1"):
        return ["127.0.0.1"]
    raise SourceError(SourceErrorKind.NETWORK, f"cannot resolve {host}: the test world has no network")
