"""A finished monitor run stored as a real run stores itself: N stories of three items each with scores and clusters,
a cited digest, and a real CSV and chart on disk. The page tests and `bench/page.py` serve it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitors.runner import item_record
from research import Digest, write_volume_chart
from research.digest import CitedItem, Development, QualityCheck
from research.export import write_csv_rows
from research.sentiment import Sentiment
from sources import Item
from storage import Database, ItemScore, RunOutcome
from storage.repositories import ChatRepository, DeliveryRepository, ItemRepository, MonitorRepository, RunRepository

FINISHED = datetime(2026, 11, 20, 9, 5, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script> & <b>'
"""A title a feed could send: the page must show it as text."""
SOURCES = ("hn", "news", "arxiv")


@dataclass(frozen=True, slots=True)
class StoredRun:
    run_id: int
    monitor_id: int
    titles: list[str]
    """Each story's lead title, best first."""


def story_title(n: int) -> str:
    return f"Story {n:02d}: DeepSeek ships model {n}" + (f" {HOSTILE}" if n == 2 else "")


async def store_digest_run(
    database: Database, out_dir: Path, *, stories: int = 50, chat: str = "1001", scheduled: datetime = FINISHED
) -> StoredRun:
    """Store one monitor's finished run of `stories` stories (three reports each), its digest citing the first seven,
    and its CSV and chart under `out_dir`."""
    owner = await ChatRepository(database).get_or_create("telegram", chat)
    monitor = await MonitorRepository(database).create(owner_chat_id=owner.id, topic="DeepSeek", schedule="daily")
    run = await RunRepository(database).open_run(monitor.id, scheduled - timedelta(minutes=5))
    assert run is not None
    items: list[Item] = []
    scores: list[ItemScore] = []
    for n in range(1, stories + 1):
        for m, source in enumerate(SOURCES):
            title = story_title(n) if m == 0 else f"{source} report {m} on story {n}"
            item = Item(
                id=f"{source}:{n}-{m}",
                source=source,
                url=f"https://example.com/{source}/{n}/{m}",
                title=title,
                text="DeepSeek",
                published=scheduled - timedelta(hours=n % 24, minutes=m),
                language="en",
                collected_at=scheduled - timedelta(minutes=10),
            )
            items.append(item)
            scores.append(
                ItemScore(
                    item_id=item.id,
                    relevance=0.9 - n / 100,
                    credibility=0.8,
                    score=1.0 - n / 100 - m / 1000,
                    cluster_id=f"c{n}",
                    rank=(n - 1) * len(SOURCES) + m + 1,
                    delivered=n <= 7,
                )
            )
    await ItemRepository(database).upsert_many([item_record(item) for item in items])
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"deepseek-{run.id}"
    chart = write_volume_chart(
        items, path=out_dir / f"{stem}.png", title="DeepSeek", since=scheduled - timedelta(days=1), until=scheduled
    )
    csv = out_dir / f"{stem}.csv"
    write_csv_rows(csv, ("title", "url", "source"), ((item.title, item.url, item.source) for item in items))
    digest = Digest(
        headline="DeepSeek ships seven models in a day",
        developments=[
            Development(text=f"{story_title(n)} — in a sentence of plain fact [{n}].", citations=[n])
            for n in range(1, 8)
        ],
        changes_since_last="Seven new models since yesterday.",
        quality=QualityCheck(completeness=0.8, quality=0.7),
        cited=[
            CitedItem(number=n, title=story_title(n), url=f"https://example.com/hn/{n}/0", source="hn")
            for n in range(1, 8)
        ],
        tone=Sentiment(score=0.31, label="positive", assessed_by="lexicon"),
    )
    outcome = RunOutcome(
        finished_at=scheduled,
        stats={
            "kind": "digest",
            "monitor_id": monitor.id,
            "topic": "DeepSeek",
            "items": len(items),
            "new_items": 21,
            "nothing_new": False,
            "delivered": True,
            "file_stem": stem,
        },
        digest=digest.model_dump(mode="json"),
        artifacts={"csv": str(csv), "chart": str(chart)},
    )
    await DeliveryRepository(database).complete_run(run.id, outcome=outcome, scores=scores, deliver=False)
    return StoredRun(run_id=run.id, monitor_id=monitor.id, titles=[story_title(n) for n in range(1, stories + 1)])
