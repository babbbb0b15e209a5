"""Many `lookout run` processes on one PostgreSQL (JOB_QUEUE=procrastinate): work shared, nothing done twice.

Every test starts real processes (tests/app/cluster.py) against a throwaway database, the fake Bot API and fake
feeds; they are skipped without TEST_DATABASE_URL.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from procrastinate import App, PsycopgConnector

from app.jobqueue import TICK, psycopg_conninfo
from storage import Database
from storage.repositories import ChatRepository, MonitorRepository
from tests.app.cluster import Cluster, LookoutProcess, running_cluster, wait_for
from tests.backends import postgres_admin_url
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.fakes.telegram import FakeTelegram, RateLimit, SentMessage, running_fake_telegram

pytestmark = pytest.mark.postgres

FEED_PATH = "/feed.xml"


def feed_xml(count: int = 5) -> str:
    now = datetime.now(UTC)
    items = "".join(
        f"<item><title>DeepSeek update {n}</title><link>https://example.com/deepseek/{n}</link>"
        f"<description>DeepSeek news item {n} about the model.</description>"
        f"<pubDate>{(now - timedelta(hours=n)).strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate></item>"
        for n in range(1, count + 1)
    )
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>https://example.com</link>'
        f"<description>news</description>{items}</channel></rss>"
    )


@pytest.fixture
def admin_url() -> str:
    return postgres_admin_url()


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as fake:
        yield fake


def telegram_env(fake: FakeTelegram) -> dict[str, str]:
    return {"TELEGRAM_BOT_TOKEN": fake.token, "TELEGRAM_API_URL": fake.url, "ALLOW_PRIVATE_URLS": "true"}


def seed_monitors(cluster: Cluster, feed_url: str, count: int, *, first_chat: int = 1001) -> list[int]:
    """`count` Telegram chats, each owning one monitor on the feed (not due yet); returns the monitor ids."""

    # Once a day, half a day away: a test or bench that outlasts a quarter hour never sees a second round of runs.
    schedule = f"daily at {datetime.now(UTC) + timedelta(hours=12):%H:%M} in UTC"

    async def work(database: Database) -> list[int]:
        chats, monitors = ChatRepository(database), MonitorRepository(database)
        ids = []
        for n in range(count):
            chat = await chats.get_or_create("telegram", str(first_chat + n), title=f"Chat {n}")
            monitor = await monitors.create(
                owner_chat_id=chat.id,
                topic="DeepSeek",
                schedule=schedule,
                sources=[f"rss:{feed_url}"],
                next_run_at=datetime.now(UTC) + timedelta(days=1),
            )
            ids.append(monitor.id)
        return ids

    return cluster.query(work)


def make_all_due(cluster: Cluster) -> None:
    """Every monitor due a minute ago, and a tick deferred now (instead of waiting for the next minute)."""

    async def work(database: Database) -> None:
        async with database.transaction() as session:
            from sqlalchemy import text

            await session.execute(text("UPDATE monitors SET next_run_at = :when"), {"when": _a_minute_ago()})
        app = App(connector=PsycopgConnector(conninfo=psycopg_conninfo(cluster.database_url)))
        async with app.open_async():
            await app.configure_task(name=TICK, queue="monitors").defer_async(
                timestamp=int(datetime.now(UTC).timestamp())
            )

    cluster.query(work)


def _a_minute_ago() -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)


def digests_per_chat(fake: FakeTelegram) -> Counter[str]:
    """How many digests (the text part that carries the monitor number) each chat received."""
    return Counter(
        message.chat_id for message in fake.messages if message.kind == "text" and "monitor #" in (message.text or "")
    )


def runs_logged(process_log: str) -> int:
    return len(re.findall(r"monitor \d+ run \d+: (ok|empty)", process_log))


def deliveries_logged(process_log: str) -> int:
    return len(re.findall(r"delivery \d+ \(run \d+\) to .*; sent$", process_log, flags=re.M))


DUE_MONITORS = 200
"""Monitors due in the same minute (the issue's number). Each worker runs 16 jobs at a time, so both workers take
jobs from the queue side by side until the end; a run or digest done twice would show in the counts."""


def test_two_workers_share_the_due_monitors_and_each_runs_and_delivers_once(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=0.2))
    feed_url = f"{fake_server.url}{FEED_PATH}"
    with running_cluster(admin_url, tmp_path, **telegram_env(telegram)) as cluster:
        monitor_ids = seed_monitors(cluster, feed_url, DUE_MONITORS)
        workers = [cluster.start_healthy("worker"), cluster.start_healthy("worker")]
        make_all_due(cluster)

        def all_delivered() -> bool:
            sent = cluster.scalar("SELECT count(*) FROM deliveries WHERE status = 'sent'")
            return sent == DUE_MONITORS

        wait_for(all_delivered, what="every digest delivered", seconds=600, every=1)
        runs = cluster.scalar("SELECT count(*) FROM runs")
        per_monitor = cluster.scalar("SELECT max(n) FROM (SELECT count(*) AS n FROM runs GROUP BY monitor_id) r")
        succeeded = cluster.scalar("SELECT count(*) FROM runs WHERE status = 'succeeded'")
        for worker in workers:
            assert worker.terminate() == 0, worker.log()
    assert runs == DUE_MONITORS and per_monitor == 1 and succeeded == DUE_MONITORS
    received = digests_per_chat(telegram)
    assert len(received) == DUE_MONITORS and set(received.values()) == {1}, received.most_common(3)
    assert sorted(received) == sorted(str(1001 + n) for n in range(len(monitor_ids)))
    shares = [runs_logged(worker.log()) for worker in workers]
    assert sum(shares) == DUE_MONITORS and all(share > 0 for share in shares), shares


GROUP_CHAT = "-1009001"

FLOOD_ENV = {
    "TELEGRAM_MAX_MESSAGES": "25",
    "TELEGRAM_RATE_PERIOD": "1.0",
    "TELEGRAM_GROUP_MAX_MESSAGES": "20",
    "TELEGRAM_GROUP_RATE_PERIOD": "8.0",
}
"""Telegram's flood limits with the group's minute shortened to 8 s: 25 messages/s for the token (Telegram's is
30), 20 per 8 s for one group (Telegram's is 20 a minute, which would make 300 group digests take a quarter
of an hour). Two workers offer more than 25/s (bench/scale.py --flood measured them at the full 30/s), so the
test fails with 429s if they do not share the one token's limit."""

FLOOD_CEILING = RateLimit(per_second=25, burst=25, per_chat_per_second=1, group_messages=20, group_period=8.0)
"""What the fake enforces: the same rates, with a burst of a second's worth overall (how far apart two sends
reserved a slot apart may arrive at the fake)."""

GROUP_DIGESTS, PRIVATE_CHATS = 300, 3000
"""The issue's flood: 300 digests to one group and one digest to each of 3,000 separate chats."""


def seed_outbox(cluster: Cluster, *, group_digests: int, private_chats: int) -> None:
    """`group_digests` text digests for one group and one digest for each of `private_chats` chats, all due."""
    from storage import RunOutcome
    from storage.repositories import DeliveryRepository, RunRepository

    async def work(database: Database) -> None:
        chats, runs, deliveries = ChatRepository(database), RunRepository(database), DeliveryRepository(database)
        group = await chats.get_or_create("telegram", GROUP_CHAT, title="Research group")
        now = datetime.now(UTC)
        for n in range(group_digests):
            run = await runs.open_search_run(chat_id=group.id, query=f"group digest {n}", now=now)
            outcome = RunOutcome(finished_at=now, stats={"kind": "notice", "text": f"group digest {n}"})
            await deliveries.complete_run(run.id, outcome=outcome)
        private = [await chats.get_or_create("telegram", str(50_000 + n)) for n in range(private_chats)]
        run = await runs.open_search_run(chat_id=private[0].id, query="broadcast", now=now)
        outcome = RunOutcome(finished_at=now, stats={"kind": "notice", "text": "broadcast digest"})
        await deliveries.complete_run(run.id, outcome=outcome, extra_chat_ids=[chat.id for chat in private[1:]])

    cluster.query(work)


def test_two_workers_keep_one_token_under_telegrams_flood_limits(admin_url: str, tmp_path: Path) -> None:
    total = GROUP_DIGESTS + PRIVATE_CHATS
    with (
        running_fake_telegram(rate_limit=FLOOD_CEILING) as telegram,
        running_cluster(admin_url, tmp_path, **telegram_env(telegram), **FLOOD_ENV) as cluster,
    ):
        seed_outbox(cluster, group_digests=GROUP_DIGESTS, private_chats=PRIVATE_CHATS)
        workers = [cluster.start("worker"), cluster.start("worker")]
        wait_for(
            lambda: cluster.scalar("SELECT count(*) FROM deliveries WHERE status = 'sent'") == total,
            what=f"{total} digests delivered",
            seconds=1200,
            every=1,
        )
        for worker in workers:
            assert worker.terminate() == 0, worker.log()
        shares = [deliveries_logged(worker.log()) for worker in workers]
    assert sum(shares) == total and all(share > 0 for share in shares), shares  # both sent with the one token
    assert telegram.throttled == 0 and telegram.rejected == 0
    group = [message.text for message in telegram.texts(GROUP_CHAT)]
    assert group == [f"group digest {n}" for n in range(GROUP_DIGESTS)]  # one chat's digests keep their order
    private = Counter(message.chat_id for message in telegram.messages if message.chat_id != GROUP_CHAT)
    assert len(private) == PRIVATE_CHATS and set(private.values()) == {1}


WEBHOOK_SECRET = "webhook-secret-for-tests"


def gemini_that_counts_turns(server: FakeHTTPServer, *, delay: float) -> None:
    """A fake Gemini answering after `delay` s with how many person's turns it was shown and the last one: with
    one conversation answered in order, message k is answered "turn k: <text k>"."""
    from tests.fakes.gemini import text_response

    def answer(recorded: RecordedRequest) -> FakeResponse:
        contents = [c for c in recorded.json().get("contents", []) if c.get("role") == "user"]
        texts = [p.get("text", "") for c in contents for p in c.get("parts", []) if p.get("text")]
        last = texts[-1] if texts else ""
        return FakeResponse.json(text_response(f"turn {len(contents)}: {last}"), delay=delay)

    for version in ("v1beta", "v1"):
        server.route("POST", f"/{version}/models/gemini-test:generateContent", answer)


def webhook_env(telegram: FakeTelegram, gemini: FakeHTTPServer) -> dict[str, str]:
    """Web processes in webhook mode, with the fake Gemini as their model."""
    return {
        **telegram_env(telegram),
        "TELEGRAM_WEBHOOK_URL": "https://lookout.example/telegram/webhook",
        "TELEGRAM_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "LLM_MODEL": "google:gemini-test",
        "LLM_HEAVY_MODEL": "google:gemini-test",
        "GEMINI_API_KEY": "test-key",
        "GEMINI_BASE_URL": gemini.url,
    }


def test_one_chats_messages_reaching_two_web_processes_are_answered_once_each_in_order(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    gemini_that_counts_turns(fake_server, delay=1.0)
    env = webhook_env(telegram, fake_server)
    chat = 7001
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        webs = [cluster.start_healthy("web"), cluster.start_healthy("web")]
        headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
        updates = [telegram.text_update(chat, f"question {n}") for n in range(1, 7)]
        for n, update in enumerate(updates):
            # Alternately to each process, each sent before the previous one is answered (answers take 1 s).
            answer = httpx.post(
                f"http://127.0.0.1:{webs[n % 2].port}/telegram/webhook", json=update, headers=headers, timeout=10
            )
            assert answer.status_code == 200
            time.sleep(0.3)
        # Telegram delivers an update again when its acknowledgement was lost: still answered once.
        httpx.post(f"http://127.0.0.1:{webs[1].port}/telegram/webhook", json=updates[2], headers=headers, timeout=10)
        wait_for(lambda: len(telegram.texts(chat)) >= 6, what="six answers", seconds=120)
        time.sleep(2)  # anything answered twice would have arrived by now
        for web in webs:
            assert web.terminate() == 0, web.log()
    answers = [message.text for message in telegram.texts(chat)]
    assert answers == [f"turn {n}: question {n}" for n in range(1, 7)]


def test_a_chats_messages_posted_by_telegram_through_a_balancer_are_answered_in_order(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    # Telegram posts a chat's next update as soon as the previous one was acknowledged. Acknowledged on arrival,
    # message 2 waited inside process A behind message 1 while message 3, at B, could take the conversation's
    # shared lock first and overtake it. Now a request is answered once its message holds its place.
    gemini_that_counts_turns(fake_server, delay=1.0)
    env = webhook_env(telegram, fake_server)
    chat, count = 7002, 6
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        a, b = cluster.start_healthy("web"), cluster.start_healthy("web")
        wait_for(lambda: telegram.webhook.get("secret_token") == WEBHOOK_SECRET, what="the webhook to be set")
        # The balancer sends two requests to A, then one to B, and again: consecutive messages of the chat land
        # on the same process and on the other one.
        telegram.deliver_to_webhook([f"http://127.0.0.1:{web.port}/telegram/webhook" for web in (a, a, b)])
        for n in range(1, count + 1):
            telegram.push_text(chat, f"question {n}")
        wait_for(lambda: len(telegram.texts(chat)) >= count, what=f"{count} answers", seconds=120)
        time.sleep(2)  # anything answered twice would have arrived by now
        for web in (a, b):
            assert web.terminate() == 0, web.log()
    answers = [message.text for message in telegram.texts(chat)]
    assert answers == [f"turn {n}: question {n}" for n in range(1, count + 1)]
    posts = [post for post in telegram.webhook_posts if post.status is not None]
    assert len(posts) == count and all(post.status == 200 for post in posts)  # each update posted and taken once
    assert {post.upstream for post in posts} == {f"http://127.0.0.1:{web.port}/telegram/webhook" for web in (a, b)}
    assert telegram.webhook_max_connections == 100


def test_when_the_polling_process_dies_another_polls_and_nothing_is_answered_twice(
    admin_url: str, tmp_path: Path, telegram: FakeTelegram
) -> None:
    env = {**telegram_env(telegram), "LEADER_CHECK_SECONDS": "1"}
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        webs = [cluster.start_healthy("web"), cluster.start_healthy("web")]
        wait_for(lambda: any("leads now" in web.log() for web in webs), what="a polling leader", seconds=60)
        [leader] = [web for web in webs if "leads now" in web.log()]
        [standby] = [web for web in webs if web is not leader]
        # A web process's health: the database, the job queue, Telegram (leading or standing by), its loops.
        health = httpx.get(standby.health_url, timeout=5).json()
        assert health["status"] == "ok"
        assert {name: health["checks"][name] for name in ("database", "jobs", "telegram", "background")} == {
            "database": "ok",
            "jobs": "ok",
            "telegram": "ok",
            "background": "ok",
        }
        assert "failing" not in health["checks"].values()  # Slack, switched off, is reported as off
        telegram.push_text(8001, "/help")
        wait_for(lambda: len(telegram.texts(8001)) == 1, what="the leader's answer", seconds=60)
        leader.kill()
        telegram.push_text(8002, "/help")
        # The stated bound: another process polls within 30 s of the leader's death.
        wait_for(lambda: "leads now" in standby.log(), what="the standby to take over polling", seconds=30)
        wait_for(lambda: len(telegram.texts(8002)) == 1, what="the new leader's answer", seconds=60)
        telegram.push_text(8001, "/help")
        wait_for(lambda: len(telegram.texts(8001)) == 2, what="a second answer in the first chat", seconds=60)
        time.sleep(2)
        assert standby.terminate() == 0, standby.log()
    assert len(telegram.texts(8001)) == 2 and len(telegram.texts(8002)) == 1
    # Two live pollers would cut each other's long polls short again and again; at most the dead leader's last
    # poll, still open at the fake when the new leader started, is cut short once.
    assert telegram.conflicts <= 1


def wait_until_sent(cluster: Cluster, count: int, *, what: str, seconds: float = 180) -> None:
    """Wait until `count` outbox rows are marked sent."""
    wait_for(
        lambda: cluster.scalar("SELECT count(*) FROM deliveries WHERE status = 'sent'") == count,
        what=what,
        seconds=seconds,
        every=0.5,
    )


def start_one_run(cluster: Cluster, feed: FakeHTTPServer) -> LookoutProcess:
    """One monitor on the (slow) feed, one worker, the monitor due: returns once its run asked for the feed."""
    seed_monitors(cluster, f"{feed.url}{FEED_PATH}", 1)
    worker = cluster.start_healthy("worker")
    make_all_due(cluster)
    wait_for(lambda: bool(feed.received(FEED_PATH)), what="the run to ask for its feed", seconds=120)
    return worker


def test_a_worker_killed_during_a_run_leaves_it_to_another_which_finishes_it(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    # The feed answers after 5 s: long enough to kill the worker in the middle of the run.
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=5))
    env = {**telegram_env(telegram), "WORKER_HEARTBEAT_SECONDS": "1"}
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        first = start_one_run(cluster, fake_server)
        first.kill()
        assert cluster.scalar("SELECT status FROM runs") == "running"
        second = cluster.start_healthy("worker")
        wait_until_sent(cluster, 1, what="the digest of the run taken over")
        runs = cluster.scalar("SELECT count(*) FROM runs")
        status = cluster.scalar("SELECT status FROM runs")
        assert second.terminate() == 0, second.log()
    assert runs == 1 and status == "succeeded"
    assert "running again the run" in second.log() and "was running on a worker that stopped" in second.log()
    assert digests_per_chat(telegram) == Counter({"1001": 1})


def test_sigterm_during_a_run_hands_the_job_back_after_the_grace_period(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=20))
    env = {**telegram_env(telegram), "SHUTDOWN_GRACE_SECONDS": "1"}
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        first = start_one_run(cluster, fake_server)
        # A worker's health: the database, the job queue and its loops; no chat frontend.
        health = httpx.get(first.health_url, timeout=5).json()
        assert health == {"status": "ok", "checks": {"database": "ok", "jobs": "ok", "background": "ok"}}
        assert first.terminate(timeout=60) == 0, first.log()  # long before the feed answers
        waiting = cluster.scalar(
            "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'lookout.run_monitor' AND status = 'todo'"
        )
        still_running = cluster.scalar("SELECT status FROM runs")
        fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml"))
        second = cluster.start_healthy("worker")
        wait_until_sent(cluster, 1, what="the digest of the run handed back")
        status = cluster.scalar("SELECT status FROM runs")
        runs = cluster.scalar("SELECT count(*) FROM runs")
        assert second.terminate() == 0, second.log()
    assert waiting == 1 and still_running == "running"  # handed back, not failed
    assert runs == 1 and status == "succeeded"
    assert "running again the run" in second.log()
    assert digests_per_chat(telegram) == Counter({"1001": 1})


QUIET_INTERVALS = {
    "DELIVERY_LEASE_SECONDS": "3600",
    "WORKER_HEARTBEAT_SECONDS": "300",
    "LEADER_CHECK_SECONDS": "60",
}
"""Every periodic wait of a process as long as the settings allow (claims renewed every 20 minutes, heartbeats
every 5, leadership checked every minute): a shutdown that waited for any of them would take minutes."""


def test_sigterm_stops_every_role_without_waiting_for_its_periodic_chores(
    admin_url: str, tmp_path: Path, telegram: FakeTelegram
) -> None:
    with running_cluster(admin_url, tmp_path, **telegram_env(telegram), **QUIET_INTERVALS) as cluster:
        processes = [cluster.start_healthy(role) for role in ("web", "worker", "all")]
        wait_for(lambda: any("leads now" in p.log() for p in processes), what="a polling leader", seconds=60)
        for process in processes:
            # Far less than the shortest of the waits above; a healthy stop takes well under a second.
            assert process.terminate(timeout=45) == 0, process.log()
            assert "app.service: stopped" in process.log(), process.log()[-2000:]


def test_sigterm_during_a_run_lets_it_finish_within_the_grace_period_and_nothing_is_lost(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer, telegram: FakeTelegram
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml", delay=3))
    env = {**telegram_env(telegram), **QUIET_INTERVALS, "SHUTDOWN_GRACE_SECONDS": "300"}
    with running_cluster(admin_url, tmp_path, **env) as cluster:
        first = start_one_run(cluster, fake_server)
        assert first.terminate(timeout=240) == 0, first.log()  # the run under way finishes first
        run_status = cluster.scalar("SELECT status FROM runs")
        job_status = cluster.scalar("SELECT status FROM procrastinate_jobs WHERE task_name = 'lookout.run_monitor'")
        queued = cluster.scalar("SELECT count(*) FROM deliveries WHERE status = 'pending'")
        second = cluster.start_healthy("worker")  # the digest the stopped worker left in the outbox goes out
        wait_until_sent(cluster, 1, what="the digest of the finished run")
        runs = cluster.scalar("SELECT count(*) FROM runs")
        assert second.terminate() == 0, second.log()
    assert run_status == "succeeded" and job_status == "succeeded" and runs == 1
    assert runs_logged(first.log()) == 1 and "running again the run" not in second.log()
    assert queued == 1  # the stopped worker took no new job: its digest waited in the outbox
    assert digests_per_chat(telegram) == Counter({"1001": 1})


def test_a_worker_killed_during_a_delivery_leaves_the_rest_to_another_without_resending_confirmed_parts(
    admin_url: str, tmp_path: Path, fake_server: FakeHTTPServer
) -> None:
    fake_server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(), content_type="application/rss+xml"))
    # Every send is recorded at once and answered a second later: a kill lands while a part is in flight.
    with running_fake_telegram(answer_delay=1.0) as telegram:
        env = {**telegram_env(telegram), "WORKER_HEARTBEAT_SECONDS": "1", "DELIVERY_LEASE_SECONDS": "5"}
        with running_cluster(admin_url, tmp_path, **env) as cluster:
            seed_monitors(cluster, f"{fake_server.url}{FEED_PATH}", 1)
            first = cluster.start_healthy("worker")
            make_all_due(cluster)
            wait_for(lambda: len(telegram.sent(1001)) >= 2, what="two parts of the digest", seconds=180)
            first.kill()  # the second part is in flight: recorded, its answer not yet heard
            before_kill = [_part(message) for message in telegram.sent(1001)]
            second = cluster.start_healthy("worker")
            wait_until_sent(cluster, 1, what="the rest of the digest")
            assert second.terminate() == 0, second.log()
        received = [_part(message) for message in telegram.sent(1001)]
    counts = Counter(received)
    twice = [part for part, count in counts.items() if count > 1]
    assert set(received) >= {("document", "csv"), ("photo", "png")}  # every part arrived
    assert max(counts.values()) <= 2 and len(twice) <= 1  # at most one part twice ...
    assert all(part == before_kill[-1] for part in twice)  # ... and only the one in flight at the kill
    assert received[: len(before_kill)] == before_kill  # nothing before it was sent again first


def _part(message: SentMessage) -> tuple[str, str]:
    """Which part of a digest a message is: its kind, and its text or the file's extension."""
    if message.kind == "text":
        return ("text", message.text or "")
    return (message.kind, (message.filename or "").rsplit(".", 1)[-1])
