"""Run every query against every source concurrently, within a bound, and record what each pair returned."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt

from kernel import utc_now
from research.language import with_languages
from research.terms import normalise
from sources import Item, SearchQuery, Source, SourceError, SourceErrorKind, failure_reason, source_spec, spec_label

logger = logging.getLogger(__name__)

UNEXPECTED: Final = "unexpected"
"""Error kind recorded when a source raised something other than `SourceError` (a bug in the source)."""

ErrorKind = SourceErrorKind | Literal["unexpected"]


class ProgressEvent(BaseModel):
    """A small progress report for a display: what happened, and how far along the work is."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["search_done", "attempt_started", "attempt_done", "exporting", "finished", "stage"]
    """`search_done`: one (source, query) pair answered; the others belong to the iterative job."""
    message: str
    """One line a person can read, e.g. `hn · "deepseek": 42 items`."""
    done: NonNegativeInt = 0
    """Steps finished so far in the current phase."""
    total: NonNegativeInt = 0
    """Steps in the current phase; 0 when unknown."""


ProgressCallback = Callable[[ProgressEvent], None]
"""Receives progress events; must be quick and must not raise (errors are logged and ignored)."""


class SearchStatus(StrEnum):
    """How one (source, query) search ended."""

    OK = "ok"
    ERROR = "error"
    SKIPPED = "skipped"
    """The source was off (`unavailable_reason()` was set) and was not asked."""
    DROPPED = "dropped"
    """The source failed earlier in the same run and was not asked again."""


class SearchOutcome(BaseModel):
    """What one source answered to one query."""

    model_config = ConfigDict(frozen=True)

    source: str
    spec: str = ""
    """How commands name the source (`hn`, `rss:<url>`): tells two feeds apart; the name when empty."""
    query: str
    """The query text."""
    query_index: NonNegativeInt = 0
    """Position of the query in the `queries` given to `collect` (texts may repeat across languages)."""
    language: str | None = None
    status: SearchStatus
    count: NonNegativeInt = 0
    """Items returned (after truncation to the query's limit)."""
    skipped_malformed: NonNegativeInt = 0
    """Entries the source dropped because they were malformed."""
    error_kind: ErrorKind | None = None
    """Why it failed (`SourceErrorKind`, or `unexpected` for a bug in the source); `None` when it did not."""
    message: str | None = None
    """The error message, why the source was skipped, or why an answered search is partial (a later page failed)."""
    http_status: int | None = None
    """The HTTP status of a failed search, when the source got that far."""
    seconds: NonNegativeFloat = 0.0
    """How long the search took."""

    @property
    def source_spec(self) -> str:
        return self.spec or self.source

    def failure(self) -> SourceFailure:
        """This failed search as the failure of its source."""
        kind = str(self.error_kind or "unexpected")
        return SourceFailure(
            spec=self.source_spec,
            kind=kind,
            reason=failure_reason(kind, self.message or "", status=self.http_status),
            message=self.message or "",
        )


class SourceFailure(BaseModel):
    """Why one source failed in a run, once per source (the first failure; it is not asked again)."""

    model_config = ConfigDict(frozen=True)

    spec: str
    """`hn`, `rss:<url>`, …"""
    kind: str
    """A `SourceErrorKind` value, or `unexpected`."""
    reason: str
    """A few words: `HTTP 500`, `timed out`, `not a feed`."""
    message: str = ""
    """The full error message, for the log and the JSON."""

    @property
    def line(self) -> str:
        """`rss example.com/feed.xml: HTTP 500`: the source (its URL shortened) and why, for a person."""
        return f"{spec_label(self.spec)}: {self.reason}"


def failure_lines(failures: Sequence[SourceFailure]) -> list[str]:
    """One line per failed source, every one of them (a reader is never left to guess what "and 2 more" were)."""
    return [failure.line for failure in failures]


class FailedSources:
    """The sources that failed during one run, by spec: each is asked once, never again in the same run.

    Shared by every `collect` call of a run (the first round, the related-terms round, each attempt of a
    collection job), so a broken feed or an unreachable API costs one request, not one per query and round.
    """

    def __init__(self) -> None:
        self._first: dict[str, SourceFailure] = {}

    def get(self, spec: str) -> SourceFailure | None:
        return self._first.get(spec)

    def record(self, outcome: SearchOutcome) -> None:
        """Note a failed search; only failures of the source itself count (not a query it rejected)."""
        if outcome.status is SearchStatus.ERROR and _source_wide(outcome):
            self._first.setdefault(outcome.source_spec, outcome.failure())

    def __len__(self) -> int:
        return len(self._first)

    @property
    def failures(self) -> list[SourceFailure]:
        """The first failure of each failed source, in the order they failed."""
        return list(self._first.values())


_QUERY_REJECTED_STATUSES = frozenset({400, 413, 414, 422})
"""HTTP statuses that say the query was wrong, not the source: other queries may still work there."""


def _source_wide(outcome: SearchOutcome) -> bool:
    return not (outcome.error_kind == SourceErrorKind.CLIENT and outcome.http_status in _QUERY_REJECTED_STATUSES)


class SourceTally(BaseModel):
    """Totals for one source over all queries of a collection."""

    source: str
    items: NonNegativeInt = 0
    skipped_malformed: NonNegativeInt = 0
    searches: NonNegativeInt = 0
    errors: NonNegativeInt = 0
    skipped_reason: str | None = None
    """Set when the source was off."""


class Collection(BaseModel):
    """Everything one `collect` call found, plus one outcome per (source, query) pair."""

    items: list[Item] = Field(default_factory=list)
    """All items in the order they arrived; not de-duplicated."""
    outcomes: list[SearchOutcome] = Field(default_factory=list)
    """One entry per (source, query) pair, in source-then-query order."""
    item_outcomes: list[NonNegativeInt] = Field(default_factory=list, repr=False)
    """For each item, the index in `outcomes` of the search that found it."""
    started_at: AwareDatetime
    finished_at: AwareDatetime

    def items_with_outcomes(self) -> Iterator[tuple[Item, SearchOutcome]]:
        """Each item with the (source, query) search that found it."""
        for item, index in zip(self.items, self.item_outcomes, strict=True):
            yield item, self.outcomes[index]

    @property
    def errors(self) -> list[SearchOutcome]:
        """The pairs that failed."""
        return [o for o in self.outcomes if o.status is SearchStatus.ERROR]

    @property
    def partial(self) -> list[SearchOutcome]:
        """The pairs that answered with their first pages only: a later page failed (the message says how)."""
        return [o for o in self.outcomes if o.status is SearchStatus.OK and o.message]

    @property
    def skipped_sources(self) -> dict[str, str]:
        """Sources that were off, with the reason each gave."""
        return {o.source: o.message or "" for o in self.outcomes if o.status is SearchStatus.SKIPPED}

    def failed_sources(self) -> list[SourceFailure]:
        """Each source that failed, once, with its first failure (a query it rejected counts too)."""
        first: dict[str, SourceFailure] = {}
        for outcome in self.errors:
            first.setdefault(outcome.source_spec, outcome.failure())
        return list(first.values())

    def per_source(self) -> dict[str, SourceTally]:
        """Totals per source name."""
        tallies: dict[str, SourceTally] = {}
        for outcome in self.outcomes:
            tally = tallies.setdefault(outcome.source, SourceTally(source=outcome.source))
            if outcome.status is SearchStatus.SKIPPED:
                tally.skipped_reason = outcome.message
                continue
            if outcome.status is SearchStatus.DROPPED:
                continue
            tally.searches += 1
            tally.items += outcome.count
            tally.skipped_malformed += outcome.skipped_malformed
            tally.errors += outcome.status is SearchStatus.ERROR
        return tallies


def emit(progress: ProgressCallback | None, event: ProgressEvent) -> None:
    """Hand an event to the callback; a failing display must never break collection."""
    if progress is None:
        return
    try:
        progress(event)
    except Exception:
        logger.exception("progress callback failed")


def _unavailable_reason(source: Source) -> str | None:
    try:
        return source.unavailable_reason()
    except Exception as exc:  # a source bug: treat the source as off rather than crash the run
        logger.exception("source %r: unavailable_reason() failed", getattr(source, "name", source))
        return f"could not tell whether the source is available: {exc!r}"


def _dropped(source: Source, spec: str, query: SearchQuery, earlier: SourceFailure) -> SearchOutcome:
    return SearchOutcome(
        source=source.name,
        spec=spec,
        query=query.text,
        language=query.language,
        status=SearchStatus.DROPPED,
        message=f"not asked again in this run: it failed earlier ({earlier.reason})",
    )


async def _search_one(
    source: Source,
    query: SearchQuery,
    *,
    semaphore: asyncio.Semaphore,
    search_timeout: float,
    failed: FailedSources,
    after: asyncio.Future[None] | None,
    opens: asyncio.Future[None] | None,
) -> tuple[list[Item], SearchOutcome]:
    """One search. `after` (the source's first search) must finish first: if the source failed there, this one is
    dropped without asking it. `opens` is set when this search is that first one."""
    spec = source_spec(source)
    try:
        if after is not None:
            await after
            earlier = failed.get(spec)
            if earlier is not None:
                return [], _dropped(source, spec, query, earlier)
        items, outcome = await _ask(source, spec, query, semaphore=semaphore, search_timeout=search_timeout)
        failed.record(outcome)
        return items, outcome
    finally:
        if opens is not None and not opens.done():
            opens.set_result(None)


async def _ask(
    source: Source, spec: str, query: SearchQuery, *, semaphore: asyncio.Semaphore, search_timeout: float
) -> tuple[list[Item], SearchOutcome]:
    async with semaphore:
        started = time.monotonic()

        def outcome(**result: Any) -> SearchOutcome:
            """This search's outcome: what was asked of which source, how long it took, and `result`."""
            seconds = time.monotonic() - started
            return SearchOutcome(
                source=source.name, spec=spec, query=query.text, language=query.language, seconds=seconds, **result
            )

        kind: ErrorKind
        status: int | None = None
        try:
            batch = await asyncio.wait_for(source.search(query), timeout=search_timeout)
        except SourceError as exc:
            kind, message, status = exc.kind, str(exc), exc.status
        except TimeoutError:
            kind, message = SourceErrorKind.TIMEOUT, f"no answer within {search_timeout:g} s"
        except Exception as exc:
            logger.exception("source %r failed unexpectedly on %r", spec, query.text)
            kind, message = UNEXPECTED, f"{type(exc).__name__}: {exc}"
        else:
            items = [
                item if item.query else item.model_copy(update={"query": query.text})
                for item in batch.items[: max(query.limit, 0)]
            ]
            # The language of each item's own text where the source does not state it (off the event loop: the
            # detector loads its model on first use).
            items = await asyncio.to_thread(with_languages, items)
            skipped = max(batch.skipped, 0)
            return items, outcome(
                status=SearchStatus.OK, count=len(items), skipped_malformed=skipped, message=batch.stopped
            )
        logger.warning("source %r on %r: %s: %s", spec, query.text, kind, message)
        return [], outcome(status=SearchStatus.ERROR, error_kind=kind, message=message, http_status=status)


async def collect(
    queries: Sequence[SearchQuery],
    sources: Sequence[Source],
    *,
    concurrency: int = 8,
    # Per search, not for the whole call: one slow source must not eat the others' time (hence not
    # `asyncio.timeout` around the call, which is what ASYNC109 suggests).
    timeout: float = 60.0,  # noqa: ASYNC109
    progress: ProgressCallback | None = None,
    failed: FailedSources | None = None,
) -> Collection:
    """Ask every available source every query, at most `concurrency` searches at a time.

    A source that raises `SourceError`, takes longer than `timeout` seconds, or raises anything else is
    recorded in its outcome and the others go on. A source whose `unavailable_reason()` is set is not asked;
    its outcomes say `skipped` with the reason. Each source's first query goes alone; if the source itself
    failed there (not merely rejected the query), its other queries are `dropped` unasked, and so are its
    queries in later calls given the same `failed` (one per run). Never raises for a source's failure.
    """
    started_at = utc_now()
    failed = failed if failed is not None else FailedSources()
    slots, query_indices = _start_searches(queries, sources, concurrency=concurrency, timeout=timeout, failed=failed)
    tasks = [slot for slot in slots if isinstance(slot, asyncio.Task)]
    try:
        await _report_searches(tasks, progress)
    finally:
        # When the caller cancels us, no search may outlive the call.
        for task in tasks:
            task.cancel()
    return _collection(slots, query_indices, started_at=started_at)


_Slot = asyncio.Task[tuple[list[Item], SearchOutcome]] | SearchOutcome
"""One (source, query) pair of a `collect` call: its running search, or the outcome of a search not made."""


def _start_searches(
    queries: Sequence[SearchQuery],
    sources: Sequence[Source],
    *,
    concurrency: int,
    timeout: float,  # per search, see `collect`
    failed: FailedSources,
) -> tuple[list[_Slot], list[int]]:
    """Start every source's searches (each source's first query alone, the rest once it answered), in source-then-
    query order, with each slot's query index; a source that is off or failed earlier gets outcomes, not searches."""
    semaphore = asyncio.Semaphore(max(concurrency, 1))
    slots: list[_Slot] = []
    query_indices: list[int] = []
    loop = asyncio.get_running_loop()
    for source in sources:
        spec = source_spec(source)
        reason = _unavailable_reason(source)
        earlier = failed.get(spec)
        first_done: asyncio.Future[None] = loop.create_future()
        for query_index, query in enumerate(queries):
            query_indices.append(query_index)
            if reason is not None:
                slots.append(
                    SearchOutcome(
                        source=source.name,
                        spec=spec,
                        query=query.text,
                        language=query.language,
                        status=SearchStatus.SKIPPED,
                        message=reason,
                    )
                )
            elif earlier is not None:
                slots.append(_dropped(source, spec, query, earlier))
            else:
                first = query_index == 0
                search = _search_one(
                    source,
                    query,
                    semaphore=semaphore,
                    search_timeout=timeout,
                    failed=failed,
                    after=None if first else first_done,
                    opens=first_done if first else None,
                )
                slots.append(asyncio.ensure_future(search))
    return slots, query_indices


async def _report_searches(
    tasks: Sequence[asyncio.Task[tuple[list[Item], SearchOutcome]]], progress: ProgressCallback | None
) -> None:
    """Wait for every search, reporting each one as it ends (a dropped one was reported with its source's failure)."""
    done = 0
    for finished in asyncio.as_completed(tasks):
        _, outcome = await finished
        if outcome.status is SearchStatus.DROPPED:
            continue  # its source's failure was reported once, when it happened
        done += 1
        text = f"{outcome.count} items" if outcome.status is SearchStatus.OK else outcome.failure().reason
        emit(
            progress,
            ProgressEvent(
                kind="search_done",
                message=f'{spec_label(outcome.source_spec)} · "{outcome.query}": {text}',
                done=done,
                total=len(tasks),
            ),
        )


def _collection(slots: Sequence[_Slot], query_indices: Sequence[int], *, started_at: datetime) -> Collection:
    """The finished searches' items and outcomes, in slot order (each item pointing at the search that found it)."""
    items: list[Item] = []
    item_outcomes: list[int] = []
    outcomes: list[SearchOutcome] = []
    for slot, query_index in zip(slots, query_indices, strict=True):
        found, outcome = ([], slot) if isinstance(slot, SearchOutcome) else slot.result()
        items.extend(found)
        item_outcomes.extend([len(outcomes)] * len(found))
        outcomes.append(outcome.model_copy(update={"query_index": query_index}))
    return Collection(
        items=items,
        outcomes=outcomes,
        item_outcomes=item_outcomes,
        started_at=started_at,
        finished_at=_now(started_at),
    )


def _now(not_before: datetime) -> datetime:
    # Clocks can step backwards; a collection never ends before it started.
    return max(utc_now(), not_before)


def merge_collections(collections: Sequence[Collection], *, started_at: datetime) -> Collection:
    """Several collections as one (outcome indices shifted)."""
    items: list[Item] = []
    outcomes: list[SearchOutcome] = []
    item_outcomes: list[int] = []
    for part in collections:
        item_outcomes.extend(index + len(outcomes) for index in part.item_outcomes)
        items.extend(part.items)
        outcomes.extend(part.outcomes)
    finished = max([started_at, *(c.finished_at for c in collections)])
    return Collection(
        items=items, outcomes=outcomes, item_outcomes=item_outcomes, started_at=started_at, finished_at=finished
    )


def _unique_texts(texts: Sequence[str]) -> list[str]:
    seen: dict[str, str] = {}
    for text in texts:
        flat = " ".join(text.split())
        if flat:
            seen.setdefault(normalise(flat), flat)
    return list(seen.values())


def _renumbered(progress: ProgressCallback | None, total: int) -> ProgressCallback | None:
    """Renumber `search_done` events of several `collect` calls into one count."""
    if progress is None:
        return None
    done = 0

    def forward(event: ProgressEvent) -> None:
        nonlocal done
        if event.kind == "search_done":
            done += 1
            event = event.model_copy(update={"done": done, "total": total})
        progress(event)

    return forward


async def collect_per_source(
    queries_by_source: Sequence[tuple[Source, Sequence[str]]],
    *,
    window: SearchQuery,
    concurrency: int = 8,
    timeout: float = 60.0,  # noqa: ASYNC109  # a per-search bound passed to `collect`, not a whole-call one
    progress: ProgressCallback | None = None,
    failed: FailedSources | None = None,
) -> Collection:
    """Run each source's own query texts (with `window`'s dates, language and limit) as one collection.

    Sources given the same queries share one `collect` call; `failed` is the run's record of failed sources
    (see `collect`).
    """
    failed = failed if failed is not None else FailedSources()
    started_at = utc_now()
    groups: dict[tuple[str, ...], list[Source]] = {}
    for source, queries in queries_by_source:
        groups.setdefault(tuple(_unique_texts(queries)), []).append(source)
    groups.pop((), None)
    available = {
        id(s): _unavailable_reason(s) is None and failed.get(source_spec(s)) is None
        for group in groups.values()
        for s in group
    }
    total = sum(len(queries) * sum(available[id(s)] for s in sources) for queries, sources in groups.items())
    forward = _renumbered(progress, total)
    parts = await asyncio.gather(
        *(
            collect(
                [replace(window, text=text) for text in queries],
                sources,
                concurrency=concurrency,
                timeout=timeout,
                progress=forward,
                failed=failed,
            )
            for queries, sources in groups.items()
        )
    )
    return merge_collections(parts, started_at=started_at)
