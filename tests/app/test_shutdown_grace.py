"""SIGTERM to a real `lookout run` while it delivers a long digest to a slow Bot API (issue #30): the process exits
within SHUTDOWN_GRACE_SECONDS, having stopped after the part in flight; the restarted process sends the rest, and
at most one part arrives twice. Twice: with sends slower than a part should take (the part in flight finishes) and
with a send slower than the whole grace (the shutdown cuts it short at the deadline)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

from storage import DeliveryStatus, upgrade_database
from tests.app.test_delivery_crash import _identity, _queue_digest, _row, _start, _wait_for
from tests.fakes.telegram import FakeTelegram

GRACE = 8.0
"""SHUTDOWN_GRACE_SECONDS for the process under test."""
SLOW = 2.5
"""Seconds each send takes in the first case: five parts take 12.5 s, longer than the grace."""
SHORT_GRACE, SLOWER_THAN_GRACE = 3.0, 4.5
"""The second case: a grace shorter than one send (which stays within the Telegram client's 5 s read timeout)."""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'lookout.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


def test_sigterm_during_a_slow_delivery_exits_within_the_grace_and_loses_nothing(
    database_url: str, tmp_path: Path
) -> None:
    asyncio.run(upgrade_database(database_url))
    fake = FakeTelegram(answer_delay=SLOW)
    fake.start()
    files = tmp_path / "exports"
    files.mkdir()
    log = tmp_path / "lookout.log"
    env: dict[str, str] = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DATA_DIR": str(tmp_path / "data"),
        "TELEGRAM_BOT_TOKEN": fake.token,
        "TELEGRAM_API_URL": fake.url,
        "LLM_MODEL": "",
        "GEMINI_API_KEY": "",
        "LOG_LEVEL": "INFO",
        "DELIVERY_POLL_SECONDS": "0.2",
    }
    stops: list[tuple[str, float, float, int]] = []
    rows: dict[int, int] = {}
    process = None
    try:
        for case, grace, delay in (("slow", GRACE, SLOW), ("slower than the grace", SHORT_GRACE, SLOWER_THAN_GRACE)):
            env["SHUTDOWN_GRACE_SECONDS"] = str(grace)
            fake.answer_delay = delay
            process = _start(env, log)
            chat_id = 7000 + len(rows)
            rows[chat_id] = asyncio.run(_queue_digest(database_url, str(chat_id), chat_id, files))
            # SIGTERM while the second part is in flight (sent, its answer not yet back).
            _wait_for(lambda: len(fake.sent(chat_id)) >= 2, what=f"the second part ({case})")  # noqa: B023
            time.sleep(0.3)
            signalled = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
            stops.append((case, grace, time.monotonic() - signalled, len(fake.sent(chat_id))))
            status, parts_sent = asyncio.run(_row(database_url, rows[chat_id]))
            assert status is not DeliveryStatus.SENT, f"{case}: the whole digest went out before the stop"
            assert parts_sent <= 2, case
            fake.answer_delay = 0.05
            process = _start(env, log)
            _wait_for(
                lambda: asyncio.run(_row(database_url, rows[chat_id]))[0] == DeliveryStatus.SENT,  # noqa: B023
                what=f"the rest after the restart ({case})",
                every=0.25,
            )
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
    finally:
        if process is not None and process.poll() is None:
            process.kill()
        fake.stop()

    output = log.read_text(errors="replace")
    report = "\n".join(
        f"{case}: grace {grace:.0f} s, exited {seconds:.1f} s after SIGTERM, {sent} message(s) sent by then"
        for case, grace, seconds, sent in stops
    )
    print(report)
    what = f"{report}\n{output[-3000:]}"
    for case, grace, seconds, _sent in stops:
        assert seconds <= grace, f"{case}: {what}"
    for chat_id, row_id in rows.items():
        received = [_identity(message) for message in fake.sent(chat_id)]
        distinct = list(dict.fromkeys(received))
        _, parts = asyncio.run(_row(database_url, row_id))
        # Nothing lost, in order (text parts, the CSV, the chart); at most the part in flight arrived twice.
        assert parts >= 5 and len(distinct) == parts, what
        assert [kind for kind, _ in distinct] == ["text"] * (parts - 2) + ["document", "photo"], what
        text = " ".join(body for kind, body in distinct if kind == "text")
        assert [int(n) for n in re.findall(rf"Development (\d) of trial {chat_id}\b", text)] == list(range(1, 8))
        assert len(received) - len(distinct) <= 1, what
    assert "stopping: the rest is left for the next process" in output
    assert "stopping: delivery did not finish within the shutdown grace; cut short" in output
