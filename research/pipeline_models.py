"""The typed inputs and outputs of a monitor run: request, options, scored items, result and JSON report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeFloat, NonNegativeInt

from research.collect import SearchOutcome, SourceFailure
from research.critique import FeedbackExample
from research.digest import Digest
from research.novelty import ItemStatus
from research.plan import QueryPlan
from research.sentiment import Sentiment
from research.usage import LlmUsage
from sources import Item, Source

__all__ = [
    "PipelineCounts",
    "PipelineOptions",
    "PipelineReport",
    "PipelineRequest",
    "PipelineResult",
    "RunExports",
    "ScoredItem",
]


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
    feedback_examples: Sequence[FeedbackExample] = ()
    """That chat's recent marks on this monitor's stories, shown to the model critique as examples."""
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
    digest_languages: Sequence[str | None] = ()
    """The languages to write the digest in (the readers' /language; None: no language asked for), the first one
    the main digest. Collection and critique happen once; the model writes the digest once per language. Empty:
    one digest in `language`."""


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
    chart_by: Literal["source", "sentiment"] = "source"
    """What the volume chart's bars are split by."""


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
    sentiment: Sentiment | None = None
    """The item's tone: the critique's, else its story's, else the lexicon's; None when unknown."""


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
    exports: RunExports | None
    """The CSV, JSON and chart; None when the run reports nothing (every source failed, or nothing new)."""
    usage: LlmUsage
    """Planning + critique + digest, summed."""
    source_errors: list[SearchOutcome]
    failed_sources: list[SourceFailure]
    """Each source that failed in the run, once, with why (`.line` names it with its URL shortened)."""
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
    digest_language: str | None = None
    """The language `digest` was asked for in (the first of `PipelineRequest.digest_languages`)."""
    language_digests: dict[str, Digest] = field(default_factory=dict)
    """The digest written again for the other requested languages, by language code ("" for none asked); absent
    when the model did not write it (no model, or it failed: then readers get `digest`)."""
    told_before: dict[str, tuple[Item, ...]] = field(default_factory=dict)
    """Per story (cluster id) that gained a report in this run, its reports delivered before (`Novelty.told_before`):
    alerts that count outlets count them too."""


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
    """Every failed search (source, query, error)."""
    partial_searches: list[SearchOutcome] = Field(default_factory=list)
    """Every search that kept its first pages only because a later page failed (the message says which)."""
    failed_sources: list[SourceFailure] = Field(default_factory=list)
    """Every source that failed, once each, with its spec (feeds by URL), the reason and the full message."""
    skipped_sources: dict[str, str]
    all_sources_failed: bool
    nothing_new: bool
    stories_path: Literal["embedding", "lexical"] = "lexical"
    """How items were grouped into stories: by embedding vectors, or by their words."""
    stories_fallback_reason: str | None = None
    """Why the embedding model was not used although one is configured, when it failed."""
    critique_path: Literal["model", "heuristic", "none"]
    critique_fallback_reason: str | None = None
    digest_path: Literal["model", "extractive", "none"]
    digest_fallback_reason: str | None = None
    digest_languages: list[str | None] = Field(default_factory=list)
    """Every language the digest was asked for, the main one first."""
    usage: dict[str, LlmUsage]
    """Per model step (`plan`, `embeddings`, `critique`, `digest`) and `total`."""
    seconds: dict[str, NonNegativeFloat]
    """Wall time per stage."""
    digest: Digest
    started_at: AwareDatetime
    finished_at: AwareDatetime
