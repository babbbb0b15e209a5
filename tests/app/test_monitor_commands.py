"""An operator's whole path: `lookout monitors add/run/list`, then `lookout run` delivers to Telegram (fakes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.telegram import FakeTelegram, running_fake_telegram
from tests.fresh_payloads import fresh_hn_payload, fresh_news_payload

PAYLOADS = Path(__file__).resolve().parents[1] / "sources" / "payloads"
CHAT = "4242"
runner = CliRunner()


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as fake:
        yield fake


@pytest.fixture
def environment(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, telegram: FakeTelegram, tmp_path: Path
) -> dict[str, str]:
    hn = fresh_hn_payload()
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse(body=hn, content_type="application/json"))
    news = fresh_news_payload()
    fake_server.route("GET", "/news/search", FakeResponse(body=news, content_type="application/rss+xml"))
    env = {
        "DATA_DIR": str(tmp_path / "data"),
        "HN_API_URL": f"{fake_server.url}/hn",
        "NEWS_RSS_URL": f"{fake_server.url}/news",
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_add_run_list_then_the_service_delivers_to_telegram(
    environment: dict[str, str], telegram: FakeTelegram, tmp_path: Path
) -> None:
    added = runner.invoke(
        cli, ["monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--schedule", "daily at 08:30",
              "--sources", "hn,news"],
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "DeepSeek" in added.output and "08:30" in added.output

    listed = runner.invoke(cli, ["monitors", "list"])
    assert listed.exit_code == 0 and "DeepSeek" in listed.output

    ran = runner.invoke(cli, ["monitors", "run", "1"])
    assert ran.exit_code == 0, ran.output
    csv_line = next(line for line in ran.output.splitlines() if line.startswith("CSV:"))
    assert Path(csv_line.split(maxsplit=1)[1]).exists()
    assert telegram.sent(CHAT) == []  # queued in the outbox; the service sends it

    port = _free_port()
    env = {**os.environ, **environment, "HTTP_PORT": str(port)}
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "lookout"), "run"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            telegram.documents(CHAT) and telegram.photos(CHAT) and telegram.calls_to("getUpdates")
        ):
            time.sleep(0.2)
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    texts = telegram.texts(CHAT)
    assert texts and texts[0].parse_mode == "HTML" and "DeepSeek" in (texts[0].text or "")
    [document] = telegram.documents(CHAT)
    assert document.filename is not None and document.filename.endswith(".csv")
    assert document.content is not None and document.content.startswith(b"\xef\xbb\xbf")  # the BOM
    assert len(telegram.photos(CHAT)) == 1
    assert health.json() == {
        "status": "ok",
        "checks": {
            "database": "ok", "scheduler": "ok", "delivery": "ok", "telegram": "ok",
            "slack": "off: SLACK_BOT_TOKEN is not set",
        },
    }  # fmt: skip
    assert "telegram: on — long polling; delivering digests" in output
    assert telegram.token not in output


def test_bad_input_is_one_clear_line(environment: dict[str, str]) -> None:
    too_often = runner.invoke(
        cli, ["monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--schedule", "every 5 minutes"]
    )
    assert too_often.exit_code == 2 and "too often" in too_often.output
    no_chat = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", "myspace:1"])
    assert (
        no_chat.exit_code == 2 and "--chat must be telegram:<chat id> (a number), slack:<channel id>" in no_chat.output
    )
    missing = runner.invoke(cli, ["monitors", "pause", "99"])
    assert missing.exit_code == 2 and "#99" in missing.output
    assert "Traceback" not in too_often.output + no_chat.output + missing.output
    # a message that starts or ends with a quoted value keeps both quotes
    zone = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--timezone", "Mars/Base"])
    assert zone.exit_code == 2 and '"Mars/Base" is not a timezone' in zone.output
    feed = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--sources", "rss:ftp://x"])
    assert feed.exit_code == 2 and "got 'ftp://x'" in feed.output


def test_every_platform_lookout_serves_is_a_chat_and_ids_are_checked(environment: dict[str, str]) -> None:
    """#9.18: Slack channels and the terminal chat are accepted; an id that is not the platform's is refused."""
    for chat in ("slack:C0123456", "telegram:-1001234567890", "terminal"):
        added = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", chat, "--schedule", "daily"])
        assert added.exit_code == 0, (chat, added.output)
        assert f"owner {chat if chat != 'terminal' else 'terminal:terminal'}" in added.output
    for chat in ("telegram:abc", "slack:general", "slack:", "terminal:someone", "C0123456"):
        refused = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", chat])
        assert refused.exit_code == 2, (chat, refused.output)
        assert "--chat must be" in refused.output and f"got “{chat}”" in refused.output
    listed = runner.invoke(cli, ["monitors", "list"])
    assert listed.output.count("DeepSeek") == 3


def test_list_and_run_print_for_people_with_the_owner_of_each_monitor(
    environment: dict[str, str], fake_server: FakeHTTPServer
) -> None:
    """#9.16: no raw markdown (`**#1 …**`, `[title](url)`), and every chat's monitors say whose they are."""
    runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", f"telegram:{CHAT}", "--sources", "hn"])
    runner.invoke(cli, ["monitors", "add", "Mistral", "--chat", "slack:C0123456", "--sources", "hn"])

    listed = runner.invoke(cli, ["monitors", "list"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert any(line.startswith("#1 DeepSeek — ") and line.endswith(f"owner telegram:{CHAT}") for line in lines)
    assert any(line.startswith("#2 Mistral — ") and line.endswith("owner slack:C0123456") for line in lines)

    ran = runner.invoke(cli, ["monitors", "run", "1"])
    assert ran.exit_code == 0, ran.output
    assert "**" not in ran.output and "](" not in ran.output
    assert "Sources\n[1] " in ran.output  # the numbered source list, each with its address in brackets
    assert "(https://" in ran.output
