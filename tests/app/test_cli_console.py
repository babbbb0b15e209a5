"""What the one-shot commands print, run as real `lookout` processes with their output piped (#9.16, #9.17, #9.19):
people's lines on the console, every library's log lines in the log file, no hard wrapping in a pipe, and an
exit status a script can trust."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.pty_chat import person_env

LOOKOUT = str(Path(sys.executable).parent / "lookout")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR)|alembic|Adding job|setup plugin")
LONG_TITLE = "DeepSeek " + "with a very long headline that goes on " * 4
LONG_URL = "https://news.example/" + "deepseek-story-path/" * 8 + "index.html"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def lookout(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LOOKOUT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_research_when_every_source_fails_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = person_env(DATA_DIR=str(data), HN_API_URL=f"http://127.0.0.1:{closed_port()}")
    result = lookout("research", "DeepSeek", "--sources", "hn", env=env, cwd=tmp_path)

    assert result.returncode == 1, result
    assert "Every source failed" in result.stderr
    assert "hn failed" in result.stdout
    for line in (result.stdout + result.stderr).splitlines():
        assert not LOG_LINE.search(line), line
    log = (data / "lookout-cli.log").read_text(encoding="utf-8")
    assert "alembic" in log  # the migration library's lines went to the log file instead


def test_research_refuses_an_empty_query_without_searching(tmp_path: Path) -> None:
    result = lookout("research", "  ", env=person_env(DATA_DIR=str(tmp_path / "data")), cwd=tmp_path)
    assert result.returncode == 2
    assert "Give something to look for" in result.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was opened


def test_piped_research_output_is_never_wrapped(fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    hits = {
        "hits": [
            {"objectID": "1", "title": LONG_TITLE, "url": LONG_URL, "author": "a", "points": 10,
             "num_comments": 2, "created_at": "2026-11-20T08:12:05Z", "created_at_i": 1795162325},
        ],
        "nbHits": 1,
    }  # fmt: skip
    body = json.dumps(hits)
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse(body=body, content_type="application/json"))
    env = person_env(DATA_DIR=str(tmp_path / "data"), HN_API_URL=f"{fake_server.url}/hn", COLUMNS="40")
    result = lookout("research", "DeepSeek", "--sources", "hn", env=env, cwd=tmp_path)

    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert f"1. {LONG_TITLE.strip()}" in lines  # one line, however long, and no markdown marks
    assert LONG_URL in lines  # whole: a script or a person can copy it
    assert "\x1b" not in result.stdout
