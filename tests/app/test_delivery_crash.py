"""A real `lookout run` delivering a digest (text parts, CSV, chart) to a slow Bot API is killed with SIGKILL at
seeded random points, and restarted: no part is lost, at most the one part in flight arrives twice, and the rest
arrives soon after the restart (measured at the fake's clock). On SQLite, and on PostgreSQL when TEST_DATABASE_URL
is set.

The resume bound is measured from the moment the restarted process is up (its first Bot API call), and the time
from the restart itself is reported too: starting Python with Lookout's imports alone takes 15-25 s on a loaded
two-core machine, which says nothing about delivery."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from storage import Database, DeliveryStatus, RunOutcome, upgrade_database
from storage.models import Delivery
from storage.repositories import ChatRepository, DeliveryRepository, RunRepository
from tests.fakes.telegram import FakeTelegram, SentMessage

TRIALS = 10
ANSWER_DELAY = 0.25
"""Seconds the fake Bot API takes to answer each send (the message is delivered at once): a kill lands while
a part is in flight more often than not."""
RESUME_BOUND = 30.0
"""Seconds after the restart within which the rest of a cut delivery must have arrived (issue #15)."""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@dataclass
class Trial:
    seed: int
    chat_id: int
    killed_after: int
    """Messages the chat had received when the process was killed."""
    restarted_at: float
    up_at: float
    """When the restarted process made its first Bot API call."""
    received: list[SentMessage]
    parts: int
    """Parts of the delivery, as stored with the row when it was marked sent."""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of either kind (the PostgreSQL one is a throwaway database, dropped afterwards)."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'lookout.db'}"
    return str(request.getfixturevalue("fresh_postgres_url"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(condition, *, what: str, every: float = 0.01, seconds: float = 300.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `condition` (generous: a restart includes starting Python, which a loaded machine makes slow)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def _digest(trial: int) -> dict[str, object]:
    """A digest long enough for three Telegram text parts, each development numbered so parts can be checked."""
    filler = "The release notes, the benchmarks and the pricing were discussed at length by the community. " * 14
    developments = [{"text": f"Development {n} of trial {trial}. {filler}", "citations": [1]} for n in range(1, 8)]
    return {
        "headline": f"Trial {trial}: DeepSeek ships",
        "developments": developments,
        "quality": {"completeness": 0.8, "quality": 0.8},
        "cited": [{"number": 1, "title": "Release", "url": "https://example.org/r", "source": "hn"}],
    }


async def _queue_digest(database_url: str, chat_external_id: str, trial: int, files: Path) -> int:
    """A finished search run for the chat with its digest, CSV and chart, and its outbox row (as a run leaves it)."""
    database = Database(database_url)
    try:
        chat = await ChatRepository(database).get_or_create("telegram", chat_external_id)
        run = await RunRepository(database).open_search_run(chat_id=chat.id, query=f"trial {trial}")
        csv, chart = files / f"trial-{trial}.csv", files / f"trial-{trial}.png"
        csv.write_text(f"title,url\nTrial {trial},https://example.org/{trial}\n")
        chart.write_bytes(PNG)
        [row] = await DeliveryRepository(database).complete_run(
            run.id,
            outcome=RunOutcome(
                finished_at=datetime.now(UTC),
                digest=_digest(trial),
                artifacts={"csv": str(csv), "chart": str(chart)},
                stats={"topic": f"Trial {trial}", "file_stem": f"trial-{trial}"},
            ),
        )
        return row.id
    finally:
        await database.dispose()


async def _row(database_url: str, row_id: int) -> tuple[DeliveryStatus | None, int]:
    """The outbox row's status and how many parts it says were sent."""
    database = Database(database_url)
    try:
        async with database.sessions() as session:
            row = await session.get(Delivery, row_id)
            return (DeliveryStatus(row.status), row.parts_sent) if row is not None else (None, 0)
    finally:
        await database.dispose()


def _start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    env = {**env, "HTTP_PORT": str(_free_port())}
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "lookout"), "run"], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def test_kill_9_mid_delivery_loses_nothing_and_repeats_at_most_the_part_in_flight(
    database_url: str, tmp_path: Path
) -> None:
    asyncio.run(upgrade_database(database_url))
    fake = FakeTelegram(answer_delay=ANSWER_DELAY)
    fake.start()
    files = tmp_path / "exports"
    files.mkdir()
    log = tmp_path / "lookout.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DATA_DIR": str(tmp_path / "data"),
        "TELEGRAM_BOT_TOKEN": fake.token,
        "TELEGRAM_API_URL": fake.url,
        "LLM_MODEL": "",
        "GEMINI_API_KEY": "",
        "LOG_LEVEL": "INFO",
        "DELIVERY_POLL_SECONDS": "0.2",
        # Far longer than the bound: the restarted process must take the dead one's claims back by itself.
        "DELIVERY_LEASE_SECONDS": "300",
    }
    trials: list[Trial] = []
    process = _start(env, log)
    try:
        for trial in range(TRIALS):
            rng = random.Random(trial)
            chat_id = 5000 + trial
            row_id = asyncio.run(_queue_digest(database_url, str(chat_id), trial, files))
            # Kill while message k is in flight (of at least three text parts, the CSV and the chart), at a
            # random moment of its slow answer.
            k = rng.randrange(5)
            _wait_for(lambda: len(fake.sent(chat_id)) > k, what=f"message {k + 1} of trial {trial}")  # noqa: B023
            time.sleep(rng.uniform(0, ANSWER_DELAY * 1.2))
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
            killed_after = len(fake.sent(chat_id))
            calls_before = len(fake.calls)
            restarted_at = time.monotonic()
            process = _start(env, log)
            _wait_for(
                lambda: asyncio.run(_row(database_url, row_id))[0] == DeliveryStatus.SENT,  # noqa: B023
                what=f"trial {trial} to be marked sent",
                every=0.25,  # a database round trip per look: not too often
            )
            _, parts = asyncio.run(_row(database_url, row_id))
            # Under heavy load the dead process may have sent every part (and marked the row) before the kill
            # landed; then the restarted one has nothing to send and may not have called the API yet.
            up_at = fake.calls[calls_before].at if len(fake.calls) > calls_before else fake.sent(chat_id)[-1].at
            trials.append(Trial(trial, chat_id, killed_after, restarted_at, up_at, fake.sent(chat_id), parts))
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        fake.stop()

    output = log.read_text(errors="replace")
    table = "\n".join(
        f"trial {t.seed}: killed after {t.killed_after}/{t.parts} messages, {len(t.received) - t.parts} duplicate(s); "
        f"rest arrived {t.received[-1].at - t.up_at:.1f} s after the restarted process was up "
        f"({t.received[-1].at - t.restarted_at:.1f} s after the restart)"
        for t in trials
    )
    print(table)
    for trial in trials:
        what = f"trial {trial.seed}\n{table}\n{output[-3000:]}"
        received = [_identity(message) for message in trial.received]
        distinct = list(dict.fromkeys(received))
        # Nothing lost: every part arrived, in order: the text parts, then the CSV, then the chart.
        assert trial.parts >= 5 and len(distinct) == trial.parts, what
        assert [kind for kind, _ in distinct] == ["text"] * (trial.parts - 2) + ["document", "photo"], what
        text = " ".join(body for kind, body in distinct if kind == "text")
        assert [int(n) for n in re.findall(rf"Development (\d) of trial {trial.seed}\b", text)] == list(range(1, 8))
        # At most one duplicate per kill, and only of the part that was in flight when the process died.
        duplicates = len(received) - len(distinct)
        assert duplicates <= 1, what
        if duplicates:
            in_flight = trial.killed_after - 1
            assert received[in_flight] == received[in_flight + 1], what
        # The rest arrived soon after the restart (at the fake's clock; the restart took the dead claim back).
        assert trial.received[-1].at - trial.up_at <= RESUME_BOUND, what
    # Every attempt and every resend left a line saying what was sent, but for a kill that landed after the dead
    # process marked its row sent and before it wrote that line (it had sent every part before the restart).
    finished_before_kill = sum(
        1
        for t in trials
        if t.killed_after == t.parts and len(t.received) == t.parts and t.received[-1].at < t.restarted_at
    )
    lines = len(re.findall(r"delivery \d+ \(run \d+\) to chat \d+ .*: parts \d+→(\d+) of \1 sent; sent", output))
    assert TRIALS - finished_before_kill <= lines <= TRIALS
    assert "resending (attempt" in output and "took back" in output


def _identity(message: SentMessage) -> tuple[str, str]:
    if message.kind == "text":
        return ("text", message.text or "")
    return (message.kind, message.filename or "")
