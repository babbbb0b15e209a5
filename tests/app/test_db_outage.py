"""PostgreSQL restarted under real `lookout run` processes: nothing lost, nothing twice, healthy again by itself.

The scenario (tests/app/outage.py) runs one web and one worker process (JOB_QUEUE=procrastinate) on a PostgreSQL
server of the test's own, stops it for 10 s while every chat writes and a monitor falls due, and starts it again.
Skipped where no PostgreSQL server binaries are installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.outage import postgres_restart, run_outage
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import FakeTelegram, running_fake_telegram
from tests.private_postgres import PrivatePostgres, postgres_binaries, private_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    if postgres_binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    with private_postgres() as started:
        yield started


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as fake:
        yield fake


@pytest.mark.parametrize("mode", ["polling", "webhook"])
def test_a_ten_second_restart_loses_no_message_repeats_none_and_runs_the_due_monitor_once(
    server: PrivatePostgres, telegram: FakeTelegram, fake_server: FakeHTTPServer, tmp_path: Path, mode: str
) -> None:
    # Long polling: updates read during the outage are confirmed to Telegram only once stored. Webhook: a request
    # is answered only once its update is stored (Telegram would send it again otherwise).
    outcome = run_outage(
        postgres_restart(server), telegram, fake_server, tmp_path, chats=5, outage_seconds=10, webhook=mode == "webhook"
    )
    logs = "\n".join(f"=== {name}\n{log[-6000:]}" for name, log in outcome.logs.items())
    assert outcome.messages == 5 * 4, logs  # written before and three times during the outage
    assert (outcome.lost, outcome.repeated) == (0, 0), logs
    assert (outcome.runs, outcome.digests) == (1, 1), logs
    assert outcome.degraded_seen, logs  # /healthz said so while the database was away ...
    assert 0 <= outcome.healthy_after <= 30, logs  # ... and every process was healthy again by itself
    assert "Side task" not in logs or "starting it again" in logs, logs
