"""The items query service: what the conversation layer reads of the items collected for chats (search by words
and dates, counts per day, a monitor's items with scores) and a `/collect` job remembered.

It owns the items table for `agent` (`Services.items`), which builds no repository of its own. Guarantees: each
query is the repository's one read, scoped to the chat when `chat_id` is given; a collection is stored as a finished
search run of the chat (for the history tools) with its model tokens counted against the chat (for /usage and the
daily budget), and a failure to store it is logged, never raised (the person still has the CSV).
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, tzinfo

from monitors.recorder import RunRecorder
from monitors.runner import item_record
from research import CollectionJobResult
from storage import Database, ItemRecord, ItemScore, ItemWithScores, RunOutcome
from storage.repositories import ItemRepository

__all__ = ["ItemService"]

logger = logging.getLogger(__name__)


class ItemService:
    """Collected items for tools, `/export` and timelines, and storing a collection; one per process."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._items = ItemRepository(database)

    async def search(
        self,
        text: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        chat_id: int | None = None,
    ) -> list[ItemRecord]:
        """Items mentioning every word of `text` dated within [since, until), newest first (`ItemRepository.search`);
        with `chat_id`, only those collected for that chat."""
        return await self._items.search(text, since=since, until=until, limit=limit, chat_id=chat_id)

    async def count_by_day(
        self, text: str, *, since: datetime, until: datetime, tz: tzinfo = UTC, chat_id: int | None = None
    ) -> dict[date, int]:
        """How many items `search` would match fall on each day of [since, until) in `tz` (days without any absent)."""
        return await self._items.count_by_day(text, since=since, until=until, tz=tz, chat_id=chat_id)

    async def for_monitor(
        self, monitor_id: int, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[ItemWithScores]:
        """Every item the monitor's runs collected within [since, until), with its latest scores, newest first."""
        return await self._items.for_monitor(monitor_id, since=since, until=until)

    async def store_collection(
        self, *, chat_id: int, request: str, job: CollectionJobResult, now: datetime
    ) -> int | None:
        """Store the collected items as a finished search run of the chat (nothing is sent); the run id, or None
        when storing failed (logged: the person still has the CSV, only the history misses these items)."""
        try:
            return await _store(self._database, chat_id=chat_id, request=request, job=job, now=now)
        except Exception:
            logger.exception("chat %d: the items of the collection %r could not be stored", chat_id, request)
            return None


async def _store(database: Database, *, chat_id: int, request: str, job: CollectionJobResult, now: datetime) -> int:
    items, usage = job.items, job.report.usage
    run = await RunRecorder(database).record(
        chat_id=chat_id,
        query=request,
        outcome=RunOutcome(
            finished_at=now,
            stats={"kind": "collect", "request": request, "items": len(items)},
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            cost=(usage.cost_usd or 0.0) if usage else 0.0,
            artifacts={"csv": str(job.paths.csv), "json": str(job.paths.json)},
        ),
        items=[item_record(ranked.item) for ranked in items],
        scores=[
            ItemScore(
                item_id=ranked.item.id,
                relevance=ranked.relevance,
                score=ranked.score,
                cluster_id=ranked.cluster_id,
                rank=rank,
            )
            for rank, ranked in enumerate(items, start=1)
        ],
        usage=[("collect", usage)] if usage is not None else (),
        deliver=False,
    )
    return run.id
