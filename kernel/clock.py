"""The clock: what every part that reads the time takes, so tests can hand it a fake one (`tests/kit.py`
`FakeClock`) and a whole process agrees on one source of "now"."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "utc_now"]

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware (UTC); injected wherever code reads the time."""


def utc_now() -> datetime:
    """The real clock: now, in UTC (the default of every `Clock` parameter)."""
    return datetime.now(UTC)
