"""The seam between platform senders and rate limits every process shares (slots reserved in the database)."""

from __future__ import annotations

from typing import Protocol

from storage import SlotLimit

__all__ = ["SlotLimit", "SlotReserver"]


class SlotReserver(Protocol):
    """Reserves the next slot of a named limit and says how long to wait for it (`storage.RateSlotRepository`)."""

    async def reserve(self, key: str, *, interval: float, burst: int = 1) -> float: ...

    async def reserve_pair(self, first: SlotLimit, second: SlotLimit) -> tuple[float, float | None]:
        """`first`'s slot, and `second`'s in the same step if `first`'s is free now (None: not taken)."""
        ...
