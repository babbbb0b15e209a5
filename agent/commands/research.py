"""The research commands: /search (a digest now), /collect (a big CSV) and /export (a monitor's items as CSV)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import ClassVar, Final

from agent.commands.action import Action, Arguments, SlackCommand
from agent.commands.common import BUDGET_SPENT_NOTE, chat_exports_dir, count, models_allowed, refuse
from agent.commands.grammar import (
    MAX_QUERY_CHARS,
    CommandError,
    ParseOptions,
    monitor_id,
    phrase_of,
    positive,
    split_sources,
    tokenize,
)
from agent.commands.monitors import run_status
from agent.commands.portability import ExportMonitorsCommand, export_chat_monitors
from agent.commands.progress import CollectionProgress, PipelineProgress, ProgressRelay
from agent.context import Services, Turn
from agent.messages import Attachment, Reply
from monitors import MonitorNotFoundError, split_source_specs, store_collection
from research import escape_markdown, export_stem, run_collection_job, write_stored_items_csv
from sources import refused_feeds
from storage import ItemRepository

__all__ = ["ACTIONS", "CollectCommand", "ExportCommand", "SearchCommand", "collect", "export", "search"]

DEFAULT_COLLECT_TARGET: Final = 2000
"""Unique items /collect aims for without `target N` (the same as `lookout collect`)."""
DEFAULT_EXPORT_DAYS: Final = 30
"""The /export window without a number of days (what /help says)."""
MAX_TARGET: Final = 100_000
"""The most unique items /collect may be asked for (a collection that size takes hours already)."""
MAX_EXPORT_DAYS: Final = 3650
"""Ten years: more is surely a typo."""


class SearchCommand(Arguments):
    """`/search <query>`."""

    name: ClassVar[str] = "search"
    query: str


class CollectCommand(Arguments):
    """`/collect <request> [target N]`."""

    name: ClassVar[str] = "collect"
    request: str
    target: int | None = None
    """Unique items wanted; None for the job's default."""
    sources: tuple[str, ...] = ()
    """Source specs from `from <sources>`; empty for the default mix."""


class ExportCommand(Arguments):
    """`/export <id> [days]`."""

    name: ClassVar[str] = "export"
    monitor_id: int
    days: int | None = None
    """The window in days; None for the default."""


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
            return refuse(f"I could not search that: {escape_markdown(str(error))}", usage="search")
        relay.final_text = "failed" if summary.status == "failed" else "done — the digest follows"
    note = "" if use_models else f"\n{BUDGET_SPENT_NOTE}"
    return [Reply(text=run_status(f"The search for “{escape_markdown(command.query)}”", summary) + note)]


async def collect(services: Services, turn: Turn, command: CollectCommand) -> list[Reply]:
    """The iterative collection job over the default sources; the CSV and its JSON metadata as attachments."""
    try:
        sources = services.resolve_sources(split_source_specs(list(command.sources) or None))
        refused = await refused_feeds(sources)
    except ValueError as error:
        return refuse(f"I cannot collect from those sources: {escape_markdown(str(error))}", usage="collect")
    if refused:
        return refuse("I cannot collect from " + escape_markdown("; ".join(refused)) + ".", usage="collect")
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
        f"Collected {count(report.total_unique, 'unique item')} for “{escape_markdown(command.request)}” "
        f"({count(report.total_duplicates, 'duplicate')} dropped) in {count(report.attempts, 'attempt')}; "
        f"stopped: {escape_markdown(report.stop_detail)}"
    )
    if report.failed_sources:
        # each failed source once, with why: it was not asked again after failing
        failed = (f"- {escape_markdown(failure.line)}" for failure in report.failed_sources)
        line += "\nSources that failed:\n" + "\n".join(failed)
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
        return [Reply(text=f"Monitor #{view.id} “{escape_markdown(view.topic)}” collected nothing in {window}.")]
    path = chat_exports_dir(services, turn) / f"{export_stem(view.topic, now, f'm{view.id}-last-{days}d')}.csv"
    write_stored_items_csv(path, rows)
    in_digest = sum(1 for row in rows if row.scores.delivered)
    topic = escape_markdown(view.topic)
    text = f"Monitor #{view.id} “{topic}”: {count(len(rows), 'item')} from {window} ({in_digest:,} in digests)."
    attachment = Attachment(path=path, filename=path.name, caption=text[:1024])
    return [Reply(text=text, attachments=(attachment,))]


async def _export_either(services: Services, turn: Turn, command: ExportCommand | ExportMonitorsCommand) -> list[Reply]:
    if isinstance(command, ExportMonitorsCommand):
        return await export_chat_monitors(services, turn, command)
    return await export(services, turn, command)


# --- parsing ------------------------------------------------------------------------------------------------


def _parse_search(args: str, _options: ParseOptions) -> SearchCommand:
    if not args:
        raise CommandError("search", "Say what to search for.")
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("search", f"Keep the query under {MAX_QUERY_CHARS} characters.")
    return SearchCommand(query=args)


_TARGET = re.compile(r"(?P<request>.*?) ?\btarget ?[=:]? ?(?P<count>[0-9][0-9,_]*)", re.IGNORECASE)


def _split_target(args: str) -> tuple[str, int | None]:
    # only "target <number>" at the very end is the option: "ads that target teens" is a request
    match = _TARGET.fullmatch(args)
    if match is None:
        return args, None
    count = match["count"].replace(",", "").replace("_", "")
    return match["request"].strip(), positive("collect", count, upper=MAX_TARGET, what="The target")


def _parse_collect(args: str, _options: ParseOptions) -> CollectCommand:
    # `target N` and `from <sources>` may come in either order at the end
    args, target = _split_target(args)
    tokens, sources = split_sources(tokenize(args), command="collect")
    args = phrase_of(tokens)
    if target is None:
        args, target = _split_target(args)
    if not args:
        raise CommandError("collect", "Say what to collect.")
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("collect", f"Keep the request under {MAX_QUERY_CHARS} characters.")
    return CollectCommand(request=args, target=target, sources=sources)


def _parse_export(args: str, _options: ParseOptions) -> ExportCommand | ExportMonitorsCommand:
    words = args.split()
    if [word.lower() for word in words] == ["monitors"]:
        return ExportMonitorsCommand()
    if not 1 <= len(words) <= 2:
        raise CommandError(
            "export", "/export needs a monitor number (and, optionally, a number of days), or `monitors`."
        )
    days = None
    if len(words) == 2:
        days = positive("export", words[1].removesuffix("d"), upper=MAX_EXPORT_DAYS, what="The number of days")
    return ExportCommand(monitor_id=monitor_id("export", words[0]), days=days)


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = (
    Action(
        name="search",
        arguments=SearchCommand,
        pattern="<query>",
        description="One-off: collect, critique and summarise a topic now (digest + CSV)",
        example="/search open source LLM licences",
        parse=_parse_search,
        run=search,
        slack=SlackCommand(description="Search the sources right now", usage_hint="DeepSeek R2"),
    ),
    Action(
        name="collect",
        arguments=CollectCommand,
        pattern="<request> [from <sources>] [target N]",
        description="Collect many items for a request; CSV and metadata when done",
        example="/collect posts about Rust in embedded systems from hn,news target 500",
        parse=_parse_collect,
        run=collect,
    ),
    Action(
        name="export",
        arguments=ExportCommand,
        pattern="<id> [days] | monitors",
        description="CSV of a monitor's items (default: last 30 days); `monitors`: this chat's monitors as JSON + OPML",
        example="/export 3 7",
        parse=_parse_export,
        run=_export_either,
    ),
)
"""The research family, in the order /help lists it."""
