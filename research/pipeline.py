"""A monitor's run in one call: plan → collect → expand → novelty → critique → synthesize → export.

Source and model failures never raise: they end up in the `PipelineResult` (errors, fallback reasons) and the
digest says what happened. Only the top-K compact items reach the heavy model; the light model only plans.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from pydantic_ai.models import Model

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
from research.novelty import ItemStatus, assess_novelty, delivered_references
from research.pipeline_models import (  # re-exported: callers import them from here
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
from sources import Item, SearchQuery, canonical_url, utc_now

__all__ = [
    "STAGES",
    "UPDATE_PREFIX",
    "PipelineCounts",
    "PipelineOptions",
    "PipelineReport",
    "PipelineRequest",
    "PipelineResult",
    "RunExports",
    "ScoredItem",
    "exact_unique",
    "failure_digest",
    "keyword_filter",
    "plan_expansion",
    "quiet_digest",
    "run_pipeline",
    "scored_items",
]

logger = logging.getLogger(__name__)

STAGES: Final = ("plan", "collect", "expand", "novelty", "critique", "digest", "export")
UPDATE_PREFIX: Final = "Update: "
"""Put before the title of an update to a delivered story in what the critique and digest see."""


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
    options = options or PipelineOptions()
    started_at = clock()
    stages = _StageClock(progress)
    usage: dict[str, LlmUsage] = {}

    budget = StageBudget(limits_of(heavy_model or light_model).pipeline_seconds)
    with stages.stage("plan", f"planning searches for {request.topic}"), budget.spending():
        plan, plan_refreshed, planned = await _plan(request, model=light_model, now=started_at, budget=budget)
        if planned is not None:
            usage["plan"] = planned.usage
    extra = list(request.extra_queries)
    window = SearchQuery(
        text="", since=request.since, until=request.until, language=request.language, limit=options.per_query_limit
    )

    # One record for the whole run: a source that failed in the first round is not asked in the second.
    failed = FailedSources()
    with stages.stage("collect", f"searching {len(request.sources)} sources"):
        first = await collect_per_source(
            [(source, [*plan.queries_for(source.name), *extra]) for source in request.sources],
            window=window,
            concurrency=options.concurrency,
            timeout=options.search_timeout,
            progress=progress,
            failed=failed,
        )
    collections = [first]

    with stages.stage("expand", "looking for related terms"):
        new_queries, skipped_expansion = plan_expansion(
            first, request=request, plan=plan, options=options, now=started_at
        )
        if new_queries:
            second = await collect_per_source(
                [(source, new_queries) for source in request.sources],
                window=window,
                concurrency=options.concurrency,
                timeout=options.search_timeout,
                progress=progress,
                failed=failed,
            )
            collections.append(second)
    collection = merge_collections(collections, started_at=first.started_at)

    counts = PipelineCounts(collected=len(collection.items))
    with stages.stage("novelty", "removing what was delivered before"):
        unique = exact_unique(collection.items)
        in_window = _in_window(unique, request.since)
        filtered = keyword_filter(in_window, include=request.include_keywords, exclude=request.exclude_keywords)
        vectors: dict[str, list[float]] | None = None
        stories_fallback: str | None = None
        if embedder is not None and filtered:
            references = delivered_references(request.delivered_items, request.previous_digest)
            embedded = await embedder.embed_items([*references, *filtered])
            if embedded.usage.requests:
                usage["embeddings"] = embedded.usage
            vectors = embedded.vectors or None
            stories_fallback = embedded.fallback_reason
        novelty = assess_novelty(
            filtered,
            delivered_items=request.delivered_items,
            previous_digest=request.previous_digest,
            already_delivered=request.already_delivered,
            delivered_urls=request.delivered_urls,
            topic=request.topic,
            vectors=vectors,
        )
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
        # Every story's lead among this run's new items (what was delivered before never leads the next digest).
        leads = story_leads(novelty.items, novelty.cluster_of, eligible={entry.item.id for entry in reportable})
        top = [
            entry.model_copy(update={"item": entry.item.model_copy(update={"title": UPDATE_PREFIX + entry.item.title})})
            if novelty.status[entry.item.id] == "update"
            else entry
            for entry in select_top(
                reportable,
                top_k=options.top_k,
                per_story=options.per_story,
                leads={story: lead.item_id for story, lead in leads.items()},
            )
        ]
    all_failed = not any(o.status is SearchStatus.OK for o in collection.outcomes)
    failed_sources = collection.failed_sources()
    nothing_new = not reportable and not all_failed
    clusters = novelty.deduper.clusters
    previous = PreviousDigest.of(request.previous_digest) if request.previous_digest else None

    critique: Critique | None = None
    with stages.stage("critique", f"checking the top {len(top)} items"), budget.spending():
        if top and heavy_model is not None and budget.left() > 0:
            critique = await llm_critique(
                top,
                topic=request.topic,
                model=heavy_model,
                clusters=clusters,
                profile=request.profile,
                now=started_at,
                run_seconds=budget.timeout(heavy_model),
            )
            usage["critique"] = critique.usage
        elif top:
            spent = BUDGET_SPENT_REASON if heavy_model is not None else None
            critique = heuristic_critique(top, clusters=clusters, now=started_at, fallback_reason=spent)
        counts.critiqued = len(critique.items) if critique else 0

    digest_path: Literal["model", "extractive", "none"] = "none"
    digest_fallback: str | None = None
    languages = list(dict.fromkeys(request.digest_languages)) or [request.language]
    language_digests: dict[str, Digest] = {}
    with stages.stage("digest", "writing the digest"), budget.spending():
        if all_failed:
            digest = failure_digest(request.topic, failed_sources, collection.skipped_sources)
        elif nothing_new:
            digest = quiet_digest(request.topic, counts)
        elif heavy_model is not None:
            for position, language in enumerate(languages):
                written = (
                    await llm_digest(
                        top,
                        topic=request.topic,
                        model=heavy_model,
                        clusters=clusters,
                        critique=critique,
                        previous=previous,
                        profile=request.profile,
                        language=language,
                        now=started_at,
                        run_seconds=budget.timeout(heavy_model),
                        leads=leads,
                    )
                    if budget.left() > 0
                    else _out_of_time_digest(
                        top,
                        topic=request.topic,
                        clusters=clusters,
                        critique=critique,
                        previous=previous,
                        now=started_at,
                        leads=leads,
                    )
                )
                if position == 0:
                    digest, digest_path, digest_fallback = written.digest, written.path, written.fallback_reason
                    usage["digest"] = written.usage
                else:  # the same items, critique and previous digest: only the writing is repeated
                    usage[f"digest:{language or 'default'}"] = written.usage
                    if written.path == "model":
                        language_digests[language or ""] = written.digest
        else:
            digest_path = "extractive"
            digest = extractive_digest(
                top,
                topic=request.topic,
                clusters=clusters,
                critique=critique,
                previous=previous,
                now=started_at,
                leads=leads,
            ).model_copy(update={"without_model": "Summarised without a language model."})
        if not all_failed and failed_sources:
            digest = digest.model_copy(update={"failed_sources": failure_lines(failed_sources)})

    scored = scored_items(ranked, status=novelty.status, critique=critique)
    if digest.developments:
        tone = digest_tone(critique, novelty.cluster_of)
        shift = tone_shift(request.previous_digest.tone if request.previous_digest else None, tone)
        changes = " ".join(part for part in (digest.changes_since_last, shift) if part) or None
        digest = digest.model_copy(update={"tone": tone, "changes_since_last": changes})

    # Files only for a digest that reports something: a run whose sources all failed, or that found nothing new,
    # sends no CSV or chart, so it writes none (its JSON report would describe files nobody receives).
    exports: RunExports | None = None
    if not (all_failed or nothing_new):
        with stages.stage("export", f"writing {len(scored)} items"):
            emit(progress, ProgressEvent(kind="exporting", message=f"writing {len(scored)} items", total=len(scored)))
            exports = RunExports(
                csv=out_dir / f"{stem}.csv", json=out_dir / f"{stem}.json", chart=out_dir / f"{stem}.png"
            )
            # Off the event loop: a bot serving chats must not stall while matplotlib draws.
            await asyncio.to_thread(_write_files, exports, scored, request, chart_by=options.chart_by, leads=leads)

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
        failed_sources=failed_sources,
        skipped_sources=collection.skipped_sources,
        all_sources_failed=all_failed,
        nothing_new=nothing_new,
        stories_path="embedding" if vectors else "lexical",
        stories_fallback_reason=stories_fallback,
        critique_path=critique.path if critique else "none",
        critique_fallback_reason=critique.fallback_reason if critique else None,
        digest_path=digest_path,
        digest_fallback_reason=digest_fallback,
        digest_languages=languages,
        usage={**usage, "total": total_usage},
        seconds=dict(stages.seconds),
        digest=digest,
        started_at=started_at,
        finished_at=max(clock(), started_at),
    )
    if exports is not None:
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
        failed_sources=failed_sources,
        all_sources_failed=all_failed,
        nothing_new=nothing_new,
        report=report,
        update_item_ids=[s.item.id for s in scored if s.status == "update"],
        digest_language=languages[0],
        language_digests=language_digests,
    )
