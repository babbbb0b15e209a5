"""Scheduling: how late a monitor added (or resumed) from the CLI while `lookout run` is up runs, on SQLite and on
PostgreSQL.

    uv run python bench/scheduling.py [--samples 2]
    TEST_DATABASE_URL=postgresql+asyncpg://… uv run python bench/scheduling.py [--samples 2]

Per backend (PostgreSQL only with TEST_DATABASE_URL, on a throwaway database): one `lookout run` (embedded mode,
the fake Bot API, a fake feed, no model), then `--samples` times `lookout monitors add … --schedule "every minute"`
from another process for a new Telegram chat, and once `lookout monitors pause` + `resume` of the first monitor.
Each is due at the next whole minute. Printed per sample: the due time, how late its run started (the run's
`started_at` in the database) and how late its first message (the digest, or the note that nothing is new: the
monitors are added with `--no-quiet`) reached the fake Bot API. The fakes run in threads of this process, which
otherwise only waits.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app.cluster import throwaway_database  # noqa: E402
from tests.app.scheduling_world import (  # noqa: E402
    EVERY_MINUTE,
    Inspector,
    base_env,
    lookout,
    running,
    serve_feed,
    wait_for,
)
from tests.backends import sqlite_url  # noqa: E402
from tests.fakes.http_server import FakeHTTPServer, running_fake_server  # noqa: E402
from tests.fakes.telegram import FakeTelegram, running_fake_telegram  # noqa: E402

FIRST_CHAT = 5001


@dataclass(frozen=True)
class Sample:
    backend: str
    change: str
    due: datetime
    run_late: float
    delivered_late: float


def _monotonic_of(moment: datetime) -> float:
    return moment.timestamp() - (time.time() - time.monotonic())


def _delivered_at(telegram: FakeTelegram, chat: int) -> float | None:
    texts = [message.at for message in telegram.texts(chat) if "DeepSeek" in (message.text or "")]
    return min(texts) if texts else None


def _measure(backend: str, change: str, chat: int, inspector: Inspector, telegram: FakeTelegram) -> Sample:
    """The newest change's monitor (the last added, or `FIRST_CHAT`'s when resumed), waited for and timed."""
    monitors = inspector.monitors()
    monitor = monitors[0] if change == "resumed" else max(monitors, key=lambda m: m.id)
    due = monitor.next_run_at
    assert due is not None
    already = len(telegram.texts(chat))
    wait_for(lambda: len(telegram.texts(chat)) > already, what=f"the digest for chat {chat}", seconds=240)
    run = next(run for run in inspector.runs(monitor.id) if run.scheduled_for == due)
    arrived = max(message.at for message in telegram.texts(chat))
    return Sample(
        backend=backend,
        change=change,
        due=due,
        run_late=(run.started_at - due).total_seconds(),
        delivered_late=arrived - _monotonic_of(due),
    )


def _backend_samples(
    backend: str, url: str, data: Path, samples: int, server: FakeHTTPServer, telegram: FakeTelegram
) -> list[Sample]:
    extra = {"TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_URL": telegram.url}
    if backend == "postgresql":
        extra["DATABASE_URL"] = url
    env = base_env(data, **extra)
    inspector = Inspector(url)
    results = []
    feed = serve_feed(server, edition=backend)
    with running(["run"], env, data.parent / f"run-{backend}.log") as service:
        wait_for(lambda: "scheduler: this process leads now" in service.log(), what="the scheduler to lead")
        for n in range(samples):
            chat = FIRST_CHAT + n
            # --no-quiet: a run that finds nothing new still sends its note, so every due time reaches the Bot API
            lookout(env, "monitors", "add", "DeepSeek", "--chat", f"telegram:{chat}", "--schedule", EVERY_MINUTE,
                    "--sources", f"rss:{feed}", "--no-quiet")  # fmt: skip
            results.append(_measure(backend, "added", chat, inspector, telegram))
        monitors = inspector.monitors()  # oldest first: FIRST_CHAT's is the first
        for monitor in monitors:  # every minute each would run again: only the resumed one may
            lookout(env, "monitors", "pause", str(monitor.id))
        time.sleep(61)  # a due time passes while they are paused
        lookout(env, "monitors", "resume", str(monitors[0].id))
        results.append(_measure(backend, "resumed", FIRST_CHAT, inspector, telegram))
        lookout(env, "monitors", "pause", str(monitors[0].id))
    return results


@contextmanager
def _databases(workdir: Path) -> Iterator[list[tuple[str, str]]]:
    with ExitStack() as stack:
        backends = [("sqlite", sqlite_url(workdir / "sqlite" / "data" / "lookout.db"))]
        admin = os.environ.get("TEST_DATABASE_URL")
        if admin:
            backends.append(("postgresql", stack.enter_context(throwaway_database(admin))))
        yield backends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2, help="monitors added per backend")
    arguments = parser.parse_args()
    results: list[Sample] = []
    with (
        TemporaryDirectory() as tmp,
        running_fake_server() as server,
        running_fake_telegram() as telegram,
        _databases(Path(tmp)) as backends,
    ):
        for backend, url in backends:
            data = Path(tmp) / backend / "data"
            data.mkdir(parents=True, exist_ok=True)
            telegram.messages.clear()
            results += _backend_samples(backend, url, data, arguments.samples, server, telegram)
    print(
        "| backend | change from the CLI | due (UTC) | run started late (s) | first message at the Bot API late (s) |"
    )
    print("|---|---|---|---|---|")
    for sample in results:
        print(
            f"| {sample.backend} | {sample.change} | {sample.due:%H:%M:%S} | {sample.run_late:.2f} "
            f"| {sample.delivered_late:.2f} |"
        )
    for backend in dict.fromkeys(sample.backend for sample in results):
        worst = max(sample.run_late for sample in results if sample.backend == backend)
        print(f"{backend}: worst run start {worst:.2f} s after its due time")


if __name__ == "__main__":
    main()
