"""What the monitor services that queue outbox rows share (the catalogue, the runner, sharing and briefings): the
database and clock they were built with, the chats, monitors and subscriptions repositories they all read, and the
one rule for waking the delivery worker after rows were queued.
"""

from __future__ import annotations

from collections.abc import Callable

from kernel import Clock
from storage import Database
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository

__all__ = ["MonitorStorage"]


class MonitorStorage:
    """The base of a monitor service: its storage, its clock and its wake-up of the delivery worker."""

    def __init__(self, database: Database, *, clock: Clock, on_queued: Callable[[], None] | None) -> None:
        self._database = database
        self._clock = clock
        self._on_queued = on_queued
        """Wakes the delivery worker (None: nothing to wake, the worker polls)."""
        self._chats = ChatRepository(database)
        self._monitors = MonitorRepository(database)
        self._subscriptions = SubscriptionRepository(database)

    def _queued(self, rows: int = 1) -> None:
        """Wake the delivery worker when `rows` outbox rows were just queued (none: nothing to send, no wake-up)."""
        if rows and self._on_queued is not None:
            self._on_queued()
