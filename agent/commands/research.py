"""The research commands: /search (a digest now), /collect (a big CSV) and /export (a monitor's items as CSV)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from agent.commands.common import BUDGET_SPENT_NOTE, chat_exports_dir, chat_zone, count, models_allowed, refuse
from agent.commands.monitors import run_status
from agent.commands.progress import CollectionProgress, PipelineProgress, ProgressRelay
from agent.commands.specs import CollectCommand, ExportCommand, SearchCommand
from agent.context import Services, Turn
from agent.messages import Attachment, Reply
from monitors import MonitorNotFoundError, split_source_specs, store_collection
from research import guard_cell, run_collection_job, safe_stem, write_csv_rows
from storage import ItemRepository, ScoredItem

__all__ = ["EXPORT_COLUMNS", "collect", "export", "search"]

DEFAULT_COLLECT_TARGET: Final = 2000
"""Unique items /collect aims for without `target N` (the same as `lookout collect`)."""
DEFAULT_EXPORT_DAYS: Final = 30
"""The /export window without a number of days (what /help says)."""
EXPORT_COLUMNS: Final = (
    "index",
    "source",
    "title",
    "text",
    "author",
    "published",
    "collected",
    "url",
    "points",
    "likes",
    "reposts",
    "comments",
    "language",
    "relevance",
    "credibility",
    "score",
    "cluster_id",
    "in_digest",
    "query",
)


async def search(services: Services, turn: Turn, command: SearchCommand) -> list[Reply]:
    """Collect, critique and synthesize the query now; the digest with its CSV and chart comes via the outbox."""
    use_models = await models_allowed(services, turn)
    async with ProgressRelay(turn.progress, PipelineProgress()) as relay:
        await relay.announce(f"searching for “{command.query}”…")
        try:
            summary = await services.monitors.search_now(
                turn.chat.id, command.query, progress=relay, use_models=use_models
            )
        except ValueError as error:
            relay.final_text = "stopped"
            return refuse(f"I could not search that: {error}", usage="search")
        relay.final_text = "failed" if summary.status == "failed" else "done — the digest follows"
    note = "" if use_models else f"\n{BUDGET_SPENT_NOTE}"
    return [Reply(text=run_status(f"The search for “{command.query}”", summary) + note)]


async def collect(services: Services, turn: Turn, command: CollectCommand) -> list[Reply]:
    """The iterative collection job over the default sources; the CSV and its JSON metadata as attachments."""
    try:
        sources = services.resolve_sources(split_source_specs(None))
    except ValueError as error:
        return refuse(f"I cannot collect right now: {error}")
    target = command.target or DEFAULT_COLLECT_TARGET
    async with ProgressRelay(turn.progress, CollectionProgress()) as relay:
        await relay.announce(f"collecting up to {target:,} items about “{command.request}”…")
        result = await run_collection_job(
            command.request,
            sources=sources,
            model=services.models.light if await models_allowed(services, turn) else None,
            target=target,
            out_dir=chat_exports_dir(services, turn),
            progress=relay,
        )
        report = result.report
        relay.final_text = f"done: {count(report.total_unique, 'unique item')}"
    await store_collection(
        services.database, chat_id=turn.chat.id, request=command.request, job=result, now=services.clock()
    )
    line = (
        f"Collected {count(report.total_unique, 'unique item')} for “{command.request}” "
        f"({report.total_duplicates:,} duplicates dropped) in {count(report.attempts, 'attempt')}; "
        f"stopped: {report.stop_detail}"
    )
    if report.source_errors:
        failed = sorted({error.source for error in report.source_errors})
        line += f"\nSources that failed at least once: {', '.join(failed)}."
    caption = f"{report.total_unique:,} items about {command.request}"[:1024]
    attachments = (
        Attachment(path=result.paths.csv, filename=result.paths.csv.name, caption=caption),
        Attachment(path=result.paths.json, filename=result.paths.json.name, caption="How the collection went"),
    )
    return [Reply(text=line, attachments=attachments)]


async def export(services: Services, turn: Turn, command: ExportCommand) -> list[Reply]:
    """Everything the monitor collected in the last N days, as a CSV attachment named after topic and date."""
    try:
        view = await services.monitors.get_monitor(command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    days = command.days or DEFAULT_EXPORT_DAYS
    now = services.clock()
    rows = await ItemRepository(services.database).for_monitor(view.id, since=now - timedelta(days=days))
    window = f"the last {count(days, 'day')}"
    if not rows:
        return [Reply(text=f"Monitor #{view.id} “{view.topic}” collected nothing in {window}.")]
    stem = safe_stem(view.topic, now)
    out_dir = chat_exports_dir(services, turn)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-m{view.id}-export-{days}d.csv"
    write_export_csv(path, rows)
    local_day = now.astimezone(chat_zone(turn, services)).date().isoformat()
    filename = f"{stem.rsplit('-', 2)[0]}-last-{days}d-{local_day}.csv"
    in_digest = sum(1 for row in rows if row.scores.delivered)
    text = f"Monitor #{view.id} “{view.topic}”: {count(len(rows), 'item')} from {window} ({in_digest:,} in digests)."
    attachment = Attachment(path=path, filename=filename, caption=text[:1024])
    return [Reply(text=text, attachments=(attachment,))]


def write_export_csv(path: Path, rows: list[ScoredItem]) -> None:
    """Write the export: one row per item, newest first, every cell guarded against formula injection."""
    write_csv_rows(path, EXPORT_COLUMNS, (_export_row(index, row) for index, row in enumerate(rows, start=1)))


def _export_row(index: int, row: ScoredItem) -> list[str]:
    item, scores = row.item, row.scores
    engagement = item.engagement
    cells = [
        str(index),
        item.source,
        item.title,
        item.text,
        item.author or "",
        _iso(item.published),
        _iso(item.collected_at),
        item.url,
        *(_number(engagement.get(key)) for key in ("points", "likes", "reposts", "comments")),
        item.language or "",
        _score(scores.relevance),
        _score(scores.credibility),
        _score(scores.score),
        scores.cluster_id or "",
        "yes" if scores.delivered else "no",
        item.query,
    ]
    return [guard_cell(cell) for cell in cells]


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _number(value: int | None) -> str:
    return "" if value is None else str(value)


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
