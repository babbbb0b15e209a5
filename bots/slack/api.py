"""Talking to the Slack Web API: the client with its retry handlers, posting Block Kit messages and files, errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bots.shared_limits import SlotReserver
from bots.slack.render import SlackMessage, blocks_payload, escape_mrkdwn
from kernel import Attachment, Backoff, parse_retry_after

logger = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
GONE_ERRORS = frozenset({"channel_not_found", "not_in_channel", "is_archived", "account_inactive"})
"""Slack errors after which posting to the channel will never work again without a person acting."""
NO_ACCESS_ERRORS = frozenset({"channel_not_found", "not_in_channel"})
"""The bot may not post into the channel (a slash command used where the bot is no member)."""


class BoundedRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """The SDK's 429 handler (it sleeps `Retry-After` seconds, then retries), except when Slack asks for a longer
    wait than `max_wait`: then the error surfaces, so the delivery worker reschedules instead of a task sleeping."""

    def __init__(self, *, max_retry_count: int = 2, max_wait: float = 30.0) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait = max_wait
        self.backoff = Backoff(attempts=None, max_wait=max_wait)

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        values = next((v for name, v in response.headers.items() if name.lower() == "retry-after"), None)
        wait = parse_retry_after(values[0] if isinstance(values, list) and values else values or None)  # type: ignore[arg-type]
        # The shared give-up rule: a wait longer than max_wait surfaces instead of holding a task asleep.
        return self.backoff.delay(state.current_attempt + 1, wait) is not None


def retry_handlers(*, max_rate_limit_wait: float = 30.0) -> list[AsyncRetryHandler]:
    """Connection resets, 500/503 and 429 (honouring `Retry-After`) are retried by the SDK itself."""
    return [
        AsyncConnectionErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2),
        BoundedRateLimitRetryHandler(max_wait=max_rate_limit_wait),
    ]


POSTING_METHODS = frozenset({"chat.postMessage", "files.completeUploadExternal"})
"""The calls that put a message in a channel, which Slack limits to about one a second per channel."""


class ChannelPacedWebClient(AsyncWebClient):
    """An `AsyncWebClient` that waits for the channel's slot before each post: slots every process shares
    (`bots.SlotReserver`), so several workers posting to one channel stay near one message a second."""

    def __init__(self, *, slots: SlotReserver, interval: float, **options: Any) -> None:
        super().__init__(**options)
        self._slots, self._interval = slots, interval

    async def api_call(self, api_method: str, **options: Any) -> Any:
        if api_method in POSTING_METHODS and self._interval > 0:
            payload = {**(options.get("params") or {}), **(options.get("data") or {}), **(options.get("json") or {})}
            channel = payload.get("channel") or payload.get("channel_id")
            if isinstance(channel, str) and channel:
                wait = await self._slots.reserve(f"slack:channel:{channel}", interval=self._interval)
                if wait > 0:
                    await asyncio.sleep(wait)
        return await super().api_call(api_method, **options)


def build_web_client(
    token: str,
    *,
    api_url: str = DEFAULT_API_URL,
    max_rate_limit_wait: float = 30.0,
    timeout: int = 30,
    channel_slots: SlotReserver | None = None,
    channel_interval: float = 1.0,
) -> AsyncWebClient:
    """An `AsyncWebClient` for the bot token at `api_url` (SLACK_API_URL) with the retry handlers above; with
    `channel_slots`, posts to one channel are paced by slots every process shares."""
    options: dict[str, Any] = {
        "token": token,
        "base_url": api_url,
        "timeout": timeout,
        "retry_handlers": retry_handlers(max_rate_limit_wait=max_rate_limit_wait),
        "logger": logging.getLogger("slack_sdk.web.async_client"),
    }
    if channel_slots is not None:
        return ChannelPacedWebClient(slots=channel_slots, interval=channel_interval, **options)
    return AsyncWebClient(**options)


def error_code(error: SlackApiError) -> str:
    """Slack's error string ("channel_not_found", "ratelimited", …) of a failed call."""
    data = getattr(error.response, "data", None)
    if isinstance(data, dict):
        return str(data.get("error") or "unknown_error")
    return "unknown_error"


def retry_after_seconds(error: SlackApiError) -> float | None:
    """The `Retry-After` of a 429, in seconds (None when absent or garbled)."""
    headers = getattr(error.response, "headers", None) or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    return parse_retry_after(value if isinstance(value, str) else None)


def is_rate_limited(error: SlackApiError) -> bool:
    return getattr(error.response, "status_code", None) == 429 or error_code(error) == "ratelimited"


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, SlackClientError)
"""Network failures and SDK request errors (e.g. a failed file upload): worth trying again later."""


class SlackPoster:
    """Posts rendered messages, status updates and files to Slack channels with one `AsyncWebClient`."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def post(self, channel: str, message: SlackMessage, *, thread_ts: str | None = None) -> str:
        """chat.postMessage; returns the new message's ts."""
        response = await self.client.chat_postMessage(
            channel=channel,
            text=message.text,
            blocks=blocks_payload(message.blocks) or None,
            thread_ts=thread_ts or None,
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response.get("ts") or "")

    async def post_text(self, channel: str, text: str, *, thread_ts: str | None = None) -> str:
        """chat.postMessage with mrkdwn text only (status lines)."""
        response = await self.client.chat_postMessage(channel=channel, text=text, thread_ts=thread_ts or None)
        return str(response.get("ts") or "")

    async def update_text(self, channel: str, ts: str, text: str) -> None:
        """chat.update of a message we posted."""
        await self.client.chat_update(channel=channel, ts=ts, text=text)

    async def upload(
        self, channel: str, file: Attachment, *, thread_ts: str | None = None, comment: str | None = None
    ) -> bool:
        """files_upload_v2 into the channel (and thread), `comment` (plain text, a file's caption) shown as written:
        Slack reads a file's comment as mrkdwn. False when the file is gone from disk."""
        try:
            content = await asyncio.to_thread(file.path.read_bytes)
        except OSError as error:  # cleaned up since it was written: the rest of the reply still goes
            logger.warning("attachment %s is unreadable (%s); skipped", file.path, error)
            return False
        await self.client.files_upload_v2(
            channel=channel,
            thread_ts=thread_ts or None,
            content=content,
            filename=file.filename,
            title=file.filename,
            initial_comment=escape_mrkdwn(comment) if comment else None,
        )
        return True


async def post_to_response_url(
    url: str, messages: Sequence[SlackMessage], *, in_channel: bool = True, handlers: list[AsyncRetryHandler]
) -> None:
    """Post messages through a slash command's `response_url` (works where the bot is no channel member)."""
    webhook = AsyncWebhookClient(url=url, retry_handlers=handlers)
    for message in messages:
        response = await webhook.send(
            text=message.text,
            blocks=blocks_payload(message.blocks) or None,
            response_type="in_channel" if in_channel else "ephemeral",
            unfurl_links=False,
            unfurl_media=False,
        )
        if response.status_code != 200:
            raise SlackClientError(f"response_url answered {response.status_code}: {response.body[:200]}")


__all__ = [
    "DEFAULT_API_URL",
    "GONE_ERRORS",
    "NO_ACCESS_ERRORS",
    "TRANSIENT_ERRORS",
    "BoundedRateLimitRetryHandler",
    "SlackPoster",
    "build_web_client",
    "error_code",
    "is_rate_limited",
    "post_to_response_url",
    "retry_after_seconds",
    "retry_handlers",
]
