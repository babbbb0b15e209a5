"""Chats: one row per platform conversation space (a DM, group or channel) and its settings."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict, Unpack

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import Chat
from storage.records import ChatRecord
from storage.repositories._common import (
    AnyConnection,
    Repository,
    assign,
    by_platform_key,
    platform_upsert,
    record_of,
)


class ChatChanges(TypedDict, total=False):
    """Fields `ChatRepository.update` may change; absent keys stay as they are."""

    external_id: str
    """A Telegram group that became a supergroup gets a new id."""
    title: str | None
    timezone: str
    language: str | None
    profile: str | None
    active: bool
    briefing_schedule: str | None
    briefing_next_at: datetime | None
    briefing_since: datetime | None


def to_chat_record(row: Chat) -> ChatRecord:
    return record_of(ChatRecord, row)


def chat_upsert(
    connection: AnyConnection,
    platform: str,
    external_id: str,
    *,
    title: str | None,
    rename: bool,
) -> Any:
    """The INSERT that creates the chat on first sight; with `rename` and a title, it also replaces the stored
    title of an existing chat."""
    return platform_upsert(
        connection,
        Chat,
        platform,
        external_id,
        values={"title": title, "timezone": "UTC", "active": True},
        replace={"title": title} if rename and title else {},
    )


class ChatRepository(Repository):
    async def get_or_create(self, platform: str, external_id: str, *, title: str | None = None) -> ChatRecord:
        """The chat, created on first sight; safe when two messages of a new chat arrive together."""

        def upsert(session: AsyncSession) -> Any:
            return chat_upsert(session, platform, external_id, title=title, rename=False)

        return await self._upserted(Chat, upsert, (platform, external_id), to_chat_record)

    async def get(self, chat_id: int) -> ChatRecord | None:
        return await self._record_by_key(Chat, chat_id, to_chat_record)

    async def find(self, platform: str, external_id: str) -> ChatRecord | None:
        return await self._record_where(by_platform_key(Chat, platform, external_id), to_chat_record)

    async def list_chats(self, *, platform: str | None = None, active_only: bool = False) -> list[ChatRecord]:
        async with self._db.sessions() as session:
            query = select(Chat).order_by(Chat.id)
            if platform is not None:
                query = query.where(Chat.platform == platform)
            if active_only:
                query = query.where(Chat.active.is_(True))
            return [to_chat_record(row) for row in await session.scalars(query)]

    async def update(self, chat_id: int, **changes: Unpack[ChatChanges]) -> ChatRecord | None:
        """Apply `changes`; None when there is no such chat."""
        return await self._changed(Chat, chat_id, lambda row: assign(row, changes), to_chat_record)

    async def briefings_due(self, now: datetime, *, after_id: int = 0, limit: int = 500) -> list[ChatRecord]:
        """Active chats whose briefing is due at `now`, by id from `after_id` on (page through them)."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Chat)
                .where(
                    Chat.active.is_(True),
                    Chat.briefing_schedule.is_not(None),
                    Chat.briefing_next_at <= now,
                    Chat.id > after_id,
                )
                .order_by(Chat.id)
                .limit(limit)
            )
            return [to_chat_record(row) for row in rows]

    async def claim_briefing(self, chat_id: int, *, due: datetime, next_at: datetime) -> bool:
        """Move the chat's next briefing from `due` to `next_at`; True for the one caller that did (a briefing is
        made once however many workers look at it)."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Chat)
                .where(Chat.id == chat_id, Chat.briefing_next_at == due)
                .values(briefing_next_at=next_at)
                .execution_options(synchronize_session=False)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, chat_id: int) -> bool:
        """Delete the chat and, through ON DELETE CASCADE, its monitors, memory and outbox rows."""
        return bool(await self._delete(Chat, Chat.id == chat_id))
