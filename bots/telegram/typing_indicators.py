"""The typing indicator on Telegram: "typing…" shown in a chat while any of its messages is being handled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

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
        self._active: dict[tuple[str, int | None], _Indicator] = {}

    @contextlib.asynccontextmanager
    async def in_chat(self, chat_id: str, *, thread_id: int | None = None) -> AsyncIterator[None]:
        key = (chat_id, thread_id)
        indicator = self._active.get(key)
        if indicator is None:
            indicator = self._active[key] = _Indicator()
            # A timer, not a task that sleeps: most answers come before it fires, and cancelling a timer handle
            # costs next to nothing where a task costs a creation, two steps and a cancellation per message.
            indicator.timer = asyncio.get_running_loop().call_later(self._after, self._start, key, indicator)
        indicator.messages += 1
        try:
            yield
        finally:
            indicator.messages -= 1
            if indicator.messages == 0:
                del self._active[key]
                if indicator.timer is not None:
                    indicator.timer.cancel()
                if indicator.task is not None:
                    indicator.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await indicator.task

    def _start(self, key: tuple[str, int | None], indicator: _Indicator) -> None:
        indicator.timer = None
        indicator.task = asyncio.create_task(self._keep_typing(*key), name="telegram typing")

    async def _keep_typing(self, chat_id: str, thread_id: int | None) -> None:
        while True:
            try:
                await self._bot.send_chat_action(chat_id, ChatAction.TYPING, message_thread_id=thread_id)
            except TelegramError as error:  # cosmetic: never worth failing or retrying for
                logger.debug("chat %s: typing indicator failed (%s)", chat_id, error)
            if is_group(chat_id):
                return  # a group has 20 calls a minute for everything: "typing…" is said once, not repeated
            await asyncio.sleep(self._every)


@dataclass(slots=True)
class _Indicator:
    """One chat's indicator: its messages in flight, the timer before the first "typing…", then the loop."""

    messages: int = 0
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[None] | None = None
