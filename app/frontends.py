"""The chat frontends `lookout run` serves (Telegram, Slack), built from settings and kept started."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from starlette.routing import BaseRoute
from telegram.error import InvalidToken
from telegram.ext import BaseRateLimiter

from app.settings import Settings
from bots import CredentialsRefusedError, Dispatcher, SlackFrontend, SlotReserver, TelegramFrontend, TelegramOptions
from monitors import ChatSender

__all__ = ["Frontend", "Frontends", "build_frontends", "describe_frontends"]

logger = logging.getLogger(__name__)

MAX_START_BACKOFF_SECONDS = 300.0
"""A platform that is down at start is retried at growing intervals up to this."""


class Frontend(Protocol):
    """What the service needs of a frontend."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def healthy(self) -> bool: ...


@dataclass
class Frontends:
    """The frontends of this process, their HTTP routes, health checks and delivery senders."""

    running: dict[str, Frontend] = field(default_factory=dict)
    routes: list[BaseRoute] = field(default_factory=list)
    senders: dict[str, ChatSender] = field(default_factory=dict)
    """Senders that replace the default per-platform sender (Slack's shares the frontend's client)."""
    _starting: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def checks(self) -> dict[str, Callable[[], Awaitable[bool]]]:
        return {name: frontend.healthy for name, frontend in self.running.items()}

    def start_all(self) -> None:
        """Start every frontend in the background: a platform that is down now is retried, not fatal."""
        for name, frontend in self.running.items():
            self._starting.append(asyncio.create_task(_keep_starting(name, frontend), name=f"start {name}"))

    async def stop_all(self) -> None:
        for task in self._starting:
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        for name, frontend in self.running.items():
            try:
                await frontend.stop()
            except Exception:  # one frontend's failure to stop must not keep the others running
                logger.exception("%s: stopping failed", name)


def _refused(error: BaseException) -> bool:
    """The platform refused our credentials: retrying will not help."""
    return isinstance(error, InvalidToken | CredentialsRefusedError)


async def _keep_starting(name: str, frontend: Frontend) -> None:
    delay = 5.0
    while True:
        try:
            await frontend.start()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if _refused(error):
                logger.error("%s: off — the platform refused the token (%s); fix it and restart", name, error)
                return
            logger.warning("%s: could not connect (%s); retrying in %.0f s", name, error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_START_BACKOFF_SECONDS)
        else:
            return


def build_frontends(
    settings: Settings,
    dispatcher: Dispatcher,
    *,
    telegram_polls: bool = True,
    telegram_limiter: BaseRateLimiter[int] | None = None,
    shared_slots: SlotReserver | None = None,
) -> Frontends:
    """A frontend per platform whose token is set (nothing is started yet). `telegram_polls=False`: Telegram
    connects without long-polling (the process that leads the polling starts it; see `app.leadership`);
    `telegram_limiter` paces every Telegram call and `shared_slots` every Slack post to a channel (limits shared
    through the database by several processes)."""
    frontends = Frontends()
    if settings.telegram_bot_token is not None:
        telegram = TelegramFrontend(
            TelegramOptions(
                token=settings.telegram_bot_token.get_secret_value(),
                api_url=settings.telegram_api_url,
                webhook_url=settings.telegram_webhook_url,
                webhook_secret=(
                    settings.telegram_webhook_secret.get_secret_value() if settings.telegram_webhook_secret else None
                ),
                poll_on_start=telegram_polls,
                rate_limiter=telegram_limiter,
            ),
            dispatcher,
        )
        frontends.running["telegram"] = telegram
        if settings.telegram_webhook_url:
            frontends.routes.append(telegram.webhook_route())
    if settings.slack_bot_token is not None:
        slack = SlackFrontend(
            settings.slack_bot_token.get_secret_value(),
            dispatcher=dispatcher,
            app_token=settings.slack_app_token.get_secret_value() if settings.slack_app_token else None,
            signing_secret=settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None,
            api_url=settings.slack_api_url,
            channel_slots=shared_slots,
            channel_interval=settings.slack_channel_interval,
        )
        frontends.running["slack"] = slack
        frontends.routes.extend(slack.routes())
        frontends.senders["slack"] = slack.sender()
    return frontends


def describe_frontends(settings: Settings) -> dict[str, tuple[bool, str]]:
    """Whether each frontend runs, and why (for the start-up log)."""
    if settings.telegram_bot_token is None:
        telegram = (False, "TELEGRAM_BOT_TOKEN is not set")
    elif settings.telegram_webhook_url:
        telegram = (True, f"webhook at /telegram/webhook for {settings.telegram_webhook_url}; delivering digests")
    else:
        telegram = (True, "long polling; delivering digests")
    if settings.slack_bot_token is None:
        slack = (False, "SLACK_BOT_TOKEN is not set")
    elif settings.slack_app_token is not None:
        slack = (True, "Socket Mode (SLACK_APP_TOKEN); delivering digests")
    else:
        slack = (True, "HTTP mode at /slack/events (SLACK_SIGNING_SECRET); delivering digests")
    return {"telegram": telegram, "slack": slack}
