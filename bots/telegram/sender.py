"""Telegram's one sender: answers, status lines and digests all go out through one python-telegram-bot `Bot` per
process, paced by its `AIORateLimiter` (about 30 messages/s overall, 20 per minute per group, from FACTS).

A message becomes parts: its markdown as Telegram HTML split into parts of at most 4096 characters, then its
files (documents keep their filename, images go as photos), buttons under the last text part. A part Telegram
cannot parse is resent as plain text. The delivery worker sends part by part (`parts`, `send_part`: errors
become `RetryLater`, `ChatGone`, `ChatMoved`); the frontend sends whole answers (`send_replies`), retrying
transient errors with the shared backoff and reporting gone or moved chats as they happen.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, TelegramError
from telegram.ext import BaseRateLimiter, ExtBot

from bots.status import DONE_MARK, WORKING_MARK, StatusLine
from bots.telegram.api import delivery_error, is_group, send_file, send_html
from bots.telegram.limits import TelegramLimits
from bots.telegram.render import caption, telegram_html_parts
from bots.telegram.request import AiohttpRequest
from kernel import Attachment, Backoff, Button, ChatGone, ChatMoved, DeliveryError, Recipient, Reply, RetryLater, Sleep

__all__ = [
    "DEFAULT_API_URL",
    "ChatEvents",
    "TelegramPart",
    "TelegramSender",
    "build_bot",
    "keyboard",
]

logger = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.telegram.org"
_BUTTONS_PER_ROW = 2

GROUP_STATUS_INTERVAL = 6.0
"""A group's status line is edited at most every 6 s: 10 of the group's 20 calls a minute, the rest is left for
the answers (the rate limiter would otherwise queue the answer behind status edits)."""

REPLY_BACKOFF = Backoff(attempts=5, base=1.0, cap=30.0, max_wait=120.0)
"""An answer part that failed transiently (network, a 429 the rate limiter could not absorb) is tried again up to
five times; Telegram asking for more than two minutes gives up (the person has moved on)."""


def build_bot(
    token: str,
    *,
    api_url: str = DEFAULT_API_URL,
    limits: TelegramLimits | None = None,
    connection_pool_size: int = 128,
    read_timeout: float = 10.0,
    poll_timeout: float = 30.0,
    rate_limiter: BaseRateLimiter[int] | None = None,
) -> ExtBot[None]:
    """The process's one `Bot` for TELEGRAM_BOT_TOKEN at TELEGRAM_API_URL, with its rate limiter: every call
    (answers, status edits, typing, digests) is paced by it and sent through aiohttp (`AiohttpRequest`).
    `rate_limiter` replaces the in-process one built from `limits` (several processes sharing the token share a
    limiter through the database)."""
    api = api_url.rstrip("/")
    return ExtBot(
        token,
        base_url=f"{api}/bot",
        base_file_url=f"{api}/file/bot",
        request=AiohttpRequest(connection_pool_size=connection_pool_size, read_timeout=read_timeout, pool_timeout=30.0),
        get_updates_request=AiohttpRequest(connection_pool_size=1, read_timeout=poll_timeout + 10),
        rate_limiter=rate_limiter or (limits or TelegramLimits()).rate_limiter(),  # type: ignore[arg-type]
    )


class ChatEvents(Protocol):
    """Where the frontend reports what it learned about a chat (`bots.dispatcher.Dispatcher` does this)."""

    async def chat_gone(self, platform: str, external_id: str, *, reason: str) -> None: ...

    async def chat_moved(self, platform: str, old_external_id: str, new_external_id: str) -> None: ...


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    """Buttons as an inline keyboard: by their rows when they name them, else two to a row."""
    if not buttons:
        return None
    keys = [InlineKeyboardButton(button.label, callback_data=button.callback_data) for button in buttons]
    if any(button.row is not None for button in buttons):
        rows: dict[int, list[InlineKeyboardButton]] = {}
        for button, key in zip(buttons, keys, strict=True):
            rows.setdefault(button.row if button.row is not None else -1, []).append(key)
        return InlineKeyboardMarkup([rows[row] for row in sorted(rows)])
    return InlineKeyboardMarkup([keys[i : i + _BUTTONS_PER_ROW] for i in range(0, len(keys), _BUTTONS_PER_ROW)])


def acknowledged(
    markup: InlineKeyboardMarkup | None, pressed: str | None, row: Sequence[Button]
) -> InlineKeyboardMarkup | None:
    """The pressed message's keyboard with the pressed button's row replaced by `row` (what the press recorded; an
    empty `row` keeps it), every other row kept; None (no buttons) when the keyboard or the pressed button is not
    known."""
    if markup is None or pressed is None:
        return None
    replacement = [InlineKeyboardButton(button.label, callback_data=button.callback_data) for button in row]
    rows: list[list[InlineKeyboardButton]] = []
    found = False
    for keys in markup.inline_keyboard:
        if not found and any(key.callback_data == pressed for key in keys):
            found = True
            rows.append(replacement or list(keys))  # an empty row: the pressed row stays as it was
        else:
            rows.append(list(keys))
    return InlineKeyboardMarkup(rows) if found and rows else None


@dataclass(frozen=True, kw_only=True)
class TelegramPart:
    """One Bot API call of a message: an HTML text part, or a file."""

    kind: Literal["html", "document", "photo"]
    html: str = ""
    attachment: Attachment | None = None
    markup: InlineKeyboardMarkup | None = None


class TelegramSender:
    """A `monitors.ChatSender` for Telegram and the frontend's way to answer; see the module docstring."""

    def __init__(self, bot: ExtBot[None], *, sleep: Sleep = asyncio.sleep, backoff: Backoff = REPLY_BACKOFF) -> None:
        self.bot = bot
        self._sleep = sleep
        self._backoff = backoff
        self._init_lock = asyncio.Lock()

    async def __aenter__(self) -> TelegramSender:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect the bot (getMe) unless the frontend did already."""
        async with self._init_lock:
            await self.bot.initialize()

    async def close(self) -> None:
        """Release the HTTP connections (the frontend's Application may have done it already)."""
        await self.bot.shutdown()

    # ---- parts --------------------------------------------------------------------------------------------

    def parts(self, message: Reply) -> list[TelegramPart]:
        """Text parts, then files; the buttons go under the last text part (or the last file)."""
        parts: list[TelegramPart] = []
        if message.text.strip():
            parts = [TelegramPart(kind="html", html=part) for part in telegram_html_parts(message.text)]
        for attachment in message.attachments:
            parts.append(
                TelegramPart(kind="photo" if attachment.kind == "image" else "document", attachment=attachment)
            )
        markup = keyboard(message.buttons)
        if markup is not None and parts:
            texts = [index for index, part in enumerate(parts) if part.kind == "html"]
            last = texts[-1] if texts else len(parts) - 1
            parts[last] = replace(parts[last], markup=markup)
        return parts

    async def send_part(self, chat: Recipient, part: TelegramPart) -> None:
        """Send one part to a stored chat; raises `RetryLater`, `ChatGone`, `ChatMoved` or `DeliveryError`."""
        try:
            await self.start()  # getMe, unless the frontend's Application did it already
        except TelegramError as error:
            raise delivery_error(error) from error
        await self._send_mapped(chat.external_id, part, None)

    async def _send(self, chat_id: str, part: TelegramPart, *, thread_id: int | None) -> None:
        if part.kind == "html":
            await send_html(self.bot, chat_id, part.html, reply_markup=part.markup, thread_id=thread_id)
            return
        attachment = part.attachment
        assert attachment is not None
        try:
            content = await asyncio.to_thread(attachment.path.read_bytes)
        except OSError as error:  # cleaned up since it was written: the rest of the message still goes
            logger.warning("attachment %s is unreadable (%s); skipped", attachment.path, error)
            return
        await send_file(
            self.bot,
            chat_id,
            content=content,
            filename=attachment.filename,
            kind=part.kind,
            caption=caption(attachment.caption) if attachment.caption else None,
            reply_markup=part.markup,
            thread_id=thread_id,
        )

    # ---- answers ------------------------------------------------------------------------------------------

    async def send_replies(
        self, chat_id: str, replies: Sequence[Reply], *, events: ChatEvents, thread_id: int | None = None
    ) -> None:
        """Send answers in order; stops early (logged) if the chat is gone or Telegram stays unreachable."""
        target = chat_id
        for reply in replies:
            for part in self.parts(reply):
                moved_to = await self._deliver(target, part, thread_id, events)
                if moved_to is None:
                    return
                target = moved_to

    async def _deliver(self, chat_id: str, part: TelegramPart, thread_id: int | None, events: ChatEvents) -> str | None:
        """Send one part with retries; the chat id to use from now on, or None to stop sending."""
        while True:
            try:
                await self._backoff.call(
                    functools.partial(self._send_mapped, chat_id, part, thread_id),
                    retry_on=lambda error: isinstance(error, RetryLater),
                    retry_after=lambda error: getattr(error, "retry_after", None),
                    sleep=self._sleep,
                    what=f"telegram chat {chat_id}: a reply part",
                )
                return chat_id
            except ChatMoved as moved:
                await events.chat_moved("telegram", chat_id, moved.new_external_id)
                if moved.new_external_id == chat_id:
                    return None
                chat_id = moved.new_external_id
            except ChatGone as gone:
                await events.chat_gone("telegram", chat_id, reason=str(gone))
                return None
            except RetryLater as failure:
                logger.warning("chat %s: giving up on a reply: %s", chat_id, failure)
                return None
            except DeliveryError as refused:  # a refused part (bad request): the rest may still go
                logger.warning("chat %s: a reply part was refused (%s); skipped", chat_id, refused)
                return chat_id

    async def _send_mapped(self, chat_id: str, part: TelegramPart, thread_id: int | None) -> None:
        """Send one part, Telegram's errors turned into the delivery errors."""
        try:
            await self._send(chat_id, part, thread_id=thread_id)
        except TelegramError as error:
            raise delivery_error(error) from error

    # ---- status -------------------------------------------------------------------------------------------

    def status_line(self, chat_id: str, *, thread_id: int | None = None, interval: float = 1.0) -> StatusLine:
        """A progress line for one answer: one message, edited in place (see `bots.status.StatusLine`)."""
        if is_group(chat_id):
            interval = max(interval, GROUP_STATUS_INTERVAL)
        return StatusLine(
            _StatusMessage(self.bot, chat_id, thread_id), interval=interval, name=f"chat {chat_id} status"
        )


@dataclass(eq=False)
class _StatusMessage:
    """Telegram's status surface: sendMessage once (silently), then editMessageText."""

    bot: ExtBot[None]
    chat_id: str
    thread_id: int | None
    message_id: int | None = field(default=None, init=False)
    """The status message once sent (what editMessageText edits)."""

    async def show(self, text: str, *, done: bool) -> None:
        line = f"{DONE_MARK if done else WORKING_MARK} {text}"
        if self.message_id is None:
            message = await self.bot.send_message(
                self.chat_id, line, message_thread_id=self.thread_id, disable_notification=True
            )
            self.message_id = message.message_id
            return
        try:
            await self.bot.edit_message_text(line, chat_id=self.chat_id, message_id=self.message_id)
        except BadRequest as error:
            if "not modified" not in error.message.lower():
                raise
