"""The chats service: a chat and its conversations in storage, for the dispatcher and the conversation layer.

It owns the repositories of chats, turns, handled updates, subscriptions (resumption), conversations and usage (the
items collected for chats are `monitors.ItemService`'s), built once per process in `app` and handed to `bots` (the
dispatcher) and `agent` (`Services.chats`), which never build a repository themselves (an import-linter contract
holds them to it). Guarantees: each method is the repository's one transaction (or, for a chat gone, the delivery
worker's same sequence), so a caller reads and writes exactly what it did when it built the repositories itself.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Unpack

from monitors.delivery import mark_chat_gone, move_chat
from storage import ChatChanges, ChatRecord, Database, TurnOpening, TurnStart
from storage.repositories import (
    ChatRepository,
    ConversationRepository,
    InboundRepository,
    SubscriptionRepository,
    TurnRepository,
    UsageRepository,
)

__all__ = ["ChatService"]

logger = logging.getLogger(__name__)


class ChatService:
    """Chats, their turns and conversations (see the module docstring); one per process, shared by every chat."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._chats = ChatRepository(database)
        self._inbound = InboundRepository(database)
        self._subscriptions = SubscriptionRepository(database)
        self._turns = TurnRepository(database)
        self._conversations = ConversationRepository(database)
        self._usage = UsageRepository(database)

    # ---- the conversation layer's storage -----------------------------------------------------------------

    @property
    def turns(self) -> TurnRepository:
        """A turn's one read (`state`, when the dispatcher did not `begin` it) and one write (`finish`)."""
        return self._turns

    @property
    def conversations(self) -> ConversationRepository:
        """Memory, summary and open confirmations per (chat, thread)."""
        return self._conversations

    @property
    def usage(self) -> UsageRepository:
        """Model usage per chat and day (the daily budget, /usage)."""
        return self._usage

    async def update(self, chat_id: int, **changes: Unpack[ChatChanges]) -> ChatRecord | None:
        """A chat's settings changed (/timezone, /language, /profile, /briefing); None when the chat is gone."""
        return await self._chats.update(chat_id, **changes)

    # ---- a turn's lifecycle (the dispatcher) ----------------------------------------------------------------

    async def seen_before(self, platform: str, event_id: str, *, now: datetime) -> bool:
        """Store an update's de-duplication mark; True when it was stored before (a duplicate)."""
        return await self._inbound.seen_before(platform, event_id, now=now)

    async def received_at(self, platform: str, event_id: str) -> datetime | None:
        """When an update's mark was stored (a retry tells its own mark by it), None when it is not."""
        return await self._inbound.received_at(platform, event_id)

    async def forget_handled_before(self, cutoff: datetime) -> int:
        """Drop the marks of updates received before `cutoff` (platforms retry within hours, not days)."""
        return await self._inbound.forget_before(cutoff)

    async def begin(self, opening: TurnOpening) -> TurnStart | None:
        """The turn's one read (`storage.TurnRepository.begin`): None when `event_id` was handled before."""
        return await self._turns.begin(opening)

    async def resume(self, chat: ChatRecord) -> ChatRecord:
        """A chat the bot had been blocked or removed from is written to again: it and its subscriptions are
        active again."""
        logger.info("chat %d on %s is reachable again: resuming its subscriptions", chat.id, chat.platform)
        await self._subscriptions.set_active_for_chat(chat.id, active=True)
        return await self._chats.update(chat.id, active=True) or chat

    async def gone(self, platform: str, external_id: str, *, reason: str, now: datetime) -> None:
        """The bot was blocked, kicked, or the chat deleted (see `monitors.mark_chat_gone`); nothing when the
        chat was never stored."""
        chat = await self._chats.find(platform, external_id)
        if chat is not None:
            await mark_chat_gone(self._database, chat, reason=reason, now=now)

    async def moved(self, platform: str, old_external_id: str, new_external_id: str) -> None:
        """The chat has a new id (see `monitors.move_chat`); nothing when the old one was never stored."""
        if old_external_id == new_external_id:
            return
        chat = await self._chats.find(platform, old_external_id)
        if chat is not None:
            await move_chat(self._database, chat, new_external_id)
