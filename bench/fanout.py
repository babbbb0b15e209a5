"""Benchmark monitor fan-out: N subscriptions over M shared monitors, delivered one by one and as briefings.

Everything on Lookout's side is the real code, in this process: chats subscribe through `MonitorService.sharing`
(the path /subscribe takes), `MonitorService.run_monitor` runs the real pipeline with the real Hacker News source
over the real `HttpClient`, the models are pydantic-ai `FunctionModel`s that answer at once and count their calls
(every other chat reads German, so each run writes its digest in two languages), the outbox is SQLite, and the
`DeliveryWorker` sends through `TelegramSender` (python-telegram-bot over HTTP). The fakes run in ANOTHER process:
`tests.fakes.telegram.FakeTelegram` enforcing ~30 messages/s overall and 1/s per chat (burst 3, 429 beyond), and a
fake Algolia answering the recorded Hacker News search. So the peak memory below is Lookout's alone.

Two scenarios, each on a fresh database: "digests" (every chat gets each run as its own message) and "briefings"
(every chat has `/briefing daily at 14:00`; the runs happen at 13:00, the briefings are assembled at 14:00 from the
stored runs and sent through the outbox).

Measured: runs made (should equal M), model calls, API messages, deliveries queued/sent/dead, time to run every
monitor (or to assemble every briefing), time until everything is delivered, the platform ceiling (messages / rate),
messages per second once the runs are done (goal ≥ 90 % of the ceiling), 429s, peak RSS of this process.

Run: uv run python bench/fanout.py [--subscriptions 10000] [--topics 100] [--scenario digests|briefings|both]
     [--rate 30] [--pace 30] [--batch-size 50] [--concurrency 8] [--poll-seconds 5]
`--pace 0` turns the Bot's rate limiter off (then only the platform's 429s slow it down).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
import platform
import re
import resource
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import func, select

from app.monitor_service import build_monitor_service
from bots.telegram import TelegramLimits, TelegramSender, build_bot
from monitors import DeliveryWorker, MonitorService, MonitorSettings, parse_schedule
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource
from sources.http import HttpClient
from storage import Database, DeliveryStatus, upgrade_database
from storage.models import Delivery
from storage.repositories import ChatRepository

PAYLOAD = Path(__file__).resolve().parents[1] / "tests" / "sources" / "payloads" / "hn_search_by_date.json"
RUN_AT = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""When every monitor is due: a few hours after the recorded stories, so they fall in the window."""
BRIEFING_AT = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


# ---- the fakes' process ----------------------------------------------------------------------------------


def fakes_main(connection: multiprocessing.connection.Connection, rate: float) -> None:
    """The other process: the fake Bot API and the fake Algolia, answering until told to stop."""
    from tests.fakes.http_server import FakeHTTPServer, FakeResponse
    from tests.fakes.telegram import FakeTelegram, RateLimit

    telegram = FakeTelegram(rate_limit=RateLimit(per_second=rate, burst=rate))
    telegram.start()
    algolia = FakeHTTPServer()
    algolia.start()
    body = PAYLOAD.read_bytes()
    for path in ("/api/v1/search", "/api/v1/search_by_date"):
        algolia.route("GET", path, FakeResponse(body=body, content_type="application/json"))
    connection.send({"telegram": telegram.url, "token": telegram.token, "algolia": algolia.url})
    while True:
        command = connection.recv()
        if command == "stats":
            connection.send(
                {
                    "sent_at": [m.at for m in telegram.messages],
                    "throttled": telegram.throttled,
                    "searches": len(algolia.requests),
                }
            )
        elif command == "reset":
            telegram.messages.clear()
            telegram.throttled = 0
            algolia.requests.clear()
            connection.send("ok")
        else:
            telegram.stop()
            algolia.stop()
            connection.send("stopped")
            return


# ---- the models ------------------------------------------------------------------------------------------

ITEM_LINE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


@dataclass
class Models:
    """Both models answer at once with valid structured output; the calls are counted per step."""

    calls: dict[str, int] = field(default_factory=lambda: {"plan": 0, "critique": 0, "digest": 0})

    def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        properties = tool.parameters_json_schema.get("properties", {})
        request = messages[0]
        assert isinstance(request, ModelRequest)
        prompt = "\n".join(
            p.content for p in request.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        )
        numbers = [int(n) for n in ITEM_LINE.findall(prompt)] or [1]
        if "assessments" in properties:
            self.calls["critique"] += 1
            verdicts = [{"number": n, "relevance": 0.8, "credibility": 0.7, "reason": "on topic"} for n in numbers]
            return ModelResponse(parts=[ToolCallPart(tool.name, {"assessments": verdicts, "contradictions": []})])
        if "headline" in properties:
            self.calls["digest"] += 1
            language = "de" if "reader's language, de" in (request.instructions or "") else "en"
            developments = [
                {"text": f"[{language}] development {i}", "citations": [n]} for i, n in enumerate(numbers[:3], 1)
            ]
            answer = {"headline": f"[{language}] what happened", "developments": developments,
                      "quality": {"completeness": 0.8, "quality": 0.7}}  # fmt: skip
            return ModelResponse(parts=[ToolCallPart(tool.name, answer)])
        self.calls["plan"] += 1
        topic = prompt.split("\n", 1)[0][-60:]
        return ModelResponse(parts=[ToolCallPart(tool.name, {"queries": [topic], "keywords": []})])


# ---- the scenarios ---------------------------------------------------------------------------------------


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now


async def open_deliveries(database: Database) -> int:
    async with database.sessions() as session:
        statement = select(func.count()).where(Delivery.status.in_([DeliveryStatus.PENDING, DeliveryStatus.FAILED]))
        return int(await session.scalar(statement) or 0)


async def delivery_counts(database: Database) -> dict[str, int]:
    async with database.sessions() as session:
        rows = await session.execute(select(Delivery.status, func.count()).group_by(Delivery.status))
        return {str(status): int(count) for status, count in rows.all()}


async def setup(service: MonitorService, database: Database, args: argparse.Namespace, *, briefings: bool) -> list[int]:
    """N chats (half of each monitor's readers in German), M monitors owned by the first M chats and shared, each chat
    subscribed to monitor i % M through the sharing service; with `briefings`, each chat's briefing at 14:00."""
    chats = ChatRepository(database)
    chat_ids = []
    for index in range(args.subscriptions):
        chat = await chats.get_or_create("telegram", str(1_000_000 + index))
        if (index // args.topics) % 2:  # each monitor's subscribers read two languages
            await chats.update(chat.id, language="de")
        chat_ids.append(chat.id)
    monitor_ids = []
    for index in range(args.topics):
        view = await service.create_monitor(chat_ids[index], f"DeepSeek {index:03d}", schedule_text="daily at 13:00",
                                            sources="hn")  # fmt: skip
        await service.sharing.share(view.id, chat_id=chat_ids[index])
        monitor_ids.append(view.id)
    for index, chat_id in enumerate(chat_ids):
        await service.sharing.subscribe(chat_id, monitor_ids[index % args.topics])
    if briefings:
        schedule = parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
        for chat_id in chat_ids:
            await service.briefings.set_briefing(chat_id, schedule)
    return monitor_ids


async def scenario(name: str, args: argparse.Namespace, fakes: multiprocessing.connection.Connection,
                   addresses: dict[str, str]) -> list[tuple[str, str]]:  # fmt: skip
    briefings = name == "briefings"
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'fanout.db'}"
        await upgrade_database(url)
        database = Database(url)
        client = HttpClient(user_agent="LookoutBench/0.1 (+https://example.org)", allow_private=True)
        hn = HackerNewsSource(client=client, config=SourcesConfig(hn_api_url=f"{addresses['algolia']}/api/v1",
                                                                   allow_private_urls=True))  # fmt: skip
        # The process's one Bot, paced by python-telegram-bot's rate limiter at `--pace` messages/s overall.
        limits = TelegramLimits(overall=args.pace, max_retries=2)
        sender = TelegramSender(build_bot(addresses["token"], api_url=addresses["telegram"], limits=limits))
        worker = DeliveryWorker(database, {"telegram": sender}, batch_size=args.batch_size,
                                concurrency=args.concurrency, poll_seconds=args.poll_seconds)  # fmt: skip
        models = Models()
        clock = Clock(RUN_AT - timedelta(hours=1))
        service = build_monitor_service(
            database,
            resolve_sources=lambda specs: [hn for _ in specs],
            light_model=FunctionModel(models.answer, model_name="light"),
            heavy_model=FunctionModel(models.answer, model_name="heavy"),
            out_dir=Path(tmp) / "exports",
            settings=MonitorSettings(min_interval_seconds=900),
            clock=clock,
            on_deliveries_queued=worker.wake,
        )
        fakes.send("reset")
        fakes.recv()
        try:
            setup_start = time.perf_counter()
            monitor_ids = await setup(service, database, args, briefings=briefings)
            setup_seconds = time.perf_counter() - setup_start

            stop = asyncio.Event()
            clock.now = RUN_AT
            start = time.perf_counter()
            delivering = asyncio.create_task(worker.run_forever(stop))
            summaries = await asyncio.gather(*(service.runs.run_monitor(mid, RUN_AT) for mid in monitor_ids))
            runs_seconds = time.perf_counter() - start
            work_done = time.monotonic()
            briefing_seconds = 0.0
            queued_briefings = 0
            if briefings:
                clock.now = BRIEFING_AT + timedelta(seconds=30)
                assembling = time.perf_counter()
                queued_briefings = len(await service.briefings.run_due())
                briefing_seconds = time.perf_counter() - assembling
                work_done = time.monotonic()
            while await open_deliveries(database):
                await asyncio.sleep(0.25)
            delivered_seconds = time.perf_counter() - start
            stop.set()
            await delivering
        finally:
            await sender.close()
            await client.aclose()
            counts = await delivery_counts(database)
            await database.dispose()
    fakes.send("stats")
    stats = fakes.recv()
    sent_at: list[float] = stats["sent_at"]
    messages = len(sent_at)
    after = [at for at in sent_at if at >= work_done]
    after_window = (after[-1] - work_done) if after else 0.0
    ceiling = messages / args.rate
    rate_after = len(after) / after_window if after_window else 0.0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    calls = models.calls
    queued = sum(s.deliveries for s in summaries if s is not None) + queued_briefings
    runs = sum(1 for s in summaries if s is not None)
    rows = [
        ("subscriptions / monitors", f"{args.subscriptions:,} / {args.topics:,}"),
        ("runs made", f"{runs:,}"),
        ("searches answered by the fake Algolia", f"{stats['searches']:,}"),
        ("model calls (plan / critique / digest)", f"{sum(calls.values()):,} ({' / '.join(map(str, calls.values()))})"),
        ("deliveries queued / sent / dead", f"{queued:,} / {counts.get('sent', 0):,} / {counts.get('dead', 0):,}"),
        ("API messages (text + CSV + chart)", f"{messages:,}"),
        ("time to run every monitor", f"{runs_seconds:.1f} s"),
        ("time to assemble and queue every briefing", f"{briefing_seconds:.1f} s" if briefings else "—"),
        ("time until everything delivered", f"{delivered_seconds:.1f} s"),
        (f"platform ceiling ({messages:,} msgs / {args.rate:g} per s)", f"{ceiling:.1f} s"),
        ("messages/s from the first message to the last", f"{(messages - 1) / (sent_at[-1] - sent_at[0]):.1f}"
         if messages > 1 and sent_at[-1] > sent_at[0] else "n/a"),
        ("messages/s once runs (and briefings) were done",
         f"{rate_after:.1f} = {rate_after / args.rate:.0%} of the ceiling ({len(after):,} msgs)"),
        ("429s answered by the fake", f"{stats['throttled']:,}"),
        ("peak RSS of Lookout's process (fakes elsewhere)", f"{rss_mib:.0f} MiB"),
        ("setup through the service (chats, shares, subscriptions)", f"{setup_seconds:.1f} s"),
    ]  # fmt: skip
    return rows


async def bench(args: argparse.Namespace) -> None:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=fakes_main, args=(child, args.rate), daemon=True)
    process.start()
    addresses = parent.recv()
    try:
        names = ["digests", "briefings"] if args.scenario == "both" else [args.scenario]
        tables = {name: await scenario(name, args, parent, addresses) for name in names}
    finally:
        parent.send("stop")
        parent.recv()
        process.join(timeout=10)
    settings = (
        f"pace={args.pace or 'off'} batch_size={args.batch_size} concurrency={args.concurrency} "
        f"poll_seconds={args.poll_seconds}"
    )
    print(f"\nfanout — {settings}; Python {platform.python_version()} on {platform.machine()}\n")
    header = " | ".join(names)
    print(f"| measure | {header} |\n|---|{'---|' * len(names)}")
    for index, (label, _) in enumerate(tables[names[0]]):
        print(f"| {label} | " + " | ".join(tables[name][index][1] for name in names) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--scenario", choices=["digests", "briefings", "both"], default="both")
    parser.add_argument("--rate", type=float, default=30.0, help="the fake platform's overall ceiling, msg/s")
    parser.add_argument("--pace", type=float, default=30.0, help="the Bot's rate limiter, msg/s overall (0: off)")
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.topics < 1 or args.subscriptions < args.topics:
        parser.error("need at least one topic and at least as many subscriptions as topics")
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
