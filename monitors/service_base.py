"""What the monitor services that queue outbox rows share (the catalogue, the runner, sharing and briefings): the
`ServiceStorage` they are built with once in `app` (the database, the clock, the wake-up of the delivery worker),
the chats, monitors and subscriptions repositories they all read, and the one rule for waking the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernel import Clock, utc_now
from storage import Database
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository

__all__ = ["MonitorStorage", "ServiceStorage"]


@dataclass(frozen=True, kw_only=True)
class ServiceStorage:
    """Where a monitor service stores, what time it is, and whom it tells that outbox rows were queued."""

    database: Database
    clock: Clock = utc_now
    on_queued: Callable[[], None] | None = None
    """Wakes the delivery worker (None: nothing to wake, the worker polls)."""


class MonitorStorage:
    """The base of a monitor service: its storage, its clock and its wake-up of the delivery worker."""

    def __init__(self, storage: ServiceStorage) -> None:
        self._database = storage.database
        self._clock = storage.clock
        self._on_queued = storage.on_queued
        self._chats = ChatRepository(storage.database)
        self._monitors = MonitorRepository(storage.database)
        self._subscriptions = SubscriptionRepository(storage.database)

    def _queued(self, rows: int = 1) -> None:
        """Wake the delivery worker when `rows` outbox rows were just queued (none: nothing to send, no wake-up)."""
        if rows and self._on_queued is not None:
            self._on_queued()
