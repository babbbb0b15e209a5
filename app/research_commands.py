"""`lookout collect` and `lookout research`: collection from the command line, with progress on stderr.

Output is drawn by the terminal's renderer: styled on a terminal, plain and unwrapped in a pipe (so a URL is
never split). `research` exits 1 when no source answered, so a script can tell "nothing found" from "broken".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer

from app.cli_output import CliOutput
from app.settings import Settings
from app.wiring import SourceCatalog, language_models, open_database, open_http_client
from research import (
    CLI_FOLDER,
    CollectionGoal,
    CollectionJobResult,
    ProgressEvent,
    ResearchResult,
    SearchStatus,
    StopReason,
    escape_markdown,
    research_once,
    run_collection_job,
)
from sources import Source

T = TypeVar("T")


def _run_with_sources(
    settings: Settings, spec: str | None, work: Callable[[list[Source]], Awaitable[T]], *, err: CliOutput
) -> T:
    """Build the sources named by `spec`, run `work` with them, and close the HTTP client."""

    async def main() -> T:
        async with open_database(settings) as database:
            client = open_http_client(settings, database=database)
            try:
                try:
                    sources = SourceCatalog.build(settings, client).resolve(spec)
                except ValueError as exc:
                    err.line(str(exc), tone="warn")
                    raise typer.Exit(code=2) from None
                return await work(sources)
            finally:
                await client.aclose()

    return asyncio.run(main())


def _progress_printer(err: CliOutput) -> Callable[[ProgressEvent], None]:
    def show(event: ProgressEvent) -> None:
        counter = f"[{event.done}/{event.total}] " if event.total else ""
        err.line(f"{counter}{event.message}", tone="dim")

    return show


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def collect_command(
    settings: Settings,
    *,
    request: str,
    goal: CollectionGoal,
    sources_spec: str | None,
) -> None:
    err, out = CliOutput(err=True), CliOutput()
    model = language_models(settings).light  # retried, then the heavy model, like every model step
    if model is None:
        err.line(f"No language model: {settings.llm_unavailable_reason()}. Planning queries without one.", tone="warn")
    out_dir = settings.exports_dir / CLI_FOLDER

    async def work(sources: list[Source]) -> CollectionJobResult:
        return await run_collection_job(
            request,
            sources=sources,
            model=model,
            goal=goal,
            out_dir=out_dir,
            progress=_progress_printer(err),
        )

    result = _run_with_sources(settings, sources_spec, work, err=err)
    report = result.report
    out.line(
        f"{_count(report.total_unique, 'unique item')} ({_count(report.total_duplicates, 'duplicate')} dropped) "
        f"in {_count(report.attempts, 'attempt')}, {report.duration_seconds:.1f} s."
    )
    out.line(f"Stopped: {report.stop_detail}")
    for failure in report.failed_sources:  # each failed source once: it was not asked again
        out.line(f"Failed: {failure.line}", tone="warn")
    for name, reason in report.skipped_sources.items():
        out.line(f"{name} is off: {reason}", tone="dim")
    out.line(f"CSV:  {result.paths.csv}")
    out.line(f"JSON: {result.paths.json}")
    if report.stop_reason is StopReason.ALL_SOURCES_FAILED and report.total_unique == 0:
        err.line(f"Every source failed, so nothing was collected for “{request}”.", tone="warn")
        raise typer.Exit(code=1)


def research_command(settings: Settings, *, query: str, limit: int, sources_spec: str | None) -> None:
    err, out = CliOutput(err=True), CliOutput()

    async def work(sources: list[Source]) -> ResearchResult:
        return await research_once(query, sources=sources, limit=limit, progress=_progress_printer(err))

    result = _run_with_sources(settings, sources_spec, work, err=err)
    collection = result.collection
    if result.items:
        out.markdown(research_markdown(result))
    answered = any(outcome.status is SearchStatus.OK for outcome in collection.outcomes)
    for outcome in collection.errors:
        out.line(f"{outcome.source} failed: {outcome.message or outcome.error_kind}", tone="warn")
    for name, reason in collection.skipped_sources.items():
        out.line(f"{name} is off: {reason}", tone="dim")
    if not answered:
        err.line(f"Every source failed, so nothing was searched for “{query}”.", tone="warn")
        raise typer.Exit(code=1)
    if not result.items:
        out.line(f"Nothing found for “{query}”.")


def research_markdown(result: ResearchResult) -> str:
    """The ranked items as markdown: number and title, then source, date and score, then the URL."""
    entries = []
    for number, ranked in enumerate(result.items, start=1):
        item = ranked.item
        published = item.published.strftime("%Y-%m-%d") if item.published else "no date"
        title = escape_markdown(" ".join(item.title.split()) or item.url)
        details = f"{escape_markdown(item.source)} · {published} · score {ranked.score:.2f}"
        entries.append(f"**{number}. {title}**\n{details}\n{item.url}")
    return "\n\n".join(entries)
