"""The research actions: /search (a digest now), /collect (a big CSV) and /export (a monitor's items as CSV), and
the chat agent's look-ups that answer it at once: `search_sources`, `read_page` and `collect` (tools with no slash
command; their answers are read by the model, fetched text fenced off as untrusted data)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import ClassVar, Final

from pydantic import Field
from pydantic_ai import ModelRetry

from agent.commands.action import Arguments, Family, MonitorArguments, SlackCommand, ToolContext, ToolUse
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
from agent.commands.progress import CollectionProgress, PipelineProgress, ProgressRelay, prefixed
from agent.context import Services, Turn
from agent.untrusted import untrusted_block
from kernel import Attachment, Reply
from monitors import MonitorNotFoundError, monitor_name, split_source_specs
from research import (
    MAX_COLLECTION_TARGET,
    CollectionGoal,
    RankedItem,
    escape_markdown,
    export_stem,
    failure_lines,
    research_once,
    run_collection_job,
    write_stored_items_csv,
)
from sources import DEFAULT_SOURCES, Source, SourceError, read_page, refused_feeds

__all__ = [
    "ACTIONS",
    "CollectCommand",
    "CollectItems",
    "ExportCommand",
    "ReadPage",
    "SearchCommand",
    "SearchSources",
    "collect",
    "export",
    "resolve",
    "search",
]

logger = logging.getLogger(__name__)

DEFAULT_EXPORT_DAYS: Final = 30
"""The /export window without a number of days (what /help says)."""
MAX_EXPORT_DAYS: Final = 3650
"""Ten years: more is surely a typo."""
MAX_RESULTS: Final = 15
"""The most results `search_sources` hands the model (each costs prompt tokens)."""
SNIPPET_CHARS: Final = 240
"""Of each result's text, what the model reads: enough to judge it, little enough for fifteen of them."""
PAGE_CHARS: Final = 8000
"""Of a page, what `read_page` hands the model (about 2,000 tokens)."""
TOOL_DAYS_LIMIT: Final = 365
"""The longest window the chat agent's tools look back over."""


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


class ExportCommand(MonitorArguments):
    """`/export <id> [days]`; the chat tool `export_items`."""

    name: ClassVar[str] = "export"
    days: int = Field(default=DEFAULT_EXPORT_DAYS, description="Window, 1-365.")
    """The window in days (the tool's at most `TOOL_DAYS_LIMIT`)."""


class SearchSources(Arguments):
    """The chat tool `search_sources` (no slash command: /search makes a digest instead)."""

    name: ClassVar[str] = "search_sources"
    query: str = Field(description='2-4 keywords, all must match, e.g. "DeepSeek R2".')
    sources: tuple[str, ...] | None = Field(
        default=None, description="e.g. hn, news, arxiv, github, wikipedia, web, rss:<url>; empty: the default mix."
    )
    days: int = Field(default=7, description="How far back, 1-365.")
    limit: int = Field(default=10, description="Items, 1-15.")
    language: str | None = Field(default=None, description='Two-letter code to search in (news, Wikipedia), e.g. "zh".')


class ReadPage(Arguments):
    """The chat tool `read_page`."""

    name: ClassVar[str] = "read_page"
    url: str = Field(description="Full http(s) URL.")


class CollectItems(Arguments):
    """The chat tool `collect` (/collect's job with the tool's smaller default target and its limits)."""

    name: ClassVar[str] = "collect_items"
    request: str = Field(description="What to collect, in the person's words.")
    target: int = Field(default=500, description="Unique items to aim for, 10-5000.")
    sources: tuple[str, ...] | None = Field(default=None, description="As for search_sources; empty: the default mix.")


async def export(services: Services, turn: Turn, command: ExportCommand) -> list[Reply]:
    """Everything the monitor collected in the last N days, as a CSV attachment named after topic and date."""
    try:
        view = await services.monitors.get_monitor(command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    days = command.days
    now = services.clock()
    rows = await services.items.for_monitor(view.id, since=now - timedelta(days=days))
    window = f"the last {count(days, 'day')}"
    if not rows:
        return [Reply(text=f"Monitor {monitor_name(view.id, view.topic)} collected nothing in {window}.")]
    path = chat_exports_dir(services, turn) / f"{export_stem(view.topic, now, f'm{view.id}-last-{days}d')}.csv"
    write_stored_items_csv(path, rows)
    in_digest = sum(1 for row in rows if row.scores.delivered)
    name = monitor_name(view.id, view.topic)
    text = f"Monitor {name}: {count(len(rows), 'item')} from {window} ({in_digest:,} in digests)."
    plain = text.replace(name, monitor_name(view.id, view.topic, "plain"), 1)
    attachment = Attachment(path=path, filename=path.name, caption=plain[:1024])  # a caption is not markdown
    return [Reply(text=text, attachments=(attachment,))]


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
    return match["request"].strip(), positive("collect", count, upper=MAX_COLLECTION_TARGET, what="The target")


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
    number = monitor_id("export", words[0])
    if len(words) == 1:
        return ExportCommand(monitor_id=number)
    days = positive("export", words[1].removesuffix("d"), upper=MAX_EXPORT_DAYS, what="The number of days")
    return ExportCommand(monitor_id=number, days=days)


# --- what the chat agent's tools answer -------------------------------------------------------------------


def resolve(context: ToolContext, sources: Sequence[str] | None) -> list[Source]:
    """The sources the model named (default: the usual mix); a wrong name goes back to the model to fix."""
    specs = [spec.strip() for spec in sources or () if spec.strip()] or list(DEFAULT_SOURCES)
    try:
        return context.services.resolve_sources(specs)
    except ValueError as error:
        raise ModelRetry(f"{error} Leave `sources` empty for the default mix.") from None


def _result_lines(ranked: Sequence[RankedItem]) -> str:
    lines = []
    for number, entry in enumerate(ranked, start=1):
        item = entry.item
        when = f"{item.published:%Y-%m-%d %H:%M} UTC" if item.published else "date unknown"
        points = f", {item.engagement.total()} engagement" if item.engagement.total() else ""
        lines.append(f"{number}. [{item.source}] {' '.join(item.title.split())}\n   {item.url} ({when}{points})")
        snippet = " ".join(item.text.split())
        if snippet:
            lines.append(f"   {snippet[:SNIPPET_CHARS]}{'…' if len(snippet) > SNIPPET_CHARS else ''}")
    return "\n".join(lines)


async def _export_items(context: ToolContext, command: ExportCommand) -> str:
    turn, now = context.turn, context.now
    monitors = context.services.monitors
    view = await monitors.get_monitor(command.monitor_id, chat_id=context.chat_id, is_admin=turn.is_admin)
    window = min(max(command.days, 1), TOOL_DAYS_LIMIT)
    scored = await context.services.items.for_monitor(view.id, since=now - timedelta(days=window))
    name = monitor_name(view.id, view.topic, "plain")
    if not scored:
        return f"Monitor {name} collected nothing in the last {window} days, so there is no CSV."
    # The same file as /export writes: one layout, one name (`deepseek-20261122-0830-m1-last-30d.csv`).
    path = context.exports_dir / f"{export_stem(view.topic, now, f'm{view.id}-last-{window}d')}.csv"
    try:
        await asyncio.to_thread(write_stored_items_csv, path, scored)
    except OSError as error:
        return f"The CSV could not be written: {error.strerror or error}."
    context.attach(
        Attachment(path=path, filename=path.name, caption=f"#{view.id} {view.topic[:100]}: {len(scored)} items")
    )
    return (
        f"Exported {len(scored)} items of monitor {name} from the last {window} days; the CSV "
        f"({path.name}) is attached to your reply automatically."
    )


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The research family, in the order /help lists it."""


@ACTIONS.action(
    pattern="<query>",
    example="/search open source LLM licences",
    parse=_parse_search,
    slack=SlackCommand(description="Search the sources right now", usage_hint="DeepSeek R2"),
)
async def search(services: Services, turn: Turn, command: SearchCommand) -> list[Reply]:
    """One-off: collect, critique and summarise a topic now (digest + CSV).

    Collect, critique and synthesize the query now; the digest with its CSV and chart comes via the outbox."""
    use_models = await models_allowed(services, turn)
    async with ProgressRelay(turn.progress, PipelineProgress()) as relay:
        await relay.announce(f"searching for “{command.query}”…")
        try:
            summary = await services.monitors.runs.search_now(
                turn.chat.id, command.query, progress=relay, use_models=use_models
            )
        except ValueError as error:
            relay.final_text = "stopped"
            return refuse(f"I could not search that: {escape_markdown(str(error))}", usage="search")
        relay.final_text = "failed" if summary.status == "failed" else "done — the digest follows"
    note = "" if use_models else f"\n{BUDGET_SPENT_NOTE}"
    return [Reply(text=run_status(f"The search for “{escape_markdown(command.query)}”", summary) + note)]


@ACTIONS.action(
    pattern="<request> [from <sources>] [target N]",
    example="/collect posts about Rust in embedded systems from hn,news target 500",
    parse=_parse_collect,
)
async def collect(services: Services, turn: Turn, command: CollectCommand) -> list[Reply]:
    """Collect many items for a request; CSV and metadata when done.

    The iterative collection job over the default sources; the CSV and its JSON metadata as attachments."""
    try:
        sources = services.resolve_sources(split_source_specs(list(command.sources) or None))
        refused = await refused_feeds(sources)
    except ValueError as error:
        return refuse(f"I cannot collect from those sources: {escape_markdown(str(error))}", usage="collect")
    if refused:
        return refuse("I cannot collect from " + escape_markdown("; ".join(refused)) + ".", usage="collect")
    goal = CollectionGoal(target=command.target) if command.target else CollectionGoal()
    async with ProgressRelay(turn.progress, CollectionProgress()) as relay:
        await relay.announce(f"collecting up to {goal.target:,} items about “{command.request}”…")
        result = await run_collection_job(
            command.request,
            sources=sources,
            model=services.models.light if await models_allowed(services, turn) else None,
            goal=goal,
            out_dir=chat_exports_dir(services, turn),
            progress=relay,
        )
        report = result.report
        relay.final_text = f"done: {count(report.total_unique, 'unique item')}"
    await services.items.store_collection(
        chat_id=turn.chat.id, request=command.request, job=result, now=services.clock()
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


@ACTIONS.action(
    pattern="<id> [days] | monitors",
    example="/export 3 7",
    parse=_parse_export,
    tool=ToolUse(
        name="export_items",
        description="Attach a CSV of what a monitor collected in the last `days` days.",
        answer=_export_items,
    ),
)
async def _export_either(services: Services, turn: Turn, command: ExportCommand | ExportMonitorsCommand) -> list[Reply]:
    """CSV of a monitor's items (default: last 30 days); `monitors`: this chat's monitors as JSON + OPML."""
    if isinstance(command, ExportMonitorsCommand):
        return await export_chat_monitors(services, turn, command)
    return await export(services, turn, command)


@ACTIONS.tool(
    name="search_sources",
    description='Search public sources now for the best recent items on a topic ("what\'s new about X").',
)
async def _search_sources(context: ToolContext, command: SearchSources) -> str:
    """Search the sources now and hand the chat agent the results."""
    text = " ".join(command.query.split())
    if not text:
        raise ModelRetry("Give a query of 2-4 keywords.")
    chosen = resolve(context, command.sources)
    days = min(max(command.days, 1), TOOL_DAYS_LIMIT)
    since = context.now - timedelta(days=days)
    names = ", ".join(dict.fromkeys(source.name for source in chosen))
    await context.say(f"Searching {names} for “{text}”…")
    async with ProgressRelay(context.turn.progress, prefixed("searching · ")) as relay:
        result = await research_once(
            text,
            sources=chosen,
            since=since,
            language=(command.language or "").strip().lower()[:3] or None,
            limit=min(max(command.limit, 1), MAX_RESULTS),
            progress=relay,
        )
        relay.final_text = f"Found {len(result.items)} items."
    context.read_untrusted = True
    failures = failure_lines(result.collection.failed_sources())
    skipped = [f"{name}: {reason}" for name, reason in result.collection.skipped_sources.items()]
    header = f"{len(result.items)} results for “{text}” from {names} (last {days} days)."
    if failures:  # every one, with its URL: the model passes on what failed, never "and others"
        header += " Failed: " + "; ".join(failures) + "."
    if skipped:
        header += " Off: " + "; ".join(skipped) + "."
    if not result.items:
        return header + " Nothing matched; try fewer or other keywords, or more days."
    return header + "\n" + untrusted_block(f"search results for {text}", _result_lines(result.items))


@ACTIONS.tool(name="read_page", description="Fetch a web page's main text (to read an article a result links to).")
async def _read_page(context: ToolContext, command: ReadPage) -> str:
    """Read a web page's main text for the chat agent."""
    url = command.url.strip()
    if not url.lower().startswith(("http://", "https://")):
        raise ModelRetry("Give a full http(s) URL, e.g. https://example.com/article.")
    await context.say(f"Reading {url[:200]}…")
    try:
        page = await read_page(url, client=context.services.http, max_chars=PAGE_CHARS)
    except SourceError as error:
        return f"Could not read {url}: {error}"
    context.read_untrusted = True
    head = [f"Title: {page.title}" if page.title else "", f"URL: {page.url}"]
    if page.published:
        head.append(f"Published: {page.published.isoformat()}")
    if page.author:
        head.append(f"Author: {page.author}")
    body = "\n".join([line for line in head if line] + ["", page.text or page.description or "(no readable text)"])
    if page.truncated:
        body += "\n[text cut here]"
    return untrusted_block(f"web page {page.url}", body)


@ACTIONS.tool(
    name="collect",
    description='Gather many items for a request with varied searches and attach them as a CSV ("collect '
    'lots of posts about X"); slow, shows progress.',
)
async def _collect_items(context: ToolContext, command: CollectItems) -> str:
    """The chat agent's /collect."""
    text = " ".join(command.request.split())
    if not text:
        raise ModelRetry("Say what to collect.")
    chosen = resolve(context, command.sources)
    goal = CollectionGoal(target=min(max(command.target, 10), 5000))
    await context.say(f"Collecting up to {goal.target} items about “{text}”…")
    try:
        async with ProgressRelay(context.turn.progress, prefixed("collecting · ")) as relay:
            job = await run_collection_job(
                text,
                sources=chosen,
                model=context.services.models.light,
                goal=goal,
                out_dir=context.exports_dir,
                progress=relay,
            )
            relay.final_text = f"Collected {job.report.total_unique} items."
    except OSError as error:
        logger.exception("collect: writing the files failed")
        return f"The collection ran but its files could not be written: {error.strerror or error}."
    report = job.report
    services = context.services
    await services.items.store_collection(chat_id=context.chat_id, request=text, job=job, now=services.clock())
    caption = f"{report.total_unique} items about {text[:200]}"
    context.attach(Attachment(path=job.paths.csv, filename=job.paths.csv.name, caption=caption))
    per_source = ", ".join(f"{name} {tally.new}" for name, tally in report.per_source.items() if tally.new)
    outcome = "reached the target" if report.reached_target else f"stopped: {report.stop_detail}"
    failed = failure_lines(report.failed_sources)
    failures = f" Sources that failed (name each): {'; '.join(failed)}." if failed else ""
    return (
        f"Collected {report.total_unique} unique items for “{text}” (target {goal.target}; {outcome}) in "
        f"{report.attempts} rounds. Per source: {per_source or 'none'}.{failures} The CSV ({job.paths.csv.name}) is "
        "attached to your reply automatically; tell the person it is there."
    )
