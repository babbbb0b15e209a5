"""Helpers the repositories share: the dialect's INSERT (for ON CONFLICT), a record from a row and a row's values from
a record, and a base class."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from storage.engine import Database

AnyConnection = AsyncSession | AsyncConnection | Connection
"""Whatever a statement can be run through: an ORM session, an async connection, a sync one (`Database.write`)."""


def dialect_name(session: AnyConnection) -> str:
    """`sqlite` or `postgresql`."""
    if isinstance(session, AsyncSession):
        return session.get_bind().dialect.name
    return session.dialect.name


def upsert_insert(session: AnyConnection, table: Any) -> Any:
    """An INSERT with `on_conflict_do_nothing`/`on_conflict_do_update` for the session's (or connection's) dialect.

    Both SQLite and PostgreSQL speak `INSERT ... ON CONFLICT`; SQLAlchemy exposes it per dialect.
    """
    return dialect_insert(dialect_name(session), table)


def dialect_insert(name: str, table: Any) -> Any:
    """`upsert_insert` for a dialect by name (statements built once per dialect and reused)."""
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"storage supports SQLite and PostgreSQL, not {name}")


_PLATFORM_KEY = ["platform", "external_id"]
"""The unique key of chats and people: the platform and its own id for them."""


def platform_upsert(
    connection: AnyConnection,
    model: type[Any],
    platform: str,
    external_id: str,
    *,
    values: Mapping[str, object],
    replace: Mapping[str, object],
) -> Any:
    """The INSERT that makes a chat or a person (a row keyed by platform and external id) with `values` on first
    sight; an existing row gets the columns of `replace` (none when it is empty)."""
    statement = upsert_insert(connection, model).values(platform=platform, external_id=external_id, **values)
    if replace:
        return statement.on_conflict_do_update(index_elements=_PLATFORM_KEY, set_=dict(replace))
    return statement.on_conflict_do_nothing(index_elements=_PLATFORM_KEY)


def by_platform_key(model: type[Any], platform: str, external_id: str) -> Select[Any]:
    """The SELECT of the chat or person `external_id` on `platform`."""
    return select(model).where(model.platform == platform, model.external_id == external_id)


R = TypeVar("R")
M = TypeVar("M")


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}
"""Each record class's field names, looked up once (records are made on every read)."""


def _field_names(record: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(record)
    if names is None:
        names = _FIELD_NAMES[record] = tuple(field.name for field in dataclasses.fields(record))
    return names


def record_of(record: type[R], row: Any, **converted: Any) -> R:
    """A `storage.records` dataclass from a row whose columns carry its field names (an ORM object, or a Core row of
    the whole table): each field is the column of that name, except those given in `converted` (an enum made of the
    stored text, a tuple of a JSON list, a value from elsewhere)."""
    values = {name: getattr(row, name) for name in _field_names(record) if name not in converted}
    return record(**values, **converted)


def values_of(record: object, **converted: Any) -> dict[str, Any]:
    """The column values of a row made from a `storage.records` dataclass, the reverse of `record_of`: each field under
    its name, except those given in `converted` (a JSON list of a tuple, a value the record does not carry)."""
    values = {name: getattr(record, name) for name in _field_names(type(record)) if name not in converted}
    return values | converted


def assign(row: object, values: Mapping[str, object]) -> None:
    """Set each column of `row` (an ORM object) named in `values` to its value."""
    for name, value in values.items():
        setattr(row, name, value)


def like_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, with LIKE's wildcards escaped (escape char `\\`)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Repository:
    """Holds the `Database`; each public method runs in its own transaction."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def _record_by_key(self, model: type[Any], key: object, to_record: Callable[[Any], R]) -> R | None:
        """The record of the row whose primary key is `key`, None when there is none."""
        async with self._db.sessions() as session:
            row = await session.get(model, key)
            return to_record(row) if row is not None else None

    async def _changed(
        self, model: type[M], key: object, change: Callable[[M], object], to_record: Callable[[M], R]
    ) -> R | None:
        """In one transaction: `change` the row whose primary key is `key` (it sets the row's columns), then its
        record; None when there is no such row."""
        async with self._db.transaction() as session:
            row = await session.get(model, key)
            if row is None:
                return None
            change(row)
            await session.flush()
            return to_record(row)

    async def _count(self, model: type[Any], *conditions: ColumnElement[bool]) -> int:
        """How many rows of `model` meet every condition."""
        async with self._db.sessions() as session:
            found = await session.scalar(select(func.count()).select_from(model).where(*conditions))
            return int(found or 0)

    async def _delete(self, model: type[Any], *conditions: ColumnElement[bool]) -> int:
        """Delete the rows of `model` that meet every condition, in one transaction; how many there were."""
        async with self._db.transaction() as session:
            result = await session.execute(delete(model).where(*conditions))
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def _upserted(
        self,
        model: type[Any],
        upsert: Callable[[AsyncSession], Any],
        key: tuple[str, str],
        to_record: Callable[[Any], R],
    ) -> R:
        """Run `upsert` (a chat's or a person's insert-or-update), then read its row by `key` (platform, external
        id) in the same transaction: safe when two messages of a new chat or person arrive together."""
        platform, external_id = key
        async with self._db.transaction() as session:
            await session.execute(upsert(session))
            row = await session.scalar(by_platform_key(model, platform, external_id))
            if row is None:  # pragma: no cover - the upsert guarantees it
                raise LookupError(f"{model.__tablename__} {platform}:{external_id} vanished")
            return to_record(row)

    async def _record_where(self, statement: Select[Any], to_record: Callable[[Any], R]) -> R | None:
        """The record of the first row `statement` (a one-entity SELECT) finds, None when it finds none."""
        async with self._db.sessions() as session:
            row = await session.scalar(statement)
            return to_record(row) if row is not None else None
