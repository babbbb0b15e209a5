"""The one recorder of runs: open a run, complete it with what it found (its items, their scores, the model usage it
spent) and queue its outbox rows — for scheduled monitor runs, `/digest`, `/search`, `/collect` and notices alike.

Guarantees: a monitor's run for a scheduled time is opened once however many processes race (the database's unique
key decides); completing a run marks it succeeded, stores its scores and queues one outbox row per recipient in one
transaction (`DeliveryRepository.complete_run`), so a run is either stored with all its rows or not at all; the
usage is counted against the chat before that, so tokens spent are counted even when storing fails; whoever
delivers is woken once rows were queued.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from research import LlmUsage, UsageKind, record_usage
from storage import Database, DeliveryRecord, ItemRecord, ItemScore, RunOutcome, RunRecord
from storage.repositories import DeliveryRepository, RunRepository

__all__ = ["RunRecorder", "SpentUsage"]

SpentUsage = Sequence[tuple[UsageKind, LlmUsage]]
"""A run's model usage by kind (a monitor run spends on "monitor" and "embedding", a collection on "collect")."""


class RunRecorder:
    """Opens, completes and fails runs, and queues their outbox rows (see the module docstring)."""

    def __init__(self, database: Database, *, on_queued: Callable[[], None] | None = None) -> None:
        self._database = database
        self._runs = RunRepository(database)
        self._deliveries = DeliveryRepository(database)
        self._on_queued = on_queued

    async def open_scheduled(self, monitor_id: int, scheduled_for: datetime, *, now: datetime) -> RunRecord | None:
        """The monitor's run for `scheduled_for`, opened; None when that run exists already (a second firing)."""
        return await self._runs.open_run(monitor_id, scheduled_for, now=now)

    async def take_over(self, monitor_id: int, scheduled_for: datetime, *, now: datetime) -> RunRecord | None:
        """That run again, if it is still "running" (its worker died during it); None when there is none."""
        return await self._runs.take_over(monitor_id, scheduled_for, now=now)

    async def open_search(self, *, chat_id: int, query: str, now: datetime) -> RunRecord:
        """A run of no monitor, asked for by the chat (`/search`, a `/digest` preview, a collection, a notice)."""
        return await self._runs.open_search_run(chat_id=chat_id, query=query, now=now)

    async def complete(
        self,
        run_id: int,
        outcome: RunOutcome,
        *,
        items: Sequence[ItemRecord] = (),
        scores: Sequence[ItemScore] = (),
        usage: SpentUsage = (),
        usage_chat_id: int | None = None,
        deliver: bool = True,
        extra_chat_ids: Sequence[int] = (),
    ) -> list[DeliveryRecord]:
        """Count `usage` against `usage_chat_id`, then store the run's outcome, items and scores and queue its rows
        (`DeliveryRepository.complete_run`: its recipients, plus `extra_chat_ids`; none when not `deliver`)."""
        if usage_chat_id is not None:
            for kind, spent in usage:
                await record_usage(
                    self._database, chat_id=usage_chat_id, now=outcome.finished_at, usage=spent, kind=kind
                )
        rows = await self._deliveries.complete_run(
            run_id, outcome=outcome, items=items, scores=scores, deliver=deliver, extra_chat_ids=extra_chat_ids
        )
        if rows and self._on_queued is not None:
            self._on_queued()
        return rows

    async def record(
        self,
        *,
        chat_id: int,
        query: str,
        outcome: RunOutcome,
        items: Sequence[ItemRecord] = (),
        scores: Sequence[ItemScore] = (),
        usage: SpentUsage = (),
        deliver: bool = True,
        extra_chat_ids: Sequence[int] = (),
    ) -> RunRecord:
        """A run of the chat that is finished as it starts (a collection, a notice): opened, then completed."""
        run = await self.open_search(chat_id=chat_id, query=query, now=outcome.finished_at)
        await self.complete(
            run.id,
            outcome,
            items=items,
            scores=scores,
            usage=usage,
            usage_chat_id=chat_id,
            deliver=deliver,
            extra_chat_ids=extra_chat_ids,
        )
        return run

    async def fail(self, run_id: int, *, error: str, finished_at: datetime | None = None) -> bool:
        """Mark a running run failed; False when it is not running (finished already, or gone)."""
        return await self._runs.fail_run(run_id, error=error, finished_at=finished_at)
