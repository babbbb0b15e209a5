"""`lookout doctor` against the fake servers: every configured part green, then each part broken in turn (one clear
line naming it, exit 1), and never a secret in what it prints."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai import models
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.gemini import FakeGemini, FakeGeminiEmbeddings
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

PAYLOADS = Path(__file__).resolve().parents[1] / "sources" / "payloads"
runner = CliRunner()


@dataclass
class Parts:
    """Every outside part doctor checks, each a fake, and the environment that names them."""

    server: FakeHTTPServer
    gemini: FakeGemini
    embeddings: FakeGeminiEmbeddings
    telegram: FakeTelegram
    slack: FakeSlack
    monkeypatch: pytest.MonkeyPatch
    port: int

    def doctor(self) -> tuple[int, list[str]]:
        self.gemini.reply_text("OK")  # after any error a breakage queued, which is served first
        with models.override_allow_model_requests(True):
            result = runner.invoke(cli, ["doctor"])
        for secret in (self.telegram.token, self.slack.token, self.gemini.api_key, "openalex-key-123", "pw-secret"):
            assert secret not in result.output
        return result.exit_code, result.output.splitlines()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def parts(fake_server: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Parts]:
    gemini = FakeGemini(fake_server, api_key="gemini-key-for-doctor")
    embeddings = FakeGeminiEmbeddings(fake_server, api_key="gemini-key-for-doctor")
    works = (PAYLOADS / "openalex_works.json").read_bytes()
    fake_server.route("GET", "/works", FakeResponse(body=works, content_type="application/json"))
    telegram, slack = FakeTelegram(), FakeSlack()
    telegram.start()
    slack.start()
    port = _free_port()
    for name, value in {
        "DATA_DIR": str(tmp_path / "data"),
        "HTTP_PORT": str(port),
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_URL": telegram.url,
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_APP_TOKEN": slack.app_token,
        "SLACK_API_URL": slack.api_url,
        "GEMINI_API_KEY": gemini.api_key,
        "GEMINI_BASE_URL": gemini.url,
        "LLM_MODEL": f"google:{gemini.model}",
        "LLM_HEAVY_MODEL": f"google:{gemini.model}",
        "EMBEDDING_MODEL": f"google:{embeddings.model}",
        "OPENALEX_API_KEY": "openalex-key-123",
        "OPENALEX_API_URL": fake_server.url,
    }.items():
        monkeypatch.setenv(name, value)
    try:
        yield Parts(fake_server, gemini, embeddings, telegram, slack, monkeypatch, port)
    finally:
        telegram.stop()
        slack.stop()


def test_every_configured_part_answers(parts: Parts) -> None:
    code, lines = parts.doctor()

    assert code == 0, lines
    assert lines[-1] == "Every check passed."
    by_name = {line.split(":", 1)[0].split(maxsplit=1)[1]: line for line in lines[:-1]}
    assert list(by_name) == [
        "database", "telegram", "slack", "language model", "embedding model", "source openalex",
        f"http port {parts.port}",
    ]  # fmt: skip
    assert all(line.startswith("ok ") for line in lines[:-1])
    assert "to apply" in by_name["database"]  # a fresh database: the first start migrates it
    assert "@" in by_name["telegram"]
    assert by_name["language model"].endswith("google:gemini-test answered")  # light and heavy are one model
    assert len(parts.gemini.requests) == 1 and parts.gemini.requests[0].body["generationConfig"]["maxOutputTokens"] == 1
    assert parts.embeddings.texts_embedded == ["ok"]
    assert parts.server.received("/works")[0].query["api_key"] == "openalex-key-123"
    assert [call for call in parts.slack.calls_to("auth.test")]


def test_nothing_configured_is_off_not_failed(parts: Parts) -> None:
    for name in ("TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "GEMINI_API_KEY", "OPENALEX_API_KEY"):
        parts.monkeypatch.delenv(name)

    code, lines = parts.doctor()

    assert code == 0, lines
    assert [line.split(maxsplit=1)[0] for line in lines[:-1]] == ["ok", "off", "off", "off", "off", "ok"]
    assert "off   telegram: TELEGRAM_BOT_TOKEN is not set" in lines


def _unreachable_model_server(parts: Parts) -> None:
    """An OpenAI-compatible server that is not running (port 9), its URL with credentials that must not be shown."""
    parts.monkeypatch.setenv("LLM_MODEL", "openai-chat:local-model")
    parts.monkeypatch.delenv("LLM_HEAVY_MODEL")
    parts.monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pw-secret@127.0.0.1:9/v1")
    parts.monkeypatch.setenv("OPENAI_API_KEY", "none")


def _hold_the_port(parts: Parts) -> Callable[[], None]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", parts.port))
    holder.listen()
    return holder.close


BREAKAGES: dict[str, tuple[Callable[[Parts], Callable[[], None] | None], str]] = {
    "database": (
        lambda p: p.monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://lookout:pw-secret@127.0.0.1:1/lookout"),
        "FAIL  database: cannot open postgresql+asyncpg://lookout:***@127.0.0.1:1/lookout: ",
    ),
    "telegram": (
        lambda p: p.monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999999:WRONG-token-for-the-doctor-test"),
        "FAIL  telegram: the token was refused (getMe: Unauthorized): check TELEGRAM_BOT_TOKEN",
    ),
    "slack": (
        lambda p: p.monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-wrong-token"),
        "FAIL  slack: auth.test refused the token (invalid_auth): check SLACK_BOT_TOKEN",
    ),
    "language model": (
        lambda p: p.gemini.reply_error(403, "PERMISSION_DENIED", "API key not valid."),
        "FAIL  language model: google:gemini-test: ",
    ),
    "unreachable model server": (
        lambda p: _unreachable_model_server(p),
        "FAIL  language model: openai:local-model: connection error (server http://127.0.0.1:9)",
    ),
    "embedding model": (
        lambda p: p.embeddings.fail_with(403, "PERMISSION_DENIED", "API key not valid."),
        "FAIL  embedding model: google:gemini-embedding-001: ",
    ),
    "source": (
        lambda p: p.server.route(
            "GET", "/works", FakeResponse(body=(PAYLOADS / "openalex_forbidden.json").read_bytes(), status=403)
        ),
        "FAIL  source openalex: rate-limited (HTTP 403)",  # OpenAlex's 403 for a key over its budget
    ),
    "http port": (_hold_the_port, "FAIL  http port "),
}


@pytest.mark.parametrize("part", list(BREAKAGES))
def test_each_broken_part_is_one_clear_line_and_exit_1(parts: Parts, part: str) -> None:
    breaking, expected = BREAKAGES[part]
    undo = breaking(parts)
    try:
        code, lines = parts.doctor()
    finally:
        if undo is not None:
            undo()

    assert code == 1, lines
    failed = [line for line in lines if line.startswith("FAIL")]
    assert len(failed) == 1 and failed[0].startswith(expected), lines
    assert lines[-1] == "1 check failed."
