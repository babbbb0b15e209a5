"""Real `lookout` processes around one database for the scheduling tests and bench/scheduling.py: `lookout run`
with the fake Bot API, `lookout chat` on a pipe, `lookout monitors add` from another process, and the database's
runs read as the processes wrote them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from storage import Database, MonitorRecord, RunRecord
from storage.repositories import MonitorRepository, RunRepository
from tests.app.cluster import free_port
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

_T = TypeVar("_T")
LOOKOUT = str(Path(sys.executable).parent / "lookout")
FEED_PATH = "/feed.xml"
EVERY_MINUTE = "every minute"
"""The shortest schedule (with MIN_MONITOR_INTERVAL=60): due at the next whole minute, a test's wait at most."""


def feed_xml(count: int = 4, *, edition: str = "a") -> str:
    """A fresh RSS feed about DeepSeek (inside any monitor's window); another `edition` has other items."""
    now = datetime.now(UTC)
    items = "".join(
        f"<item><title>DeepSeek update {n}{edition}</title><link>https://example.com/deepseek/{edition}/{n}</link>"
        f"<description>DeepSeek news item {n} about the model.</description>"
        f"<pubDate>{(now - timedelta(hours=n)).strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate></item>"
        for n in range(1, count + 1)
    )
    return (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>https://example.com</link>'
        f"<description>news</description>{items}</channel></rss>"
    )


def serve_feed(server: FakeHTTPServer, *, edition: str = "a") -> str:
    """Route the feed (this edition of it) on the fake server; returns its URL."""
    server.route("GET", FEED_PATH, FakeResponse(body=feed_xml(edition=edition), content_type="application/rss+xml"))
    return f"{server.url}{FEED_PATH}"


def base_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A `lookout` process's environment: no model, fast monitors allowed, the fakes reachable."""
    env = {k: v for k, v in os.environ.items() if k not in ("TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "DATABASE_URL")}
    return {
        **env,
        "DATA_DIR": str(data_dir),
        "GEMINI_API_KEY": "",
        "LLM_MODEL": "",
        "EMBEDDING_MODEL": "",
        "MIN_MONITOR_INTERVAL": "60",
        "ALLOW_PRIVATE_URLS": "true",
        "LOG_LEVEL": "INFO",
        "HTTP_PORT": str(free_port()),
        **extra,
    }


@dataclass
class Running:
    """A started `lookout` process whose output goes to a file."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, *, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


@contextmanager
def running(args: list[str], env: Mapping[str, str], log_path: Path, *, stdin: int | None = None) -> Iterator[Running]:
    """`lookout <args>` in the background (stopped with SIGTERM, killed if it will not stop)."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [LOOKOUT, *args], env=dict(env), cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT, stdin=stdin
        )
    handle = Running(process=process, log_path=log_path)
    try:
        yield handle
    finally:
        handle.stop()


def lookout(env: Mapping[str, str], *args: str) -> str:
    """Run a `lookout` command to its end; its output (it must succeed)."""
    done = subprocess.run([LOOKOUT, *args], env=dict(env), capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def wait_for(predicate: Callable[[], bool], *, what: str, seconds: float = 150, every: float = 0.2) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {seconds:.0f} s waiting for {what}"
        time.sleep(every)


class Inspector:
    """Reads what the processes stored (a connection of its own per question)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _ask(self, work: Callable[[Database], Awaitable[_T]]) -> _T:
        async def main() -> _T:
            database = Database(self.url)
            try:
                return await work(database)
            finally:
                await database.dispose()

        return asyncio.run(main())

    def monitors(self) -> list[MonitorRecord]:
        return self._ask(lambda database: MonitorRepository(database).list_all())

    def runs(self, monitor_id: int) -> list[RunRecord]:
        return self._ask(lambda database: RunRepository(database).list_for_monitor(monitor_id, limit=100))
