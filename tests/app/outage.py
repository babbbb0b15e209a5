"""The database outage scenario: real `lookout run` processes on a private PostgreSQL that is stopped and started
(or, embedded, on a SQLite file another writer locks).

One web process (Telegram long polling, against the fake Bot API) and `workers` worker processes
(JOB_QUEUE=procrastinate) share a PostgreSQL server of the scenario's own (`tests.private_postgres`). Every chat
writes before the outage, a monitor becomes due, the server is stopped (`pg_ctl stop -m fast`, what a restart or a
failover does to its clients) for `outage_seconds` while every chat writes again, then started. `Outcome` says how
many messages were lost or answered twice, how often the due monitor ran and delivered, and how long after the
server came back every process was healthy and every message answered. The SQLite variant (`sqlite_locked`) runs
one embedded process and holds the file's write lock from another connection instead. Used by
tests/app/test_db_outage.py and bench/db_outage.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import text

from storage import Database, upgrade_database
from storage.repositories import ChatRepository, MonitorRepository
from tests.app.cluster import Cluster, LookoutProcess, wait_for
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.telegram import FakeTelegram
from tests.private_postgres import PrivatePostgres

FEED_PATH = "/outage-feed.xml"
FIRST_CHAT = 3001
DUE_CHAT = FIRST_CHAT
"""The chat whose monitor falls due while the database is away."""

OUTAGE_ROUNDS = 3
"""Times every chat writes while the database is away (at its start, a third and two thirds into it)."""

FAST_INTERVALS = {"LEADER_CHECK_SECONDS": "1", "WORKER_HEARTBEAT_SECONDS": "2", "SHUTDOWN_GRACE_SECONDS": "5"}
"""Short periodic waits: a lost lock is noticed within a second, a worker silent for 6 s is presumed dead, and a
worker whose database went away hands its jobs back after 5 s."""


@dataclass
class Outcome:
    """What the scenario measured."""

    messages: int
    """Messages sent to the bot in all (before and during the outage)."""
    lost: int
    """Messages never answered."""
    repeated: int
    """Answers beyond one per message."""
    runs: int
    """Runs of the monitor that was due during the outage."""
    digests: int
    """Digests of that monitor received by its chat."""
    healthy_after: float
    """Seconds from the server's return until every process answered /healthz with 200."""
    answered_after: float
    """Seconds from the server's return until every message was answered."""
    degraded_seen: bool
    """Whether /healthz said "degraded" while the server was away."""
    logs: dict[str, str] = field(default_factory=dict)


def feed_xml() -> str:
    now = datetime.now(UTC)
    items = "".join(
        f"<item><title>Outage story {n}</title><link>https://example.com/outage/{n}</link>"
        f"<description>Story {n} about the outage.</description>"
        f"<pubDate>{(now - timedelta(hours=n)).strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate></item>"
        for n in range(1, 4)
    )
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>https://example.com</link>'
        f"<description>news</description>{items}</channel></rss>"
    )


async def _seed(url: str, feed_url: str, chats: int) -> int:
    """Migrate, store `chats` Telegram chats and one monitor in the first, not due; returns the monitor's id."""
    await upgrade_database(url)
    database = Database(url)
    try:
        chat_repository, monitors = ChatRepository(database), MonitorRepository(database)
        ids = [(await chat_repository.get_or_create("telegram", str(FIRST_CHAT + n))).id for n in range(chats)]
        monitor = await monitors.create(
            owner_chat_id=ids[0],
            topic="Outage",
            schedule=f"daily at {datetime.now(UTC) + timedelta(hours=12):%H:%M} in UTC",
            sources=[f"rss:{feed_url}"],
            next_run_at=datetime.now(UTC) + timedelta(days=1),
        )
        return monitor.id
    finally:
        await database.dispose()


def _make_due(cluster: Cluster, monitor_id: int, *, in_seconds: float) -> None:
    async def work(database: Database) -> None:
        async with database.transaction() as session:
            when = datetime.now(UTC) + timedelta(seconds=in_seconds)
            await session.execute(
                text("UPDATE monitors SET next_run_at = :when WHERE id = :id"), {"when": when, "id": monitor_id}
            )

    cluster.query(work)


def _health(process: LookoutProcess) -> tuple[int, str]:
    try:
        answer = httpx.get(process.health_url, timeout=15)
    except httpx.HTTPError as error:
        return 0, type(error).__name__
    return answer.status_code, str(answer.json().get("status"))


def answers_per_chat(fake: FakeTelegram, chats: int) -> Counter[str]:
    """Answers to people's messages per chat (the digest's text, which names its monitor, is not one)."""
    wanted = {str(FIRST_CHAT + n) for n in range(chats)}
    return Counter(
        message.chat_id
        for message in fake.messages
        if message.kind == "text" and message.chat_id in wanted and "monitor #" not in (message.text or "")
    )


def digests_in(fake: FakeTelegram, chat: int) -> int:
    return sum(1 for message in fake.texts(chat) if "monitor #" in (message.text or ""))


@dataclass(frozen=True)
class Outage:
    """How the database goes away and comes back, and where it is."""

    database_url: str
    begin: Callable[[], None]
    end: Callable[[], None]
    scaled: bool = True
    """PostgreSQL with one web and `workers` worker processes; False: one embedded process (SQLite)."""


def postgres_restart(server: PrivatePostgres) -> Outage:
    """The private server stopped (`pg_ctl stop -m fast`) and started again."""
    return Outage(database_url=server.url, begin=server.stop, end=server.start)


def sqlite_locked(path: Path) -> Outage:
    """A SQLite file whose write lock another process's writer holds (BEGIN IMMEDIATE … COMMIT) meanwhile."""
    holder: dict[str, sqlite3.Connection] = {}

    def begin() -> None:
        connection = sqlite3.connect(path, isolation_level=None, timeout=60)
        connection.execute("BEGIN IMMEDIATE")
        holder["connection"] = connection

    def end() -> None:
        connection = holder.pop("connection")
        connection.execute("COMMIT")
        connection.close()

    return Outage(database_url=f"sqlite+aiosqlite:///{path}", begin=begin, end=end, scaled=False)


def run_outage(
    outage: Outage,
    telegram: FakeTelegram,
    feeds: FakeHTTPServer,
    workdir: Path,
    *,
    chats: int,
    outage_seconds: float,
    workers: int = 1,
    settle_seconds: float = 180,
    webhook: bool = False,
) -> Outcome:
    """The scenario (see the module docstring); the database must be reachable and empty."""
    feeds.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml"))
    monitor_id = asyncio.run(_seed(outage.database_url, f"{feeds.url}{FEED_PATH}", chats))
    env = {
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
        "ALLOW_PRIVATE_URLS": "true",
        **FAST_INTERVALS,
    }
    if not outage.scaled:
        env["JOB_QUEUE"] = "embedded"
    if webhook:  # Telegram posts each update until a 2xx answer, a chat's next one only after
        env |= {"TELEGRAM_WEBHOOK_URL": "https://lookout.example/telegram/webhook", "TELEGRAM_WEBHOOK_SECRET": "s3cret"}
    cluster = Cluster(database_url=outage.database_url, workdir=workdir, env=env)
    try:
        if outage.scaled:
            processes = [cluster.start_healthy("web"), *(cluster.start_healthy("worker") for _ in range(workers))]
            web = processes[0]
            if webhook:
                wait_for(lambda: bool(telegram.webhook.get("url")), what="the webhook to be set", seconds=60)
                telegram.deliver_to_webhook([f"http://127.0.0.1:{web.port}/telegram/webhook"])
            else:
                wait_for(lambda: "leads now" in web.log(), what="the web process to poll Telegram", seconds=60)
        else:
            processes = [cluster.start_healthy("all")]
            web = processes[0]
        sent = 0
        for n in range(chats):
            telegram.push_text(FIRST_CHAT + n, f"before the outage {n}")
            sent += 1
        wait_for(lambda: sum(answers_per_chat(telegram, chats).values()) >= sent, what="answers before", seconds=120)
        if outage.scaled:  # (the embedded scheduler reads monitors' times at start and on changes it is told of)
            _make_due(cluster, monitor_id, in_seconds=2)
        outage.begin()
        down_at = time.monotonic()
        seen: list[tuple[int, str]] = []
        probing = threading.Thread(target=lambda: seen.append(_health(web)), daemon=True)
        probing.start()  # asked once the process had a moment to notice (the first round is on its way)
        for round_ in range(OUTAGE_ROUNDS):
            for n in range(chats):
                telegram.push_text(FIRST_CHAT + n, f"during the outage {round_}.{n}")
                sent += 1
            time.sleep(max(0.0, down_at + (round_ + 1) * outage_seconds / OUTAGE_ROUNDS - time.monotonic()))
        probing.join()
        degraded_seen = (503, "degraded") in seen
        outage.end()
        up_at = time.monotonic()
        healthy_after = answered_after = -1.0
        deadline = up_at + settle_seconds
        while time.monotonic() < deadline and (healthy_after < 0 or answered_after < 0):
            if healthy_after < 0 and all(process.healthy() for process in processes):
                healthy_after = time.monotonic() - up_at
            if answered_after < 0 and sum(answers_per_chat(telegram, chats).values()) >= sent:
                answered_after = time.monotonic() - up_at
            time.sleep(0.25)
        if outage.scaled:
            wait_for(lambda: digests_in(telegram, DUE_CHAT) >= 1, what="the due digest", seconds=settle_seconds)
        time.sleep(3)  # anything answered or delivered twice would have arrived by now
        answered = answers_per_chat(telegram, chats)
        lost = sum(max(0, expected - answered.get(str(FIRST_CHAT + n), 0)) for n, expected in _expected(sent, chats))
        repeated = sum(
            max(0, answered.get(str(FIRST_CHAT + n), 0) - expected) for n, expected in _expected(sent, chats)
        )
        runs = int(str(cluster.scalar("SELECT count(*) FROM runs WHERE monitor_id = :id", id=monitor_id)))
        outcome = Outcome(
            messages=sent,
            lost=lost,
            repeated=repeated,
            runs=runs,
            digests=digests_in(telegram, DUE_CHAT),
            healthy_after=healthy_after,
            answered_after=answered_after,
            degraded_seen=degraded_seen,
        )
    finally:
        cluster.stop_all()
    outcome.logs = {process.name: process.log() for process in cluster.processes}
    return outcome


def _expected(sent: int, chats: int) -> list[tuple[int, int]]:
    """Messages sent to each chat: every round wrote once to every chat."""
    return [(n, sent // chats) for n in range(chats)]
