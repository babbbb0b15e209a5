"""What a "collect N items about X" job aims for and how long it may try: one value, built by `/collect`, the chat
agent's `collect` tool and `lookout collect`, passed whole to `research.jobs.run_collection_job`.

The module imports nothing heavy, so the command line can read the defaults for its `--help` at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_COLLECTION_TARGET: Final = 100_000
"""The most unique items a collection may be asked for (a collection that size takes hours already)."""


@dataclass(frozen=True)
class CollectionGoal:
    """The target and the effort allowed for one collection job; every field at least 1."""

    target: int = 2000
    """Unique items to reach when the person names no target (`/collect … target N`, `--target`)."""
    max_attempts: int = 10
    """Collection rounds at most, so a request that keeps finding something new still ends in bounded time."""
    items_per_attempt: int = 500
    """Items asked for per round, shared among its queries and sources (each search asks for at least 10)."""

    def __post_init__(self) -> None:
        for name in ("target", "max_attempts", "items_per_attempt"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
