"""Conversation memory per (chat, thread): pydantic-ai's serialised messages and a rolling summary."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from storage.models import Conversation
from storage.records import ConversationRecord
from storage.repositories._common import Repository, upsert_insert
from storage.types import utc_now


def to_conversation_record(row: Conversation) -> ConversationRecord:
    return ConversationRecord(
        id=row.id,
        chat_id=row.chat_id,
        thread_key=row.thread_key,
        messages=row.messages,
        summary=row.summary,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class ConversationRepository(Repository):
    async def load(self, chat_id: int, thread_key: str = "") -> ConversationRecord | None:
        """The stored memory of a conversation; `thread_key` is "" for chats without threads."""
        async with self._db.sessions() as session:
            row = await session.scalar(
                select(Conversation).where(Conversation.chat_id == chat_id, Conversation.thread_key == thread_key)
            )
            return to_conversation_record(row) if row else None

    async def save(
        self,
        chat_id: int,
        thread_key: str = "",
        *,
        messages: bytes,
        summary: str | None,
        now: datetime | None = None,
    ) -> ConversationRecord:
        """Replace the conversation's messages and summary (created on the first save)."""
        when = now or utc_now()
        async with self._db.transaction() as session:
            statement = upsert_insert(session, Conversation).values(
                chat_id=chat_id,
                thread_key=thread_key,
                messages=messages,
                summary=summary,
                created_at=when,
                updated_at=when,
            )
            statement = statement.on_conflict_do_update(
                index_elements=["chat_id", "thread_key"],
                set_={"messages": messages, "summary": summary, "updated_at": when},
            )
            await session.execute(statement)
            row = await session.scalar(
                select(Conversation)
                .where(Conversation.chat_id == chat_id, Conversation.thread_key == thread_key)
                .execution_options(populate_existing=True)
            )
            if row is None:  # pragma: no cover - the upsert above guarantees it
                raise LookupError(f"conversation {chat_id}/{thread_key} vanished")
            return to_conversation_record(row)

    async def clear(self, chat_id: int, thread_key: str = "") -> bool:
        """Forget the conversation entirely, summary included (`/forget`)."""
        async with self._db.transaction() as session:
            result = await session.execute(
                delete(Conversation).where(Conversation.chat_id == chat_id, Conversation.thread_key == thread_key)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]
