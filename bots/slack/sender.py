"""Slack's one sender: answers, status lines and digests all go out through the process's one `AsyncWebClient`.

A message becomes parts: Block Kit messages (sections of at most 3,000 characters, at most 50 blocks each; a
digest's or briefing's first line becomes a header block), then its files through `files_upload_v2` (a file's
caption as the comment). The web client's retry handlers already wait out short 429s (`bots.slack.api`). The
delivery worker sends part by part (`parts`, `send_part`), errors mapped: `ratelimited` → `RetryLater` with
its Retry-After; channel_not_found, not_in_channel, is_archived, account_inactive → `ChatGone`; network and
5xx → `RetryLater`; any other Slack error → `DeliveryError`. The frontend sends whole answers
(`send_replies`), falling back to a slash command's `response_url` where the bot may not post (and telling the
person, once per command, that digests and files cannot arrive there until the bot is invited).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bots.slack.api import (
    GONE_ERRORS,
    NO_ACCESS_ERRORS,
    TRANSIENT_ERRORS,
    SlackPoster,
    error_code,
    is_rate_limited,
    post_to_response_url,
    retry_after_seconds,
    retry_handlers,
)
from bots.slack.render import HEADER_TEXT_LIMIT, SlackMessage, escape_mrkdwn, plain_text, reply_messages
from bots.status import DONE_MARK, WORKING_MARK, StatusLine, StatusOff
from kernel import Attachment, Button, ChatGone, DeliveryError, Recipient, Reply, RetryLater

__all__ = [
    "NOT_A_MEMBER_HERE",
    "NO_FILES_HERE",
    "SlackPart",
    "SlackSender",
    "SlackTarget",
    "delivery_error",
    "digest_messages",
]

logger = logging.getLogger(__name__)

NO_FILES_HERE = "I can't post files in this channel: invite me with `/invite @Lookout` and ask again."
NOT_A_MEMBER_HERE = (
    "I'm not a member of this channel, so I can answer your commands here but can't post digests or files: they "
    "will not arrive until you invite me with `/invite @Lookout`."
)
"""Told once per command (only to the person) where the bot answers through response_url: without it, "the digest
follows" would be followed by nothing, as the digest is posted into the channel like any scheduled one."""


@dataclass(frozen=True, kw_only=True)
class SlackPart:
    """One API call of a message: a Block Kit message, or a file upload."""

    message: SlackMessage | None = None
    attachment: Attachment | None = None


@dataclass
class SlackTarget:
    """Where the answers to one message go."""

    channel: str
    thread_ts: str | None = None
    response_url: str | None = None
    """A slash command's or button's response_url, for channels the bot may not post into."""
    via_response_url: bool = False
    """chat.postMessage was refused here: the rest goes through response_url."""
    told_no_files: bool = False
    """The person has read once that files (and digests) cannot be posted here."""


class SlackSender:
    """A `monitors.ChatSender` for Slack and the frontend's way to answer; see the module docstring."""

    def __init__(self, client: AsyncWebClient, *, max_rate_limit_wait: float = 30.0) -> None:
        self.client = client
        self._poster = SlackPoster(client)
        self._handlers: list[AsyncRetryHandler] = retry_handlers(max_rate_limit_wait=max_rate_limit_wait)

    # ---- parts --------------------------------------------------------------------------------------------

    def parts(self, message: Reply) -> list[SlackPart]:
        """Block Kit messages, then files."""
        parts: list[SlackPart] = []
        if message.text.strip():
            if message.purpose in ("digest", "briefing"):
                blocks = digest_messages(message.text, buttons=message.buttons)
            else:
                blocks = reply_messages(message.text, buttons=message.buttons)
            parts = [SlackPart(message=block) for block in blocks]
        parts.extend(SlackPart(attachment=attachment) for attachment in message.attachments)
        return parts

    async def send_part(self, chat: Recipient, part: SlackPart) -> None:
        """Send one part into a stored channel; raises `RetryLater`, `ChatGone` or `DeliveryError`."""
        try:
            if part.message is not None:
                await self._poster.post(chat.external_id, part.message)
            elif part.attachment is not None:
                await self._poster.upload(chat.external_id, part.attachment, comment=part.attachment.caption)
        except SlackApiError as error:
            raise delivery_error(error) from error
        except TRANSIENT_ERRORS as error:
            raise RetryLater(f"network error talking to Slack: {type(error).__name__}: {error}") from error

    # ---- answers ------------------------------------------------------------------------------------------

    async def send_replies(self, target: SlackTarget, replies: Sequence[Reply]) -> None:
        """Send answers in order into the target's channel (or thread), through response_url where the bot may
        not post; Slack's errors are raised (the dispatcher's boundary tells the person)."""
        for reply in replies:
            for part in self.parts(reply):
                if part.message is not None:
                    await self._post(target, part.message)
                elif part.attachment is not None:
                    await self._upload(target, part.attachment)

    async def _post(self, target: SlackTarget, message: SlackMessage) -> None:
        if not target.via_response_url:
            try:
                await self._poster.post(target.channel, message, thread_ts=target.thread_ts)
                return
            except SlackApiError as error:
                if error_code(error) not in NO_ACCESS_ERRORS or target.response_url is None:
                    raise
                logger.info(
                    "slack: cannot post in %s (%s); answering via response_url", target.channel, error_code(error)
                )
                target.via_response_url = True
        assert target.response_url is not None
        await post_to_response_url(target.response_url, [message], handlers=self._handlers)
        if not target.told_no_files:
            target.told_no_files = True
            await post_to_response_url(
                target.response_url, reply_messages(NOT_A_MEMBER_HERE), in_channel=False, handlers=self._handlers
            )

    async def _upload(self, target: SlackTarget, attachment: Attachment) -> None:
        if not target.via_response_url:
            try:
                await self._poster.upload(
                    target.channel, attachment, thread_ts=target.thread_ts, comment=attachment.caption
                )
                return
            except SlackApiError as error:
                if error_code(error) not in NO_ACCESS_ERRORS or target.response_url is None:
                    raise
                target.via_response_url = True
        if target.response_url is None or target.told_no_files:
            return
        target.told_no_files = True
        await post_to_response_url(
            target.response_url, reply_messages(NO_FILES_HERE), in_channel=False, handlers=self._handlers
        )

    # ---- status -------------------------------------------------------------------------------------------

    def status_line(self, channel: str, *, thread_ts: str | None = None, interval: float = 2.0) -> StatusLine:
        """A progress line for one answer: one message, edited with chat.update (see `bots.status`)."""
        return StatusLine(
            SlackStatusMessage(self._poster, channel, thread_ts), interval=interval, name=f"{channel} status"
        )


@dataclass(eq=False)
class SlackStatusMessage:
    """Slack's status surface: chat.postMessage once, then chat.update; no access to the channel turns it off."""

    poster: SlackPoster
    channel: str
    thread_ts: str | None
    ts: str | None = field(default=None, init=False)
    """The status message once posted (what chat.update edits)."""

    async def show(self, text: str, *, done: bool) -> None:
        line = f"{DONE_MARK if done else WORKING_MARK} _{escape_mrkdwn(text)}_"
        try:
            if self.ts is None:
                self.ts = await self.poster.post_text(self.channel, line, thread_ts=self.thread_ts)
            else:
                await self.poster.update_text(self.channel, self.ts, line)
        except SlackApiError as error:
            code = error_code(error)
            if code in NO_ACCESS_ERRORS or code in GONE_ERRORS:
                raise StatusOff(f"Slack said {code}") from error
            raise


def delivery_error(error: SlackApiError) -> DeliveryError:
    """The delivery error for a failed Slack call."""
    code = error_code(error)
    if is_rate_limited(error):
        return RetryLater(f"Slack rate limit ({code})", retry_after=retry_after_seconds(error))
    if code in GONE_ERRORS:
        return ChatGone(f"Slack: {code}")
    status = getattr(error.response, "status_code", 200)
    if isinstance(status, int) and status >= 500:
        return RetryLater(f"Slack answered {status} ({code})")
    return DeliveryError(f"Slack refused the message: {code}")


def digest_messages(text: str, *, buttons: Sequence[Button] = ()) -> list[SlackMessage]:
    """A digest's markdown as Slack messages: its first line as the header block when it is a short title; its
    feedback rows (`buttons`) at the end."""
    first, _, rest = text.strip().partition("\n")
    title = plain_text(first)
    if rest.strip() and title and len(title) <= HEADER_TEXT_LIMIT:
        return reply_messages(rest, header=title, buttons=buttons)
    return reply_messages(text, buttons=buttons)
