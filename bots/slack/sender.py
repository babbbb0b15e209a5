"""Delivers monitor digests to Slack channels: Block Kit messages (header, sections, dividers), then files."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.delivered_parts import DeliveredParts
from bots.slack.api import (
    DEFAULT_API_URL,
    GONE_ERRORS,
    TRANSIENT_ERRORS,
    SlackPoster,
    build_web_client,
    error_code,
    is_rate_limited,
    retry_after_seconds,
)
from bots.slack.render import HEADER_TEXT_LIMIT, SlackMessage, plain_text, reply_messages
from monitors import Attachment, ChatGone, DeliveryError, OutgoingDigest, RetryLater
from storage import ChatRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class _Step:
    """One API call of a delivery: a message, or a file upload."""

    message: SlackMessage | None = None
    attachment: Attachment | None = None


class SlackSender:
    """A `monitors.delivery.ChatSender` for Slack: the digest as Block Kit messages, the CSV and chart as files.

    The digest's first line (topic and date) becomes a header block; the rest becomes sections of at most 3,000
    characters, at most 50 blocks per message, several messages when needed. Attachments follow through
    `files_upload_v2` into the channel. The web client's retry handlers already wait out short 429s; what is
    left maps to the worker's errors: `ratelimited` → `RetryLater(retry_after)`; channel_not_found,
    not_in_channel, is_archived, account_inactive → `ChatGone`; network failures → `RetryLater`; any other
    Slack error → `DeliveryError` (retried with backoff).

    A retried delivery skips the parts this process already posted to that channel.
    """

    def __init__(self, client: AsyncWebClient) -> None:
        self._poster = SlackPoster(client)
        self._delivered = DeliveredParts()

    @classmethod
    def from_token(
        cls, token: str, *, api_url: str = DEFAULT_API_URL, max_rate_limit_wait: float = 30.0
    ) -> SlackSender:
        """A sender with its own web client (SLACK_BOT_TOKEN at SLACK_API_URL)."""
        return cls(build_web_client(token, api_url=api_url, max_rate_limit_wait=max_rate_limit_wait))

    async def send(self, chat: ChatRecord, message: OutgoingDigest) -> None:
        """Post the messages, then upload the attachments; raises `RetryLater`, `ChatGone` or `DeliveryError`."""
        channel = chat.external_id
        await self._delivered.send_remaining(
            chat, message, _steps(message), lambda step: self._send_step(channel, step)
        )

    async def _send_step(self, channel: str, step: _Step) -> None:
        try:
            if step.message is not None:
                await self._poster.post(channel, step.message)
            elif step.attachment is not None:
                await self._poster.upload(channel, step.attachment)
        except SlackApiError as error:
            raise delivery_error(error) from error
        except TRANSIENT_ERRORS as error:
            raise RetryLater(f"network error talking to Slack: {type(error).__name__}: {error}") from error


def delivery_error(error: SlackApiError) -> DeliveryError:
    """The worker's error for a failed Slack call."""
    code = error_code(error)
    if is_rate_limited(error):
        return RetryLater(f"Slack rate limit ({code})", retry_after=retry_after_seconds(error))
    if code in GONE_ERRORS:
        return ChatGone(f"Slack: {code}")
    status = getattr(error.response, "status_code", 200)
    if isinstance(status, int) and status >= 500:
        return RetryLater(f"Slack answered {status} ({code})")
    return DeliveryError(f"Slack refused the message: {code}")


def digest_messages(text: str) -> list[SlackMessage]:
    """A digest's markdown as Slack messages: its first line as the header block when it is a short title."""
    first, _, rest = text.strip().partition("\n")
    title = plain_text(first)
    if rest.strip() and title and len(title) <= HEADER_TEXT_LIMIT:
        return reply_messages(rest, header=title)
    return reply_messages(text)


def _steps(message: OutgoingDigest) -> list[_Step]:
    steps = [_Step(message=part) for part in digest_messages(message.text)]
    steps.extend(_Step(attachment=attachment) for attachment in message.attachments)
    return steps


__all__ = ["SlackSender", "delivery_error", "digest_messages"]
