"""Delivers monitor digests to Telegram chats: HTML text in parts, the CSV as a document, the chart as a photo."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from telegram import Bot
from telegram.error import TelegramError
from telegram.ext import BaseRateLimiter, ExtBot
from telegram.request import HTTPXRequest

from bots.delivered_parts import DeliveredParts
from bots.telegram.api import delivery_error, send_file, send_html
from bots.telegram.render import caption, html_to_plain_text, markdown_to_telegram_html, split_telegram_html
from monitors import Attachment, OutgoingDigest
from storage import ChatRecord

logger = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.telegram.org/bot"
DEFAULT_FILE_URL = "https://api.telegram.org/file/bot"
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class _Step:
    """One API call of a delivery: a text part, or an attachment."""

    kind: Literal["html", "document", "photo"]
    html: str = ""
    attachment: Attachment | None = None


class TelegramSender:
    """A `monitors.delivery.ChatSender` for Telegram, through python-telegram-bot's `Bot`.

    The digest's markdown becomes Telegram HTML split into parts of at most 4096 characters, sent in order; a
    part Telegram cannot parse is resent as plain text. Attachments follow: documents keep their filename,
    images go as photos with a caption. Errors become `RetryLater` (429 with its wait, network, timeouts),
    `ChatGone` (403, chat not found) or `ChatMoved` (a group upgraded to a supergroup).

    A retried delivery (the worker resends the whole message) skips the parts this process already delivered
    to that chat, so a 429 on the third part does not repeat the first two. The memory is per process: after a
    restart a half-delivered message is sent again from its first part.

    `max_messages_per_second` paces every call this sender makes (Telegram allows about 30 per second per
    bot); None sends as fast as the worker asks. A `rate_limiter` (python-telegram-bot's) replaces that pace.
    """

    def __init__(
        self,
        token: str,
        *,
        base_url: str = DEFAULT_API_URL,
        base_file_url: str = DEFAULT_FILE_URL,
        max_messages_per_second: float | None = None,
        connection_pool_size: int = 64,
        read_timeout: float = 10.0,
        rate_limiter: BaseRateLimiter[int] | None = None,
    ) -> None:
        request = HTTPXRequest(connection_pool_size=connection_pool_size, read_timeout=read_timeout)
        if rate_limiter is not None:  # every call paced by the limiter (one shared by several processes)
            self.bot: Bot = ExtBot(
                token, base_url=base_url, base_file_url=base_file_url, request=request, rate_limiter=rate_limiter
            )
            max_messages_per_second = None
        else:
            self.bot = Bot(token, base_url=base_url, base_file_url=base_file_url, request=request)
        self._interval = 1.0 / max_messages_per_second if max_messages_per_second else 0.0
        self._next_slot = 0.0
        self._pace_lock = asyncio.Lock()
        self._init_lock = asyncio.Lock()
        self._delivered = DeliveredParts()

    async def __aenter__(self) -> TelegramSender:
        await self.bot.initialize()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Release the HTTP connections."""
        await self.bot.shutdown()

    async def send(self, chat: ChatRecord, message: OutgoingDigest) -> None:
        """Deliver the text parts, then the attachments; raises `RetryLater`, `ChatGone` or `ChatMoved`."""
        chat_id = chat.external_id

        async def send_step(step: _Step) -> None:
            await self._call(functools.partial(self._send_step, chat_id, step, message))

        await self._delivered.send_remaining(chat, message, _steps(message), send_step)

    async def _send_step(self, chat_id: str, step: _Step, message: OutgoingDigest) -> None:
        if step.kind == "html":
            await send_html(self.bot, chat_id, step.html, pace=self._paced)
            return
        attachment = step.attachment
        assert attachment is not None
        try:
            content = await asyncio.to_thread(attachment.path.read_bytes)
        except OSError as error:  # cleaned up since the run: the rest of the message still goes
            logger.warning("attachment %s is unreadable (%s); skipped", attachment.path, error)
            return
        await send_file(
            self.bot,
            chat_id,
            content=content,
            filename=attachment.filename,
            kind=step.kind,
            caption=_photo_caption(message) if step.kind == "photo" else None,
            pace=self._paced,
        )

    async def _paced(self, call: Awaitable[_T]) -> _T:
        if self._interval:
            async with self._pace_lock:
                now = time.monotonic()
                if self._next_slot > now:
                    await asyncio.sleep(self._next_slot - now)
                self._next_slot = max(now, self._next_slot) + self._interval
        return await call

    async def _call(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run one step (initializing the bot first), turning Telegram's errors into the worker's."""
        try:
            async with self._init_lock:
                await self.bot.initialize()
            await step()
        except TelegramError as error:
            raise delivery_error(error) from error


def _steps(message: OutgoingDigest) -> list[_Step]:
    steps = [_Step(kind="html", html=part) for part in split_telegram_html(markdown_to_telegram_html(message.text))]
    for attachment in message.attachments:
        steps.append(_Step(kind="photo" if attachment.kind == "image" else "document", attachment=attachment))
    return steps


def _photo_caption(message: OutgoingDigest) -> str:
    """The digest's first line (topic and date) as plain text."""
    first_line = message.text.strip().split("\n", 1)[0]
    return caption(html_to_plain_text(markdown_to_telegram_html(first_line)))


__all__ = ["DEFAULT_API_URL", "DEFAULT_FILE_URL", "TelegramSender"]
