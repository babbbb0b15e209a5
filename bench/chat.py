"""Benchmark chat throughput: C concurrent chats × M messages through the real Telegram frontend, Lookout alone.

Two processes, so the fake's CPU and GIL are not Lookout's:
- the fake's process: `tests.fakes.telegram.FakeTelegram` (the Bot API, no rate ceiling) and the people who
  write to the bot. Latency is measured there, on one clock: from the moment getUpdates handed an update to
  the bot to the moment the answer's sendMessage arrived;
- Lookout's process (this one): the real `TelegramFrontend` (python-telegram-bot, long polling), `Dispatcher`,
  `Conversation` (`CommandRouter` + `ChatAgent`: memory, budget, usage) and `ReplySender`, built through the
  app's composition root. The model is a pydantic-ai `FunctionModel` that answers at once (and counts its
  calls, summaries apart). Lookout's CPU time and peak RSS are this process's own.

Several web processes (`--web-processes 1,2`): Lookout instead runs as N processes of its own, each built as
`lookout run --role web` builds itself with JOB_QUEUE=procrastinate (the composition root with PostgreSQL advisory
locks per conversation and Telegram's limits kept in the database) serving the webhook route, with the instant model.
The fake delivers updates to the webhook as Telegram's Bot API server does (`FakeTelegram.deliver_to_webhook`: one
update of a chat at a time, the next after a 2xx answer; chats in parallel up to setWebhook's max_connections) and
posts each one to the next process in turn, standing for the round-robin balancer (nginx, HAProxy) a deployment puts
in front of them: a balancer process of the bench's own would take CPU from the two cores Lookout is measured on, and
per-request round robin is what makes a chat's consecutive messages land on different processes. Latency then starts
when an update's POST began. Each process reports its own CPU time and peak RSS; PostgreSQL's server CPU is read
from /proc.

Runs, each on SQLite and (with `--postgres-url`, or TEST_DATABASE_URL set) on a throwaway PostgreSQL database:
- closed loop, free text: each chat sends its next message when the answer to the previous one arrived;
- closed loop, commands: the same with `/help` and `/monitors` (no model);
- paced (optional, `--paced 50,100`): open loop at each offered rate, each chat writing on a clock whether
  answered or not: latency at a load below capacity (a closed loop's latency is chats ÷ throughput);
- burst (optional, `--burst`): every chat's messages queued at once.

Every run checks that each chat got exactly one answer per message, in order (none lost, none duplicated), and
counts the garbage collector's collections and their CPU time in Lookout's process. Lookout's process tunes the
collector as `lookout run` does once assembled (`app.heap`); `--default-gc` keeps CPython's defaults (the A/B).

Run: uv run python bench/chat.py [--chats 50] [--messages 30] [--memory-turns 10] [--commands 10]
                                  [--paced RATES] [--burst] [--databases sqlite,postgresql] [--postgres-url URL]
                                  [--profile FILE] [--profile-commands FILE] [--default-gc]
                                  [--postgres-delay-ms MS] [--web-processes COUNTS]

`--postgres-delay-ms` puts PostgreSQL across a network: Lookout reaches it through `tests.fakes.postgres_proxy` in
a process of its own, every answer held back that long (the round trip time it adds is measured and printed).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

import yappi
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bench.fake_process import free_port

FIRST_CHAT = 10_000
SUMMARY_MARK = "You keep the memory of a chat"
"""Words of the summariser's instructions: how the scripted model tells a summary call from a chat call."""


# ---- the fake's process ---------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the people saw in one run (sent back to Lookout's process)."""

    latencies: list[float] = field(default_factory=list)
    from_sent: list[float] = field(default_factory=list)
    """Latencies from the moment the person wrote (in a burst through a webhook, an update waits at Telegram until
    the chat's previous one was accepted: `latencies` start when its POST began)."""
    seconds: float = 0.0
    sent: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    unexpected: list[str] = field(default_factory=list)
    """Answers that are not the expected echo (an error reply, for one)."""
    fake_cpu_seconds: float = 0.0
    """CPU time of the fake's process (Bot API and people) during the run: when it nears the wall time, the fake
    (not Lookout) bounds the throughput."""


def fake_process(conn: Connection, long_poll_cap: float) -> None:
    """Run the fake Bot API and the people until told to stop."""
    from tests.fakes.telegram import FakeTelegram

    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    fake = FakeTelegram(long_poll_cap=long_poll_cap)
    fake.start()
    conn.send({"token": fake.token, "url": fake.url})
    while True:
        request = conn.recv()
        if request["op"] == "stop":
            break
        if request["op"] == "webhook":  # from now on updates are POSTed to the web processes, in turn
            fake.deliver_to_webhook(request["upstreams"])
            conn.send({"delivering": True})
            continue
        conn.send(asyncio.run(_people(fake, **request)))
    refused = Counter(
        str(post.status or post.error) for post in fake.webhook_posts if not 200 <= (post.status or 0) <= 299
    )
    conn.send(
        {
            "api_calls": len(fake.calls),
            "typing": len(fake.calls_to("sendChatAction")),
            "webhook_posts": len(fake.webhook_posts),
            "webhook_refused": refused,
        }
    )
    fake.stop()


def delayed_postgres_process(conn: Connection, admin_url: str, delay: float) -> None:
    """Run a PostgreSQL proxy holding back every answer by `delay` seconds until told to stop; sends its URL, then
    for each "count" asked (and at the stop) the round trips it carried so far and how often each statement's text
    was sent."""
    from tests.fakes.postgres_proxy import postgres_proxy

    async def serve() -> None:
        async with postgres_proxy(admin_url, delay=delay) as proxy:
            conn.send(proxy.url)
            while True:
                request = await asyncio.to_thread(conn.recv)
                conn.send((proxy.round_trips, Counter(" ".join(query.split()) for query in proxy.executed)))
                if request == "stop":
                    break

    asyncio.run(serve())


async def round_trip_ms(url: str, count: int = 200) -> tuple[float, float]:
    """The median round trip of an empty query on one connection to `url`, and its 99th percentile (ms)."""
    import asyncpg

    parsed = make_url(url)
    raw = parsed.set(drivername="postgresql", query={})  # the proxy's `ssl=disable` is SQLAlchemy's spelling
    connection = await asyncpg.connect(raw.render_as_string(hide_password=False), ssl=False)
    try:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            await connection.fetchrow(";")
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await connection.close()
    return percentile(times, 0.5), percentile(times, 0.99)


async def _people(
    fake: Any,
    *,
    op: str,
    chats: int,
    messages: int,
    texts: Sequence[str],
    tag: str,
    timeout: float,
    rate: float = 0.0,
) -> Outcome:
    """Each chat writes `messages` messages (cycling through `texts`, numbered): closed loop, all at once, or
    paced (open loop: `rate` messages per second over all chats, each chat at an even interval, answered or not)."""
    loop = asyncio.get_running_loop()
    arrived: dict[str, list[Any]] = {}
    wake: dict[str, asyncio.Event] = {}
    chat_ids = [str(FIRST_CHAT + chat) for chat in range(chats)]
    before = {chat_id: len(fake.texts(chat_id)) for chat_id in chat_ids}

    def store(sent: Any) -> None:
        if sent.chat_id in wake:
            arrived.setdefault(sent.chat_id, []).append(sent)
            wake[sent.chat_id].set()

    def on_message(sent: Any) -> None:  # on the fake's thread
        if sent.kind == "text":
            loop.call_soon_threadsafe(store, sent)

    for chat_id in chat_ids:
        wake[chat_id] = asyncio.Event()
    fake.on_message(on_message)
    sent_ids: dict[str, list[int]] = {chat_id: [] for chat_id in chat_ids}
    pushed_at: dict[int, float] = {}

    def push(chat_id: str, text: str) -> int:
        at = time.monotonic()
        update_id: int = fake.push_text(int(chat_id), text)
        pushed_at[update_id] = at
        return update_id

    def text_for(n: int) -> str:
        base = texts[n % len(texts)]
        return f"{base}" if base.startswith("/") else f"{base} {tag} {n}"

    async def wait_for(chat_id: str, count: int, deadline: float) -> bool:
        while len(arrived.get(chat_id, [])) < count:
            wake[chat_id].clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(wake[chat_id].wait(), left)
            except TimeoutError:
                return False
        return True

    async def person(chat_id: str) -> None:
        deadline = time.monotonic() + timeout
        for n in range(messages):
            sent_ids[chat_id].append(push(chat_id, text_for(n)))
            if not await wait_for(chat_id, n + 1, deadline):
                return

    start = time.monotonic()
    fake_cpu = time.process_time()

    async def paced(index: int, chat_id: str) -> None:
        interval = chats / rate  # each chat writes every `interval` s; chats start staggered by 1/rate
        for n in range(messages):
            await asyncio.sleep(max(0.0, start + index / rate + n * interval - time.monotonic()))
            sent_ids[chat_id].append(push(chat_id, text_for(n)))
        await wait_for(chat_id, messages, start + timeout)

    if op == "closed":
        await asyncio.gather(*(person(chat_id) for chat_id in chat_ids))
    elif op == "paced":
        await asyncio.gather(*(paced(index, chat_id) for index, chat_id in enumerate(chat_ids)))
    else:
        for n in range(messages):
            for chat_id in chat_ids:
                sent_ids[chat_id].append(push(chat_id, text_for(n)))
        deadline = start + timeout
        await asyncio.gather(*(wait_for(chat_id, messages, deadline) for chat_id in chat_ids))
    outcome = Outcome(seconds=time.monotonic() - start, fake_cpu_seconds=time.process_time() - fake_cpu)
    await asyncio.sleep(0.5)  # a duplicate answer would arrive in this time
    fake._listeners.remove(on_message)
    for chat_id in chat_ids:
        answers = arrived.get(chat_id, [])
        ids = sent_ids[chat_id]
        outcome.sent += len(ids)
        outcome.answered += min(len(answers), len(ids))
        outcome.lost += max(0, len(ids) - len(answers))
        outcome.duplicated += max(0, len(answers) - len(ids))
        free_text = [a for a in answers if (a.text or "").startswith("echo: ")]
        if not texts[0].startswith("/"):
            outcome.unexpected += [a.text or "" for a in answers if not (a.text or "").startswith("echo: ")]
        numbers = [int((a.text or "").rsplit(" ", 1)[1]) for a in free_text]
        outcome.out_of_order += sum(1 for i, number in enumerate(numbers) if number != i)
        for update_id, answer in zip(ids, answers, strict=False):
            outcome.latencies.append(answer.at - fake.served_at[update_id])
            outcome.from_sent.append(answer.at - pushed_at[update_id])
    assert all(len(fake.texts(c)) - before[c] == len(arrived.get(c, [])) for c in chat_ids)
    return outcome


# ---- Lookout's process ----------------------------------------------------------------------------------------


class InstantModel:
    """A FunctionModel that echoes the newest thing the person said, counting chat and summary calls."""

    def __init__(self) -> None:
        self.chat_calls = 0
        self.summary_calls = 0
        self.model = FunctionModel(self._answer, model_name="instant")

    async def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # async, as a real model client is: pydantic-ai runs a plain function in a worker thread
        if SUMMARY_MARK in (info.instructions or ""):
            self.summary_calls += 1
            return ModelResponse(parts=[TextPart("The person tested the bot with numbered messages.")])
        self.chat_calls += 1
        for message in reversed(messages):
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                        return ModelResponse(parts=[TextPart(f"echo: {part.content}")])
        return ModelResponse(parts=[TextPart("echo: ?")])

    @property
    def calls(self) -> int:
        return self.chat_calls + self.summary_calls


@asynccontextmanager
async def throwaway_postgres(admin_url: str) -> AsyncIterator[str]:
    """An empty PostgreSQL database for one bench run, dropped afterwards."""
    from storage import Database

    name = f"lookout_bench_{uuid.uuid4().hex[:10]}"

    async def admin(statement: str) -> None:
        database = Database(admin_url)
        try:
            async with database.engine.connect() as connection:
                connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text(statement))
        finally:
            await database.dispose()

    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def lookout(
    url: str,
    fake: dict[str, str],
    model: InstantModel,
    memory_turns: int,
    tmp: Path,
    flood_ceiling: float,
    *,
    tune_gc: bool = True,
) -> AsyncIterator[Any]:
    """Lookout's Telegram side on `url`, built through the composition root as `lookout run` builds it
    (`app.service.assemble`: monitor stack, services, dispatcher, frontends), with the instant model as the
    process's model set."""
    from app.heap import tune_garbage_collector
    from app.service import assemble
    from app.settings import load_settings
    from app.wiring import open_database
    from research import ModelSet

    settings = load_settings(
        database_url=url,
        data_dir=tmp / "data",
        telegram_bot_token=fake["token"],
        telegram_api_url=fake["url"],
        memory_turns=memory_turns,
        telegram_max_messages=flood_ceiling,
    )
    async with (
        open_database(settings) as database,
        assemble(settings, database, models=ModelSet.of(model.model, None)) as process,
    ):
        if tune_gc:  # as `lookout run` does once assembled
            tune_garbage_collector()
        telegram = process.frontends.running["telegram"]
        await telegram.start()
        try:
            yield process.dispatcher
        finally:
            await telegram.stop()
            await process.dispatcher.finish_background()


@dataclass
class CollectorClock:
    """Collections of CPython's cyclic garbage collector in Lookout's process, and the CPU time they took, by
    generation (through `gc.callbacks`; CPU time of the collecting thread, which holds the GIL meanwhile)."""

    counts: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    _started: float = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            generation = info["generation"]
            self.counts[generation] += 1
            self.seconds[generation] += time.thread_time() - self._started

    def reset(self) -> None:
        self.counts, self.seconds = [0, 0, 0], [0.0, 0.0, 0.0]

    def line(self) -> str:
        """Collections by generation, and their time, since the last reset."""
        return ", ".join(
            f"{count:,} ({seconds * 1000:,.0f} ms CPU)"
            for count, seconds in zip(self.counts, self.seconds, strict=True)
        )


COLLECTOR = CollectorClock()


@dataclass
class Row:
    """One line of the results table."""

    database: str
    run: str
    outcome: Outcome
    cpu_seconds: float
    model_calls: int
    summary_calls: int
    collections: str
    mode: str = "1 process, long polling"
    process_cpu: list[float] = field(default_factory=list)
    """CPU seconds of each Lookout process during the run."""
    rss_mib: list[float] = field(default_factory=list)
    """Peak RSS of each Lookout process so far."""
    load_before: float = 0.0
    postgres_cpu: float | None = None
    """CPU seconds of PostgreSQL's server processes during the run (PostgreSQL runs only)."""
    round_trips: int | None = None
    """Round trips to PostgreSQL during the run, counted by the --postgres-delay-ms proxy (None without it)."""
    statements: Counter[str] = field(default_factory=Counter)
    """How often each statement's text went through that proxy during the run."""


PROFILE_ENTRIES = (
    # where a turn's CPU goes, by the entry points of each stage (inclusive CPU time; they nest: see the rows)
    ("receive: getUpdates and Update.de_json", "Updater._start_polling"),
    ("receive: Application hands the update on", "Application.process_update"),
    ("dispatch: whole turn (lock, turn, deliver)", "Dispatcher.dispatch"),
    ("dispatch: TurnRepository.begin (the read)", "TurnRepository.begin"),
    ("conversation: Conversation.respond", "Conversation.respond"),
    ("agent: ChatAgent._reply", "ChatAgent._reply"),
    ("agent: pydantic-ai Agent.run", "AbstractAgent.run"),
    ("agent: memory decode", "ConversationMemory.__init__"),
    ("agent: memory encode", "ConversationMemory.encode_after"),
    ("agent: TurnRepository.finish (the write)", "TurnRepository.finish"),
    ("agent: memory fold (background)", "ChatAgent._fold"),
    ("commands: CommandRouter", "CommandRouter.respond"),
    ("send: TelegramSender.send_replies", "TelegramSender.send_replies"),
    ("send: markdown to Telegram HTML", "markdown_to_telegram_html"),
    ("typing: TypingIndicators._keep_typing", "TypingIndicators._keep_typing"),
    ("Bot API: every call (ExtBot._do_post)", "ExtBot._do_post"),
    ("Bot API: aiohttp request", "AiohttpRequest.do_request"),
    ("Bot API: rate limiter", "AIORateLimiter.process_request"),
    ("storage: Database.write (SQLite writer thread)", "Database.write"),
    ("storage: asyncpg, every statement (PostgreSQL)", "AsyncAdapt_asyncpg_cursor._prepare_and_execute"),
    ("storage: pool pre-ping (PostgreSQL)", "PGDialect_asyncpg.do_ping"),
    ("web: the webhook request (Starlette, PTB's Update.de_json)", "TelegramFrontend._webhook"),
    ("web: uvicorn, each HTTP request", "RequestResponseCycle.run_asgi"),
    ("web: the conversation's advisory lock (connect, lock, unlock)", "AdvisoryLocks.hold"),
    ("web: Bot API limits kept in the database (every call)", "SharedRateLimiter.process_request"),
    ("web: one rate slot reserved (a statement)", "RateSlotRepository.reserve"),
)


def write_profile(path: Path, label: str, *, messages: int) -> None:
    """The yappi profile of one run: CPU per message by stage, then the functions with the most own CPU time."""
    stats = yappi.get_func_stats()
    by_name: dict[str, float] = {}
    for stat in stats:
        by_name[stat.name] = max(by_name.get(stat.name, 0.0), stat.ttot)
    threads = sorted(yappi.get_thread_stats(), key=lambda t: -t.ttot)
    total = sum(t.ttot for t in threads)
    lines = [
        f"# {label}: yappi, CPU clock, all threads; {messages:,} messages; {total:.1f} s of CPU",
        "",
        "## CPU per message by stage (inclusive; stages nest)",
        "",
        "| stage | entry point | CPU ms per message |",
        "|---|---|---|",
    ]
    for stage, name in PROFILE_ENTRIES:
        if name in by_name:
            lines.append(f"| {stage} | `{name}` | {by_name[name] * 1000 / messages:.2f} |")
    lines += ["", "## threads", "", "| thread | CPU s |", "|---|---|"]
    lines += [f"| {t.name} | {t.ttot:.2f} |" for t in threads[:8]]
    lines += ["", "## own CPU time (top 60)", "", "| function | calls | own ms/msg | incl. ms/msg | module |"]
    lines += ["|---|---|---|---|---|"]
    stats.sort("tsub", "desc")
    for stat in list(stats)[:60]:
        module = stat.module.split("site-packages/")[-1].split("python3.11/")[-1]
        lines.append(
            f"| `{stat.name}` | {stat.ncall:,} | {stat.tsub * 1000 / messages:.3f} "
            f"| {stat.ttot * 1000 / messages:.3f} | {module}:{stat.lineno} |"
        )
    path.write_text("\n".join(lines) + "\n")


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def drive(conn: Connection, **request: Any) -> Outcome:
    conn.send(request)
    return await asyncio.to_thread(conn.recv)


@dataclass
class Counters:
    """Lookout's side so far: CPU seconds and peak RSS (MiB) of each of its processes, and the model's calls."""

    cpu: list[float]
    rss_mib: list[float]
    model_calls: int
    summary_calls: int


class LookoutSide:
    """Lookout in this process (long polling, as the bench always ran it)."""

    label = "1 process, long polling"
    in_process = True

    def __init__(self, model: InstantModel) -> None:
        self.model = model

    async def counters(self) -> Counters:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return Counters([time.process_time()], [rss], self.model.calls, self.model.summary_calls)


async def bench_database(
    name: str, url: str, fake: dict[str, str], conn: Connection, args: argparse.Namespace
) -> list[Row]:
    model = InstantModel()
    with tempfile.TemporaryDirectory() as tmp:
        async with lookout(
            url, fake, model, args.memory_turns, Path(tmp), args.telegram_max_messages, tune_gc=not args.default_gc
        ):
            return await run_suite(name, LookoutSide(model), conn, args)


async def proxy_counts(args: argparse.Namespace) -> tuple[int, Counter[str]] | None:
    """The delaying proxy's round trips and statements so far (None when PostgreSQL is reached directly)."""
    proxy: Connection | None = getattr(args, "proxy_conn", None)
    if proxy is None:
        return None
    proxy.send("count")
    counts: tuple[int, Counter[str]] = await asyncio.to_thread(proxy.recv)
    return counts


async def run_suite(name: str, side: Any, conn: Connection, args: argparse.Namespace) -> list[Row]:
    """The runs (warm-up, free text, commands, paced, burst) against one Lookout side (`LookoutSide` or
    `WebProcesses`)."""
    rows: list[Row] = []
    timeout = 600.0

    async def run(
        label: str,
        op: str,
        texts: Sequence[str],
        messages: int,
        tag: str,
        profile: str | None = None,
        rate: float = 0.0,
        *,
        free_text_run: bool = False,
    ) -> None:
        profiling = bool(profile) and name == args.profile_database and side.in_process
        if profiling:
            yappi.clear_stats()
            yappi.set_clock_type("cpu")
            yappi.start(builtins=True, profile_threads=True)
        web_profile = args.profile_web if not side.in_process and free_text_run else None
        if web_profile:  # the first web process profiles itself; messages spread over all of them
            side.pipes[0].send("profile")
            await asyncio.to_thread(side.pipes[0].recv)
        load = os.getloadavg()[0]
        before = await side.counters()
        postgres_before = postgres_cpu_seconds() if name == "postgresql" else None
        proxy_before = await proxy_counts(args)
        COLLECTOR.reset()
        outcome = await drive(
            conn,
            op=op,
            chats=args.chats,
            messages=messages,
            texts=list(texts),
            tag=tag,
            timeout=timeout,
            rate=rate,
        )
        await asyncio.sleep(0.2)  # folds started by the last answers finish (their calls count)
        if profiling and profile:
            yappi.stop()
            write_profile(Path(profile), label, messages=args.chats * messages)
        if web_profile:
            share = args.chats * messages // len(side.pipes)
            side.pipes[0].send(("profiled", web_profile, f"{label}, web process 1 of {len(side.pipes)}", share))
            await asyncio.to_thread(side.pipes[0].recv)
        after = await side.counters()
        postgres_after = postgres_cpu_seconds() if name == "postgresql" else None
        proxy_after = await proxy_counts(args)
        process_cpu = [b - a for a, b in zip(before.cpu, after.cpu, strict=True)]
        rows.append(
            Row(
                database=name,
                run=label,
                outcome=outcome,
                cpu_seconds=sum(process_cpu),
                model_calls=after.model_calls - before.model_calls,
                summary_calls=after.summary_calls - before.summary_calls,
                collections=COLLECTOR.line() if side.in_process else "(in the web processes: not counted)",
                mode=side.label,
                process_cpu=process_cpu,
                rss_mib=after.rss_mib,
                load_before=load,
                postgres_cpu=(
                    postgres_after - postgres_before
                    if postgres_after is not None and postgres_before is not None
                    else None
                ),
                round_trips=proxy_after[0] - proxy_before[0] if proxy_after and proxy_before else None,
                statements=proxy_after[1] - proxy_before[1] if proxy_after and proxy_before else Counter(),
            )
        )

    # warm-up: imports, connection pools, the first statements of each kind
    await drive(conn, op="closed", chats=args.chats, messages=2, texts=["warm up", "/help"], tag="w", timeout=60)
    await run(
        f"closed loop, free text: {args.chats} chats × {args.messages}",
        "closed",
        ["hello"],
        args.messages,
        "closed",
        profile=args.profile,
        free_text_run=True,
    )
    if args.commands:
        await run(
            f"closed loop, /help and /monitors: {args.chats} chats × {args.commands}",
            "closed",
            ["/help", "/monitors"],
            args.commands,
            "commands",
            profile=args.profile_commands,
        )
    for rate in args.paced:
        await run(
            f"paced (open loop), free text: {rate:g} msg/s over {args.chats} chats × {args.messages}",
            "paced",
            ["hello"],
            args.messages,
            f"paced{rate:g}",
            rate=rate,
        )
        if args.commands:
            await run(
                f"paced (open loop), /help and /monitors: {rate:g} msg/s over {args.chats} chats × {args.commands}",
                "paced",
                ["/help", "/monitors"],
                args.commands,
                f"pacedc{rate:g}",
                rate=rate,
            )
    if args.burst:
        await run(
            f"burst, free text: {args.chats * args.messages} queued at once",
            "burst",
            ["hello"],
            args.messages,
            "burst",
        )
    return rows


# ---- Lookout as several web processes behind a balancer (Telegram webhook, PostgreSQL) -------------------------

WEBHOOK_URL = "https://lookout.example/telegram/webhook"
"""TELEGRAM_WEBHOOK_URL of the web processes: the balancer's public address (the fake posts to the upstreams)."""
WEBHOOK_SECRET = "bench-webhook-secret"
RATE_PERIOD = 0.001
"""TELEGRAM_RATE_PERIOD of the web processes (see `_serve_web`)."""


def web_process(conn: Connection, url: str, fake: dict[str, str], port: int, options: dict[str, Any]) -> None:
    """One Lookout web process (spawned): serves the webhook on `port` until told to stop."""
    logging.basicConfig(level=logging.WARNING)
    gc.callbacks.append(COLLECTOR)
    asyncio.run(_serve_web(conn, url, fake, port, options))


async def _serve_web(conn: Connection, url: str, fake: dict[str, str], port: int, options: dict[str, Any]) -> None:
    """Built as `lookout run --role web` builds itself on PostgreSQL (`app.service._run_scaled`: the composition
    root with advisory locks shared by every process, the Telegram limits kept in the database, the webhook route
    on the HTTP server), with the instant model as the process's model set. No job queue: the bench sends no
    digests."""
    from app.heap import tune_garbage_collector
    from app.http_server import build_http_app, serve_http
    from app.service import assemble
    from app.settings import load_settings
    from app.wiring import open_database
    from research import ModelSet
    from storage import AdvisoryLocks

    settings = load_settings(
        database_url=url,
        data_dir=Path(options["data_dir"]),
        telegram_bot_token=fake["token"],
        telegram_api_url=fake["url"],
        telegram_webhook_url=WEBHOOK_URL,
        telegram_webhook_secret=WEBHOOK_SECRET,
        job_queue="procrastinate",
        memory_turns=options["memory_turns"],
        # The limits kept in the database (`SharedRateLimiter`) also pace each private chat to one message per
        # TELEGRAM_RATE_PERIOD (a burst of three), as Telegram asks; people here write again the instant they are
        # answered, so that pace, not Lookout, would bound the closed loop. A 1 ms period lifts it (the overall
        # ceiling stays the one asked for); every call still reserves its slots in the database.
        telegram_rate_period=RATE_PERIOD,
        telegram_max_messages=options["flood_ceiling"] * RATE_PERIOD,
        http_host="127.0.0.1",
        http_port=port,
    )
    model = InstantModel()
    locks = AdvisoryLocks(settings.database_url)
    stop = asyncio.Event()
    try:
        async with (
            open_database(settings) as database,
            assemble(settings, database, models=ModelSet.of(model.model, None), shared_locks=locks) as process,
        ):
            if options["tune_gc"]:
                tune_garbage_collector()
            telegram = process.frontends.running["telegram"]
            await telegram.start()
            app = build_http_app(checks={}, routes=process.frontends.routes)
            serving = asyncio.create_task(serve_http(app, host="127.0.0.1", port=port, stop=stop))
            while True:  # listening once a connection is accepted
                try:
                    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                break
            conn.send({"ready": os.getpid()})
            while (request := await asyncio.to_thread(conn.recv)) != "stop":
                if request == "counters":
                    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                    conn.send(Counters([time.process_time()], [rss], model.calls, model.summary_calls))
                elif request == "profile":
                    yappi.clear_stats()
                    yappi.set_clock_type("cpu")
                    yappi.start(builtins=True, profile_threads=True)
                    conn.send("profiling")
                else:  # ("profiled", path, label, messages)
                    _, path, label, messages = request
                    yappi.stop()
                    write_profile(Path(path), label, messages=messages)
                    conn.send("written")
            stop.set()
            await serving
            await telegram.stop()
            await process.dispatcher.finish_background()
    finally:
        await locks.dispose()
    conn.send("stopped")


class WebProcesses:
    """N web processes (`web_process`), asked for their counters through a pipe each."""

    in_process = False

    def __init__(self, pipes: list[Connection]) -> None:
        self.pipes = pipes
        self.label = f"{len(pipes)} web process{'es' if len(pipes) > 1 else ''}, webhook"

    async def counters(self) -> Counters:
        total = Counters([], [], 0, 0)
        for pipe in self.pipes:
            pipe.send("counters")
            one: Counters = await asyncio.to_thread(pipe.recv)
            total.cpu += one.cpu
            total.rss_mib += one.rss_mib
            total.model_calls += one.model_calls
            total.summary_calls += one.summary_calls
        return total


async def bench_web_processes(
    url: str, fake: dict[str, str], conn: Connection, args: argparse.Namespace, count: int
) -> list[Row]:
    """Lookout as `count` web processes on PostgreSQL; the fake posts each update to them in turn."""
    context = multiprocessing.get_context("spawn")
    processes: list[Any] = []
    pipes: list[Connection] = []
    ports: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        options = {
            "data_dir": str(Path(tmp) / "data"),
            "memory_turns": args.memory_turns,
            "flood_ceiling": args.telegram_max_messages,
            "tune_gc": not args.default_gc,
        }
        try:
            for index in range(count):
                ours, theirs = context.Pipe()
                port = free_port()
                process = context.Process(
                    target=web_process, args=(theirs, url, fake, port, options), name=f"lookout-web-{index + 1}"
                )
                process.start()
                processes.append(process)
                pipes.append(ours)
                ports.append(port)
            for pipe in pipes:
                if not await asyncio.to_thread(pipe.poll, 180):
                    raise SystemExit("a web process did not start within 3 minutes")
                await asyncio.to_thread(pipe.recv)
            conn.send({"op": "webhook", "upstreams": [f"http://127.0.0.1:{port}/telegram/webhook" for port in ports]})
            await asyncio.to_thread(conn.recv)
            return await run_suite("postgresql", WebProcesses(pipes), conn, args)
        finally:
            for pipe, process in zip(pipes, processes, strict=False):
                if process.is_alive():
                    pipe.send("stop")
            for pipe, process in zip(pipes, processes, strict=False):
                if await asyncio.to_thread(pipe.poll, 60):
                    pipe.recv()
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()


def postgres_cpu_seconds() -> float | None:
    """CPU seconds PostgreSQL's server processes used so far, on this machine (/proc): every live `postgres`
    process, plus what the postmaster's ended children (backends of closed connections) used. Other sessions'
    databases on the same server count too. None when /proc cannot tell."""
    processes: dict[str, tuple[str, list[str]]] = {}  # pid → (name, the fields after the name)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            processes[entry.name] = (stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split())
    ticks = 0
    found = False
    for name, fields in processes.values():
        if not name.startswith("postgres"):
            continue
        found = True
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        parent = processes.get(fields[1])
        if parent is None or not parent[0].startswith("postgres"):  # the postmaster: its ended children too
            ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK") if found else None


async def bench(args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    fake_proc = context.Process(target=fake_process, args=(child_conn, 1.0), name="fake-telegram", daemon=True)
    fake_proc.start()
    fake = conn.recv()
    rows: list[Row] = []
    databases: list[tuple[str, str | None]] = []
    if "sqlite" in args.databases:
        databases.append(("sqlite", None))
    if ("postgresql" in args.databases or args.web_processes) and not args.postgres_url:
        raise SystemExit("PostgreSQL needs --postgres-url or TEST_DATABASE_URL")
    if "postgresql" in args.databases:
        databases.append(("postgresql", args.postgres_url))
    delayed: Any = None
    if args.postgres_delay_ms and ("postgresql" in args.databases or args.web_processes):
        delayed_conn, delayed_child = context.Pipe()
        delayed = context.Process(
            target=delayed_postgres_process,
            args=(delayed_child, args.postgres_url, args.postgres_delay_ms / 1000),
            name="postgres-delay",
            daemon=True,
        )
        delayed.start()
        proxied = delayed_conn.recv()
        direct_rtt, proxied_rtt = await round_trip_ms(args.postgres_url), await round_trip_ms(proxied)
        databases = [(name, proxied if name == "postgresql" else url) for name, url in databases]
        args.postgres_url, args.proxy_conn = proxied, delayed_conn  # the web processes' database too
        print(
            f"PostgreSQL through a proxy holding answers {args.postgres_delay_ms:g} ms: round trip p50 / p99 "
            f"{proxied_rtt[0]:.2f} / {proxied_rtt[1]:.2f} ms (direct {direct_rtt[0]:.2f} / {direct_rtt[1]:.2f} ms)"
        )
    try:
        for name, admin_url in databases:
            if admin_url is None:
                with tempfile.TemporaryDirectory() as tmp:
                    url = f"sqlite+aiosqlite:///{Path(tmp) / 'lookout.db'}"
                    rows += await bench_database(name, url, fake, conn, args)
            else:
                async with throwaway_postgres(admin_url) as url:
                    rows += await bench_database(name, url, fake, conn, args)
        for count in args.web_processes:  # after the long-polling runs: from here on the fake posts to webhooks
            async with throwaway_postgres(args.postgres_url) as url:
                rows += await bench_web_processes(url, fake, conn, args, count)
    finally:
        conn.send({"op": "stop"})
        totals = conn.recv()
        fake_proc.join(timeout=10)
        if delayed is not None:
            delayed_conn.send("stop")
            round_trips, _ = delayed_conn.recv()
            delayed.join(timeout=10)
            messages = sum(row.outcome.sent for row in rows if row.database == "postgresql")
            messages += 2 * args.chats  # the warm-up
            print(
                f"round trips through the proxy: {round_trips:,} for {messages:,} messages "
                "(creating and migrating the database included: take the difference of two runs)"
            )
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load = os.getloadavg()
    print(
        f"\nchat — Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"instant scripted model, MEMORY_TURNS={args.memory_turns}, event loop "
        f"{type(asyncio.get_running_loop()).__module__}; load average before/after: "
        f"{args.load_before[0]:.2f} / {load[0]:.2f}\n"
    )
    print(
        "| database | run | messages | wall | msg/s | p50 | p99 | max | Lookout CPU/msg | fake's CPU/msg "
        "| model calls/msg (summaries) | lost / dup / out of order |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        outcome = row.outcome
        count = outcome.sent or 1
        database = row.database if row.mode == LookoutSide.label else f"{row.database}, {row.mode}"
        print(
            f"| {database} | {row.run} | {outcome.sent:,} | {outcome.seconds:.1f} s "
            f"| {outcome.answered / outcome.seconds:.0f} "
            f"| {percentile(outcome.latencies, 0.5) * 1000:.0f} ms "
            f"| {percentile(outcome.latencies, 0.99) * 1000:.0f} ms "
            f"| {max(outcome.latencies, default=float('nan')) * 1000:.0f} ms "
            f"| {row.cpu_seconds * 1000 / count:.1f} ms | {outcome.fake_cpu_seconds * 1000 / count:.1f} ms "
            f"| {row.model_calls / count:.2f} ({row.summary_calls}) "
            f"| {outcome.lost} / {outcome.duplicated} / {outcome.out_of_order} |"
        )
    for row in rows:
        if row.outcome.unexpected:
            print(f"\n{row.database}, {row.run}: {len(row.outcome.unexpected)} unexpected answers, e.g.")
            for text in sorted(set(row.outcome.unexpected))[:5]:
                print(f"  {text[:160]!r}")
    print(
        "\nWhere the CPU went, per run: each Lookout process's CPU per message and its share of one core (CPU s ÷ "
        "wall s), the fake's (Bot API and people, one process) and PostgreSQL's server processes' (every database "
        "on the server: other sessions' work counts too); latency also from the moment the person wrote.\n"
    )
    print(
        "| Lookout | run | load before | Lookout CPU/msg, all processes | per process: CPU/msg (share of a core) "
        "| fake: CPU/msg (share) | PostgreSQL: CPU/msg (share) | peak RSS per process | p50 / p99 from the person's "
        "message |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        outcome = row.outcome
        count, wall = outcome.sent or 1, outcome.seconds or 1.0
        each = ", ".join(f"{cpu * 1000 / count:.1f} ms ({cpu / wall:.0%})" for cpu in row.process_cpu)
        postgres = (
            "–"
            if row.postgres_cpu is None
            else f"{row.postgres_cpu * 1000 / count:.1f} ms ({row.postgres_cpu / wall:.0%})"
        )
        print(
            f"| {row.database}, {row.mode} | {row.run} | {row.load_before:.2f} "
            f"| {row.cpu_seconds * 1000 / count:.1f} ms "
            f"| {each} | {outcome.fake_cpu_seconds * 1000 / count:.1f} ms ({outcome.fake_cpu_seconds / wall:.0%}) "
            f"| {postgres} | {', '.join(f'{rss:.0f} MiB' for rss in row.rss_mib)} "
            f"| {percentile(outcome.from_sent, 0.5) * 1000:.0f} / {percentile(outcome.from_sent, 0.99) * 1000:.0f} ms |"
        )
    for row in rows:
        if row.round_trips is None:
            continue
        count = row.outcome.sent or 1
        print(
            f"\nround trips to PostgreSQL, {row.database}, {row.mode}, {row.run}: {row.round_trips / count:.2f} per "
            f"message ({row.round_trips:,}); statements run per message:"
        )
        for statement, times in row.statements.most_common(12):
            print(f"  {times / count:6.2f}  {statement[:150]}")
    print(f"\npeak RSS of this process (Lookout's, in long-polling runs): {rss_mib:.0f} MiB")
    print(f"\ngarbage collections in Lookout's process (thresholds {gc.get_threshold()}), generations 0 / 1 / 2:")
    for row in rows:
        print(f"- {row.database}, {row.run}: {row.collections}")
    print(f"Bot API calls answered by the fake: {totals['api_calls']:,} ({totals['typing']:,} typing)")
    if totals["webhook_posts"]:
        print(
            f"Updates POSTed to the webhooks: {totals['webhook_posts']:,}, of which refused or failed (sent again): "
            f"{sum(totals['webhook_refused'].values()):,} {dict(totals['webhook_refused'])}"
        )


T = TypeVar("T")


def _comma_separated(convert: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse type: "1,2" → [convert("1"), convert("2")] (empty parts skipped)."""
    return lambda value: [convert(part) for part in value.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=30, help="free-text messages per chat")
    parser.add_argument("--commands", type=int, default=10, help="command messages per chat (0: skip that run)")
    parser.add_argument("--memory-turns", type=int, default=10, help="MEMORY_TURNS (summaries fold older turns)")
    parser.add_argument(
        "--telegram-max-messages",
        type=float,
        default=100_000.0,
        help="TELEGRAM_MAX_MESSAGES for Lookout's rate limiter (default: high, since the fake has no ceiling and "
        "this measures Lookout's side; Telegram itself allows about 30/s, the setting's default)",
    )
    parser.add_argument("--burst", action="store_true", help="also queue every message at once")
    parser.add_argument(
        "--paced",
        type=_comma_separated(float),
        default=[],
        help="comma-separated rates (msg/s over all chats): also run open loop at each offered rate, people "
        "writing on a clock whether answered or not (latency at a load below capacity, where the closed loop "
        "only shows Little's law)",
    )
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TEST_DATABASE_URL"),
        help="an admin URL of a PostgreSQL server; a throwaway database is made there (default: TEST_DATABASE_URL)",
    )
    parser.add_argument(
        "--databases",
        default="sqlite,postgresql" if os.environ.get("TEST_DATABASE_URL") else "sqlite",
        help="comma-separated: sqlite, postgresql (default: both when TEST_DATABASE_URL is set); `none`: only the "
        "--web-processes runs",
    )
    parser.add_argument(
        "--web-processes",
        type=_comma_separated(int),
        default=[],
        help="comma-separated process counts, e.g. 1,2: after the --databases runs, run Lookout as that many web "
        "processes in Telegram webhook mode on a throwaway PostgreSQL database (shared advisory locks and rate "
        "limits, as `lookout run --role web` with JOB_QUEUE=procrastinate); the fake posts each update to the "
        "next process in turn, as a round-robin balancer would",
    )
    parser.add_argument(
        "--profile", help="profile Lookout's process (yappi, CPU time, every thread) in the SQLite free-text run"
    )
    parser.add_argument("--profile-commands", help="the same for the SQLite commands run")
    parser.add_argument(
        "--profile-web",
        help="profile the first web process (yappi, CPU time) in the --web-processes free-text run (per message: "
        "the messages divided by the number of processes)",
    )
    parser.add_argument(
        "--profile-database",
        default="sqlite",
        choices=("sqlite", "postgresql"),
        help="which database's runs --profile and --profile-commands profile (default: sqlite)",
    )
    parser.add_argument(
        "--default-gc",
        action="store_true",
        help="keep CPython's default garbage collector thresholds (`lookout run` freezes its start-up heap and "
        "collects the young generation every 10,000 allocations: app/heap.py)",
    )
    parser.add_argument(
        "--uvloop",
        action="store_true",
        help="run Lookout's process on uvloop instead of asyncio's loop (not a dependency: `uv run --with uvloop "
        "python bench/chat.py --uvloop`; measured and not kept)",
    )
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval for Lookout's process (GIL)")
    parser.add_argument(
        "--postgres-delay-ms",
        type=float,
        default=0.0,
        help="reach PostgreSQL through a proxy in its own process that holds back every answer this long (a "
        "database across a network; the round trip it adds is measured and printed)",
    )
    args = parser.parse_args()
    if args.chats < 1 or args.messages < 1:
        parser.error("need at least one chat and one message")
    args.load_before = os.getloadavg()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    logging.basicConfig(level=logging.WARNING)
    gc.callbacks.append(COLLECTOR)
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    if args.uvloop:
        try:
            import uvloop  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            parser.error("--uvloop needs uvloop, not a dependency: uv run --with uvloop python bench/chat.py …")
        uvloop.run(bench(args))
    else:
        asyncio.run(bench(args))


if __name__ == "__main__":
    main()
