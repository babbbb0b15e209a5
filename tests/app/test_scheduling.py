"""One scheduler that sees every change, as real processes: a monitor added by `lookout monitors add` while
`lookout run` is up runs at its due time and is delivered through the fake Bot API (SQLite and PostgreSQL);
`lookout chat` and `lookout run` on one SQLite file schedule from one process (the other says so once, and
takes over when that one stops), one run per due time."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.app.cluster import throwaway_database
from tests.app.scheduling_world import (
    EVERY_MINUTE,
    Inspector,
    base_env,
    lookout,
    running,
    serve_feed,
    wait_for,
)
from tests.backends import sqlite_url
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import FakeTelegram, running_fake_telegram

CHAT = 4242
LED_ELSEWHERE = "Another Lookout process on this database (a `lookout run`) runs the monitors on schedule"


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as fake:
        yield fake


def _telegram_env(telegram: FakeTelegram) -> dict[str, str]:
    return {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url}


def _add_and_see_it_delivered(env: dict[str, str], inspector: Inspector, feed: str, telegram: FakeTelegram) -> None:
    lookout(env, "monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--schedule", EVERY_MINUTE,
            "--sources", f"rss:{feed}")  # fmt: skip
    [monitor] = inspector.monitors()
    due = monitor.next_run_at
    assert due is not None
    wait_for(lambda: any("DeepSeek" in (m.text or "") for m in telegram.texts(CHAT)), what="the digest on Telegram")
    runs = inspector.runs(monitor.id)
    assert [run.scheduled_for for run in runs][-1] == due  # the time it was due, not a later one
    assert runs[-1].started_at - due < timedelta(minutes=2)


def test_a_monitor_added_while_run_is_up_runs_at_its_time_on_sqlite(
    tmp_path: Path, telegram: FakeTelegram, fake_server: FakeHTTPServer
) -> None:
    env = base_env(tmp_path / "data", **_telegram_env(telegram))
    inspector = Inspector(sqlite_url(tmp_path / "data" / "lookout.db"))
    with running(["run"], env, tmp_path / "run.log") as service:
        wait_for(lambda: "scheduler: this process leads now" in service.log(), what="the scheduler to lead")
        _add_and_see_it_delivered(env, inspector, serve_feed(fake_server), telegram)
        assert service.stop() == 0, service.log()


@pytest.mark.postgres
def test_a_monitor_added_while_run_is_up_runs_at_its_time_on_postgresql(
    tmp_path: Path, telegram: FakeTelegram, fake_server: FakeHTTPServer
) -> None:
    admin_url = os.environ.get("TEST_DATABASE_URL")
    if not admin_url:
        pytest.skip("TEST_DATABASE_URL is not set")
    with throwaway_database(admin_url) as url:
        # The scheduler's safety poll is longer than the test waits: only the NOTIFY of the change can wake it.
        env = base_env(tmp_path / "data", DATABASE_URL=url, SCHEDULER_POLL_SECONDS="300", **_telegram_env(telegram))
        with running(["run"], env, tmp_path / "run.log") as service:
            wait_for(lambda: "scheduler: this process leads now" in service.log(), what="the scheduler to lead")
            _add_and_see_it_delivered(env, Inspector(url), serve_feed(fake_server), telegram)
            assert service.stop() == 0, service.log()


def test_chat_and_run_on_one_sqlite_file_schedule_from_one_process(
    tmp_path: Path, telegram: FakeTelegram, fake_server: FakeHTTPServer
) -> None:
    data = tmp_path / "data"
    env = base_env(data, **_telegram_env(telegram))
    chat_env = base_env(data)
    inspector = Inspector(sqlite_url(data / "lookout.db"))
    with running(["run"], env, tmp_path / "run.log") as service:
        wait_for(lambda: "scheduler: this process leads now" in service.log(), what="`lookout run` to lead")
        with running(["chat"], chat_env, tmp_path / "chat.out", stdin=subprocess.PIPE) as chat:
            wait_for(lambda: LED_ELSEWHERE in chat.log(), what="the chat to say another process schedules")
            lookout(env, "monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--schedule", EVERY_MINUTE,
                    "--sources", f"rss:{serve_feed(fake_server)}")  # fmt: skip
            [monitor] = inspector.monitors()
            wait_for(lambda: bool(telegram.texts(CHAT)), what="the first digest, sent by `lookout run`")
            assert service.stop() == 0, service.log()
            # `lookout run` let go: the chat takes over scheduling and runs the next due time (its digest for
            # Telegram waits in the outbox: the chat has no Telegram sender)
            chat_log = data / "lookout-chat.log"
            wait_for(lambda: "scheduler: this process leads now" in chat_log.read_text(), what="the chat to lead")
            wait_for(lambda: len(inspector.runs(monitor.id)) >= 2, what="a run scheduled by the chat")
            chat_output, chat_lines = chat.log(), chat_log.read_text()
        runs = inspector.runs(monitor.id)
    times = Counter(run.scheduled_for for run in runs)
    assert len(times) >= 2 and set(times.values()) == {1}, times  # one run per due time
    assert chat_output.count(LED_ELSEWHERE) == 1  # said once
    # the chat ticked only once it led: while `lookout run` led, it ran nothing
    assert chat_lines.index("tick: 1 monitor(s) due") > chat_lines.index("scheduler: this process leads now")
    assert "tick: 1 monitor(s) due" in service.log()
