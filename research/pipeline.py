"""A monitor's run in one call: plan → collect → expand → novelty → critique → synthesize → export.

Source and model failures never raise: they end up in the `PipelineResult` (errors, fallback reasons) and the
digest says what happened. Only the top-K compact items reach the heavy model; the light model only plans.
"""

from __future__ import annotations

import asyncio
import csv
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt
from pydantic_ai.models import Model

from research.collect import (
    Collection,
    ProgressCallback,
    ProgressEvent,
    SearchOutcome,
    SearchStatus,
    collect,
    emit,
)
from research.critique import Critique, LlmUsage, heuristic_critique, llm_critique, outlet_of
from research.dedupe import Deduper, normalise
from research.digest import (
    Digest,
    PreviousDigest,
    QualityCheck,
    extractive_digest,
    llm_digest,
)
from research.export import CSV_COLUMNS, csv_row, guard_cell, write_json
from research.plan import PlanResult, QueryPlan, expansion_queries, plan_is_stale, plan_queries
from research.rank import RankedItem, rank
from sources.base import Item, SearchQuery, Source, item_id, utc_now
from sources.urls import canonical_url

logger = logging.getLogger(__name__)

STAGES: Final = ("plan", "collect", "expand", "novelty", "critique", "digest", "export")
PIPELINE_CSV_COLUMNS: Final = (*CSV_COLUMNS, "credibility", "status")
UPDATE_PREFIX: Final = "Update: "
"""Put before the title of an update to a delivered story in what the critique and digest see."""

ItemStatus = Literal["new", "update", "repeat", "delivered"]
"""`new`: a story not delivered before. `update`: a new item of a delivered story from an outlet that had not
carried it. `repeat`: a new item of a delivered story adding no outlet (not reported). `delivered`: delivered
before (by id or URL)."""


@dataclass(frozen=True, kw_only=True)
class PipelineRequest:
    """What to run: the monitor's topic, sources, window and what it already delivered."""

    topic: str
    sources: Sequence[Source]
    since: datetime
    """Aware UTC: start of the lookback window; items published before it are dropped."""
    until: datetime
    """Aware UTC: the run's scheduled time."""
    extra_queries: Sequence[str] = ()
    include_keywords: Sequence[str] = ()
    """When given, an item must mention at least one of them (title or text, case-insensitive)."""
    exclude_keywords: Sequence[str] = ()
    """An item mentioning any of them is dropped."""
    language: str | None = None
    profile: str | None = None
    """The chat's profile text, injected into LLM prompts."""
    plan: QueryPlan | None = None
    """The stored plan; None or stale (older than 7 days, or for another topic) → re-plan."""
    plan_updated_at: datetime | None = None
    already_delivered: frozenset[str] = frozenset()
    """Item ids this monitor delivered before."""
    previous_digest: Digest | None = None
    # Added beyond the contract:
    delivered_items: Sequence[Item] = ()
    """The delivered items themselves, when the caller has them: their titles let a story that gained a new
    outlet be recognised as an update even when the sources no longer return the old items."""
    delivered_urls: frozenset[str] = frozenset()
    """URLs delivered before, for items whose ids changed."""
    timezone: tzinfo = UTC
    """The monitor's timezone, for the chart's days."""


@dataclass(frozen=True, kw_only=True)
class PipelineOptions:
    """Budgets and caps of a run."""

    top_k: int = 20
    """Items the critique and the digest see (compact), at most `per_story` of one story."""
    per_story: int = 3
    per_query_limit: int = 30
    """Items asked of each (source, query) search."""
    max_expansion_queries: int = 3
    expand_below: int = 100
    """The expansion round runs only when the first round found fewer unique in-window items than this."""
    expansion_top_items: int = 15
    """How many of the best first-round items are read for new terms."""
    concurrency: int = 8
    search_timeout: float = 60.0


@dataclass(frozen=True)
class ScoredItem:
    """One collected, de-duplicated item with its scores: a CSV row."""

    item: Item
    cluster_id: str | None
    relevance: float
    """The critique's relevance when the item was critiqued, else the ranking's (BM25 against the topic)."""
    credibility: float | None
    """The critique's credibility; `None` for items outside the top-K."""
    score: float
    """The ranking's combined score (relevance, recency, engagement)."""
    rank: int
    """1 = best; the CSV's order."""
    recency: float = 0.0
    engagement: float = 0.0
    status: ItemStatus = "new"
    reason: str | None = None
    """The critique's one-line reason, for critiqued items."""


@dataclass(frozen=True)
class RunExports:
    """The files of one run."""

    csv: Path
    json: Path
    chart: Path


@dataclass(frozen=True)
class PipelineResult:
    """Everything a run produced; `source_errors`, `all_sources_failed` and the report say what went wrong."""

    digest: Digest
    items: list[ScoredItem]
    """Every collected, de-duplicated, in-window, keyword-filtered item, best first (the CSV rows)."""
    new_item_ids: list[str]
    """Items with status `new` or `update`: what this run delivers (the digest covers the best of them, the
    CSV all); store them as delivered."""
    plan: QueryPlan
    plan_refreshed: bool
    exports: RunExports
    usage: LlmUsage
    """Planning + critique + digest, summed."""
    source_errors: list[SearchOutcome]
    all_sources_failed: bool
    """No search answered (every source failed or was off); the digest says which and why."""
    nothing_new: bool
    """Sources answered but novelty left nothing to report (quiet monitors skip); never with
    `all_sources_failed`."""
    # Added beyond the contract:
    report: PipelineReport | None = None
    """The JSON summary's content."""
    update_item_ids: list[str] = field(default_factory=list)
    """The subset of `new_item_ids` that are updates to delivered stories."""


class PipelineCounts(BaseModel):
    """How many items each stage kept."""

    collected: NonNegativeInt = 0
    """Items all searches returned, repeats included."""
    unique: NonNegativeInt = 0
    """After dropping repeats by id and URL."""
    out_of_window: NonNegativeInt = 0
    """Published before `since`."""
    excluded_by_keywords: NonNegativeInt = 0
    delivered_before: NonNegativeInt = 0
    repeats: NonNegativeInt = 0
    """New items of delivered stories that added no outlet."""
    new: NonNegativeInt = 0
    updates: NonNegativeInt = 0
    stories: NonNegativeInt = 0
    """Clusters among the exported items."""
    critiqued: NonNegativeInt = 0


class PipelineReport(BaseModel):
    """The JSON summary of a run: the request, counts, errors, usage and time per stage."""

    topic: str
    since: AwareDatetime
    until: AwareDatetime
    sources: list[str]
    extra_queries: list[str]
    include_keywords: list[str]
    exclude_keywords: list[str]
    language: str | None
    plan: QueryPlan
    plan_refreshed: bool
    plan_fallback_reason: str | None = None
    expansion_queries: list[str] = Field(default_factory=list)
    expansion_skipped: str | None = None
    """Why there was no expansion round, when there was none."""
    searches: NonNegativeInt = 0
    """(source, query) searches sent, both rounds."""
    counts: PipelineCounts
    source_errors: list[SearchOutcome]
    skipped_sources: dict[str, str]
    all_sources_failed: bool
    nothing_new: bool
    critique_path: Literal["model", "heuristic", "none"]
    critique_fallback_reason: str | None = None
    digest_path: Literal["model", "extractive", "none"]
    digest_fallback_reason: str | None = None
    usage: dict[str, LlmUsage]
    """Per model step (`plan`, `critique`, `digest`) and `total`."""
    seconds: dict[str, NonNegativeFloat]
    """Wall time per stage."""
    digest: Digest
    started_at: AwareDatetime
    finished_at: AwareDatetime


# ---- helpers ---------------------------------------------------------------------------------------------


class _StageClock:
    def __init__(self, progress: ProgressCallback | None) -> None:
        self.seconds: dict[str, float] = {}
        self._progress = progress

    @contextmanager
    def stage(self, name: str, message: str) -> Iterator[None]:
        emit(self._progress, ProgressEvent(kind="stage", message=message, done=STAGES.index(name), total=len(STAGES)))
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


def sum_usage(parts: Sequence[LlmUsage]) -> LlmUsage:
    """Several steps' usage as one; the model names joined."""
    names = list(dict.fromkeys(p.model for p in parts if p.model))
    return LlmUsage(
        model=", ".join(names) or None,
        requests=sum(p.requests for p in parts),
        input_tokens=sum(p.input_tokens for p in parts),
        output_tokens=sum(p.output_tokens for p in parts),
    )


def _unique_texts(texts: Sequence[str]) -> list[str]:
    seen: dict[str, str] = {}
    for text in texts:
        flat = " ".join(text.split())
        if flat:
            seen.setdefault(normalise(flat), flat)
    return list(seen.values())


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


def _counting(progress: ProgressCallback | None, total: int) -> ProgressCallback | None:
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


def _is_available(source: Source) -> bool:
    try:
        return source.unavailable_reason() is None
    except Exception:  # `collect` records a failing check as the source being off; count it the same way
        return False


async def collect_grouped(
    queries_by_source: Sequence[tuple[Source, Sequence[str]]],
    *,
    request: PipelineRequest,
    options: PipelineOptions,
    progress: ProgressCallback | None,
) -> Collection:
    """Run each source's queries; sources with the same queries share one `collect` call."""
    started_at = utc_now()
    groups: dict[tuple[str, ...], list[Source]] = {}
    for source, queries in queries_by_source:
        groups.setdefault(tuple(_unique_texts(queries)), []).append(source)
    groups.pop((), None)
    total = sum(len(queries) * sum(map(_is_available, sources)) for queries, sources in groups.items())
    forward = _counting(progress, total)
    parts = await asyncio.gather(
        *(
            collect(
                [
                    SearchQuery(
                        text=text,
                        since=request.since,
                        until=request.until,
                        language=request.language,
                        limit=options.per_query_limit,
                    )
                    for text in queries
                ],
                sources,
                concurrency=options.concurrency,
                timeout=options.search_timeout,
                progress=forward,
            )
            for queries, sources in groups.items()
        )
    )
    return merge_collections(parts, started_at=started_at)


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    text = re.escape(normalise(keyword))
    # Word boundaries for alphabetic scripts ("AI" must not match "said"); plain containment for CJK and Thai,
    # whose words are not separated by spaces.
    return re.compile(rf"(?<!\w){text}(?!\w)" if keyword.isascii() else text)


def keyword_filter(items: Sequence[Item], *, include: Sequence[str], exclude: Sequence[str]) -> list[Item]:
    """The items that mention an include keyword (when any are given) and no exclude keyword."""
    includes = [_keyword_pattern(k) for k in include if k.strip()]
    excludes = [_keyword_pattern(k) for k in exclude if k.strip()]
    kept = []
    for item in items:
        text = normalise(f"{item.title} {item.text}")
        if includes and not any(p.search(text) for p in includes):
            continue
        if any(p.search(text) for p in excludes):
            continue
        kept.append(item)
    return kept


# ---- novelty ---------------------------------------------------------------------------------------------


@dataclass
class Novelty:
    """The collected items after novelty: each one's status and story, and the stories known before."""

    items: list[Item]
    """Unique collected items (new ones and those delivered before), in the order found."""
    status: dict[str, ItemStatus]
    cluster_of: dict[str, str]
    deduper: Deduper


def _references(request: PipelineRequest) -> list[Item]:
    """What was delivered before, as items: the given ones, then the previous digest's citations."""
    references = list(request.delivered_items)
    for cited in request.previous_digest.cited if request.previous_digest else ():
        canonical = canonical_url(cited.url)
        references.append(
            Item(id=item_id(cited.source or "cited", canonical=canonical), source=cited.source or "cited",
                 url=canonical, title=cited.title)
        )  # fmt: skip
    return references


def assess_novelty(items: Sequence[Item], request: PipelineRequest) -> Novelty:
    """Cluster the items together with what was delivered before, and give each item its status."""
    deduper = Deduper()
    references = _references(request)
    deduper.add(references)
    reference_by_url = {canonical_url(r.url): r.id for r in references}
    delivered_ids = set(request.already_delivered) | {r.id for r in references}
    delivered_urls = {canonical_url(url) for url in request.delivered_urls} | set(reference_by_url)
    added = deduper.add(items)

    kept: list[Item] = []
    cluster_of: dict[str, str] = {}
    status: dict[str, ItemStatus] = {}
    emitted: set[str] = set()
    new_ids = {item.id for item in added.new}
    for item in items:
        key = canonical_url(item.url)
        if item.id in emitted or key in emitted:
            continue  # a repeat within this run's collection
        if item.id in new_ids:
            cluster = added.cluster_of[item.id]
        else:  # seen before: it matched something delivered, by id or by URL
            cluster = deduper.cluster_id(item.id) or deduper.cluster_id(reference_by_url.get(key, "")) or ""
        emitted.update((item.id, key))
        kept.append(item)
        cluster_of[item.id] = cluster
        delivered = item.id in delivered_ids or key in delivered_urls or item.id not in new_ids
        status[item.id] = "delivered" if delivered else "new"

    # A story delivered before stays quiet unless an outlet that had not carried it now does.
    outlets_before: dict[str, set[str]] = {}
    for story in deduper.clusters:
        for member in story.members:
            if member.id in delivered_ids or canonical_url(member.url) in delivered_urls:
                outlets_before.setdefault(story.id, set()).add(outlet_of(member))
    for item in kept:
        known = outlets_before.get(cluster_of[item.id])
        if status[item.id] == "new" and known is not None:
            status[item.id] = "repeat" if outlet_of(item) in known else "update"
    return Novelty(items=kept, status=status, cluster_of=cluster_of, deduper=deduper)


def select_top(ranked: Sequence[RankedItem], *, top_k: int, per_story: int) -> list[RankedItem]:
    """The best `top_k` items, at most `per_story` of one story."""
    chosen: list[RankedItem] = []
    per_cluster: dict[str, int] = {}
    for entry in ranked:
        key = entry.cluster_id or entry.item.id
        if per_cluster.get(key, 0) >= per_story:
            continue
        per_cluster[key] = per_cluster.get(key, 0) + 1
        chosen.append(entry)
        if len(chosen) >= top_k:
            break
    return chosen


# ---- digests without items -------------------------------------------------------------------------------


def failure_digest(topic: str, errors: Sequence[SearchOutcome], skipped: dict[str, str]) -> Digest:
    """The digest of a run in which no source answered: which failed and why."""
    reasons = {f"{o.source}: {o.error_kind}: {o.message or ''}".strip(": ") for o in errors}
    reasons |= {f"{name}: off ({why})" for name, why in skipped.items()}
    return Digest(
        headline=f"No update on {topic}: every source failed",
        developments=[],
        quality=QualityCheck(
            completeness=0.0,
            quality=0.0,
            missing_angles=sorted(reasons),
            notes="No items could be collected; the sources are tried again on the next run.",
        ),
    )


def quiet_digest(topic: str, counts: PipelineCounts) -> Digest:
    """The digest of a run that found nothing the monitor had not delivered."""
    seen = counts.delivered_before + counts.repeats
    return Digest(
        headline=f"Nothing new about {topic}",
        developments=[],
        quality=QualityCheck(
            completeness=1.0,
            quality=0.0,
            notes=f"{counts.unique} items collected; {seen} were delivered before or repeat delivered stories.",
        ),
    )


# ---- export ----------------------------------------------------------------------------------------------


def write_pipeline_csv(path: Path, items: Sequence[ScoredItem]) -> None:
    """The collection's CSV columns plus credibility and status; written whole or not at all."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8-sig", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(PIPELINE_CSV_COLUMNS)
            for scored in items:
                ranked = RankedItem(
                    item=scored.item,
                    cluster_id=scored.cluster_id,
                    relevance=scored.relevance,
                    recency=scored.recency,
                    engagement=scored.engagement,
                    score=scored.score,
                )
                credibility = "" if scored.credibility is None else f"{scored.credibility:.4f}"
                writer.writerow([*csv_row(scored.rank, ranked), guard_cell(credibility), scored.status])
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_files(exports: RunExports, items: Sequence[ScoredItem], request: PipelineRequest) -> None:
    exports.csv.parent.mkdir(parents=True, exist_ok=True)
    write_pipeline_csv(exports.csv, items)
    _write_chart([scored.item for scored in items], path=exports.chart, request=request)


def _write_chart(items: Sequence[Item], *, path: Path, request: PipelineRequest) -> Path:
    from research.chart import write_volume_chart  # matplotlib is paid for only when a chart is drawn

    try:
        return write_volume_chart(
            items, path=path, title=request.topic, since=request.since, until=request.until, timezone=request.timezone
        )
    except OSError:
        raise
    except Exception as error:  # a chart that cannot be drawn is an export that cannot be written
        raise OSError(f"could not draw the chart {path.name}: {error}") from error


# ---- the run ---------------------------------------------------------------------------------------------


async def _plan(
    request: PipelineRequest, *, model: Model | None, now: datetime
) -> tuple[QueryPlan, bool, PlanResult | None]:
    if request.plan is not None and not plan_is_stale(
        request.plan, request.plan_updated_at, topic=request.topic, now=now
    ):
        return request.plan, False, None
    result = await plan_queries(
        request.topic,
        sources=[source.name for source in request.sources],
        extra_queries=request.extra_queries,
        language=request.language,
        profile=request.profile,
        model=model,
    )
    return result.plan, True, result


def _in_window(items: Sequence[Item], since: datetime) -> list[Item]:
    # Undated items stay: the source matched them to the query and we cannot tell their age.
    return [item for item in items if item.published is None or item.published >= since]


def exact_unique(items: Sequence[Item]) -> list[Item]:
    """The items without repeats by id or canonical URL, first occurrence kept."""
    seen: set[str] = set()
    unique = []
    for item in items:
        key = canonical_url(item.url)
        if item.id not in seen and key not in seen:
            seen.update((item.id, key))
            unique.append(item)
    return unique


async def run_pipeline(
    request: PipelineRequest,
    *,
    light_model: Model | None,
    heavy_model: Model | None,
    out_dir: Path,
    stem: str,
    progress: ProgressCallback | None = None,
    now: Callable[[], datetime] | None = None,
    options: PipelineOptions | None = None,
) -> PipelineResult:
    """Run the whole pipeline and write `<stem>.csv`, `<stem>.json` and `<stem>.png` under `out_dir`.

    Never raises for source or model failures (they are in the result); raises `OSError` only when the
    exports cannot be written, and `ValueError` for an unsafe `stem`.
    """
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ValueError(f"unsafe file stem {stem!r}; build it with research.export.safe_stem()")
    clock = now or utc_now
    options = options or PipelineOptions()
    started_at = clock()
    stages = _StageClock(progress)
    usage: dict[str, LlmUsage] = {}

    with stages.stage("plan", f"planning searches for {request.topic}"):
        plan, plan_refreshed, planned = await _plan(request, model=light_model, now=started_at)
        if planned is not None:
            usage["plan"] = planned.usage
    extra = list(request.extra_queries)

    with stages.stage("collect", f"searching {len(request.sources)} sources"):
        first = await collect_grouped(
            [(source, [*plan.queries_for(source.name), *extra]) for source in request.sources],
            request=request,
            options=options,
            progress=progress,
        )
    collections = [first]

    with stages.stage("expand", "looking for related terms"):
        in_window = _in_window(exact_unique(first.items), request.since)
        found = len(in_window)
        new_queries: list[str] = []
        skipped_expansion: str | None = None
        if not any(o.status is SearchStatus.OK for o in first.outcomes):
            skipped_expansion = "no source answered the first round"
        elif found >= options.expand_below:
            skipped_expansion = f"the first round found {found} items (at least {options.expand_below})"
        else:
            ranked_first = rank(in_window, topic=" ".join([request.topic, *plan.keywords]), now=started_at)
            leaders = [entry.item for entry in ranked_first[: options.expansion_top_items]]
            new_queries = expansion_queries(
                leaders, plan=plan, extra_queries=extra, limit=options.max_expansion_queries
            )
            if not new_queries:
                skipped_expansion = "the top items named no new terms"
        if new_queries:
            second = await collect_grouped(
                [(source, new_queries) for source in request.sources],
                request=request,
                options=options,
                progress=progress,
            )
            collections.append(second)
    collection = merge_collections(collections, started_at=first.started_at)

    counts = PipelineCounts(collected=len(collection.items))
    with stages.stage("novelty", "removing what was delivered before"):
        unique = exact_unique(collection.items)
        in_window = _in_window(unique, request.since)
        filtered = keyword_filter(in_window, include=request.include_keywords, exclude=request.exclude_keywords)
        novelty = assess_novelty(filtered, request)
        counts.unique = len(unique)
        counts.out_of_window = len(unique) - len(in_window)
        counts.excluded_by_keywords = len(in_window) - len(filtered)
        statuses = list(novelty.status.values())
        counts.delivered_before = statuses.count("delivered")
        counts.repeats = statuses.count("repeat")
        counts.new = statuses.count("new")
        counts.updates = statuses.count("update")
        counts.stories = len(set(novelty.cluster_of.values()))
        ranked = rank(
            novelty.items,
            topic=" ".join([request.topic, *plan.keywords]),
            cluster_of=novelty.cluster_of,
            now=started_at,
        )
        reportable = [entry for entry in ranked if novelty.status[entry.item.id] in ("new", "update")]
        top = [
            entry.model_copy(update={"item": entry.item.model_copy(update={"title": UPDATE_PREFIX + entry.item.title})})
            if novelty.status[entry.item.id] == "update"
            else entry
            for entry in select_top(reportable, top_k=options.top_k, per_story=options.per_story)
        ]
    all_failed = not any(o.status is SearchStatus.OK for o in collection.outcomes)
    nothing_new = not reportable and not all_failed
    clusters = novelty.deduper.clusters
    previous = PreviousDigest.of(request.previous_digest) if request.previous_digest else None

    critique: Critique | None = None
    with stages.stage("critique", f"checking the top {len(top)} items"):
        if top and heavy_model is not None:
            critique = await llm_critique(
                top, topic=request.topic, model=heavy_model, clusters=clusters, profile=request.profile, now=started_at
            )
            usage["critique"] = critique.usage
        elif top:
            critique = heuristic_critique(top, clusters=clusters, now=started_at)
        counts.critiqued = len(critique.items) if critique else 0

    digest_path: Literal["model", "extractive", "none"] = "none"
    digest_fallback: str | None = None
    with stages.stage("digest", "writing the digest"):
        if all_failed:
            digest = failure_digest(request.topic, collection.errors, collection.skipped_sources)
        elif nothing_new:
            digest = quiet_digest(request.topic, counts)
        elif heavy_model is not None:
            written = await llm_digest(
                top,
                topic=request.topic,
                model=heavy_model,
                clusters=clusters,
                critique=critique,
                previous=previous,
                profile=request.profile,
                now=started_at,
            )
            digest, digest_path, digest_fallback = written.digest, written.path, written.fallback_reason
            usage["digest"] = written.usage
        else:
            digest_path = "extractive"
            digest = extractive_digest(
                top, topic=request.topic, clusters=clusters, critique=critique, previous=previous, now=started_at
            )

    verdicts = {verdict.item_id: verdict for verdict in critique.items} if critique else {}
    scored = []
    for position, entry in enumerate(ranked, start=1):
        verdict = verdicts.get(entry.item.id)
        scored.append(
            ScoredItem(
                item=entry.item,
                cluster_id=entry.cluster_id,
                relevance=verdict.relevance if verdict else entry.relevance,
                credibility=verdict.credibility if verdict else None,
                score=entry.score,
                rank=position,
                recency=entry.recency,
                engagement=entry.engagement,
                status=novelty.status[entry.item.id],
                reason=verdict.reason if verdict else None,
            )
        )

    with stages.stage("export", f"writing {len(scored)} items"):
        emit(progress, ProgressEvent(kind="exporting", message=f"writing {len(scored)} items", total=len(scored)))
        exports = RunExports(csv=out_dir / f"{stem}.csv", json=out_dir / f"{stem}.json", chart=out_dir / f"{stem}.png")
        # Off the event loop: a bot serving chats must not stall while matplotlib draws.
        await asyncio.to_thread(_write_files, exports, scored, request)

    total_usage = sum_usage(list(usage.values()))
    report = PipelineReport(
        topic=request.topic,
        since=request.since,
        until=request.until,
        sources=[source.name for source in request.sources],
        extra_queries=extra,
        include_keywords=list(request.include_keywords),
        exclude_keywords=list(request.exclude_keywords),
        language=request.language,
        plan=plan,
        plan_refreshed=plan_refreshed,
        plan_fallback_reason=planned.fallback_reason if planned else None,
        expansion_queries=new_queries,
        expansion_skipped=skipped_expansion,
        searches=sum(o.status is not SearchStatus.SKIPPED for o in collection.outcomes),
        counts=counts,
        source_errors=collection.errors,
        skipped_sources=collection.skipped_sources,
        all_sources_failed=all_failed,
        nothing_new=nothing_new,
        critique_path=critique.path if critique else "none",
        critique_fallback_reason=critique.fallback_reason if critique else None,
        digest_path=digest_path,
        digest_fallback_reason=digest_fallback,
        usage={**usage, "total": total_usage},
        seconds=dict(stages.seconds),
        digest=digest,
        started_at=started_at,
        finished_at=max(clock(), started_at),
    )
    await asyncio.to_thread(write_json, exports.json, report)
    new_ids = [s.item.id for s in scored if s.status in ("new", "update")]
    emit(progress, ProgressEvent(kind="finished", message=digest.headline, done=len(STAGES), total=len(STAGES)))
    return PipelineResult(
        digest=digest,
        items=scored,
        new_item_ids=new_ids,
        plan=plan,
        plan_refreshed=plan_refreshed,
        exports=exports,
        usage=total_usage,
        source_errors=collection.errors,
        all_sources_failed=all_failed,
        nothing_new=nothing_new,
        report=report,
        update_item_ids=[s.item.id for s in scored if s.status == "update"],
    )
