"""A real `lookout run` killed with SIGKILL between storing a monitor run and checking its alerts, and started again:
the alert still comes, once. On SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.

The kill point needs no hook: the monitor's light model is a fake OpenAI-compatible server that holds the alert's
yes/no question (asked only after the run is stored) until the process is killed; every other model request gets a
400, so the run falls back to its model-free steps at once. The pending check is then dated back past the grace
(what ten minutes of waiting would do), and the restarted process's first tick takes it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from monitors.schedule import parse_schedule
from monitors.scheduler import POLL_SECONDS
from storage import Database, RunStatus, upgrade_database
from storage.models import PendingAlertCheck
from storage.repositories import AlertRepository, ChatRepository, MonitorRepository
from tests.app.scheduling_world import Inspector, base_env, running, wait_for
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest
from tests.fakes.openai_compat import completion, error_body
from tests.fakes.telegram import FakeTelegram

CHAT = 5001
MODEL = "fake-model"
API_KEY = "sk-test"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'lookout.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


def release_feed() -> str:
    """Two outlets reporting a DeepSeek release, inside any window."""
    published = format_datetime(datetime.now(UTC) - timedelta(hours=1))
    items = "".join(
        f"<item><title>{title}</title><link>https://{site}/v4</link><description>{title}.</description>"
        f"<pubDate>{published}</pubDate></item>"
        for site, title in (
            ("reuters.com", "DeepSeek releases V4 model with open weights"),
            ("theverge.com", "DeepSeek released its V4 model under open weights"),
        )
    )
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>https://news.example</link>'
        f"<description>news</description>{items}</channel></rss>"
    )


class HeldModel:
    """The fake model: holds (or, once `answering`, answers yes to) the alert question; refuses everything else."""

    def __init__(self, server: FakeHTTPServer) -> None:
        self.answering = False
        self.alert_questions = 0
        for prefix in ("/v1", ""):
            server.route("POST", f"{prefix}/chat/completions", self.answer)
        self.base_url = f"{server.url}/v1"

    def answer(self, recorded: RecordedRequest) -> FakeResponse:
        body: dict[str, Any] = json.loads(recorded.body or b"{}")
        system = " ".join(str(message.get("content")) for message in body.get("messages", []))
        if "alert condition" not in system:
            return FakeResponse.json(error_body(400, "not scripted here"), status=400)
        self.alert_questions += 1
        if not self.answering:
            return FakeResponse.json(error_body(503, "held"), status=503, delay=120)  # the process dies waiting
        verdict = {"fires": True, "reason": "DeepSeek released V4.", "citations": [1]}
        return FakeResponse.json(completion(tool_calls=[("final_result", verdict)], model=MODEL))


async def _prepare(url: str, feed_url: str) -> None:
    """A Telegram chat with a monitor due now on the fake feed, and an alert on it."""
    await upgrade_database(url)
    database = Database(url)
    try:
        chat = await ChatRepository(database).get_or_create("telegram", str(CHAT))
        later = datetime.now(UTC) + timedelta(hours=12)  # no scheduled time falls within the test
        schedule = parse_schedule(f"daily at {later:%H:%M}", timezone="UTC", min_interval_seconds=60)
        monitor = await MonitorRepository(database).create(
            owner_chat_id=chat.id,
            topic="DeepSeek",
            schedule=schedule.to_text(),
            sources=[f"rss:{feed_url}"],
            next_run_at=datetime.now(UTC) - timedelta(minutes=1),
        )
        await AlertRepository(database).create(
            chat_id=chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model"
        )
    finally:
        await database.dispose()


async def _pending(url: str, *, date_back: timedelta | None = None) -> int:
    """How many alert checks are pending (all of them dated back by `date_back` first, when given)."""
    database = Database(url)
    try:
        if date_back is not None:
            async with database.transaction() as session:
                await session.execute(update(PendingAlertCheck).values(created_at=datetime.now(UTC) - date_back))
        return len(await AlertRepository(database).pending_checks(created_before=datetime.now(UTC)))
    finally:
        await database.dispose()


def test_kill_9_between_storing_a_run_and_checking_its_alerts_still_alerts_once(
    database_url: str, tmp_path: Path, fake_server: FakeHTTPServer
) -> None:
    fake_server.route("GET", "/feed.xml", FakeResponse(body=release_feed(), content_type="application/rss+xml"))
    model = HeldModel(fake_server)
    asyncio.run(_prepare(database_url, f"{fake_server.url}/feed.xml"))
    telegram = FakeTelegram()
    telegram.start()
    env = base_env(
        tmp_path / "data",
        DATABASE_URL=database_url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_API_URL=telegram.url,
        LLM_MODEL=f"openai-chat:{MODEL}",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY=API_KEY,
        DELIVERY_POLL_SECONDS="0.2",
    )
    inspector = Inspector(database_url)

    def alerts() -> list[str]:
        return [message.text or "" for message in telegram.sent(CHAT) if (message.text or "").startswith("🔔")]

    try:
        with running(["run"], env, tmp_path / "first.log") as first:
            wait_for(lambda: model.alert_questions > 0, what="the alert's question (the run stored)", seconds=240)
            first.process.send_signal(signal.SIGKILL)
            first.process.wait(timeout=30)
        [run] = inspector.runs(1)
        assert run.status is RunStatus.SUCCEEDED and alerts() == []
        # as if the grace had passed: the restarted process's first tick takes the check
        assert asyncio.run(_pending(database_url, date_back=timedelta(minutes=11))) == 1

        model.answering = True
        with running(["run"], env, tmp_path / "second.log") as second:
            wait_for(lambda: len(alerts()) > 0, what="the alert after the restart", seconds=240)
            wait_for(lambda: asyncio.run(_pending(database_url)) == 0, what="the check done", seconds=60)
            time.sleep(POLL_SECONDS * 2)  # a few more ticks: nothing more comes
            log = second.log()
    finally:
        telegram.stop()

    texts = alerts()
    assert len(texts) == 1, f"{texts}\n{log[-3000:]}"
    assert "Alert #1" in texts[0] and "DeepSeek released V4." in texts[0]
    assert "checking its alerts, left pending" in log
    assert [entry.id for entry in inspector.runs(1)] == [run.id]  # the restart took the pending check, no new run
