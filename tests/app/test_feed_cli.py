"""`lookout monitors feed <id> [--new]`: prints the monitor's feed URLs under PUBLIC_URL (the paths and a note to set
it when unset); `--new` replaces the token; an unknown monitor is one clear line. And the operator's whole path:
a run's digest is read back from `lookout run`'s HTTP server at the printed path."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import feedparser
import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.telegram import FakeTelegram, running_fake_telegram
from tests.fresh_payloads import fresh_hn_payload

runner = CliRunner()
TOKEN = r"[A-Za-z0-9_-]{32,}"


def test_feed_prints_urls_and_new_replaces_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    added = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", "terminal", "--sources", "hn"])
    assert added.exit_code == 0, added.output

    bare = runner.invoke(cli, ["monitors", "feed", "1"])
    monkeypatch.setenv("PUBLIC_URL", "https://lookout.example.org/")
    public = runner.invoke(cli, ["monitors", "feed", "1"])
    rotated = runner.invoke(cli, ["monitors", "feed", "1", "--new"])
    missing = runner.invoke(cli, ["monitors", "feed", "9"])

    assert bare.exit_code == 0, bare.output
    path = re.search(rf"Atom: +(/feeds/({TOKEN})\.atom)", bare.output)
    assert path is not None, bare.output
    assert f"/feeds/{path[2]}.json" in bare.output and "PUBLIC_URL is not set" in bare.output
    assert public.exit_code == 0
    assert f"https://lookout.example.org/feeds/{path[2]}.atom" in public.output
    assert f"https://lookout.example.org/feeds/{path[2]}.json" in public.output
    assert "PUBLIC_URL is not set" not in public.output
    assert rotated.exit_code == 0 and "the old ones no longer work" in rotated.output
    new = re.search(rf"https://lookout.example.org/feeds/({TOKEN})\.atom", rotated.output)
    assert new is not None and new[1] != path[2]
    assert missing.exit_code == 2 and "There is no monitor #9." in missing.output


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as fake:
        yield fake


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_run_is_read_back_from_lookout_run(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, telegram: FakeTelegram, tmp_path: Path
) -> None:
    hn = fresh_hn_payload()
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse(body=hn, content_type="application/json"))
    port = _free_port()
    environment = {
        "DATA_DIR": str(tmp_path / "data"),
        "HN_API_URL": f"{fake_server.url}/hn",
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
        "HTTP_PORT": str(port),
        "PUBLIC_URL": "https://lookout.example.org",
    }
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    assert (
        runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn"]).exit_code == 0
    )
    ran = runner.invoke(cli, ["monitors", "run", "1"])
    assert ran.exit_code == 0, ran.output
    printed = runner.invoke(cli, ["monitors", "feed", "1"])
    match = re.search(rf"https://lookout.example.org(/feeds/{TOKEN}\.atom)", printed.output)
    assert match is not None, printed.output

    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "lookout"), "run"],
        env={**os.environ, **environment}, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}{match[1]}"
        deadline = time.monotonic() + 60
        while True:
            try:
                feed = httpx.get(url, timeout=5)
                break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        again = httpx.get(url, headers={"If-None-Match": feed.headers["etag"]}, timeout=5)
        wrong = httpx.get(f"http://127.0.0.1:{port}/feeds/{'x' * 32}.atom", timeout=5)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert feed.status_code == 200, feed.text
    parsed = feedparser.parse(feed.content)
    assert not parsed.bozo and len(parsed.entries) == 1
    [entry] = parsed.entries
    assert entry.title and entry.link.startswith("http") and entry.updated_parsed
    assert parsed.feed.links[0].href == f"https://lookout.example.org{match[1]}"
    assert again.status_code == 304 and wrong.status_code == 404
    assert match[1] not in output  # feed tokens stay out of the log
