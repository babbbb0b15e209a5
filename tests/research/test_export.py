"""CSV and JSON export: BOM, escaping, non-Latin text, formula-injection guard, safe names; the jobs that write them."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from research.export import COLLECTION_CSV_COLUMNS, guard_cell, safe_stem, write_exports
from research.goal import CollectionGoal
from research.iterative import CollectionReport, StopReason
from research.jobs import research_once, run_collection_job
from research.rank import RankedItem
from sources.base import Engagement, Item
from tests.research.fake_sources import BASE_TIME, RecordingSource, make_item, rate_limited


def report() -> CollectionReport:
    return CollectionReport(
        request="collect posts about 深度求索",
        target=10,
        max_attempts=3,
        items_per_attempt=50,
        reached_target=False,
        stop_reason=StopReason.ATTEMPT_LIMIT,
        stop_detail="hit the limit of 3 attempts",
        total_unique=2,
        total_duplicates=0,
        attempts=3,
        queries=[],
        per_source={},
        source_errors=[],
        skipped_sources={},
        planner="deterministic",
        started_at=BASE_TIME,
        finished_at=BASE_TIME,
        duration_seconds=0,
    )


def ranked(item: Item, **parts: float) -> RankedItem:
    values = {"relevance": 0.5, "recency": 0.25, "engagement": 0.125, "score": 0.4, **parts}
    return RankedItem(item=item, cluster_id="c1", **values)


def test_csv_round_trips_with_bom_escaping_unicode_and_injection_guard(tmp_path: Path) -> None:
    tricky = Item(
        id="hn:1",
        source="hn",
        url="https://example.com/a",
        title='=HYPERLINK("http://evil.example","click")',
        text='line one, with comma\nline two "quoted"',
        author="@mallory",
        published=datetime(2026, 11, 20, 13, 30, tzinfo=UTC),
        engagement=Engagement(points=12, comments=3),
        language="en",
        query="-1+1",
    )
    chinese = make_item("news", "2", title="深度求索发布V4大模型", text="\t tabbed", language="zh", points=None)
    paths = write_exports(report(), [ranked(tricky), ranked(chinese)], out_dir=tmp_path / "exports", stem="s")

    raw = paths.csv.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf"), "UTF-8 BOM so Excel detects the encoding"
    with paths.csv.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(COLLECTION_CSV_COLUMNS)
    first, second = rows
    assert first["index"] == "1" and second["index"] == "2"
    assert first["title"] == "'" + tricky.title
    assert first["text"] == tricky.text, "commas, quotes and newlines survive"
    assert first["author"] == "'@mallory"
    assert first["query"] == "'-1+1"
    assert first["published"] == "2026-11-20T13:30:00Z"
    assert (first["points"], first["likes"], first["comments"]) == ("12", "", "3")
    assert first["chars"] == str(len(tricky.text))
    assert (first["relevance"], first["score"], first["cluster_id"]) == ("0.5000", "0.4000", "c1")
    assert first["engagement_score"] == "0.1250"
    assert second["title"] == "深度求索发布V4大模型"
    assert second["text"] == "'\t tabbed"
    assert second["language"] == "zh"

    metadata = json.loads(paths.json.read_text(encoding="utf-8"))
    assert metadata["request"] == "collect posts about 深度求索"
    assert metadata["stop_reason"] == "attempt_limit"
    assert "深度求索" in paths.json.read_text(encoding="utf-8"), "non-Latin text is written as is"
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["s.csv", "s.json"], "no temp files left"


def test_guard_cell_and_safe_stem() -> None:
    assert [guard_cell(v) for v in ("=1", "+1", "-1", "@a", "\tx", "\rx", "ok", "")] == [
        "'=1",
        "'+1",
        "'-1",
        "'@a",
        "'\tx",
        "'\rx",
        "ok",
        "",
    ]
    when = datetime(2026, 11, 20, 12, 5, tzinfo=UTC)
    assert safe_stem("DeepSeek R2: news?", when) == "deepseek-r2-news-20261120-1205"
    assert safe_stem("../../etc/passwd", when) == "etc-passwd-20261120-1205"
    assert safe_stem("深度求索 新闻", when) == "深度求索-新闻-20261120-1205"
    assert safe_stem("...", when) == "collection-20261120-1205"
    assert len(safe_stem("x" * 500, when)) < 80
    with pytest.raises(ValueError, match="unsafe"):
        write_exports(report(), [], out_dir=Path("/tmp"), stem="../x")


async def test_run_collection_job_writes_csv_and_json(tmp_path: Path) -> None:
    def answer(query: object) -> list[Item]:
        return [make_item("hn", f"k{i}", title=f"Rust kernel story number {i}", points=i) for i in range(12)]

    result = await run_collection_job(
        "collect 10 posts about Rust",
        sources=[RecordingSource("hn", answer), rate_limited("github")],
        model=None,
        goal=CollectionGoal(target=10),
        out_dir=tmp_path,
    )
    assert result.report.stop_reason is StopReason.TARGET_REACHED
    assert result.paths.csv.name.startswith("rust-") and result.paths.csv.suffix == ".csv"
    with result.paths.csv.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 == len(result.items)
    assert [float(r["score"]) for r in rows] == sorted((float(r["score"]) for r in rows), reverse=True)
    assert {r["query"] for r in rows} == {"Rust"}
    metadata = json.loads(result.paths.json.read_text(encoding="utf-8"))
    assert metadata["total_unique"] == 12
    assert metadata["source_errors"][0]["source"] == "github"
    assert metadata["queries"][0]["new"] == 12


async def test_research_once_dedupes_clusters_and_ranks() -> None:
    story = "Tesla recalls 239,000 vehicles over rearview camera failure"
    hn = RecordingSource(
        "hn",
        lambda q: [
            make_item("hn", "1", title=story, points=300, hours_ago=3),
            make_item("hn", "2", title="Unrelated: my garden in autumn", points=5000, hours_ago=100),
        ],
    )
    news = RecordingSource(
        "news",
        lambda q: [
            make_item("news", "9", title="Tesla recall: 239,000 cars get camera fix", hours_ago=2),
            make_item("news", "1", title=story, url="https://example.com/hn/1"),  # same URL as hn:1
        ],
    )
    result = await research_once("Tesla recall", sources=[hn, news], limit=5)
    assert [r.item.id for r in result.items] == ["hn:1", "hn:2"], "one per story; the copy by URL is gone"
    assert {o.source: o.count for o in result.collection.outcomes} == {"hn": 2, "news": 2}
    everything = (await research_once("Tesla recall", sources=[hn, news], one_per_story=False)).items
    assert {r.item.id for r in everything} == {"hn:1", "hn:2", "news:9"}
    assert len({r.cluster_id for r in everything}) == 2
    assert hn.queries[0].text == "Tesla recall"
