"""A `/collect` job remembered: its items as a finished search run of the chat (for the history tools) and its
model tokens counted against the chat (for /usage and the daily budget)."""

from __future__ import annotations

import logging
from datetime import datetime

from monitors.runner import item_record
from research import CollectionJobResult, record_usage
from storage import Database, ItemScore, RunOutcome
from storage.repositories import DeliveryRepository, RunRepository

__all__ = ["store_collection"]

logger = logging.getLogger(__name__)


async def store_collection(
    database: Database, *, chat_id: int, request: str, job: CollectionJobResult, now: datetime
) -> int | None:
    """Store the collected items as a finished search run of the chat (nothing is sent); the run id, or None when
    storing failed (logged: the person still has the CSV, only the history misses these items)."""
    try:
        return await _store(database, chat_id=chat_id, request=request, job=job, now=now)
    except Exception:
        logger.exception("chat %d: the items of the collection %r could not be stored", chat_id, request)
        return None


async def _store(database: Database, *, chat_id: int, request: str, job: CollectionJobResult, now: datetime) -> int:
    items, usage = job.items, job.report.usage
    if usage is not None:
        await record_usage(database, chat_id=chat_id, now=now, usage=usage, kind="collect")
    run = await RunRepository(database).open_search_run(chat_id=chat_id, query=request, now=now)
    await DeliveryRepository(database).complete_run(
        run.id,
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
        deliver=False,
    )
    return run.id
