"""Conversation state per (chat, thread): pydantic-ai's serialised messages, a rolling summary, the open
confirmation and the "told once" flag, with a revision that grows with every write."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Row, Table, bindparam, delete, select, update
from sqlalchemy.engine import Connection

from kernel import utc_now
from storage.models import Conversation
from storage.records import ConversationChanges, ConversationRecord
from storage.repositories._common import Repository, dialect_insert, dialect_name

TABLE = cast(Table, Conversation.__table__)
CONVERSATION_COLUMNS = tuple(TABLE.c)
"""Every column, in the order `conversation_record` reads them."""


def conversation_record(row: Row[Any] | Any, prefix: str = "") -> ConversationRecord:
    """The record from a row holding every column (named `prefix` + column name)."""
    values = row._mapping if isinstance(row, Row) else row

    def value(name: str) -> Any:
        return values[f"{prefix}{name}"]

    return ConversationRecord(
        id=value("id"),
        chat_id=value("chat_id"),
        thread_key=value("thread_key"),
        messages=value("messages"),
        summary=value("summary"),
        created_at=value("created_at"),
        updated_at=value("updated_at"),
        confirmation_token=value("confirmation_token"),
        confirmation=value("confirmation"),
        told_no_model=bool(value("told_no_model")),
        revision=value("revision"),
    )


def _values(changes: ConversationChanges, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "messages" in changes:
        values["messages"] = changes["messages"]
    if "summary" in changes:
        values["summary"] = changes["summary"]
    if "confirmation" in changes:
        opened = changes["confirmation"]
        values["confirmation_token"] = opened[0] if opened else None
        values["confirmation"] = opened[1] if opened else None
    if "told_no_model" in changes:
        values["told_no_model"] = changes["told_no_model"]
    if changes.get("touch"):
        values["updated_at"] = now
    return values


def _new_row(chat_id: int, thread_key: str, values: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A new conversation's row: the defaults, then `values`."""
    return {
        "chat_id": chat_id,
        "thread_key": thread_key,
        "messages": b"",
        "summary": None,
        "confirmation_token": None,
        "confirmation": None,
        "told_no_model": False,
        "revision": 1,
        "created_at": now,
        "updated_at": now,
        **values,
    }


@functools.cache
def _upsert(dialect: str, changed: tuple[str, ...]) -> Any:
    """INSERT the conversation, or on conflict set the `changed` columns from the inserted values."""
    insert = dialect_insert(dialect, TABLE)
    excluded = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=["chat_id", "thread_key"],
        set_={**{name: excluded[name] for name in changed}, "revision": TABLE.c.revision + 1},
    ).returning(TABLE.c.revision)


@functools.cache
def _conditional_update(changed: tuple[str, ...]) -> Any:
    """UPDATE the `changed` columns while the revision is still the one read."""
    return (
        update(TABLE)
        .where(
            TABLE.c.chat_id == bindparam("key_chat_id"),
            TABLE.c.thread_key == bindparam("key_thread_key"),
            TABLE.c.revision == bindparam("key_revision"),
        )
        .values(**{name: bindparam(name) for name in changed}, revision=TABLE.c.revision + 1)
        .returning(TABLE.c.revision)
    )


def write_conversation(
    connection: Connection,
    chat_id: int,
    thread_key: str,
    changes: ConversationChanges,
    *,
    now: datetime,
    if_revision: int | None = None,
) -> int | None:
    """Apply `changes` inside the caller's transaction and return the new revision.

    Without `if_revision` the row is created on the first write (one upsert). With it, the changes apply only
    while the stored revision still is `if_revision` (None when the conversation moved on or is gone)."""
    values = _values(changes, now)
    changed = tuple(sorted(values))
    if if_revision is not None:
        keys = {"key_chat_id": chat_id, "key_thread_key": thread_key, "key_revision": if_revision}
        result = connection.execute(_conditional_update(changed), {**values, **keys})
        revision: int | None = result.scalar_one_or_none()
        return revision
    row = _new_row(chat_id, thread_key, values, now)
    created: int = connection.execute(_upsert(dialect_name(connection), changed), row).scalar_one()
    return created


def conversation_write_cte(
    chat_id: int,
    thread_key: str,
    changes: ConversationChanges,
    *,
    now: datetime,
    if_revision: int | None = None,
) -> tuple[Any, dict[str, Any]]:
    """PostgreSQL: `write_conversation` as a data-modifying CTE named `conversation` (one column, `revision`) and
    its parameters, for a caller that runs it inside a larger statement. The same write: an upsert, or without
    a row changed when `if_revision` is no longer the stored revision."""
    values = _values(changes, now)
    changed = tuple(sorted(values))
    if if_revision is not None:
        keys = {"key_chat_id": chat_id, "key_thread_key": thread_key, "key_revision": if_revision}
        return _write_cte(changed, conditional=True), {**values, **keys}
    row = _new_row(chat_id, thread_key, values, now)
    return _write_cte(changed, conditional=False), row


@functools.cache
def _write_cte(changed: tuple[str, ...], *, conditional: bool) -> Any:
    """Built once per shape: a statement object used again is not compiled, nor its cache key computed, again."""
    return (_conditional_update(changed) if conditional else _upsert_values(changed)).cte("conversation")


@functools.cache
def _upsert_values(changed: tuple[str, ...]) -> Any:
    """`_upsert` on PostgreSQL with every column bound by name (a CTE takes its VALUES from the statement)."""
    insert = dialect_insert("postgresql", TABLE).values(**{name: bindparam(name) for name in _ROW_COLUMNS})
    excluded = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=["chat_id", "thread_key"],
        set_={**{name: excluded[name] for name in changed}, "revision": TABLE.c.revision + 1},
    ).returning(TABLE.c.revision)


_ROW_COLUMNS = tuple(column.name for column in TABLE.c if column.name != "id")
"""The columns a new row sets (`_new_row`'s keys)."""


class ConversationRepository(Repository):
    async def load(self, chat_id: int, thread_key: str = "") -> ConversationRecord | None:
        """The stored state of a conversation; `thread_key` is "" for chats without threads."""
        return await self._one(TABLE.c.chat_id == chat_id, TABLE.c.thread_key == thread_key)

    async def _one(self, *where: ColumnElement[bool]) -> ConversationRecord | None:
        async with self._db.begin_read() as connection:
            row = (await connection.execute(select(*CONVERSATION_COLUMNS).where(*where))).first()
            return conversation_record(row) if row else None

    async def write(
        self,
        chat_id: int,
        thread_key: str,
        changes: ConversationChanges,
        *,
        now: datetime | None = None,
        if_revision: int | None = None,
    ) -> int | None:
        """`write_conversation` in a transaction of its own."""
        when = now or utc_now()
        return await self._db.write(
            lambda connection: write_conversation(
                connection, chat_id, thread_key, changes, now=when, if_revision=if_revision
            )
        )

    async def save(
        self,
        chat_id: int,
        thread_key: str = "",
        *,
        messages: bytes,
        summary: str | None,
        now: datetime | None = None,
    ) -> ConversationRecord:
        """Replace the conversation's messages and summary (created on the first save); the stored state after."""
        await self.write(chat_id, thread_key, {"messages": messages, "summary": summary, "touch": True}, now=now)
        record = await self.load(chat_id, thread_key)
        if record is None:  # pragma: no cover - the upsert above guarantees it
            raise LookupError(f"conversation {chat_id}/{thread_key} vanished")
        return record

    async def find_confirmation(self, chat_id: int, token: str) -> ConversationRecord | None:
        """The conversation of this chat (any thread) whose open confirmation has `token`."""
        return await self._one(TABLE.c.chat_id == chat_id, TABLE.c.confirmation_token == token)

    async def claim_confirmation(self, chat_id: int, thread_key: str, token: str) -> bool:
        """Close the open confirmation `token` of the conversation; True for exactly one of any number of callers
        (two presses of "Yes", two processes), False when it is no longer open."""
        table = TABLE
        async with self._db.begin() as connection:
            result = await connection.execute(
                update(table)
                .where(
                    table.c.chat_id == chat_id,
                    table.c.thread_key == thread_key,
                    table.c.confirmation_token == token,
                )
                .values(confirmation_token=None, confirmation=None, revision=table.c.revision + 1)
            )
            return bool(result.rowcount)

    async def clear(self, chat_id: int, thread_key: str = "") -> bool:
        """Forget the conversation entirely: memory, summary, open confirmation and flags (`/forget`)."""
        async with self._db.begin() as connection:
            result = await connection.execute(
                delete(Conversation).where(Conversation.chat_id == chat_id, Conversation.thread_key == thread_key)
            )
            return bool(result.rowcount)
