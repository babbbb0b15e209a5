"""A chat turn's storage in two transactions: one in (the de-duplication mark, the chat and the person, the
conversation's state, today's tokens) and one out (the conversation's changes and the usage of the turn).

Guarantees: the de-duplication mark is committed before the turn's work starts (of two deliveries of one update
exactly one gets a `TurnStart`); the common turn (known chat and person, no rename) costs one INSERT and one
SELECT in (on PostgreSQL one statement doing both, committed as it runs: one round trip), one upsert per written
row out (on PostgreSQL one statement, its upserts data-modifying CTEs: one round trip, all or nothing).
The statements are SQLAlchemy Core, built once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, cast

from sqlalchemy import Date, Row, Table, and_, bindparam, null, select
from sqlalchemy.engine import Connection

from storage.models import Chat, ProcessedInbound, User
from storage.records import ConversationChanges, TurnOpening, TurnStart, TurnState, UsageEntry
from storage.repositories._common import Repository, dialect_insert, dialect_name
from storage.repositories.chats import chat_upsert, to_chat_record
from storage.repositories.conversations import (
    CONVERSATION_COLUMNS,
    conversation_record,
    conversation_write_cte,
    write_conversation,
)
from storage.repositories.conversations import TABLE as CONVERSATION_TABLE
from storage.repositories.usage import add_usage, tokens_on, usage_upsert_ctes
from storage.repositories.users import to_user_record, user_upsert

_chats, _users = cast(Table, Chat.__table__), cast(Table, User.__table__)
_conversations = CONVERSATION_TABLE


def _people() -> Any:
    """chat ⟕ person ⟕ conversation (the chat itself is picked by `_chat_is_the_turns`)."""
    return _chats.outerjoin(
        _users, and_(_users.c.platform == bindparam("platform"), _users.c.external_id == bindparam("user"))
    ).outerjoin(
        _conversations,
        and_(_conversations.c.chat_id == _chats.c.id, _conversations.c.thread_key == bindparam("thread")),
    )


def _start_columns() -> list[Any]:
    return [
        *(column.label(f"chat_{column.name}") for column in _chats.c),
        *(column.label(f"user_{column.name}") for column in _users.c),
        *(column.label(f"conv_{column.name}") for column in CONVERSATION_COLUMNS),
        tokens_on(_chats.c.id, bindparam("day", type_=Date())).label("tokens_today"),
    ]


def _chat_is_the_turns() -> Any:
    return and_(_chats.c.platform == bindparam("platform"), _chats.c.external_id == bindparam("chat"))


_START = select(*_start_columns()).select_from(_people()).where(_chat_is_the_turns())
"""The turn's one read: chat ⟕ person ⟕ conversation, with the chat's tokens today."""


@functools.cache
def _mark(dialect: str) -> Any:
    """The de-duplication mark: returns the new row's id, nothing when the update was handled before."""
    insert = dialect_insert(dialect, ProcessedInbound)
    return insert.on_conflict_do_nothing(index_elements=["platform", "external_id"]).returning(ProcessedInbound.id)


def _marked_start_query() -> Any:
    """PostgreSQL: the de-duplication mark and the turn's read in one statement. The mark is a data-modifying CTE;
    the read hangs off its row, so a duplicate (no row inserted) reads nothing at all, and a new update whose chat
    is not stored yet reads one row of NULL chat columns. The read sees the database as it was before the mark
    (PostgreSQL's snapshot rule for such CTEs), which is all it needs: it does not read the mark's table."""
    mark = (
        _mark("postgresql")
        .values(platform=bindparam("platform"), external_id=bindparam("event"), received_at=bindparam("now"))
        .cte("mark")
    )
    return select(mark.c.id.label("mark_id"), *_start_columns()).select_from(
        mark.outerjoin(_people(), _chat_is_the_turns())
    )


_MARKED_START = _marked_start_query()


def _state_query() -> Any:
    return select(*CONVERSATION_COLUMNS).where(
        _conversations.c.chat_id == bindparam("chat_id"), _conversations.c.thread_key == bindparam("thread")
    )


_STATE = _state_query()

FINISH_PATIENCE_SECONDS = 120.0
"""How long a turn's last write waits for a database that went away (a restart, a failover) before the turn fails:
the answer is in hand and the person waits for it; nothing was sent to the server meanwhile, so waiting is safe."""
_TOKENS = select(tokens_on(bindparam("chat_id"), bindparam("day", type_=Date())))


class _Prefixed:
    """The columns of one table in a joined row, read as attributes (what the record builders take)."""

    def __init__(self, values: Any, prefix: str) -> None:
        self._values, self._prefix = values, prefix

    def __getattr__(self, name: str) -> Any:
        return self._values[self._prefix + name]


def _turn_start(row: Row[Any]) -> TurnStart:
    values = row._mapping
    chat = to_chat_record(cast(Chat, _Prefixed(values, "chat_")))
    user = to_user_record(cast(User, _Prefixed(values, "user_")))
    conversation = conversation_record(values, "conv_") if values["conv_id"] is not None else None
    return TurnStart(
        chat=chat, user=user, state=TurnState(conversation=conversation, tokens_today=int(values["tokens_today"]))
    )


class TurnRepository(Repository):
    async def begin(self, opening: TurnOpening) -> TurnStart | None:
        """One transaction: mark `event_id` handled (None when it already was: a duplicate), then read the chat,
        the person, the conversation state and the chat's tokens on `day`. A chat or person seen for the first
        time is created, and a new non-empty title or display name replaces the stored one."""
        platform, chat_external_id, user_external_id = (
            opening.platform,
            opening.chat_external_id,
            opening.user_external_id,
        )
        event_id, now, chat_title, user_name = opening.event_id, opening.now, opening.chat_title, opening.user_name
        params: dict[str, Any] = {
            "platform": platform,
            "chat": chat_external_id,
            "user": user_external_id,
            "thread": opening.thread_key,
            "day": opening.day,
        }

        marked: Row[Any] | None = None
        if event_id is not None and self._db.dialect == "postgresql":
            # One round trip, committed as it runs: the mark is stored before the turn's work starts. When the
            # chat or the person still has to be stored, that follows in a transaction of its own (a crash
            # between the two loses the turn but never answers it twice, as a crash after one transaction would).
            marked = await self._db.write_alone(_MARKED_START, params | {"event": event_id, "now": now})
            if marked is None:
                return None
            if marked._mapping["chat_id"] is not None and not _stale(
                marked, chat_title=chat_title, user_name=user_name
            ):
                return _turn_start(marked)

        def work(connection: Connection) -> TurnStart | None:
            if event_id is not None and marked is None:
                mark = {"platform": platform, "external_id": event_id, "received_at": now}
                if connection.execute(_mark(dialect_name(connection)), mark).scalar_one_or_none() is None:
                    return None
            row = connection.execute(_START, params).first() if marked is None else None  # marked: stale
            if row is None or _stale(row, chat_title=chat_title, user_name=user_name):
                connection.execute(chat_upsert(connection, platform, chat_external_id, title=chat_title, rename=True))
                connection.execute(user_upsert(connection, platform, user_external_id, display_name=user_name))
                row = connection.execute(_START, params).first()
                if row is None:  # pragma: no cover - the upserts above guarantee it
                    raise LookupError(f"chat {platform}:{chat_external_id} vanished")
            return _turn_start(row)

        return await self._db.write(work)

    async def state(self, chat_id: int, thread_key: str, day: date) -> TurnState:
        """The conversation state and the chat's tokens on `day`, for a caller that did not `begin` the turn."""
        async with self._db.begin_read() as connection:
            row = (await connection.execute(_STATE, {"chat_id": chat_id, "thread": thread_key})).first()
            tokens = (await connection.execute(_TOKENS, {"chat_id": chat_id, "day": day})).scalar_one()
        return TurnState(conversation=conversation_record(row) if row else None, tokens_today=int(tokens))

    async def finish(
        self,
        chat_id: int,
        thread_key: str,
        *,
        now: datetime,
        day: date,
        changes: ConversationChanges | None = None,
        usage: Sequence[UsageEntry] = (),
        if_revision: int | None = None,
    ) -> int | None:
        """One transaction: the conversation's changes (see `write_conversation`) and the turn's usage, which
        counts even when `if_revision` kept the changes out. Returns the new revision (None: nothing written to
        the conversation)."""
        spent = [entry for entry in usage if entry.requests or entry.input_tokens or entry.output_tokens]
        if not changes and not spent:
            return None

        if self._db.dialect == "postgresql":
            # One statement, committed as it runs (one round trip): the conversation's write and the usage are
            # data-modifying CTEs of it, so both commit together or neither does, as in one transaction.
            statement, parameters = _finish_statement(
                chat_id, thread_key, now=now, day=day, changes=changes, spent=spent, if_revision=if_revision
            )
            row = await self._db.write_alone(statement, parameters, patience=FINISH_PATIENCE_SECONDS)
            return None if row is None else cast(int | None, row[0])

        def work(connection: Connection) -> int | None:
            revision = None
            if changes:
                revision = write_conversation(
                    connection, chat_id, thread_key, changes, now=now, if_revision=if_revision
                )
            for entry in spent:
                add_usage(connection, chat_id, day, entry)
            return revision

        return await self._db.write(work)


def _stale(row: Row[Any], *, chat_title: str | None, user_name: str | None) -> bool:
    """The person is new, or the chat or the person has a new name to store."""
    values = row._mapping
    return (
        values["user_id"] is None
        or bool(chat_title and values["chat_title"] != chat_title)
        or bool(user_name and values["user_display_name"] != user_name)
    )


def _finish_statement(
    chat_id: int,
    thread_key: str,
    *,
    now: datetime,
    day: date,
    changes: ConversationChanges | None,
    spent: Sequence[UsageEntry],
    if_revision: int | None,
) -> tuple[Any, dict[str, Any]]:
    """PostgreSQL: `finish` as one statement returning the new revision (NULL: nothing written to the
    conversation). Its CTEs all run, referenced or not, in the statement's one transaction."""
    parameters: dict[str, Any] = {}
    conversation, usage = None, ()
    if changes:
        conversation, written = conversation_write_cte(chat_id, thread_key, changes, now=now, if_revision=if_revision)
        parameters |= written
    if spent:
        usage, added = usage_upsert_ctes(chat_id, day, spent)
        parameters |= added
    return _finish_query(conversation, usage), parameters


@functools.cache
def _finish_query(conversation: Any, usage: tuple[Any, ...]) -> Any:
    """Built once per pair of (cached) CTEs, so the turn reuses one statement object."""
    revision = null() if conversation is None else select(conversation.c.revision).scalar_subquery()
    return select(revision.label("revision")).add_cte(*(cte for cte in (conversation, *usage) if cte is not None))
