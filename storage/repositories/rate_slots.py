"""Send slots shared by every process: one rate limit per key, reserved atomically on the database's clock.

The generic cell rate algorithm keeps one number per limit, its "theoretical arrival time" (TAT): a request may
go at `TAT - tolerance`, and moves the TAT on by one interval. One `INSERT … ON CONFLICT DO UPDATE` reserves a
slot and says how long to wait for it, so any number of processes share a limit without talking to each other,
and the database's clock is the one clock they all read.

A message often needs two slots, its chat's and the whole token's, and the second may be taken only once the
first has come (a chat waiting its turn must not hold a slot every other chat could use meanwhile).
`reserve_pair` takes both in one statement when the first is free now, the common case, and only the first when
it is not. Each statement runs alone in autocommit on PostgreSQL (`Database.write_alone_rows`), without a
liveness check of its pooled connection before it, since running it twice only spends a slot: one round trip.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import TextClause, text

from storage.repositories._common import Repository

_NOW = {
    "postgresql": "extract(epoch from clock_timestamp())",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_GREATEST = {"postgresql": "greatest", "sqlite": "max"}


@dataclass(frozen=True)
class SlotLimit:
    """One rate limit: `key`'s slots come one per `interval` seconds, up to `burst` at once."""

    key: str
    interval: float
    burst: int = 1

    @property
    def tolerance(self) -> float:
        return max(self.burst - 1, 0) * self.interval


@functools.cache
def _single(dialect: str) -> TextClause:
    """Built once per dialect: every Bot API call naming a chat runs one of these two statements."""
    now, greatest = _NOW[dialect], _GREATEST[dialect]
    return text(
        f"INSERT INTO rate_slots (key, tat) VALUES (:key, {now} + :interval) "  # noqa: S608 - no user text
        f"ON CONFLICT (key) DO UPDATE SET tat = {greatest}(rate_slots.tat, {now}) + :interval "
        f"RETURNING tat - :interval - :tolerance - {now}"
    )


@functools.cache
def _pair(dialect: str) -> TextClause:
    """Both limits' slots in one multi-row upsert; the second row is left out when the first limit's slot is not
    free now (read from the first's TAT before the statement changes it: PostgreSQL's statement snapshot, and
    SQLite materialises an `INSERT … SELECT` that reads its own table before inserting). Rows go in a fixed order
    (first, then second), so two statements never lock the same two rows in opposite orders."""
    now, greatest = _NOW[dialect], _GREATEST[dialect]

    def number(name: str) -> str:  # typed, or PostgreSQL reads a parameter in a CASE or a union as text
        return f"CAST(:{name} AS double precision)"

    return text(
        "INSERT INTO rate_slots (key, tat) "  # noqa: S608 - no user text
        f"SELECT slot.key, {now} + slot.step FROM ("
        f"SELECT 1 AS n, :first_key AS key, {number('first_interval')} AS step "
        f"UNION ALL SELECT 2, :second_key, {number('second_interval')}"
        ") AS slot "
        "WHERE slot.n = 1 OR NOT EXISTS ("
        f"SELECT 1 FROM rate_slots AS held WHERE held.key = :first_key AND held.tat - {number('first_tolerance')} "
        f"> {now}) "
        "ORDER BY slot.n "
        f"ON CONFLICT (key) DO UPDATE SET tat = {greatest}(rate_slots.tat, {now}) + "
        f"CASE WHEN excluded.key = :first_key THEN {number('first_interval')} ELSE {number('second_interval')} END "
        f"RETURNING key, tat - CASE WHEN key = :first_key THEN {number('first_reach')} "
        f"ELSE {number('second_reach')} END - {now}"
    )


class RateSlotRepository(Repository):
    async def reserve(self, key: str, *, interval: float, burst: int = 1) -> float:
        """Reserve the next slot of `key` (one per `interval` seconds, up to `burst` at once); returns the seconds
        to wait before using it (0 when it is free now). The slot is taken whether or not the caller uses it."""
        limit = SlotLimit(key, interval, burst)
        rows = await self._db.write_alone_rows(
            _single(self._db.dialect),
            {"key": key, "interval": interval, "tolerance": limit.tolerance},
            repeatable=True,  # a slot taken twice only spends one: no liveness check before it
        )
        return max(float(rows[0][0]), 0.0)

    async def reserve_pair(self, first: SlotLimit, second: SlotLimit) -> tuple[float, float | None]:
        """Reserve `first`'s next slot and, in the same statement, `second`'s if `first`'s is free now; returns the
        seconds to wait for each (None: `second` was not taken, since `first`'s slot is still to come). A caller
        that has to wait for `first` takes `second` after the wait (`reserve`); a `second` slot returned with a
        wait for `first` (another process took `first`'s slot in the same instant) is left unused, which only
        spends one slot of `second` too many."""
        if first.key == second.key:
            raise ValueError("a pair of slots needs two keys")
        rows = await self._db.write_alone_rows(
            _pair(self._db.dialect),
            {
                "first_key": first.key,
                "first_interval": first.interval,
                "first_tolerance": first.tolerance,
                "first_reach": first.interval + first.tolerance,
                "second_key": second.key,
                "second_interval": second.interval,
                "second_reach": second.interval + second.tolerance,
            },
            repeatable=True,
        )
        waits = {str(key): max(float(wait), 0.0) for key, wait in map(tuple, rows)}
        return waits[first.key], waits.get(second.key)
