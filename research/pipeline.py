"""A monitor's run in one call: a table of named stages (`_RUN`) run in order over one run state (`_Run`):
plan → collect → expand → novelty (dedupe, embed, cluster, rank) → critique → digest (and tone) → export.

Source and model failures never raise: they end up in the `PipelineResult` (errors, fallback reasons) and the
digest says what happened. Only the top-K compact items reach the heavy model; the light model only plans.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from pydantic_ai.models import Model

from kernel import Clock, utc_now
from research.collect import (
    Collection,
    FailedSources,
    ProgressCallback,
    ProgressEvent,
    SearchStatus,
    SourceFailure,
    collect_per_source,
    emit,
    failure_lines,
    merge_collections,
)
from research.critique import Critique, heuristic_critique, llm_critique
from research.dedupe import Cluster, StoryLead, story_leads
from research.digest import (
    Digest,
    DigestResult,
    PreviousDigest,
    QualityCheck,
    extractive_digest,
    llm_digest,
)
from research.embeddings import ItemEmbedder
from research.export import write_json, write_run_csv
from research.llm import BUDGET_SPENT_REASON, StageBudget, limits_of
from research.novelty import ItemStatus, Novelty, assess_novelty, delivered_references
from research.pipeline_models import (
    PipelineCounts,
    PipelineOptions,
    PipelineReport,
    PipelineRequest,
    PipelineResult,
    RunExports,
    ScoredItem,
)
from research.plan import PlanResult, QueryPlan, expansion_queries, plan_is_stale, plan_queries
from research.rank import RankedItem, rank, select_top
from research.rules import word_pattern
from research.sentiment import Sentiment, lexicon_sentiment, mean_sentiment, tone_shift
from research.terms import normalise
from research.usage import LlmUsage, sum_usage
from sources import Item, SearchQuery, canonical_url

__all__ = [
    "STAGES",
    "UPDATE_PREFIX",
    "exact_unique",
    "failure_digest",
    "keyword_filter",
    "plan_expansion",
    "quiet_digest",
    "run_pipeline",
    "scored_items",
]

logger = logging.getLogger(__name__)

UPDATE_PREFIX: Final = "Update: "
"""Put before the title of an update to a delivered story in what the critique and digest see."""


# ---- helpers ---------------------------------------------------------------------------------------------


def keyword_filter(items: Sequence[Item], *, include: Sequence[str], exclude: Sequence[str]) -> list[Item]:
    """The items that mention an include keyword (when any are given) and no exclude keyword."""
    includes = [word_pattern(k) for k in include if k.strip()]
    excludes = [word_pattern(k) for k in exclude if k.strip()]
    kept = []
    for item in items:
        text = normalise(f"{item.title} {item.text}")
        if includes and not any(p.search(text) for p in includes):
            continue
        if any(p.search(text) for p in excludes):
            continue
        kept.append(item)
    return kept


# ---- digests without items -------------------------------------------------------------------------------


def failure_digest(topic: str, failures: Sequence[SourceFailure], skipped: dict[str, str]) -> Digest:
    """The digest of a run in which no source answered: every source that failed and why, and those that were off."""
    lines = [*failure_lines(failures), *(f"{name}: off ({why})" for name, why in skipped.items())]
    return Digest(
        headline=f"No update on {topic}: every source failed",
        developments=[],
        quality=QualityCheck(
            completeness=0.0,
            quality=0.0,
            notes="No items could be collected; the sources are tried again on the next run.",
        ),
        failed_sources=lines,
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


def story_sentiments(critique: Critique | None, cluster_of: dict[str, str]) -> dict[str, Sentiment]:
    """Each story's tone: the mean of its critiqued members' tones."""
    by_story: dict[str, list[Sentiment | None]] = {}
    for verdict in critique.items if critique else ():
        story = cluster_of.get(verdict.item_id)
        if story is not None:
            by_story.setdefault(story, []).append(verdict.sentiment)
    found = {story: mean_sentiment(parts, assessed_by="story") for story, parts in by_story.items()}
    return {story: tone for story, tone in found.items() if tone is not None}


def digest_tone(critique: Critique | None, cluster_of: dict[str, str]) -> Sentiment | None:
    """The tone of a digest: the mean over the stories it covers (each story counted once)."""
    return mean_sentiment(story_sentiments(critique, cluster_of).values())


def scored_items(
    ranked: Sequence[RankedItem], *, status: dict[str, ItemStatus], critique: Critique | None
) -> list[ScoredItem]:
    """The CSV rows: the ranking's order and scores, with the critique's verdicts where it gave them, and each
    item's tone (the critique's, else its story's, else the lexicon's)."""
    verdicts = {verdict.item_id: verdict for verdict in critique.items} if critique else {}
    stories = story_sentiments(critique, {e.item.id: e.cluster_id for e in ranked if e.cluster_id})
    scored = []
    for position, entry in enumerate(ranked, start=1):
        verdict = verdicts.get(entry.item.id)
        item = entry.item
        tone = verdict.sentiment if verdict else None
        if tone is None and entry.cluster_id:
            tone = stories.get(entry.cluster_id)
        if tone is None:
            tone = lexicon_sentiment(f"{item.title}. {item.text[:300]}", item.language)
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
                status=status[entry.item.id],
                reason=verdict.reason if verdict else None,
                sentiment=tone,
            )
        )
    return scored


def _write_files(
    exports: RunExports,
    items: Sequence[ScoredItem],
    request: PipelineRequest,
    *,
    chart_by: str = "source",
    leads: Mapping[str, StoryLead] | None = None,
) -> None:
    exports.csv.parent.mkdir(parents=True, exist_ok=True)
    write_run_csv(exports.csv, items, leads=leads)
    series = (
        {s.item.id: s.sentiment.label if s.sentiment else "unknown" for s in items} if chart_by == "sentiment" else None
    )
    _write_chart([scored.item for scored in items], path=exports.chart, request=request, series=series)


def _write_chart(
    items: Sequence[Item], *, path: Path, request: PipelineRequest, series: Mapping[str, str] | None = None
) -> Path:
    from research.chart import write_volume_chart  # matplotlib is paid for only when a chart is drawn

    try:
        return write_volume_chart(
            items,
            path=path,
            title=request.topic,
            since=request.since,
            until=request.until,
            timezone=request.timezone,
            series=series,
        )
    except OSError:
        raise
    except Exception as error:  # a chart that cannot be drawn is an export that cannot be written
        raise OSError(f"could not draw the chart {path.name}: {error}") from error


# ---- the run ---------------------------------------------------------------------------------------------


async def _plan(
    request: PipelineRequest, *, model: Model | None, now: datetime, budget: StageBudget
) -> tuple[QueryPlan, bool, PlanResult | None]:
    stored = request.plan
    # A rule-made plan stands in for a model that was missing or failing: with a model now, try it again.
    upgrade = stored is not None and stored.made_by == "deterministic" and model is not None
    if (
        stored is not None
        and not upgrade
        and not plan_is_stale(stored, request.plan_updated_at, topic=request.topic, now=now)
    ):
        return stored, False, None
    result = await plan_queries(
        request.topic,
        sources=[source.name for source in request.sources],
        extra_queries=request.extra_queries,
        language=request.language,
        profile=request.profile,
        model=model if budget.left() > 0 else None,
        run_seconds=budget.timeout(model),
    )
    return result.plan, True, result


def plan_expansion(
    first: Collection, *, request: PipelineRequest, plan: QueryPlan, options: PipelineOptions, now: datetime
) -> tuple[list[str], str | None]:
    """The second round's queries from the first round's best items, or none and why not."""
    if not any(o.status is SearchStatus.OK for o in first.outcomes):
        return [], "no source answered the first round"
    in_window = _in_window(exact_unique(first.items), request.since)
    kept = keyword_filter(in_window, include=request.include_keywords, exclude=request.exclude_keywords)
    if len(kept) >= options.expand_below:
        return [], f"the first round found {len(kept)} items (at least {options.expand_below})"
    ranked = rank(kept, topic=" ".join([request.topic, *plan.keywords]), now=now)
    leaders = [entry.item for entry in ranked[: options.expansion_top_items]]
    queries = expansion_queries(
        leaders, plan=plan, extra_queries=request.extra_queries, limit=options.max_expansion_queries
    )
    return queries, None if queries else "the top items named no new terms"


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


def _out_of_time_digest(
    top: Sequence[RankedItem],
    *,
    topic: str,
    clusters: Sequence[Cluster],
    critique: Critique | None,
    previous: PreviousDigest | None,
    now: datetime,
    leads: Mapping[str, StoryLead] | None,
) -> DigestResult:
    """The extractive digest of a run whose model time was spent before its digest was written."""
    digest = extractive_digest(
        top, topic=topic, clusters=clusters, critique=critique, previous=previous, now=now, leads=leads
    )
    note = "Summarised without the language model: this run's time for it (LLM_PIPELINE_SECONDS) was used up."
    return DigestResult(
        digest=digest.model_copy(update={"without_model": note}), path="extractive", fallback_reason=BUDGET_SPENT_REASON
    )


# ---- the run's state and its stages -----------------------------------------------------------------------


@dataclass(eq=False)
class _Run:
    """One run: its inputs, and what each stage has found so far (a stage reads only what earlier stages set)."""

    request: PipelineRequest
    options: PipelineOptions
    light_model: Model | None
    heavy_model: Model | None
    embedder: ItemEmbedder | None
    progress: ProgressCallback | None
    out_dir: Path
    stem: str
    started_at: datetime
    budget: StageBudget
    usage: dict[str, LlmUsage] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    # plan
    plan: QueryPlan = field(init=False)
    plan_refreshed: bool = field(init=False)
    planned: PlanResult | None = field(init=False)
    # collect: one record for the whole run, so a source that failed in the first round is not asked in the second
    failed: FailedSources = field(default_factory=FailedSources)
    window: SearchQuery = field(init=False)
    first: Collection = field(init=False)
    # expand
    new_queries: list[str] = field(init=False)
    skipped_expansion: str | None = field(init=False)
    collection: Collection = field(init=False)
    all_failed: bool = field(init=False)
    failed_sources: list[SourceFailure] = field(init=False)
    # novelty: dedupe, embed, novelty, rank
    counts: PipelineCounts = field(init=False)
    unique: list[Item] = field(init=False)
    in_window: list[Item] = field(init=False)
    filtered: list[Item] = field(init=False)
    vectors: dict[str, list[float]] | None = None
    stories_fallback: str | None = None
    novelty: Novelty = field(init=False)
    clusters: list[Cluster] = field(init=False)
    """The stories known to this run: its items' and those delivered before."""
    ranked: list[RankedItem] = field(init=False)
    reportable: list[RankedItem] = field(init=False)
    leads: dict[str, StoryLead] = field(init=False)
    top: list[RankedItem] = field(init=False)
    nothing_new: bool = field(init=False)
    # critique, digest (and tone), export
    previous: PreviousDigest | None = field(init=False)
    """The monitor's previous digest, as the digest writer sees it."""
    critique: Critique | None = None
    languages: list[str | None] = field(init=False)
    digest: Digest = field(init=False)
    digest_path: Literal["model", "extractive", "none"] = "none"
    digest_fallback: str | None = None
    language_digests: dict[str, Digest] = field(default_factory=dict)
    scored: list[ScoredItem] = field(init=False)
    exports: RunExports | None = None

    def __post_init__(self) -> None:
        self.previous = PreviousDigest.of(self.request.previous_digest) if self.request.previous_digest else None

    @property
    def reports_something(self) -> bool:
        """Whether the digest reports items (not a run whose sources all failed, nor one that found nothing new)."""
        return not (self.all_failed or self.nothing_new)


async def _plan_stage(run: _Run) -> None:
    """Plan the searches: the stored plan while it is fresh, else a new one (from the light model when given)."""
    with run.budget.spending():
        run.plan, run.plan_refreshed, run.planned = await _plan(
            run.request, model=run.light_model, now=run.started_at, budget=run.budget
        )
    if run.planned is not None:
        run.usage["plan"] = run.planned.usage


async def _collect_stage(run: _Run) -> None:
    """Ask every source its planned queries and the monitor's extra ones, in parallel."""
    request, options = run.request, run.options
    run.window = SearchQuery(
        text="", since=request.since, until=request.until, language=request.language, limit=options.per_query_limit
    )
    run.first = await collect_per_source(
        [(source, [*run.plan.queries_for(source.name), *request.extra_queries]) for source in request.sources],
        window=run.window,
        concurrency=options.concurrency,
        timeout=options.search_timeout,
        progress=run.progress,
        failed=run.failed,
    )


async def _expand_stage(run: _Run) -> None:
    """Search again with the terms the first round's best items name, when it found few; merge both rounds."""
    request, options = run.request, run.options
    run.new_queries, run.skipped_expansion = plan_expansion(
        run.first, request=request, plan=run.plan, options=options, now=run.started_at
    )
    collections = [run.first]
    if run.new_queries:
        second = await collect_per_source(
            [(source, run.new_queries) for source in request.sources],
            window=run.window,
            concurrency=options.concurrency,
            timeout=options.search_timeout,
            progress=run.progress,
            failed=run.failed,
        )
        collections.append(second)
    run.collection = merge_collections(collections, started_at=run.first.started_at)
    run.all_failed = not any(o.status is SearchStatus.OK for o in run.collection.outcomes)
    run.failed_sources = run.collection.failed_sources()


async def _dedupe_stage(run: _Run) -> None:
    """Drop exact repeats (by id or canonical URL), items older than the window and those the keywords exclude."""
    request = run.request
    run.counts = PipelineCounts(collected=len(run.collection.items))
    run.unique = exact_unique(run.collection.items)
    run.in_window = _in_window(run.unique, request.since)
    run.filtered = keyword_filter(run.in_window, include=request.include_keywords, exclude=request.exclude_keywords)


async def _embed_stage(run: _Run) -> None:
    """Embed the items and what was delivered before, so stories cluster by meaning across languages."""
    if run.embedder is None or not run.filtered:
        return
    references = delivered_references(run.request.delivered_items, run.request.previous_digest)
    embedded = await run.embedder.embed_items([*references, *run.filtered])
    if embedded.usage.requests:
        run.usage["embeddings"] = embedded.usage
    run.vectors = embedded.vectors or None
    run.stories_fallback = embedded.fallback_reason


async def _novelty_stage(run: _Run) -> None:
    """Cluster the items into stories with what was delivered before, and give each item its status."""
    request, counts = run.request, run.counts
    run.novelty = assess_novelty(
        run.filtered,
        delivered_items=request.delivered_items,
        previous_digest=request.previous_digest,
        already_delivered=request.already_delivered,
        delivered_urls=request.delivered_urls,
        topic=request.topic,
        vectors=run.vectors,
    )
    run.clusters = run.novelty.deduper.clusters
    counts.unique = len(run.unique)
    counts.out_of_window = len(run.unique) - len(run.in_window)
    counts.excluded_by_keywords = len(run.in_window) - len(run.filtered)
    statuses = list(run.novelty.status.values())
    counts.delivered_before = statuses.count("delivered")
    counts.repeats = statuses.count("repeat")
    counts.new = statuses.count("new")
    counts.updates = statuses.count("update")
    counts.stories = len(set(run.novelty.cluster_of.values()))


async def _rank_stage(run: _Run) -> None:
    """Rank the items, pick each story's lead among the new ones, and select the top items for the digest."""
    novelty = run.novelty
    run.ranked = rank(
        novelty.items,
        topic=" ".join([run.request.topic, *run.plan.keywords]),
        cluster_of=novelty.cluster_of,
        now=run.started_at,
    )
    run.reportable = [entry for entry in run.ranked if novelty.status[entry.item.id] in ("new", "update")]
    # Every story's lead among this run's new items (what was delivered before never leads the next digest).
    run.leads = story_leads(novelty.items, novelty.cluster_of, eligible={entry.item.id for entry in run.reportable})
    run.top = [
        entry.model_copy(update={"item": entry.item.model_copy(update={"title": UPDATE_PREFIX + entry.item.title})})
        if novelty.status[entry.item.id] == "update"
        else entry
        for entry in select_top(
            run.reportable,
            top_k=run.options.top_k,
            per_story=run.options.per_story,
            leads={story: lead.item_id for story, lead in run.leads.items()},
        )
    ]
    run.nothing_new = not run.reportable and not run.all_failed


async def _critique_stage(run: _Run) -> None:
    """Critique the top items: with the heavy model while the run's model time lasts, else by heuristics."""
    top, heavy_model, budget = run.top, run.heavy_model, run.budget
    with budget.spending():
        if top and heavy_model is not None and budget.left() > 0:
            run.critique = await llm_critique(
                top,
                topic=run.request.topic,
                model=heavy_model,
                clusters=run.clusters,
                profile=run.request.profile,
                now=run.started_at,
                run_seconds=budget.timeout(heavy_model),
                examples=run.request.feedback_examples,
            )
            run.usage["critique"] = run.critique.usage
        elif top:
            spent = BUDGET_SPENT_REASON if heavy_model is not None else None
            run.critique = heuristic_critique(top, clusters=run.clusters, now=run.started_at, fallback_reason=spent)
    run.counts.critiqued = len(run.critique.items) if run.critique else 0


async def _digest_stage(run: _Run) -> None:
    """Write the digest: why nothing came, that nothing was new, or the top items (by the model in each language)."""
    request = run.request
    run.languages = list(dict.fromkeys(request.digest_languages)) or [request.language]
    with run.budget.spending():
        if run.all_failed:
            run.digest = failure_digest(request.topic, run.failed_sources, run.collection.skipped_sources)
        elif run.nothing_new:
            run.digest = quiet_digest(request.topic, run.counts)
        elif run.heavy_model is not None:
            await _model_digests(run, run.heavy_model)
        else:
            run.digest_path = "extractive"
            run.digest = extractive_digest(
                run.top,
                topic=request.topic,
                clusters=run.clusters,
                critique=run.critique,
                previous=run.previous,
                now=run.started_at,
                leads=run.leads,
            ).model_copy(update={"without_model": "Summarised without a language model."})
    if not run.all_failed and run.failed_sources:
        run.digest = run.digest.model_copy(update={"failed_sources": failure_lines(run.failed_sources)})


async def _model_digests(run: _Run, model: Model) -> None:
    """One digest per language by the heavy model (extractive once the run's model time is spent): the first is the
    run's digest, the others its translations."""
    previous = run.previous
    for position, language in enumerate(run.languages):
        written = (
            await llm_digest(
                run.top,
                topic=run.request.topic,
                model=model,
                clusters=run.clusters,
                critique=run.critique,
                previous=previous,
                profile=run.request.profile,
                language=language,
                now=run.started_at,
                run_seconds=run.budget.timeout(model),
                leads=run.leads,
            )
            if run.budget.left() > 0
            else _out_of_time_digest(
                run.top,
                topic=run.request.topic,
                clusters=run.clusters,
                critique=run.critique,
                previous=previous,
                now=run.started_at,
                leads=run.leads,
            )
        )
        if position == 0:
            run.digest, run.digest_path, run.digest_fallback = written.digest, written.path, written.fallback_reason
            run.usage["digest"] = written.usage
        else:  # the same items, critique and previous digest: only the writing is repeated
            run.usage[f"digest:{language or 'default'}"] = written.usage
            if written.path == "model":
                run.language_digests[language or ""] = written.digest


async def _tone_stage(run: _Run) -> None:
    """Score every ranked item for the CSV, and give a digest that reports something its tone and tone shift."""
    run.scored = scored_items(run.ranked, status=run.novelty.status, critique=run.critique)
    digest = run.digest
    if digest.developments:
        tone = digest_tone(run.critique, run.novelty.cluster_of)
        previous_tone = run.request.previous_digest.tone if run.request.previous_digest else None
        changes = " ".join(part for part in (digest.changes_since_last, tone_shift(previous_tone, tone)) if part)
        run.digest = digest.model_copy(update={"tone": tone, "changes_since_last": changes or None})


async def _files_stage(run: _Run) -> None:
    """Write the CSV and the chart (the JSON report follows once the run's timings are known)."""
    emit(
        run.progress, ProgressEvent(kind="exporting", message=f"writing {len(run.scored)} items", total=len(run.scored))
    )
    stem, out_dir = run.stem, run.out_dir
    run.exports = RunExports(csv=out_dir / f"{stem}.csv", json=out_dir / f"{stem}.json", chart=out_dir / f"{stem}.png")
    # Off the event loop: a bot serving chats must not stall while matplotlib draws.
    await asyncio.to_thread(
        _write_files, run.exports, run.scored, run.request, chart_by=run.options.chart_by, leads=run.leads
    )


@dataclass(frozen=True)
class _Stage:
    """A named, timed part of a run that the person waiting sees announced; its steps run in order."""

    name: str
    describe: Callable[[_Run], str]
    """The progress line announcing it, from what the run has found so far."""
    steps: tuple[Callable[[_Run], Awaitable[None]], ...]
    runs_if: Callable[[_Run], bool] = lambda run: True


_RUN: Final[tuple[_Stage, ...]] = (
    _Stage("plan", lambda run: f"planning searches for {run.request.topic}", (_plan_stage,)),
    _Stage("collect", lambda run: f"searching {len(run.request.sources)} sources", (_collect_stage,)),
    _Stage("expand", lambda run: "looking for related terms", (_expand_stage,)),
    _Stage(
        "novelty",
        lambda run: "removing what was delivered before",
        (_dedupe_stage, _embed_stage, _novelty_stage, _rank_stage),
    ),
    _Stage("critique", lambda run: f"checking the top {len(run.top)} items", (_critique_stage,)),
    _Stage("digest", lambda run: "writing the digest", (_digest_stage, _tone_stage)),
    # Files only for a digest that reports something: a run whose sources all failed, or that found nothing new,
    # sends no CSV or chart, so it writes none (its JSON report would describe files nobody receives).
    _Stage(
        "export",
        lambda run: f"writing {len(run.scored)} items",
        (_files_stage,),
        runs_if=lambda run: run.reports_something,
    ),
)
"""What a monitor run does, in order: the table of contents of `run_pipeline`."""

STAGES: Final[tuple[str, ...]] = tuple(stage.name for stage in _RUN)
"""The stages' names, in order: progress events number them, and the report times each one that ran."""


async def _run_stage(stage: _Stage, run: _Run) -> None:
    """Announce the stage, run its steps and add the time they took to the run's clock."""
    emit(
        run.progress,
        ProgressEvent(kind="stage", message=stage.describe(run), done=STAGES.index(stage.name), total=len(STAGES)),
    )
    started = time.perf_counter()
    try:
        for step in stage.steps:
            await step(run)
    finally:
        run.seconds[stage.name] = run.seconds.get(stage.name, 0.0) + time.perf_counter() - started


def _report(run: _Run, *, finished_at: datetime) -> PipelineReport:
    """What the run did and why, for the JSON export and the run's record."""
    request, collection, critique = run.request, run.collection, run.critique
    return PipelineReport(
        topic=request.topic,
        since=request.since,
        until=request.until,
        sources=[source.name for source in request.sources],
        extra_queries=list(request.extra_queries),
        include_keywords=list(request.include_keywords),
        exclude_keywords=list(request.exclude_keywords),
        language=request.language,
        plan=run.plan,
        plan_refreshed=run.plan_refreshed,
        plan_fallback_reason=run.planned.fallback_reason if run.planned else None,
        expansion_queries=run.new_queries,
        expansion_skipped=run.skipped_expansion,
        searches=sum(o.status is not SearchStatus.SKIPPED for o in collection.outcomes),
        counts=run.counts,
        source_errors=collection.errors,
        partial_searches=collection.partial,
        failed_sources=run.failed_sources,
        skipped_sources=collection.skipped_sources,
        all_sources_failed=run.all_failed,
        nothing_new=run.nothing_new,
        stories_path="embedding" if run.vectors else "lexical",
        stories_fallback_reason=run.stories_fallback,
        critique_path=critique.path if critique else "none",
        critique_fallback_reason=critique.fallback_reason if critique else None,
        digest_path=run.digest_path,
        digest_fallback_reason=run.digest_fallback,
        digest_languages=run.languages,
        usage={**run.usage, "total": sum_usage(list(run.usage.values()))},
        seconds=dict(run.seconds),
        digest=run.digest,
        started_at=run.started_at,
        finished_at=max(finished_at, run.started_at),
    )


def _result(run: _Run, report: PipelineReport) -> PipelineResult:
    """What the caller stores and delivers."""
    scored = run.scored
    return PipelineResult(
        digest=run.digest,
        items=scored,
        new_item_ids=[s.item.id for s in scored if s.status in ("new", "update")],
        plan=run.plan,
        plan_refreshed=run.plan_refreshed,
        exports=run.exports,
        usage=report.usage["total"],
        source_errors=run.collection.errors,
        failed_sources=run.failed_sources,
        all_sources_failed=run.all_failed,
        nothing_new=run.nothing_new,
        report=report,
        update_item_ids=[s.item.id for s in scored if s.status == "update"],
        digest_language=run.languages[0],
        language_digests=run.language_digests,
        told_before=run.novelty.told_before() if hasattr(run, "novelty") else {},
    )


async def run_pipeline(
    request: PipelineRequest,
    *,
    light_model: Model | None,
    heavy_model: Model | None,
    out_dir: Path,
    stem: str,
    progress: ProgressCallback | None = None,
    now: Clock | None = None,
    options: PipelineOptions | None = None,
    embedder: ItemEmbedder | None = None,
) -> PipelineResult:
    """Run the whole pipeline and write `<stem>.csv`, `<stem>.json` and `<stem>.png` under `out_dir` when the digest
    reports something (not when every source failed or nothing was new: then `exports` is None).

    With an `embedder`, stories are grouped by embedding vectors (across languages); if it fails, by words, and
    the report says why.

    Never raises for source or model failures (they are in the result); raises `OSError` only when the
    exports cannot be written, and `ValueError` for an unsafe `stem`.
    """
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ValueError(f"unsafe file stem {stem!r}; build it with research.export.safe_stem()")
    clock = now or utc_now
    run = _Run(
        request=request,
        options=options or PipelineOptions(),
        light_model=light_model,
        heavy_model=heavy_model,
        embedder=embedder,
        progress=progress,
        out_dir=out_dir,
        stem=stem,
        started_at=clock(),
        budget=StageBudget(limits_of(heavy_model or light_model).pipeline_seconds),
    )
    for stage in _RUN:
        if stage.runs_if(run):
            await _run_stage(stage, run)
    report = _report(run, finished_at=clock())
    if run.exports is not None:
        await asyncio.to_thread(write_json, run.exports.json, report)
    emit(progress, ProgressEvent(kind="finished", message=run.digest.headline, done=len(STAGES), total=len(STAGES)))
    return _result(run, report)
