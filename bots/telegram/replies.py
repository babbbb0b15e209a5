"""Answers on Telegram: replies as HTML parts with buttons and files, progress as one edited status message,
and a typing indicator while the bot works. Platform errors are handled here, per call:
429 waits `retry_after` and retries, network errors retry with backoff, 403 marks the chat gone, a group that
became a supergroup moves the stored chat and the rest goes to the new id."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatAction
from telegram.error import BadRequest, RetryAfter, TelegramError

from agent import Attachment, Button, ProgressUpdate, Reply
from bots.telegram.api import delivery_error, send_file, send_html
from bots.telegram.render import caption, markdown_to_telegram_html, split_telegram_html
from monitors import ChatGone, ChatMoved, RetryLater

__all__ = ["ChatEvents", "ReplySender", "StatusMessage", "TypingIndicators", "keyboard"]

logger = logging.getLogger(__name__)

_BUTTONS_PER_ROW = 2


class ChatEvents(Protocol):
    """Where the frontend reports what it learned about a chat (`bots.dispatcher.Dispatcher` does this)."""

    async def chat_gone(self, platform: str, external_id: str, *, reason: str) -> None: ...

    async def chat_moved(self, platform: str, old_external_id: str, new_external_id: str) -> None: ...


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    """Buttons as an inline keyboard, two to a row."""
    if not buttons:
        return None
    keys = [InlineKeyboardButton(button.label, callback_data=button.callback_data) for button in buttons]
    return InlineKeyboardMarkup([keys[i : i + _BUTTONS_PER_ROW] for i in range(0, len(keys), _BUTTONS_PER_ROW)])


@dataclass(frozen=True, kw_only=True)
class _Step:
    kind: Literal["html", "document", "photo"]
    html: str = ""
    attachment: Attachment | None = None
    markup: InlineKeyboardMarkup | None = None


def _steps(reply: Reply) -> list[_Step]:
    """The API calls for one reply: text parts, then files; the buttons go under the last text part (or file)."""
    steps: list[_Step] = []
    if reply.text.strip():
        steps = [_Step(kind="html", html=part) for part in split_telegram_html(markdown_to_telegram_html(reply.text))]
    for attachment in reply.attachments:
        steps.append(_Step(kind="photo" if attachment.kind == "image" else "document", attachment=attachment))
    markup = keyboard(reply.buttons)
    if markup is not None and steps:
        texts = [index for index, step in enumerate(steps) if step.kind == "html"]
        last = texts[-1] if texts else len(steps) - 1
        step = steps[last]
        steps[last] = _Step(kind=step.kind, html=step.html, attachment=step.attachment, markup=markup)
    return steps


class ReplySender:
    """Sends neutral replies to one Telegram chat at a time, handling the platform's errors.

    `max_attempts` bounds retries of one call (429s and network errors); a 429 asking for more than
    `max_wait` seconds gives up at once. `sleep` is how it waits (tests may pass a faster one).
    """

    def __init__(
        self,
        bot: Bot,
        events: ChatEvents,
        *,
        max_attempts: int = 5,
        max_wait: float = 120.0,
        backoff: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._bot = bot
        self._events = events
        self._max_attempts = max_attempts
        self._max_wait = max_wait
        self._backoff = backoff
        self._sleep = sleep

    async def send(self, chat_id: str, replies: Sequence[Reply], *, thread_id: int | None = None) -> None:
        """Send every reply in order; stops early (logged) if the chat is gone or Telegram stays unreachable."""
        target = chat_id
        for reply in replies:
            for step in _steps(reply):
                moved_to = await self._deliver(target, step, thread_id)
                if moved_to is None:
                    return
                target = moved_to

    async def _deliver(self, chat_id: str, step: _Step, thread_id: int | None) -> str | None:
        """Send one step with retries; the chat id to use from now on, or None to stop sending."""
        attempt = 0
        while True:
            try:
                await self._call(chat_id, step, thread_id)
                return chat_id
            except TelegramError as error:
                failure = delivery_error(error)
            if isinstance(failure, ChatMoved):
                await self._events.chat_moved("telegram", chat_id, failure.new_external_id)
                if failure.new_external_id == chat_id:
                    return None
                chat_id = failure.new_external_id
                continue
            if isinstance(failure, ChatGone):
                await self._events.chat_gone("telegram", chat_id, reason=str(failure))
                return None
            if not isinstance(failure, RetryLater):
                logger.warning("chat %s: a reply part was refused (%s); skipped", chat_id, failure)
                return chat_id
            attempt += 1
            wait = failure.retry_after if failure.retry_after is not None else self._backoff * 2 ** (attempt - 1)
            if attempt >= self._max_attempts or wait > self._max_wait:
                logger.warning("chat %s: giving up on a reply after %d attempt(s): %s", chat_id, attempt, failure)
                return None
            logger.info("chat %s: %s; retrying in %.1f s", chat_id, failure, wait)
            await self._sleep(wait)

    async def _call(self, chat_id: str, step: _Step, thread_id: int | None) -> None:
        if step.kind == "html":
            await send_html(self._bot, chat_id, step.html, reply_markup=step.markup, thread_id=thread_id)
            return
        attachment = step.attachment
        assert attachment is not None
        try:
            content = await asyncio.to_thread(attachment.path.read_bytes)
        except OSError as error:
            logger.warning("attachment %s is unreadable (%s); skipped", attachment.path, error)
            return
        await send_file(
            self._bot,
            chat_id,
            content=content,
            filename=attachment.filename,
            kind=step.kind,
            caption=caption(attachment.caption) if attachment.caption else None,
            reply_markup=step.markup,
            thread_id=thread_id,
        )


class StatusMessage:
    """A `ProgressSink` that shows progress as one message edited in place.

    The first update sends the message; later ones edit it, at most one edit per `min_interval` seconds and
    never with unchanged text. Updates that arrive in between are folded into the next edit, and `close()`
    makes sure the last one is shown. Progress is best effort: a failing call is logged, never raised.
    """

    def __init__(self, bot: Bot, chat_id: str, *, thread_id: int | None = None, min_interval: float = 1.0) -> None:
        self._bot = bot
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._min_interval = min_interval
        self._message_id: int | None = None
        self._shown: str | None = None
        self._pending: str | None = None
        self._last_call = 0.0
        self._flusher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def message_id(self) -> int | None:
        return self._message_id

    async def __call__(self, update: ProgressUpdate) -> None:
        self._pending = update.text
        if self._message_id is None:
            await self._flush()
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="telegram progress edit")

    async def close(self) -> None:
        """Show the latest update (waiting out the edit interval), then stop."""
        if self._flusher is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        if self._pending is not None and self._pending != self._shown:
            await self._flush_later()

    async def _flush_later(self) -> None:
        wait = self._last_call + self._min_interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await self._flush()

    async def _flush(self) -> None:
        async with self._lock:
            text = self._pending
            if text is None or text == self._shown:
                return
            self._last_call = time.monotonic()
            try:
                if self._message_id is None:
                    message = await self._bot.send_message(
                        self._chat_id, text, message_thread_id=self._thread_id, disable_notification=True
                    )
                    self._message_id = message.message_id
                else:
                    await self._bot.edit_message_text(text, chat_id=self._chat_id, message_id=self._message_id)
                self._shown = text
            except RetryAfter as error:  # the next update (or close) tries again
                logger.info("chat %s: progress edit throttled (%s)", self._chat_id, error)
            except BadRequest as error:
                if "not modified" in error.message.lower():
                    self._shown = text
                else:
                    logger.info("chat %s: progress not shown (%s)", self._chat_id, error.message)
            except TelegramError as error:
                logger.info("chat %s: progress not shown (%s)", self._chat_id, error)


class TypingIndicators:
    """Keeps "typing…" showing in a chat while any of its messages is being handled or waits its turn.

    One loop per chat (and forum topic), however many of its messages are in flight: Telegram clears the
    indicator after 5 s, so it is repeated every `every` seconds until the chat's last message is done. It first
    shows `after` seconds in: an answer that comes sooner (a command, a quick reply) needs no indicator, and
    saves the API call.
    """

    def __init__(self, bot: Bot, *, every: float = 4.5, after: float = 0.5) -> None:
        self._bot = bot
        self._every = every
        self._after = after
        self._active: dict[tuple[str, int | None], tuple[int, asyncio.Task[None]]] = {}

    @contextlib.asynccontextmanager
    async def in_chat(self, chat_id: str, *, thread_id: int | None = None) -> AsyncIterator[None]:
        key = (chat_id, thread_id)
        count, task = self._active.get(key, (0, None))
        if task is None:
            task = asyncio.create_task(self._keep_typing(chat_id, thread_id), name="telegram typing")
        self._active[key] = (count + 1, task)
        try:
            yield
        finally:
            count, task = self._active[key]
            if count > 1:
                self._active[key] = (count - 1, task)
            else:
                del self._active[key]
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _keep_typing(self, chat_id: str, thread_id: int | None) -> None:
        await asyncio.sleep(self._after)
        while True:
            try:
                await self._bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
            except TelegramError as error:  # cosmetic: never worth failing or retrying for
                logger.debug("chat %s: typing indicator failed (%s)", chat_id, error)
            await asyncio.sleep(self._every)
