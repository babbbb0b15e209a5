"""`lookout monitors subscribe <id> --to <url>` and `lookout destinations list|test|remove|briefing` as an operator
runs them: URLs printed masked (also in the CLI's log file), a webhook's secret printed once, bad URLs refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, running_fake_server

runner = CliRunner()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ALLOW_PRIVATE_URLS", "true")  # the receivers are on 127.0.0.1
    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    for name in ("ALLOWED_USERS", "ALLOWED_CHATS", "ADMIN_USERS", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def receiver() -> Iterator[FakeHTTPServer]:
    with running_fake_server() as server:
        server.route("POST", "/hook/p4th-t0ken", FakeResponse(status=204))
        yield server


def lookout(*args: str) -> tuple[int, str]:
    result = runner.invoke(cli, list(args))
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def test_a_webhook_destination_is_added_listed_tested_and_removed(environment: Path, receiver: FakeHTTPServer) -> None:
    assert lookout("monitors", "add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn")[0] == 0
    url = f"webhook+{receiver.url}/hook/p4th-t0ken"
    label = f"webhook+http://127.0.0.1:{receiver.port}/…"

    added = lookout("monitors", "subscribe", "1", "--to", url)
    again = lookout("monitors", "subscribe", "1", "--to", url)
    listed = lookout("destinations", "list")
    tested = lookout("destinations", "test", "1")
    removed = lookout("destinations", "remove", "1")
    after = lookout("destinations", "list")

    assert added[0] == 0 and added[1].startswith(f"Destination #1 {label} now receives monitor #1 “DeepSeek”")
    assert "Signing secret (shown only now):" in added[1]
    assert again[0] == 0 and "already received" in again[1] and "Signing secret" not in again[1]
    assert listed == (0, f"• #1 webhook {label}: #1\n")
    assert tested == (0, f"Test sent to destination #1 {label}: it went through.\n")
    assert removed == (0, f"Destination #1 {label} removed.\n")
    assert after[0] == 0 and after[1].startswith("No destinations yet")
    [post] = receiver.received("/hook/p4th-t0ken", "POST")
    assert json.loads(post.body)["event"] == "test"
    secret = added[1].split("Signing secret (shown only now): ")[1].split(" ")[0]
    log = (environment / "data" / "lookout-cli.log").read_text()
    for output in (added[1], again[1], listed[1], tested[1], removed[1], log):
        assert "p4th-t0ken" not in output
    assert secret not in log


def test_bad_destinations_are_refused_in_one_sentence(environment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert lookout("monitors", "add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn")[0] == 0

    malformed = lookout("monitors", "subscribe", "1", "--to", "mailto://")
    neither = lookout("monitors", "subscribe", "1")
    both = lookout("monitors", "subscribe", "1", "--chat", "terminal", "--to", "ntfy://topic")
    monkeypatch.setenv("ALLOW_PRIVATE_URLS", "false")
    private = lookout(
        "monitors", "subscribe", "1", "--to", "mailto://bob:pw-s3cret@10.0.0.7:2525?to=a@example.com&from=l@example.com"
    )
    missing = lookout("destinations", "test", "7")

    assert malformed[0] == 2 and malformed[1].startswith("Apprise cannot read that mailto:// URL")
    assert neither == (2, "Give either --chat or --to.\n")
    assert both == (2, "Give either --chat or --to.\n")
    assert private[0] == 2 and private[1].startswith("10.0.0.7 is a private or loopback address")
    assert "pw-s3cret" not in private[1]
    assert missing[0] == 2 and missing[1].startswith("There is no destination #7")
    assert lookout("destinations", "list")[1].startswith("No destinations yet")
