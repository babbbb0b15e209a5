"""Send slots shared by every process: one rate limit per key, reserved atomically on the database's clock.

The generic cell rate algorithm keeps one number per limit, its "theoretical arrival time" (TAT): a request may
go at `TAT - tolerance`, and moves the TAT on by one interval. One `INSERT … ON CONFLICT DO UPDATE` reserves a
slot and says how long to wait for it, so any number of processes share a limit without talking to each other,
and the database's clock is the one clock they all read. On PostgreSQL it runs in autocommit: the limit's row is
locked only while the server runs it (in a transaction of its own it stayed locked until the sending process got
round to its COMMIT, and every other send of every process queued behind that).
"""

from __future__ import annotations

from sqlalchemy import text

from storage.repositories._common import Repository

_NOW = {
    "postgresql": "extract(epoch from clock_timestamp())",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_GREATEST = {"postgresql": "greatest", "sqlite": "max"}


class RateSlotRepository(Repository):
    async def reserve(self, key: str, *, interval: float, burst: int = 1) -> float:
        """Reserve the next slot of `key` (one per `interval` seconds, up to `burst` at once); returns the seconds
        to wait before using it (0 when it is free now). The slot is taken whether or not the caller uses it."""
        dialect = self._db.dialect
        now, greatest = _NOW[dialect], _GREATEST[dialect]
        tolerance = max(burst - 1, 0) * interval
        statement = text(
            f"INSERT INTO rate_slots (key, tat) VALUES (:key, {now} + :interval) "  # noqa: S608 - no user text
            f"ON CONFLICT (key) DO UPDATE SET tat = {greatest}(rate_slots.tat, {now}) + :interval "
            f"RETURNING tat - :interval - :tolerance - {now}"
        )
        # Alone (on PostgreSQL in autocommit): a limit's row is shared by every send of every process, so it is locked
        # only while the server runs the statement, not until a COMMIT the sending process gets round to.
        row = await self._db.write_alone(statement, {"key": key, "interval": interval, "tolerance": tolerance})
        assert row is not None  # RETURNING always gives the one row
        return max(float(row[0]), 0.0)
