"""Rank items by relevance to the topic (BM25), recency (half-life decay) and engagement (log, per source)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat

from kernel import utc_now
from research.terms import tokens
from sources import Item


class RankWeights(BaseModel):
    """How much each part counts in the combined score; they need not sum to 1."""

    model_config = ConfigDict(frozen=True)

    relevance: NonNegativeFloat = 0.6
    recency: NonNegativeFloat = 0.25
    engagement: NonNegativeFloat = 0.15


class RankedItem(BaseModel):
    """An item with the parts of its score, all in [0, 1], kept for the CSV."""

    model_config = ConfigDict(frozen=True)

    item: Item
    cluster_id: str | None = None
    """The story it belongs to (see `research.dedupe`)."""
    relevance: float = Field(ge=0, le=1)
    """BM25 of title + text against the topic, divided by the best BM25 in the batch."""
    recency: float = Field(ge=0, le=1)
    """0.5 ** (age / half-life); `unknown_recency` when the source gave no date."""
    engagement: float = Field(ge=0, le=1)
    """log(1 + points + likes + reposts + comments) over the highest such value of the same source."""
    score: float = Field(ge=0)
    """Weighted sum of the three parts."""


def bm25(
    query_terms: Sequence[str], documents: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75
) -> list[float]:
    """Okapi BM25 of every document against the query terms (repeated terms count once)."""
    if not documents:
        return []
    count = len(documents)
    average_length = sum(len(d) for d in documents) / count or 1.0
    terms = list(dict.fromkeys(query_terms))
    document_frequency = Counter(t for d in documents for t in set(d) if t in terms)
    idf = {t: math.log(1 + (count - document_frequency[t] + 0.5) / (document_frequency[t] + 0.5)) for t in terms}
    scores = []
    for document in documents:
        frequencies = Counter(document)
        length_norm = k1 * (1 - b + b * len(document) / average_length)
        scores.append(
            sum(idf[t] * frequencies[t] * (k1 + 1) / (frequencies[t] + length_norm) for t in terms if frequencies[t])
        )
    return scores


def recency(published: datetime | None, *, now: datetime, half_life_hours: float, unknown: float) -> float:
    """Halves every `half_life_hours`; a date in the future counts as now."""
    if published is None:
        return unknown
    age_hours = max((now - published).total_seconds() / 3600, 0.0)
    return float(0.5 ** (age_hours / half_life_hours))


def _engagement_parts(items: Sequence[Item]) -> list[float]:
    logs = [math.log1p(item.engagement.total()) for item in items]
    best_per_source: dict[str, float] = {}
    for item, value in zip(items, logs, strict=True):
        best_per_source[item.source] = max(best_per_source.get(item.source, 0.0), value)
    # Per source, because 500 HN points and 500 GitHub stars are not the same amount of attention.
    return [
        value / best_per_source[item.source] if best_per_source[item.source] else 0.0
        for item, value in zip(items, logs, strict=True)
    ]


def rank(
    items: Sequence[Item],
    *,
    topic: str,
    cluster_of: Mapping[str, str] | None = None,
    now: datetime | None = None,
    weights: RankWeights | None = None,
    half_life_hours: PositiveFloat = 48.0,
    unknown_recency: float = 0.25,
) -> list[RankedItem]:
    """Score every item and return them best first (ties keep input order)."""
    weights = weights or RankWeights()
    now = now or utc_now()
    cluster_of = cluster_of or {}
    documents = [tokens(f"{item.title} {item.text}") for item in items]
    raw_relevance = bm25(tokens(topic), documents)
    best = max(raw_relevance, default=0.0)
    engagement = _engagement_parts(items)
    ranked = []
    for index, item in enumerate(items):
        relevance = raw_relevance[index] / best if best > 0 else 0.0
        fresh = recency(item.published, now=now, half_life_hours=half_life_hours, unknown=unknown_recency)
        score = weights.relevance * relevance + weights.recency * fresh + weights.engagement * engagement[index]
        ranked.append(
            RankedItem(
                item=item,
                cluster_id=cluster_of.get(item.id),
                relevance=min(relevance, 1.0),
                recency=min(fresh, 1.0),
                engagement=min(engagement[index], 1.0),
                score=score,
            )
        )
    return sorted(ranked, key=lambda r: -r.score)


def select_top(
    ranked: Sequence[RankedItem], *, top_k: int, per_story: int, leads: Mapping[str, str] | None = None
) -> list[RankedItem]:
    """The best `top_k` items, at most `per_story` of one story. With `leads` (the lead item's id by cluster id,
    see `research.dedupe.story_leads`), a story's lead is its first item chosen, at the place of the story's best
    ranked item, wherever it ranks itself: the digest shows a story by its lead, so the lead must be among the
    items it cites."""
    leads = leads or {}
    by_id = {entry.item.id: entry for entry in ranked}
    chosen: list[RankedItem] = []
    taken: set[str] = set()
    per_cluster: dict[str, int] = {}
    for entry in ranked:
        key = entry.cluster_id or entry.item.id
        lead = by_id.get(leads.get(key, ""))
        for candidate in (lead, entry) if lead is not None and lead.item.id not in taken else (entry,):
            if candidate.item.id in taken or per_cluster.get(key, 0) >= per_story or len(chosen) >= top_k:
                continue
            per_cluster[key] = per_cluster.get(key, 0) + 1
            taken.add(candidate.item.id)
            chosen.append(candidate)
        if len(chosen) >= top_k:
            break
    return chosen
