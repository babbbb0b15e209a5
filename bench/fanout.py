"""Benchmark monitor fan-out: N subscriptions over M monitors due in the same minute, delivered to a fake Telegram.

Everything between the sources and the Telegram API is the real code: `MonitorService.run_monitor` (the real
pipeline on its extractive path: no model, so zero model calls), the outbox in SQLite, `DeliveryWorker` and
`TelegramSender` (python-telegram-bot over HTTP) against `tests.fakes.telegram.FakeTelegram`, which enforces
~30 messages/s overall and 1/s per chat (burst 3) and answers 429 beyond. Sources are in-process fakes
answering each query after a small latency. Chat `i` subscribes to monitor `i % M`.

Measured: collections (pipeline runs; should equal M), searches answered by the fake sources, model calls,
time to run every monitor, time until every delivery is sent (from the minute's start) against the platform
ceiling (API messages / rate), API messages per second over the delivery window, 429s answered, and peak RSS
(the process holds the fake server too).

Run: uv run python bench/fanout.py [--subscriptions 1000] [--topics 100] [--pace 30] [--batch-size 50]
     [--concurrency 8] [--poll-seconds 5]
`--pace 0` turns the Bot's rate limiter off (then only the platform's 429s slow it down).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import resource
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import func, select

from bots.telegram import TelegramLimits, TelegramSender, build_bot
from monitors.delivery import DeliveryWorker
from monitors.runner import PipelineFunction
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research.pipeline import PipelineResult, run_pipeline
from sources.base import Item, SearchQuery
from storage import Database, DeliveryStatus, upgrade_database
from storage.models import Chat, Delivery, Subscription
from tests.fakes.telegram import FakeTelegram, RateLimit
from tests.research.fake_sources import BASE_TIME, RecordingSource, make_item

SCHEDULED_FOR = BASE_TIME + timedelta(hours=1)
"""The minute every monitor is due; the fake sources' items fall in the hour before it."""
ITEMS_PER_QUERY = 8


@dataclass
class Counters:
    pipelines: int = 0


def counting(pipeline: PipelineFunction, counters: Counters) -> PipelineFunction:
    async def counted(*args: object, **kwargs: object) -> PipelineResult:
        counters.pipelines += 1
        return await pipeline(*args, **kwargs)  # type: ignore[arg-type]

    return counted


def fake_source(name: str, latency: float) -> RecordingSource:
    def answer(query: SearchQuery) -> list[Item]:
        topic = query.text
        return [
            make_item(
                name,
                f"{topic}-{n}",
                title=f"{topic}: {name} report {n} on what changed this week",
                text=f"{topic} coverage from {name}, item {n}.",
                points=10 + n,
            )
            for n in range(ITEMS_PER_QUERY)
        ]

    return RecordingSource(name, answer, delay=latency)


async def setup(database: Database, service: MonitorService, *, subscriptions: int, topics: int) -> list[int]:
    """N chats, M monitors (owned by the first M chats), chat i subscribed to monitor i % M."""
    async with database.transaction() as session:
        session.add_all(Chat(platform="telegram", external_id=str(1_000_000 + i)) for i in range(subscriptions))
    async with database.sessions() as session:
        chat_ids = list(await session.scalars(select(Chat.id).order_by(Chat.id)))
    monitor_ids = []
    for index in range(topics):
        view = await service.create_monitor(chat_ids[index], f"Topic {index:03d} launch", sources="hn,news")
        monitor_ids.append(view.id)
    async with database.transaction() as session:
        owned = set(await session.scalars(select(Subscription.chat_id)))
        session.add_all(
            Subscription(monitor_id=monitor_ids[i % topics], chat_id=chat_id)
            for i, chat_id in enumerate(chat_ids)
            if chat_id not in owned
        )
    return monitor_ids


async def open_deliveries(database: Database) -> int:
    async with database.sessions() as session:
        statement = select(func.count()).where(Delivery.status.in_([DeliveryStatus.PENDING, DeliveryStatus.FAILED]))
        return int(await session.scalar(statement) or 0)


async def delivery_counts(database: Database) -> dict[str, int]:
    async with database.sessions() as session:
        rows = await session.execute(select(Delivery.status, func.count()).group_by(Delivery.status))
        return {str(status): int(count) for status, count in rows.all()}


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'fanout.db'}"
        await upgrade_database(url)
        database = Database(url)
        fake = FakeTelegram(rate_limit=RateLimit(per_second=args.rate, burst=args.rate))
        fake.start()
        sources = {"hn": fake_source("hn", args.latency), "news": fake_source("news", args.latency)}
        counters = Counters()
        # The process's one Bot, paced by python-telegram-bot's rate limiter at `--pace` messages/s overall.
        limits = TelegramLimits(messages_per_second=args.pace, max_retries=2)
        sender = TelegramSender(build_bot(fake.token, api_url=fake.url, limits=limits))
        worker = DeliveryWorker(
            database,
            {"telegram": sender},
            batch_size=args.batch_size,
            concurrency=args.concurrency,
            poll_seconds=args.poll_seconds,
        )
        service = MonitorService(
            database,
            resolve_sources=lambda specs: [sources[spec] for spec in specs],
            light_model=None,
            heavy_model=None,
            out_dir=Path(tmp) / "exports",
            settings=MonitorSettings(),
            clock=lambda: SCHEDULED_FOR,
            pipeline=counting(run_pipeline, counters),
            on_deliveries_queued=worker.wake,
        )
        try:
            setup_start = time.perf_counter()
            monitor_ids = await setup(database, service, subscriptions=args.subscriptions, topics=args.topics)
            setup_seconds = time.perf_counter() - setup_start

            stop = asyncio.Event()
            start = time.perf_counter()
            start_mono = time.monotonic()
            worker_task = asyncio.create_task(worker.run_forever(stop))
            summaries = await asyncio.gather(*(service.run_monitor(mid, SCHEDULED_FOR) for mid in monitor_ids))
            runs_seconds = time.perf_counter() - start
            runs_done_mono = time.monotonic()
            while await open_deliveries(database):
                await asyncio.sleep(0.25)
            delivered_seconds = time.perf_counter() - start
            stop.set()
            await worker_task
        finally:
            await sender.close()
            fake.stop()
            counts = await delivery_counts(database)
            await database.dispose()

    messages = len(fake.messages)
    window = (fake.messages[-1].at - fake.messages[0].at) if messages > 1 else 0.0
    first_send = (fake.messages[0].at - start_mono) if messages else 0.0
    ceiling = messages / args.rate
    after_runs = [message.at for message in fake.messages if message.at >= runs_done_mono]
    after_window = (after_runs[-1] - runs_done_mono) if after_runs else 0.0
    queued = sum(summary.deliveries for summary in summaries if summary is not None)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("subscriptions / monitors", f"{args.subscriptions:,} / {args.topics:,}"),
        ("collections made (pipeline runs)", f"{counters.pipelines:,}"),
        ("searches answered by fake sources", f"{sum(len(s.queries) for s in sources.values()):,}"),
        ("model calls", "0 (no model: extractive path)"),
        ("deliveries queued / sent / dead", f"{queued:,} / {counts.get('sent', 0):,} / {counts.get('dead', 0):,}"),
        ("API messages (text parts + CSV + chart)", f"{messages:,}"),
        ("time to run all monitors", f"{runs_seconds:.1f} s"),
        ("first message sent after", f"{first_send:.1f} s"),
        ("time until everything delivered", f"{delivered_seconds:.1f} s"),
        (f"platform ceiling ({messages:,} msgs / {args.rate:g} per s)", f"{ceiling:.1f} s"),
        ("messages/s over the delivery window", f"{messages / window:.1f}" if window else "n/a"),
        (
            "messages/s once every monitor had run",
            f"{len(after_runs) / after_window:.1f} ({len(after_runs):,} msgs)" if after_window else "n/a",
        ),
        ("429s answered by the fake", f"{fake.throttled:,}"),
        ("peak RSS (whole process, fake included)", f"{rss_mib:.0f} MiB"),
        ("setup (chats, monitors, subscriptions; not timed above)", f"{setup_seconds:.1f} s"),
    ]
    settings = (
        f"pace={args.pace or 'off'} batch_size={args.batch_size} concurrency={args.concurrency} "
        f"poll_seconds={args.poll_seconds} source latency={args.latency * 1000:.0f} ms"
    )
    print(f"\nfanout — {settings}; Python {platform.python_version()} on {platform.machine()}\n")
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subscriptions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rate", type=float, default=30.0, help="the fake platform's overall ceiling, msg/s")
    parser.add_argument("--pace", type=float, default=30.0, help="the Bot's rate limiter, msg/s overall (0: off)")
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    parser.add_argument("--latency", type=float, default=0.02, help="fake source latency, seconds")
    args = parser.parse_args()
    if args.topics < 1 or args.subscriptions < args.topics:
        parser.error("need at least one topic and at least as many subscriptions as topics")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
