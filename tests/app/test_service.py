"""`lookout run` as a real process: migrates, serves /healthz, says which frontends are off, stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.fakes.slack import FakeSlack, SlackSigner, command_body
from tests.fakes.telegram import FakeTelegram

FORM = "application/x-www-form-urlencoded"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(predicate: Callable[[], bool], *, what: str, seconds: float = 120) -> None:
    # Generous: a loaded CI machine can take tens of seconds to start Python with every library imported.
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_run_serves_health_talks_on_telegram_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    telegram = FakeTelegram()
    telegram.start()
    port = _free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "HTTP_PORT": str(port),
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
        "GEMINI_API_KEY": "",
        "LOG_LEVEL": "INFO",
    }
    script = Path(sys.executable).parent / "lookout"
    process = subprocess.Popen(
        [str(script), "run"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        _wait_for(lambda: bool(telegram.commands), what="setMyCommands")
        telegram.push_text(4242, "/help")
        _wait_for(lambda: bool(telegram.texts(4242)), what="the answer to /help")
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert health.status_code == 200
        assert health.json() == {  # every frontend, the one that is off with why (#9.20)
            "status": "ok",
            "checks": {
                "database": "ok", "scheduler": "ok", "delivery": "ok", "telegram": "ok",
                "slack": "off: SLACK_BOT_TOKEN is not set",
            },
        }  # fmt: skip
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        telegram.stop()
    assert process.returncode == 0, output
    assert "/track" in (telegram.texts(4242)[0].text or "")
    assert {command["command"] for command in telegram.commands} >= {"track", "monitors", "digest", "search"}
    assert "telegram: on — long polling" in output
    assert "scheduler: this process leads now" in output and "scheduler started: ticking over the database" in output
    assert "slack: off — SLACK_BOT_TOKEN is not set" in output
    assert "anyone who finds the bot can use it" in output
    assert "garbage collector: " in output and "start-up objects frozen" in output  # app.heap, once assembled
    assert telegram.token.split(":", 1)[1] not in output
    assert output.rstrip().endswith("stopped")
    assert (tmp_path / "data" / "lookout.db").exists()


def test_run_answers_a_signed_slack_command_over_http(tmp_path: Path) -> None:
    slack = FakeSlack()
    slack.start()
    secret = "slack-signing-secret-for-tests"
    port = _free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "HTTP_PORT": str(port),
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_SIGNING_SECRET": secret,
        "SLACK_API_URL": slack.api_url,
        "GEMINI_API_KEY": "",
        "LOG_LEVEL": "INFO",
    }
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "lookout"), "run"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        events = f"http://127.0.0.1:{port}/slack/events"
        _wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), what="/healthz")
        _wait_for(lambda: bool(slack.calls_to("auth.test")), what="auth.test")
        body = command_body("/lookout", "help", channel="C0RESEARCH", user="U0ANN", response_url=slack.response_url())
        forged = httpx.post(
            events, content=body, headers={**SlackSigner("wrong").headers(body, content_type=FORM)}, timeout=5
        )
        ack = httpx.post(events, content=body, headers=SlackSigner(secret).headers(body, content_type=FORM), timeout=5)
        _wait_for(lambda: bool(slack.messages_in("C0RESEARCH")), what="the answer to /lookout help")
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        slack.stop()
    assert process.returncode == 0, output
    assert forged.status_code == 401
    assert ack.status_code == 200 and "on it" in ack.text
    answer = " ".join(slack.messages_in("C0RESEARCH")[0].section_texts())
    assert "/track" in answer
    assert health.json()["checks"]["slack"] == "ok"
    assert health.json()["checks"]["telegram"] == "off: TELEGRAM_BOT_TOKEN is not set"
    assert "slack: on — HTTP mode at /slack/events" in output
    assert secret not in output and slack.token not in output


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
    except httpx.TransportError:
        return False
    return True
