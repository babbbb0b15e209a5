"""`lookout collect` and `lookout research`: collection from the command line, with progress on stderr."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.settings import Settings
from app.wiring import SourceCatalog, language_models, open_database, open_http_client
from research import CollectionJobResult, ProgressEvent, ResearchResult, research_once, run_collection_job
from sources import Source

T = TypeVar("T")


def _run_with_sources(
    settings: Settings, spec: str | None, work: Callable[[list[Source]], Awaitable[T]], *, console: Console
) -> T:
    """Build the sources named by `spec`, run `work` with them, and close the HTTP client."""

    async def main() -> T:
        async with open_database(settings) as database:
            client = open_http_client(settings, database=database)
            try:
                try:
                    sources = SourceCatalog.build(settings, client).resolve(spec)
                except ValueError as exc:
                    console.print(f"[red]{escape(str(exc))}[/red]")
                    raise typer.Exit(code=2) from None
                return await work(sources)
            finally:
                await client.aclose()

    return asyncio.run(main())


def _progress_printer(console: Console) -> Callable[[ProgressEvent], None]:
    def show(event: ProgressEvent) -> None:
        counter = f"[{event.done}/{event.total}] " if event.total else ""
        console.print(f"[dim]{counter}{escape(event.message)}[/dim]")

    return show


def collect_command(
    settings: Settings,
    *,
    request: str,
    target: int,
    max_attempts: int,
    items_per_attempt: int,
    sources_spec: str | None,
) -> None:
    err = Console(stderr=True)
    out = Console()
    model = language_models(settings).light  # retried, then the heavy model, like every model step
    if model is None:
        err.print(f"[yellow]No language model ({settings.llm_unavailable_reason()}); planning queries without one.")
    out_dir = settings.data_dir / "exports"

    async def work(sources: list[Source]) -> CollectionJobResult:
        return await run_collection_job(
            request,
            sources=sources,
            model=model,
            target=target,
            max_attempts=max_attempts,
            items_per_attempt=items_per_attempt,
            out_dir=out_dir,
            progress=_progress_printer(err),
        )

    result = _run_with_sources(settings, sources_spec, work, console=err)
    report = result.report
    out.print(
        f"{report.total_unique} unique items ({report.total_duplicates} duplicates dropped) "
        f"in {report.attempts} attempts, {report.duration_seconds:.1f} s."
    )
    out.print(f"Stopped: {escape(report.stop_detail)}")
    for error in report.source_errors:
        out.print(f"[yellow]{escape(error.source)} failed ({escape(str(error.kind))}): {escape(error.message)}")
    for name, reason in report.skipped_sources.items():
        out.print(f"[dim]{escape(name)} is off: {escape(reason)}[/dim]")
    # Plain echo: rich would wrap a long path, and people copy these lines.
    typer.echo(f"CSV:  {result.paths.csv}")
    typer.echo(f"JSON: {result.paths.json}")


def research_command(settings: Settings, *, query: str, limit: int, sources_spec: str | None) -> None:
    err = Console(stderr=True)
    out = Console()

    async def work(sources: list[Source]) -> ResearchResult:
        return await research_once(query, sources=sources, limit=limit, progress=_progress_printer(err))

    result = _run_with_sources(settings, sources_spec, work, console=err)
    if not result.items:
        out.print(f"Nothing found for {escape(query)!r}.")
    table = Table(show_lines=False, expand=True)
    for column in ("#", "score", "source", "published", "title / url"):
        table.add_column(column, overflow="fold")
    for number, ranked in enumerate(result.items, start=1):
        item = ranked.item
        published = item.published.strftime("%Y-%m-%d") if item.published else "—"
        table.add_row(
            str(number),
            f"{ranked.score:.2f}",
            item.source,
            published,
            f"{escape(item.title)}\n[link={item.url}]{escape(item.url)}[/link]",
        )
    if result.items:
        out.print(table)
    for outcome in result.collection.errors:
        out.print(f"[yellow]{escape(outcome.source)} failed: {escape(outcome.message or '')}")
    for name, reason in result.collection.skipped_sources.items():
        out.print(f"[dim]{escape(name)} is off: {escape(reason)}[/dim]")
