"""Ranking: BM25 relevance, half-life recency, per-source log engagement, one combined score."""

from __future__ import annotations

from datetime import timedelta

import pytest

from research.rank import RankWeights, bm25, rank, recency
from tests.research.fake_sources import BASE_TIME, make_item


def test_relevant_fresh_item_beats_irrelevant_popular_one() -> None:
    relevant = make_item(
        "news", "a", title="DeepSeek releases V4 open-weight model", text="DeepSeek V4 ...", hours_ago=2
    )
    popular = make_item(
        "hn", "b", title="Show HN: my sourdough starter tracker", points=2500, comments=900, hours_ago=200
    )
    middling = make_item("hn", "c", title="Notes on running DeepSeek locally", points=30, hours_ago=30)
    ranked = rank([popular, middling, relevant], topic="DeepSeek V4", cluster_of={"news:a": "c7"}, now=BASE_TIME)

    assert [r.item.id for r in ranked] == ["news:a", "hn:c", "hn:b"]
    top = ranked[0]
    assert top.cluster_id == "c7"
    assert top.relevance == 1.0
    assert top.recency == pytest.approx(0.5 ** (2 / 48))
    assert top.engagement == 0.0, "no counts from the source means no engagement"
    w = RankWeights()
    assert top.score == pytest.approx(w.relevance * top.relevance + w.recency * top.recency)
    assert ranked[2].relevance == 0.0
    assert ranked[2].engagement == 1.0, "the most engaged HN item sets the HN scale"
    assert 0 < ranked[1].engagement < 1


def test_engagement_is_normalised_per_source() -> None:
    github = make_item("github", "g", title="x", points=50_000)
    hn = make_item("hn", "h", title="y", points=40)
    ranked = rank([github, hn], topic="z", now=BASE_TIME)
    assert {r.item.id: r.engagement for r in ranked} == {"github:g": 1.0, "hn:h": 1.0}


def test_bm25_prefers_more_matches_and_rarer_terms() -> None:
    docs = [["deepseek", "model"], ["deepseek", "v4", "model"], ["model", "weather"], ["v4", "engine"]]
    scores = bm25(["deepseek", "v4"], docs)
    assert scores[1] == max(scores)
    assert scores[2] == 0.0
    assert bm25(["a"], []) == []


def test_recency_halves_per_half_life_and_handles_unknown_and_future() -> None:
    assert recency(BASE_TIME - timedelta(hours=24), now=BASE_TIME, half_life_hours=24, unknown=0.3) == 0.5
    assert recency(None, now=BASE_TIME, half_life_hours=24, unknown=0.3) == 0.3
    assert recency(BASE_TIME + timedelta(hours=5), now=BASE_TIME, half_life_hours=24, unknown=0.3) == 1.0
