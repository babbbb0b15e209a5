"""The `lookout` CLI: help on every command, version, database upgrade, and honest messages for what is missing."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

runner = CliRunner()
COMMANDS = [[], ["version"], ["run"], ["chat"], ["db"], ["db", "upgrade"]]


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "lookout"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "Usage: lookout" in result.stdout
    for command in ("run", "chat", "db", "version"):
        assert command in result.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "root")
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_version_names_lookout_and_libraries() -> None:
    result = runner.invoke(cli, ["version"])
    assert result.exit_code == 0
    assert result.output.startswith("lookout 0.1.0\n")
    assert "pydantic-ai-slim 2." in result.output
    assert "python-telegram-bot 22." in result.output


def test_db_upgrade_creates_the_schema_in_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "fresh"))
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "Database is up to date." in result.output
    database = tmp_path / "fresh" / "lookout.db"
    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("select name from sqlite_master where type='table'")}
    assert {"chats", "monitors", "runs", "items", "deliveries", "alembic_version"} <= tables
    again = runner.invoke(cli, ["db", "upgrade"])
    assert again.exit_code == 0


def test_bad_configuration_is_one_sentence_and_exit_code_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIMEZONE", "Nowhere/Special")
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 2
    assert "TIMEZONE must be an IANA name" in result.output
    assert "Traceback" not in result.output


def test_run_with_no_platform_says_the_next_step_and_exits(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "lookout"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DATA_DIR": str(tmp_path / "data")}

    result = subprocess.run(
        [str(script), "run"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "neither TELEGRAM_BOT_TOKEN nor SLACK_BOT_TOKEN is set" in message
    assert "@BotFather" in message and "slack_app_manifest.yaml" in message and "`lookout chat`" in message
    assert result.stdout == ""
    assert not (tmp_path / "data" / "lookout.db").exists()  # nothing started: no database, no scheduler


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [(200, 0, 'healthy: {"database": "ok"}'), (503, 1, "unhealthy (HTTP 503)")],
)
def test_healthcheck_asks_healthz_and_exits_by_its_answer(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, status: int, code: int, said: str
) -> None:
    body = {"status": "ok" if status == 200 else "degraded", "checks": {"database": "ok" if status == 200 else "x"}}
    fake_server.route("GET", "/healthz", FakeResponse.json(body, status=status))
    monkeypatch.setenv("HTTP_HOST", "0.0.0.0")  # what the image sets: asked on the loopback
    monkeypatch.setenv("HTTP_PORT", fake_server.url.rsplit(":", 1)[1])

    result = runner.invoke(cli, ["healthcheck"])

    assert result.exit_code == code, result.output
    assert said in result.output
    assert fake_server.received("/healthz")


def test_healthcheck_with_nothing_listening_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HTTP_PORT", str(port))

    result = runner.invoke(cli, ["healthcheck"])

    assert result.exit_code == 1
    assert f"no answer from http://127.0.0.1:{port}/healthz" in result.output
