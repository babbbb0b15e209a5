"""The typing indicator on Telegram: "typing…" shown in a chat while any of its messages is being handled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from telegram import Bot
from telegram.constants import ChatAction
from telegram.error import TelegramError

from bots.telegram.api import is_group

__all__ = ["TypingIndicators"]

logger = logging.getLogger(__name__)


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
            if is_group(chat_id):
                return  # a group has 20 calls a minute for everything: "typing…" is said once, not repeated
            await asyncio.sleep(self._every)
