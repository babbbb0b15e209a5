"""Locks shared by every process on one database: PostgreSQL advisory locks (held ones and tried ones), and file
locks next to a SQLite file (tried ones, for a duty one process does: scheduling).

A lock is named by a string (hashed to PostgreSQL's 64-bit key with `hashtextextended`) and held on a connection
of its own, from a pool kept apart from the repositories' (a lock held through a long turn must not starve the
queries the turn makes). That pool is bounded (`max_connections`): a lock held or waited for takes one connection,
and with one lock per conversation in flight an unbounded pool opened as many connections as conversations (two
web processes with 50 chats writing at once ran PostgreSQL out of its 100). Beyond the bound, `hold` waits for a
connection first; a holder never needs a second one, so the wait always ends. A lock is released when the holder
lets go, or by PostgreSQL itself when the holder's session ends: a killed process's connection closes at once, and
the server's TCP keepalives (set on every lock connection) end the session of a machine that vanished within about
`KEEPALIVE_SECONDS`.

A pooled connection is not checked before use (no `pool_pre_ping`): the lock statement is the check. When it
fails because the connection turned out dead (the server restarted, or ended an idle session), that connection
is dropped and the statement runs once more on a new one. That is safe for a lock statement: a session that died
holds no lock, and one that died just after the lock was granted released it as it ended.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final, Protocol

from sqlalchemy import TextClause, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS: Final = 20
"""Idle + interval × count of the server-side TCP keepalives on lock connections (10 + 5 × 2)."""
_KEEPALIVES = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "2"}


class LockUnsupportedError(Exception):
    """Advisory locks exist only on PostgreSQL."""


MAX_CONNECTIONS: Final = 20
"""Connections one process holds locks on, at most (so locks held or waited for at once); PostgreSQL allows 100
connections by default, shared by every process with the repositories' pools (5 + 10 each)."""


def _lock_engine(url: str, *, pool_size: int, max_connections: int) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise LockUnsupportedError(f"advisory locks need PostgreSQL, not {parsed.get_backend_name()}")
    connect_args: dict[str, object] = {}
    if parsed.get_driver_name() == "asyncpg":
        connect_args["server_settings"] = dict(_KEEPALIVES)
    else:  # psycopg takes libpq options
        connect_args["options"] = " ".join(f"-c {name}={value}" for name, value in _KEEPALIVES.items())
    return create_async_engine(
        url,
        pool_size=min(pool_size, max_connections),
        max_overflow=max(0, max_connections - pool_size),
        pool_timeout=24 * 3600,  # waiting for a connection is waiting for the lock: as long as it takes
        # No check on checkout: the lock statement is the check (`AdvisoryLocks._run`).
        # No transaction stays open on a lock's connection (an idle transaction would hold back VACUUM).
        isolation_level="AUTOCOMMIT",
        connect_args=connect_args,
    )


class HeldLock:
    """A lock this process holds until `release()` (or until its connection is lost: see `still_held`)."""

    def __init__(self, name: str, connection: AsyncConnection) -> None:
        self.name = name
        self._connection: AsyncConnection | None = connection

    async def still_held(self) -> bool:
        """Whether the session holding the lock is alive (a lost connection means the lock is gone too)."""
        connection = self._connection
        if connection is None:
            return False
        try:
            await asyncio.wait_for(connection.execute(text("SELECT 1")), timeout=5)
        except Exception as error:  # whatever went wrong, the lock can no longer be counted on
            logger.warning("lock %s: its connection was lost (%s)", self.name, error)
            await self._close(invalidate=True)
            return False
        return True

    async def release(self) -> None:
        connection = self._connection
        if connection is None:
            return
        try:
            await connection.execute(text("SELECT pg_advisory_unlock(hashtextextended(:name, 0))"), {"name": self.name})
        except Exception:  # the session is gone, and the lock with it
            await self._close(invalidate=True)
            return
        await self._close(invalidate=False)

    async def _close(self, *, invalidate: bool) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await _close(connection, invalidate=invalidate)


async def _close(connection: AsyncConnection, *, invalidate: bool) -> None:
    """Give a lock connection back to the pool, or (`invalidate`) end its session and drop it."""
    try:
        if invalidate:
            await connection.invalidate()
        await connection.close()
    except Exception:  # closing a dead connection may fail; nothing is left to release
        logger.debug("closing lock connection failed", exc_info=True)


_LOCK = text("SELECT pg_advisory_lock(hashtextextended(:name, 0))")
_TRY_LOCK = text("SELECT pg_try_advisory_lock(hashtextextended(:name, 0))")


class AdvisoryLocks:
    """Named locks across every process on one PostgreSQL database (see the module docstring)."""

    def __init__(self, url: str, *, pool_size: int = 4, max_connections: int = MAX_CONNECTIONS) -> None:
        self._engine = _lock_engine(url, pool_size=pool_size, max_connections=max_connections)

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        """Wait for the lock (PostgreSQL queues waiters first come, first served), hold it inside the block."""
        connection, _ = await self._run(_LOCK, name)
        held = HeldLock(name, connection)
        try:
            yield
        finally:
            await asyncio.shield(held.release())

    async def try_hold(self, name: str) -> HeldLock | None:
        """Take the lock if nobody holds it; the caller releases it (or loses it with its connection)."""
        connection, taken = await self._run(_TRY_LOCK, name)
        if not taken:
            await connection.close()
            return None
        return HeldLock(name, connection)

    async def _run(self, statement: TextClause, name: str) -> tuple[AsyncConnection, object]:
        """`statement` on a pooled connection, and its value; a connection found dead by it is dropped and the
        statement runs once more on a new one (see the module docstring). On any failure, and when cancelled
        while waiting, the connection's session is ended, and its wait or lock with it."""
        for attempt in (1, 2):
            connection = await self._engine.connect()
            try:
                return connection, (await connection.execute(statement, {"name": name})).scalar()
            except DBAPIError as error:
                await _close(connection, invalidate=True)
                if attempt == 2 or not error.connection_invalidated:
                    raise
                logger.info("lock %s: a pooled connection was dead (%s); trying a new one", name, error.orig)
            except BaseException:
                await _close(connection, invalidate=True)
                raise
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def dispose(self) -> None:
        await self._engine.dispose()


class HeldFileLock:
    """A lock on a file this process holds until `release()`; the operating system lets go when the process ends,
    however it ends, so a killed holder never leaves it taken."""

    def __init__(self, name: str, descriptor: int | None) -> None:
        self.name = name
        self._descriptor = descriptor
        self._held = True

    async def still_held(self) -> bool:
        """Always true until released: a lock on an open file cannot be lost."""
        return self._held

    async def release(self) -> None:
        descriptor, self._descriptor, self._held = self._descriptor, None, False
        if descriptor is not None:
            os.close(descriptor)  # closing the file releases its lock


class FileLocks:
    """Named locks across the processes of one machine that share a SQLite file: `flock` on a file next to it
    (`<database>.<name>.lock`). A database in memory is one process's own, so its locks are always granted."""

    def __init__(self, database_path: Path | None) -> None:
        self._path = database_path

    def path_of(self, name: str) -> Path | None:
        """The lock file of `name` (None for a database in memory)."""
        if self._path is None:
            return None
        safe = "".join(character if character.isalnum() else "-" for character in name)
        return self._path.with_name(f"{self._path.name}.{safe}.lock")

    async def try_hold(self, name: str) -> HeldFileLock | None:
        """Take the lock if no other process holds it; the caller releases it."""
        path = self.path_of(name)
        if path is None:
            return HeldFileLock(name, None)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            return None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())  # who holds it, for a person looking
        return HeldFileLock(name, descriptor)

    async def dispose(self) -> None:
        """Nothing pooled (the same face as `AdvisoryLocks`)."""


class Held(Protocol):
    """A lock held by this process, advisory or on a file."""

    name: str

    async def still_held(self) -> bool: ...

    async def release(self) -> None: ...


class TriedLocks(Protocol):
    """Locks that can be tried by name across processes: `AdvisoryLocks` (PostgreSQL) or `FileLocks` (SQLite)."""

    async def try_hold(self, name: str) -> Held | None: ...

    async def dispose(self) -> None: ...


def locks_for(url: str) -> TriedLocks:
    """The locks the processes sharing the database at `url` agree on: advisory locks on PostgreSQL, file locks
    next to a SQLite file (always granted for a database in memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return AdvisoryLocks(url, pool_size=1, max_connections=2)
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return FileLocks(None)
    return FileLocks(Path(database).expanduser().resolve())
