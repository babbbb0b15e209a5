"""The chat frontends `lookout run` serves (Telegram, Slack), built from settings and kept started."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from starlette.routing import BaseRoute
from telegram.error import InvalidToken

from app.settings import Settings
from bots import (
    Dispatcher,
    SharedRateLimiter,
    SlotReserver,
    TelegramFrontend,
    TelegramLimits,
    TelegramOptions,
    TelegramSender,
    build_bot,
)
from kernel import Backoff, ChatSender, Sleep

if TYPE_CHECKING:  # Slack's libraries (~30 MB resident) load only in a process that has a Slack token
    from bots import SlackSender

__all__ = ["Frontend", "Frontends", "PlatformSenders", "build_frontends", "describe_frontends", "platform_senders"]

logger = logging.getLogger(__name__)

START_BACKOFF = Backoff(attempts=None, base=5.0, cap=300.0)
"""A platform that is down at start is retried for ever, at jittered doubling intervals up to five minutes."""


class Frontend(Protocol):
    """What the service needs of a frontend."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def healthy(self) -> bool: ...


@dataclass
class PlatformSenders:
    """The process's one sender per configured platform: one Telegram `Bot` with its rate limiter, one Slack web
    client. The frontends answer with them and the delivery worker sends digests with them."""

    telegram: TelegramSender | None = None
    slack: SlackSender | None = None

    def by_platform(self) -> dict[str, ChatSender[Any]]:
        senders: dict[str, ChatSender[Any]] = {}
        if self.telegram is not None:
            senders["telegram"] = self.telegram
        if self.slack is not None:
            senders["slack"] = self.slack
        return senders

    async def close(self) -> None:
        """Release the connections (after the frontends and the worker stopped)."""
        if self.telegram is not None:
            await self.telegram.close()
        # Slack's web client opens a session per request: nothing stays open.


def flood_limits(settings: Settings) -> TelegramLimits:
    """Telegram's flood limits as TELEGRAM_MAX_MESSAGES, TELEGRAM_GROUP_MAX_MESSAGES and their periods say."""
    return TelegramLimits(
        overall=settings.telegram_max_messages,
        period=settings.telegram_rate_period,
        group=settings.telegram_group_max_messages,
        group_period=settings.telegram_group_rate_period,
    )


def shared_telegram_limiter(settings: Settings, slots: SlotReserver) -> SharedRateLimiter | None:
    """The flood limits kept through the database for every process that sends with the token."""
    if settings.telegram_bot_token is None:
        return None
    bot_id = settings.telegram_bot_token.get_secret_value().split(":", 1)[0]  # the public part of the token
    return SharedRateLimiter(slots, token_key=bot_id, limits=flood_limits(settings))


def platform_senders(
    settings: Settings, *, telegram_limits: TelegramLimits | None = None, shared_slots: SlotReserver | None = None
) -> PlatformSenders:
    """One sender per platform whose token is set; `telegram_limits` defaults to the TELEGRAM_* flood limits.
    With `shared_slots` (several processes on one database) the limits are kept through the database instead:
    every Telegram call and every Slack post to a channel reserves its slot there."""
    senders = PlatformSenders()
    if settings.telegram_bot_token is not None:
        bot = build_bot(
            settings.telegram_bot_token.get_secret_value(),
            api_url=settings.telegram_api_url,
            limits=telegram_limits or flood_limits(settings),
            rate_limiter=shared_telegram_limiter(settings, shared_slots) if shared_slots is not None else None,
        )
        senders.telegram = TelegramSender(bot)
    if settings.slack_bot_token is not None:
        from bots import SlackSender, build_web_client

        senders.slack = SlackSender(
            build_web_client(
                settings.slack_bot_token.get_secret_value(),
                api_url=settings.slack_api_url,
                channel_slots=shared_slots,
                channel_interval=settings.slack_channel_interval,
            )
        )
    return senders


@dataclass
class Frontends:
    """The frontends of this process, their HTTP routes and health checks."""

    running: dict[str, Frontend] = field(default_factory=dict)
    routes: list[BaseRoute] = field(default_factory=list)
    sleep: Sleep = asyncio.sleep
    """How start-up retries wait (tests pass one that returns at once)."""
    _starting: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def checks(self) -> dict[str, Callable[[], Awaitable[bool]]]:
        return {name: frontend.healthy for name, frontend in self.running.items()}

    def start_all(self) -> None:
        """Start every frontend in the background: a platform that is down now is retried, not fatal."""
        for name, frontend in self.running.items():
            self._starting.append(asyncio.create_task(_keep_starting(name, frontend, self.sleep), name=f"start {name}"))

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
    if isinstance(error, InvalidToken):
        return True
    from bots import CredentialsRefusedError

    return isinstance(error, CredentialsRefusedError)


async def _keep_starting(name: str, frontend: Frontend, sleep: Sleep) -> None:
    try:
        await START_BACKOFF.call(
            frontend.start, retry_on=lambda error: not _refused(error), sleep=sleep, what=f"{name}: connecting"
        )
    except Exception as error:
        if not _refused(error):
            raise
        logger.error("%s: off — the platform refused the token (%s); fix it and restart", name, error)


def build_frontends(
    settings: Settings, dispatcher: Dispatcher, senders: PlatformSenders, *, telegram_polls: bool = True
) -> Frontends:
    """A frontend per platform whose token is set, answering through the process's one sender of its platform
    (nothing is started yet). `telegram_polls=False`: Telegram connects without long-polling (the process that
    leads the polling starts it; see `app.leadership`)."""
    frontends = Frontends()
    if settings.telegram_bot_token is not None and senders.telegram is not None:
        telegram = TelegramFrontend(
            TelegramOptions(
                token=settings.telegram_bot_token.get_secret_value(),
                api_url=settings.telegram_api_url,
                webhook_url=settings.telegram_webhook_url,
                webhook_secret=(
                    settings.telegram_webhook_secret.get_secret_value() if settings.telegram_webhook_secret else None
                ),
                poll_on_start=telegram_polls,
            ),
            dispatcher,
            senders.telegram,
        )
        frontends.running["telegram"] = telegram
        if settings.telegram_webhook_url:
            frontends.routes.append(telegram.webhook_route())
    if settings.slack_bot_token is not None and senders.slack is not None:
        from bots import SlackFrontend

        slack = SlackFrontend(
            senders.slack,
            dispatcher=dispatcher,
            app_token=settings.slack_app_token.get_secret_value() if settings.slack_app_token else None,
            signing_secret=settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None,
        )
        frontends.running["slack"] = slack
        frontends.routes.extend(slack.routes())
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
