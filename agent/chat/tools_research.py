"""Chat-agent tools that reach the outside world: search the sources once, read a page, run a collection job."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from pydantic_ai import ModelRetry, RunContext

from agent.chat.deps import ChatDeps
from agent.chat.instructions import untrusted_block
from agent.commands.progress import ProgressRelay, prefixed
from agent.messages import Attachment
from monitors import store_collection
from research import RankedItem, failure_lines, research_once, run_collection_job
from sources import DEFAULT_SOURCES, Source, SourceError, read_page

__all__ = ["collect", "read_web_page", "resolve", "search_sources"]

logger = logging.getLogger(__name__)

MAX_RESULTS = 15
SNIPPET_CHARS = 240
PAGE_CHARS = 8000


def resolve(deps: ChatDeps, sources: Sequence[str] | None) -> list[Source]:
    """The sources the model named (default: the usual mix); a wrong name goes back to the model to fix."""
    specs = [spec.strip() for spec in sources or () if spec.strip()] or list(DEFAULT_SOURCES)
    try:
        return deps.services.resolve_sources(specs)
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


async def search_sources(
    ctx: RunContext[ChatDeps],
    query: str,
    sources: list[str] | None = None,
    days: int = 7,
    limit: int = 10,
    language: str | None = None,
) -> str:
    """Search public sources now for the best recent items on a topic ("what's new about X").

    Args:
        query: 2-4 keywords, all must match, e.g. "DeepSeek R2".
        sources: e.g. hn, news, arxiv, github, wikipedia, web, rss:<url>; empty: the default mix.
        days: How far back, 1-365.
        limit: Items, 1-15.
        language: Two-letter code to search in (news, Wikipedia), e.g. "zh".
    """
    deps = ctx.deps
    text = " ".join(query.split())
    if not text:
        raise ModelRetry("Give a query of 2-4 keywords.")
    chosen = resolve(deps, sources)
    since = deps.now - timedelta(days=min(max(days, 1), 365))
    names = ", ".join(dict.fromkeys(source.name for source in chosen))
    await deps.say(f"Searching {names} for “{text}”…")
    async with ProgressRelay(deps.turn.progress, prefixed("searching · ")) as relay:
        result = await research_once(
            text,
            sources=chosen,
            since=since,
            language=(language or "").strip().lower()[:3] or None,
            limit=min(max(limit, 1), MAX_RESULTS),
            progress=relay,
        )
        relay.final_text = f"Found {len(result.items)} items."
    deps.read_untrusted = True
    failures = failure_lines(result.collection.failed_sources())
    skipped = [f"{name}: {reason}" for name, reason in result.collection.skipped_sources.items()]
    header = f"{len(result.items)} results for “{text}” from {names} (last {min(max(days, 1), 365)} days)."
    if failures:  # every one, with its URL: the model passes on what failed, never "and others"
        header += " Failed: " + "; ".join(failures) + "."
    if skipped:
        header += " Off: " + "; ".join(skipped) + "."
    if not result.items:
        return header + " Nothing matched; try fewer or other keywords, or more days."
    return header + "\n" + untrusted_block(f"search results for {text}", _result_lines(result.items))


async def read_web_page(ctx: RunContext[ChatDeps], url: str) -> str:
    """Fetch a web page's main text (to read an article a result links to).

    Args:
        url: Full http(s) URL.
    """
    deps = ctx.deps
    if not url.strip().lower().startswith(("http://", "https://")):
        raise ModelRetry("Give a full http(s) URL, e.g. https://example.com/article.")
    await deps.say(f"Reading {url.strip()[:200]}…")
    try:
        page = await read_page(url.strip(), client=deps.services.http, max_chars=PAGE_CHARS)
    except SourceError as error:
        return f"Could not read {url.strip()}: {error}"
    deps.read_untrusted = True
    head = [f"Title: {page.title}" if page.title else "", f"URL: {page.url}"]
    if page.published:
        head.append(f"Published: {page.published.isoformat()}")
    if page.author:
        head.append(f"Author: {page.author}")
    body = "\n".join([line for line in head if line] + ["", page.text or page.description or "(no readable text)"])
    if page.truncated:
        body += "\n[text cut here]"
    return untrusted_block(f"web page {page.url}", body)


async def collect(ctx: RunContext[ChatDeps], request: str, target: int = 500, sources: list[str] | None = None) -> str:
    """Gather many items for a request with varied searches and attach them as a CSV ("collect lots of posts
    about X"); slow, shows progress.

    Args:
        request: What to collect, in the person's words.
        target: Unique items to aim for, 10-5000.
        sources: As for search_sources; empty: the default mix.
    """
    deps = ctx.deps
    text = " ".join(request.split())
    if not text:
        raise ModelRetry("Say what to collect.")
    chosen = resolve(deps, sources)
    goal = min(max(target, 10), 5000)
    await deps.say(f"Collecting up to {goal} items about “{text}”…")
    try:
        async with ProgressRelay(deps.turn.progress, prefixed("collecting · ")) as relay:
            job = await run_collection_job(
                text,
                sources=chosen,
                model=deps.services.models.light,
                target=goal,
                out_dir=deps.exports_dir,
                progress=relay,
            )
            relay.final_text = f"Collected {job.report.total_unique} items."
    except OSError as error:
        logger.exception("collect: writing the files failed")
        return f"The collection ran but its files could not be written: {error.strerror or error}."
    report = job.report
    await store_collection(
        deps.services.database, chat_id=deps.turn.chat.id, request=text, job=job, now=deps.services.clock()
    )
    deps.attach(
        Attachment(
            path=job.paths.csv,
            filename=job.paths.csv.name,
            caption=f"{report.total_unique} items about {text[:200]}",
        )
    )
    per_source = ", ".join(f"{name} {tally.new}" for name, tally in report.per_source.items() if tally.new)
    outcome = "reached the target" if report.reached_target else f"stopped: {report.stop_detail}"
    failed = failure_lines(report.failed_sources)
    failures = f" Sources that failed (name each): {'; '.join(failed)}." if failed else ""
    return (
        f"Collected {report.total_unique} unique items for “{text}” (target {goal}; {outcome}) in "
        f"{report.attempts} rounds. Per source: {per_source or 'none'}.{failures} The CSV ({job.paths.csv.name}) is "
        "attached to your reply automatically; tell the person it is there."
    )
