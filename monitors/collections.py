"""Items of a `/collect` job stored as a finished search run of the chat, so its history tools can find them."""

from __future__ import annotations

import logging
from datetime import datetime

from monitors.runner import item_record
from research.jobs import CollectionJobResult
from storage import Database, DeliveryRepository, ItemScore, RunOutcome, RunRepository

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
    items = job.items
    run = await RunRepository(database).open_search_run(chat_id=chat_id, query=request, now=now)
    await DeliveryRepository(database).complete_run(
        run.id,
        outcome=RunOutcome(
            finished_at=now,
            stats={"kind": "collect", "request": request, "items": len(items)},
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
