"""Which frontends `lookout run` builds from settings, and how a platform that is down at start is retried."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from telegram.error import InvalidToken

from app.assembly import access_policy
from app.frontends import Frontends, build_frontends, describe_frontends, platform_senders
from app.settings import load_settings
from bots.dispatcher import Dispatcher
from bots.slack.frontend import CredentialsRefusedError
from bots.slack.sender import SlackSender
from monitors import ChatService
from storage import Database


class FlakyPlatform:
    """A frontend whose platform refuses connections a few times (or rejects the token for good)."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.attempts = 0
        self.started = asyncio.Event()
        self.stopped = False

    async def start(self) -> None:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        self.started.set()

    async def stop(self) -> None:
        self.stopped = True

    async def healthy(self) -> bool:
        return self.started.is_set()


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


async def test_a_platform_down_at_start_is_retried_until_it_answers() -> None:
    platform = FlakyPlatform([ConnectionError("down"), TimeoutError("slow")])
    frontends = Frontends(running={"telegram": platform}, sleep=no_wait)
    frontends.start_all()
    await asyncio.wait_for(platform.started.wait(), timeout=10)
    assert platform.attempts == 3
    assert await frontends.checks["telegram"]()
    await frontends.stop_all()
    assert platform.stopped


@pytest.mark.parametrize(
    "refusal", [InvalidToken("Unauthorized"), CredentialsRefusedError("Slack refused SLACK_BOT_TOKEN: invalid_auth")]
)
async def test_a_refused_token_is_not_retried(refusal: Exception, caplog: pytest.LogCaptureFixture) -> None:
    platform = FlakyPlatform([refusal])
    frontends = Frontends(running={"telegram": platform}, sleep=no_wait)
    frontends.start_all()
    await asyncio.gather(*frontends._starting)
    assert platform.attempts == 1
    assert not await frontends.checks["telegram"]()
    assert "refused the token" in caplog.text
    await frontends.stop_all()


async def test_slack_in_http_mode_mounts_its_route_and_delivers_digests(tmp_path: Path) -> None:
    settings = load_settings(
        _env_file=None,
        data_dir=tmp_path,
        slack_bot_token="xoxb-1",
        slack_signing_secret="secret",
        telegram_bot_token="1:abc",
        telegram_webhook_url="https://bot.example.org/telegram/webhook",
        telegram_webhook_secret="hook-secret",
    )
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    try:
        senders = platform_senders(settings)
        dispatcher = Dispatcher(ChatService(database), conversation=None, access=access_policy(settings))  # type: ignore[arg-type]
        built = build_frontends(settings, dispatcher, senders)
    finally:
        await database.dispose()
    assert set(built.running) == {"telegram", "slack"}
    assert {getattr(route, "path", None) for route in built.routes} == {"/slack/events", "/telegram/webhook"}
    assert isinstance(senders.slack, SlackSender)
    assert set(senders.by_platform()) == {"telegram", "slack"}  # digests go through the frontends' senders
    assert set(built.checks) == {"telegram", "slack"}


def test_the_start_up_log_says_which_mode_each_frontend_runs_in() -> None:
    socket = load_settings(_env_file=None, slack_bot_token="xoxb-1", slack_app_token="xapp-1")
    described = describe_frontends(socket)
    assert described["slack"] == (True, "Socket Mode (SLACK_APP_TOKEN); delivering digests")
    assert described["telegram"] == (False, "TELEGRAM_BOT_TOKEN is not set")
