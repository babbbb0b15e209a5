"""Helpers the repositories share: the dialect's INSERT (for ON CONFLICT) and a base class."""

from __future__ import annotations

from typing import Any

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


def like_pattern(text: str) -> str:
    """A LIKE pattern matching `text` anywhere, with LIKE's wildcards escaped (escape char `\\`)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Repository:
    """Holds the `Database`; each public method runs in its own transaction."""

    def __init__(self, database: Database) -> None:
        self._db = database
