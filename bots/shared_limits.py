"""The seam between platform senders and rate limits every process shares (slots reserved in the database)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["SlotReserver"]


class SlotReserver(Protocol):
    """Reserves the next slot of a named limit and says how long to wait for it (`storage.RateSlotRepository`)."""

    async def reserve(self, key: str, *, interval: float, burst: int = 1) -> float: ...
