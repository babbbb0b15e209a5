"""`lookout chat`: the terminal chat as a newcomer meets it — zero configuration, commands, a digest delivered
through the outbox with its CSV saved under DATA_DIR/exports — driven through its input stream and, once, as a
real process on a pseudo-terminal (line editing, Ctrl-C, history, Ctrl-D)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from typer.testing import CliRunner

from app.cli import cli
from app.monitoring import monitor_stack
from app.settings import load_settings
from app.wiring import open_database
from storage.repositories import ChatRepository
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fresh_payloads import fresh_hn_payload, fresh_news_payload

PAYLOADS = Path(__file__).resolve().parents[1] / "sources" / "payloads"
GREETING = "Lookout in your terminal"
PROMPT = r"\n> "
runner = CliRunner()


def route_sources(server: FakeHTTPServer, *, hn_prefix: str = "/hn") -> None:
    hn = fresh_hn_payload()  # inside a daily monitor's window: a digest with files
    for path in ("/search", "/search_by_date"):
        server.route("GET", f"{hn_prefix}{path}", FakeResponse(body=hn, content_type="application/json"))
    news = fresh_news_payload()
    server.route("GET", "/news/search", FakeResponse(body=news, content_type="application/rss+xml"))


def source_env(server: FakeHTTPServer, data_dir: Path, *, hn_prefix: str = "/hn") -> dict[str, str]:
    """Every source endpoint on the fake server (the commands below only ever name hn and news)."""
    return {
        "DATA_DIR": str(data_dir),
        "HN_API_URL": f"{server.url}{hn_prefix}",
        "NEWS_RSS_URL": f"{server.url}/news",
        "ARXIV_API_URL": f"{server.url}/arxiv",
        "GITHUB_API_URL": f"{server.url}/github",
        "WIKIPEDIA_API_URL": f"{server.url}/wikipedia",
    }


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, tmp_path: Path) -> dict[str, str]:
    route_sources(fake_server)
    env = source_env(fake_server, tmp_path / "data")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def saved_files(output: str, label: str) -> list[Path]:
    return [Path(line.split(": ", 1)[1]) for line in output.splitlines() if line.startswith(f"{label}: ")]


def test_zero_configuration_chat_works_and_ends_at_end_of_input(isolated_environment: Path) -> None:
    result = runner.invoke(cli, ["chat"], input="/help\nhello\n")
    assert result.exit_code == 0, result.output
    greeting, model_line, works_line, *rest = result.output.splitlines()
    assert greeting.startswith(GREETING) and "/help" in greeting and "Ctrl-D" in greeting
    # One sentence a line, no nested parentheses (#9.25).
    assert (
        model_line
        == "No language model: GEMINI_API_KEY is not set; get a key at aistudio.google.com and put it in .env."
    )
    assert works_line.startswith("Commands work without one. Log: ")
    answers = "\n".join(rest)
    assert "/track <topic> [schedule] [from <sources>]" in answers  # /help
    assert "GEMINI_API_KEY" in answers  # free text explains how to enable the model
    assert "Set LLM_MODEL" not in answers  # it has a default: only the key is missing
    assert "Something went wrong" not in answers and "Traceback" not in result.output
    assert (isolated_environment / "data" / "lookout.db").is_file()  # the embedded SQLite default
    assert (isolated_environment / "data" / "lookout-chat.log").is_file()


def test_track_monitors_digest_with_the_csv_saved(environment: dict[str, str], fake_server: FakeHTTPServer) -> None:
    lines = ["/track DeepSeek daily at 08:30 from hn,news", "/monitors", "/digest 1"]
    result = runner.invoke(cli, ["chat"], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    output = result.output
    assert "Tracking DeepSeek as monitor #1." in output
    assert "#1 DeepSeek" in output and "every day at 08:30" in output  # /monitors
    assert "Monitor #1 ran:" in output  # /digest's own reply ...
    delivered = output.split("── delivered", 1)[1]  # ... and the digest itself, through the outbox
    assert "DeepSeek · " in delivered and "monitor #1" in delivered
    exports = (Path(environment["DATA_DIR"]) / "exports" / "terminal-terminal").resolve()  # the chat's folder
    [csv] = saved_files(delivered, "CSV")
    [chart] = saved_files(delivered, "Chart")
    assert csv.parent == exports and csv.suffix == ".csv" and csv.is_file()
    assert csv.read_bytes().startswith(b"\xef\xbb\xbf")  # the CSV export (BOM for spreadsheets)
    assert chart.parent == exports and chart.read_bytes().startswith(b"\x89PNG")
    assert fake_server.received("/hn/search_by_date") and fake_server.received("/news/search")


def test_a_bad_command_prints_its_usage_and_the_chat_goes_on(environment: dict[str, str]) -> None:
    result = runner.invoke(cli, ["chat"], input="/track\n/pause abc\n/monitors\n")
    assert result.exit_code == 0, result.output
    assert "Usage: /track <topic> [schedule] [from <sources>]" in result.output
    assert "/pause <id>" in result.output
    assert "No monitors in this chat yet" in result.output  # the line after the mistakes was answered


def test_a_digest_queued_while_the_chat_was_closed_is_printed_when_it_runs(environment: dict[str, str]) -> None:
    first = runner.invoke(cli, ["chat"], input="/track DeepSeek daily at 08:30 from hn,news\n")
    assert first.exit_code == 0 and "monitor #1" in first.output

    async def run_monitor_elsewhere() -> None:  # as the scheduler would, with no terminal chat running
        settings = load_settings()
        async with open_database(settings) as database, monitor_stack(settings, database) as stack:
            chat = await ChatRepository(database).find("terminal", "terminal")
            assert chat is not None
            summary = await stack.service.runs.run_now(1, chat.id)
            assert summary.deliveries == 1

    asyncio.run(run_monitor_elsewhere())
    second = runner.invoke(cli, ["chat"], input="")
    assert second.exit_code == 0, second.output
    delivered = second.output.split("── delivered", 1)[1]
    assert "DeepSeek · " in delivered
    [csv] = saved_files(delivered, "CSV")
    assert csv.is_file()


def test_a_scheduled_run_that_fails_is_told_in_the_terminal(
    environment: dict[str, str], fake_server: FakeHTTPServer
) -> None:
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse(status=503, body="maintenance"))
    first = runner.invoke(cli, ["chat"], input="/track DeepSeek daily at 08:30 from hn\n")
    assert first.exit_code == 0 and "monitor #1" in first.output

    async def scheduled_run() -> None:  # as the scheduler fires it
        settings = load_settings()
        async with open_database(settings) as database, monitor_stack(settings, database) as stack:
            summary = await stack.service.runs.run_monitor(1, datetime(2026, 11, 21, 8, 30, tzinfo=UTC))
            assert summary is not None and summary.status == "failed"

    asyncio.run(scheduled_run())
    second = runner.invoke(cli, ["chat"], input="/monitors\n")
    assert second.exit_code == 0, second.output
    delivered = second.output.split("── delivered", 1)[1]
    assert "Monitor #1 “DeepSeek” failed: every source failed." in delivered
    assert "hn: HTTP 503" in delivered and "/pause 1" in delivered
    assert "failed: every source failed: hn: HTTP 503" in second.output  # /monitors says it too


# ---- the real process on a pseudo-terminal -------------------------------------------------------------------


class GatedServer(FakeHTTPServer):
    """The fake server, except that requests under /gated wait until `release()` (work to cancel with Ctrl-C)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()
        self.gated = threading.Event()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/gated"):
            self.gated.set()
            while not self.released.is_set():
                await asyncio.sleep(0.05)
        return await super()._handle(request)


@pytest.fixture
def gated_server() -> Iterator[GatedServer]:
    server = GatedServer()
    server.start()
    try:
        yield server
    finally:
        server.released.set()
        server.stop()


class Terminal:
    """`lookout chat` on a pseudo-terminal that is its controlling terminal (so Ctrl-C sends SIGINT)."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "lookout"), "chat"],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )  # fmt: skip
        os.close(slave)
        self.screen = ""

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 90) -> int:
        """Read until `pattern` (a regex) shows up after position `after`; returns where its match ends."""
        deadline = time.monotonic() + timeout
        while (match := re.compile(pattern).search(self.screen, after)) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never appeared; the screen:\n{self.screen}")
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536).decode(errors="replace")
                except OSError:  # the process ended and closed the terminal
                    time.sleep(0.2)
        return match.end()

    def type(self, keys: str) -> int:
        """Send keystrokes; returns the screen position before them."""
        position = len(self.screen)
        os.write(self.master, keys.encode())
        return position

    def close(self) -> int:
        try:
            return self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            os.close(self.master)


def test_a_real_terminal_session(gated_server: GatedServer, tmp_path: Path) -> None:
    route_sources(gated_server, hn_prefix="/gated/hn")
    data_dir = tmp_path / "data"
    env = {**os.environ, **source_env(gated_server, data_dir, hn_prefix="/gated/hn"), "TERM": "xterm"}
    for name in ("GEMINI_API_KEY", "DATABASE_URL", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN"):
        env.pop(name, None)
    terminal = Terminal(env, tmp_path)
    try:
        prompt = terminal.wait_for(PROMPT)  # after the greeting and the start-up
        assert GREETING in terminal.screen[:prompt]

        # Ctrl-C at the prompt drops the half-typed line; the next line is sent alone.
        at = terminal.type("/untrack 42")
        terminal.wait_for("/untrack 42", after=at)  # readline is reading (and echoing) the line
        at = terminal.wait_for(PROMPT, after=terminal.type("\x03"))
        at = terminal.type("/track DeepSeek daily at 08:30 from news\r")
        terminal.wait_for(r"Tracking .*DeepSeek.* as monitor #1[\s\S]*" + PROMPT, after=at)
        assert "#42" not in terminal.screen

        # The digest arrives through the outbox while the chat runs, with its files saved.
        start = terminal.type("/digest 1\r")
        end = terminal.wait_for(r"Chart: \S+\.png", after=start)
        digest = terminal.screen[start:end]
        assert "delivered" in digest and "DeepSeek" in digest
        csv = Path(re.findall(r"CSV: (\S+\.csv)", digest)[0])
        assert csv.is_file() and csv.parent == (data_dir / "exports" / "terminal-terminal").resolve()
        terminal.wait_for(r"Monitor #1 ran[\s\S]*" + PROMPT, after=start)

        # Ctrl-C while work runs cancels it, and the chat goes on.
        terminal.wait_for(r"as monitor #2[\s\S]*" + PROMPT, after=terminal.type("/track Mistral daily from hn\r"))
        terminal.type("/digest 2\r")
        assert gated_server.gated.wait(timeout=90), "the monitor never reached its source"
        terminal.wait_for(r"Cancelled\.[\s\S]*" + PROMPT, after=terminal.type("\x03"))
        terminal.wait_for(r"#2 Mistral[\s\S]*" + PROMPT, after=terminal.type("/monitors\r"))

        terminal.type("\x04")  # Ctrl-D at an empty prompt
        assert terminal.close() == 0, terminal.screen
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    history = (data_dir / "chat_history").read_text()
    assert "/digest 1" in history and "/untrack 42" not in history
    assert "Traceback" not in terminal.screen


def test_sigterm_ends_the_chat_cleanly_with_its_history_saved(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = {**os.environ, "DATA_DIR": str(data_dir), "TERM": "xterm"}
    for name in ("GEMINI_API_KEY", "DATABASE_URL", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN"):
        env.pop(name, None)
    terminal = Terminal(env, tmp_path)
    try:
        terminal.wait_for(PROMPT)
        terminal.wait_for(r"No monitors in this chat yet[\s\S]*" + PROMPT, after=terminal.type("/monitors\r"))
        terminal.process.send_signal(signal.SIGTERM)
        assert terminal.close() == 128 + signal.SIGTERM, terminal.screen
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
    assert "/monitors" in (data_dir / "chat_history").read_text()
    assert "Traceback" not in terminal.screen
