"""The collection jobs the CLI and the chat agent call: iterate to a target and export, or search once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic_ai.models import Model

from research.collect import Collection, ProgressCallback, ProgressEvent, collect, emit
from research.dedupe import Deduper
from research.export import ExportPaths, export_stem, write_exports
from research.goal import CollectionGoal
from research.iterative import CollectionReport, run_iterative_collection
from research.query_variants import topic_of
from research.rank import RankedItem, rank
from sources import SearchQuery, Source


@dataclass(frozen=True)
class CollectionJobResult:
    """What a collection job produced: its report, where the files are, and the ranked items."""

    report: CollectionReport
    paths: ExportPaths
    items: list[RankedItem]
    """Every unique item, best first (the CSV's order)."""


async def run_collection_job(
    request: str,
    *,
    sources: Sequence[Source],
    model: Model | str | None,
    goal: CollectionGoal,
    out_dir: Path,
    progress: ProgressCallback | None = None,
) -> CollectionJobResult:
    """Collect to the goal's target (see `research.iterative`), rank, and write `<stem>.csv` and `<stem>.json`.

    Source and model failures end up in the report; only failing to write the files raises (`OSError`).
    """
    collection = await run_iterative_collection(
        request,
        sources=sources,
        model=model,
        goal=goal,
        progress=progress,
    )
    topic = topic_of(request)
    ranked = rank(collection.items, topic=topic, cluster_of=collection.cluster_of)
    emit(progress, ProgressEvent(kind="exporting", message=f"writing {len(ranked)} items", total=len(ranked)))
    stem = export_stem(topic, collection.report.started_at, "collect")
    paths = write_exports(collection.report, ranked, out_dir=out_dir, stem=stem)
    return CollectionJobResult(report=collection.report, paths=paths, items=ranked)


@dataclass(frozen=True)
class ResearchResult:
    """A one-off search: the best items, and the collection behind them (per-source outcomes, errors)."""

    items: list[RankedItem]
    collection: Collection


async def research_once(
    query: str,
    *,
    sources: Sequence[Source],
    since: datetime | None = None,
    language: str | None = None,
    limit: int = 20,
    per_source_limit: int = 30,
    one_per_story: bool = True,
    search_timeout: float = 30.0,
    progress: ProgressCallback | None = None,
) -> ResearchResult:
    """Search every source once, drop duplicates, cluster, rank; the best `limit` items.

    With `one_per_story`, each story (cluster) shows once, by its best-ranked member.
    """
    search = SearchQuery(text=query, since=since, language=language, limit=per_source_limit)
    collection = await collect([search], sources, timeout=search_timeout, progress=progress)
    deduper = Deduper(topic=query)
    result = deduper.add(collection.items)
    ranked = rank(result.new, topic=query, cluster_of=result.cluster_of)
    if one_per_story:
        seen: set[str | None] = set()
        best_per_story = []
        for candidate in ranked:
            if candidate.cluster_id not in seen:
                seen.add(candidate.cluster_id)
                best_per_story.append(candidate)
        ranked = best_per_story
    return ResearchResult(items=ranked[: max(limit, 0)], collection=collection)
