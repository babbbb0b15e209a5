"""Monitor schedules changed: told to every process on one PostgreSQL database (NOTIFY), heard by the scheduler
(LISTEN on a connection of its own), so a monitor added by `lookout monitors add` in another process is seen at
once. SQLite has no such channel: there the scheduler reads the database every few seconds instead
(`pushes` is False), and `announce` does nothing.

The channel carries no payload: a notification only says "look again", so a lost one costs at most the
scheduler's safety poll. After a lost connection the listener connects again and calls its callback once (a
change may have been missed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage.engine import Database

__all__ = ["CHANNEL", "ScheduleChanges"]

logger = logging.getLogger(__name__)

CHANNEL: Final = "lookout_schedule"
"""The PostgreSQL notification channel of schedule changes."""
RECONNECT_SECONDS: Final = 5.0
"""How long the listener waits before connecting again after its connection was lost."""
_NOTIFY = text("SELECT pg_notify(:channel, '')")


class ScheduleChanges:
    """Announce and hear that a monitor's schedule changed, across the processes sharing `database`."""

    def __init__(self, database: Database, url: str) -> None:
        self._database = database
        parsed = make_url(url)
        self.pushes = parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "asyncpg"
        """Whether changes are pushed to listeners (PostgreSQL through asyncpg); otherwise they poll."""
        self._dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False) if self.pushes else ""

    async def announce(self) -> None:
        """Tell every listening process that schedules changed (nothing to do without a channel)."""
        if self.pushes:
            await self._database.write_alone(_NOTIFY, {"channel": CHANNEL})

    async def listen(self, on_change: Callable[[], None], stop: asyncio.Event) -> None:
        """Call `on_change` for each announcement until `stop` is set (returns at once without a channel)."""
        import asyncpg  # type: ignore[import-untyped]  # the driver; only a listening process opens its own

        while self.pushes and not stop.is_set():
            lost = asyncio.Event()
            connection: Any = None
            try:
                connection = await asyncpg.connect(self._dsn, timeout=10)
                connection.add_termination_listener(lambda _connection, lost=lost: lost.set())
                await connection.add_listener(CHANNEL, lambda *_arguments: on_change())
                on_change()  # a change may have happened before this connection listened
                await _first(stop, lost)
            except Exception as error:  # the database is unreachable: poll until it is back
                logger.warning("listening for schedule changes failed (%s); again in %.0f s", error, RECONNECT_SECONDS)
                lost.set()
            finally:
                if connection is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(connection.close(), timeout=5)
            if lost.is_set() and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=RECONNECT_SECONDS)


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
