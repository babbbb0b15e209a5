"""What one poll of a monitor's feed costs: a full document (Atom, JSON Feed) against the 304 path (the validator
only, no rendering), for 1, 10 and 30 stored digests of 7 developments and 20 sources each (30 is `FEED_ENTRIES`).

A throwaway SQLite database, migrated; each row is the median of the rounds, in milliseconds of wall time, with the
document's size.

    uv run python bench/feeds.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from monitors import FeedKind, MonitorFeeds
from research import Digest
from research.digest import CitedItem, Development, QualityCheck
from storage import Database, RunOutcome, upgrade_database
from storage.repositories import ChatRepository, DeliveryRepository, MonitorRepository, RunRepository

START = datetime(2026, 11, 1, tzinfo=UTC)


def _digest(day: int) -> Digest:
    return Digest(
        headline=f"What happened on day {day}",
        developments=[
            Development(text=f"Development {n} of day {day}, in a sentence of plain fact [{n + 1}].", citations=[n + 1])
            for n in range(7)
        ],
        quality=QualityCheck(completeness=0.8, quality=0.7),
        cited=[
            CitedItem(number=n + 1, title=f"A report's title number {n}", url=f"https://example.com/{day}/{n}",
                      source="hn")
            for n in range(20)
        ],
    )  # fmt: skip


async def _monitor_with(database: Database, digests: int) -> int:
    chat = await ChatRepository(database).get_or_create("telegram", str(digests))
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    runs, deliveries = RunRepository(database), DeliveryRepository(database)
    for day in range(digests):
        run = await runs.open_run(monitor.id, START + timedelta(days=day))
        assert run is not None
        outcome = RunOutcome(
            finished_at=START + timedelta(days=day, hours=1), digest=_digest(day).model_dump(mode="json")
        )
        await deliveries.complete_run(run.id, outcome=outcome, deliver=False)
    return monitor.id


async def _median_ms(feeds: MonitorFeeds, token: str, kind: FeedKind, *, body: bool, rounds: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        document = await feeds.document(token, kind, base_url="https://lookout.example.org")
        assert document is not None
        size = len(document.body) if body else 0
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), size


async def main(rounds: int) -> None:
    folder = Path(tempfile.mkdtemp())
    url = f"sqlite+aiosqlite:///{folder / 'feeds.db'}"
    await upgrade_database(url)
    database = Database(url)
    try:
        feeds = MonitorFeeds(database)
        print("| digests | format | full document (ms) | 304 path (ms) | bytes |")
        print("|---:|---|---:|---:|---:|")
        for digests in (1, 10, 30):
            token = await feeds.token(await _monitor_with(database, digests))
            for kind in ("atom", "json"):
                await feeds.document(token, kind, base_url="https://lookout.example.org")  # warm
                full, size = await _median_ms(feeds, token, kind, body=True, rounds=rounds)
                validator, _ = await _median_ms(feeds, token, kind, body=False, rounds=rounds)
                print(f"| {digests} | {kind} | {full:.1f} | {validator:.1f} | {size:,} |")
    finally:
        await database.dispose()
        shutil.rmtree(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))
