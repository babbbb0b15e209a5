"""Async engines for SQLite and PostgreSQL, and `Database`, which holds an engine, its sessions and the way to run a
whole transaction of Core statements at once (`Database.write`)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy
from sqlalchemy import Row, event, text
from sqlalchemy.engine import URL, Connection, CursorResult, Engine, make_url
from sqlalchemy.exc import DBAPIError, InvalidatePoolError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.util import await_only

T = TypeVar("T")

logger = logging.getLogger(__name__)

READ_ONLY_OPTION = "lookout_read_only"
"""Execution option marking the connections of read-only sessions (SQLite begins them deferred)."""

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for the lock before failing: long enough for a burst of writers."""


def create_engine(url: str) -> AsyncEngine:
    """An async engine for `sqlite+aiosqlite://` or `postgresql+asyncpg://` URLs.

    SQLite gets WAL, foreign keys, a busy timeout and `BEGIN IMMEDIATE` transactions; the parent
    directory of a file database is created.
    """
    return _create_engine(url, foreign_keys=True)


def _create_engine(url: str, *, foreign_keys: bool) -> AsyncEngine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        if parsed.get_driver_name() != "asyncpg":
            return create_async_engine(url, pool_pre_ping=True)
        engine = create_async_engine(url)
        _ping_on_checkout(engine.sync_engine)
        return engine

    database = parsed.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url)
    _configure_sqlite(engine.sync_engine, foreign_keys=foreign_keys)
    return engine


def _ping_on_checkout(engine: Engine) -> None:
    """Check a pooled asyncpg connection with one round trip before handing it out; a dead one (the server
    restarted, or closed an idle session) is replaced by a new connection, and every connection pooled before it
    is replaced at its next checkout (after a restart they are all dead).

    This is `pool_pre_ping`'s guarantee at a third of its cost: SQLAlchemy's asyncpg ping wraps its empty query
    in BEGIN … ROLLBACK (three round trips, for pgbouncer's transaction mode, which Lookout does not use); an
    empty query outside a transaction is one. A connection just opened is not pinged (it has just answered), nor
    one taken for a statement that may run twice (`Database.write_alone_rows(repeatable=True)`), which is its own
    check."""

    @event.listens_for(engine, "connect")
    def _on_connect(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_FRESH] = True

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        if record.info.pop(_FRESH, False) or _UNCHECKED.get():
            return
        asyncpg_connection: Any = record.driver_connection
        try:
            await_only(asyncpg_connection.fetchrow(";"))
        except Exception as error:  # any failure: this connection cannot carry a statement
            raise InvalidatePoolError(f"pooled connection is dead: {error!r}") from error


_FRESH = "lookout_fresh"
"""`ConnectionPoolEntry.info` key marking a connection opened and not yet handed out."""

_UNCHECKED: ContextVar[bool] = ContextVar("lookout_unchecked_checkout", default=False)
"""Set while checking out a connection for a repeatable statement: no liveness check (see `_ping_on_checkout`)."""


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # A deferred transaction that reads and then writes cannot wait for the lock: SQLite fails it
        # at once with "database is locked". Taking the write lock up front makes writers queue on
        # busy_timeout instead. Read-only sessions (`Database.sessions`) begin deferred: under WAL they
        # read a snapshot without queueing behind the one writer (50 busy chats made every read wait).
        read_only = connection.get_execution_options().get(READ_ONLY_OPTION, False)
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class _WriterQueue:
    """One writing transaction at a time, in the order they asked (an `asyncio.Lock` per running loop)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:  # a Database may outlive one event loop (tests, CLI commands): a lock per loop
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            yield


class _SqliteThread:
    """Runs whole transactions on one thread with the plain `sqlite3` driver: the writer's, or the reader's.

    The async driver hands every cursor operation to its own thread and back (about four hand-offs per statement,
    each a trip through the GIL, plus the pool's rollback on return); a transaction run here costs one hand-off
    however many statements it has. The reader's transactions begin deferred (a WAL snapshot: they never wait for
    the writer).
    """

    def __init__(self, url: URL, *, read_only: bool = False) -> None:
        engine = sqlalchemy.create_engine(
            url.set(drivername="sqlite+pysqlite"), connect_args={"check_same_thread": False}
        )
        _configure_sqlite(engine, foreign_keys=True)
        self._root = engine
        self.engine = engine.execution_options(**{READ_ONLY_OPTION: True}) if read_only else engine
        self._name = "sqlite-reader" if read_only else "sqlite-writer"
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)

    @classmethod
    def for_engine(cls, engine: AsyncEngine, *, read_only: bool = False) -> _SqliteThread | None:
        """The thread for a SQLite file; None for PostgreSQL and in-memory databases (one connection each)."""
        url = engine.url
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        if url.database.startswith("file:"):
            return None  # URI databases (shared caches) stay on the async driver
        return cls(url, read_only=read_only)

    async def run(self, work: Callable[[Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._transaction, work)

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        with self.engine.begin() as connection:
            return work(connection)

    def dispose(self) -> None:
        """Close the connection; the thread is replaced, so it still works afterwards (like an engine)."""
        self._thread.shutdown(wait=True)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        self._root.dispose()


RECONNECT_DELAY_FIRST, RECONNECT_DELAY_CAP = 0.5, 5.0
"""A patient write (`Database.write_alone(patience=…)`) asks for a connection again after 0.5 s, doubling to at most
5 s apart: it goes on within 5 s of the database's return."""

_UNREACHABLE_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300")
"""SQLSTATEs that say the server went away, not that the statement was wrong: class 08 (connection exception),
57P01–57P03 (terminated by an administrator, crash shutdown, cannot connect now: a restart or failover) and 53300
(too many connections, as when every process reconnects at once after one)."""


def is_unreachable(error: BaseException) -> bool:
    """Whether `error` (or one it was raised from) says the database could not be reached or the connection was
    lost: a restart, a failover, a network cut (or, on SQLite, another process holding the write lock past the busy
    timeout); then the same work may be tried again once the database is back.
    A statement the database refused (a constraint, a syntax error) is not such an error."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, OSError | InvalidatePoolError | sqlalchemy.exc.TimeoutError):
            return True  # refused, reset, timed out; a pooled connection found dead; the pool gave up waiting
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.startswith(_UNREACHABLE_SQLSTATES):
            return True
        if type(current).__name__ in ("ConnectionDoesNotExistError", "InterfaceError") and "closed" in str(current):
            return True  # asyncpg: "connection was closed in the middle of operation", "connection is closed"
        if isinstance(current, sqlite3.OperationalError) and "database is locked" in str(current):
            return True  # another process's writer held SQLite's lock past the busy timeout; nothing was written
        current = current.__cause__ or current.__context__
    return False


def _rows(result: CursorResult[Any]) -> list[Row[Any]]:
    """A statement's rows; none when it returns no rows (no RETURNING)."""
    return list(result) if result.returns_rows else []


class Database:
    """An engine and its session factory, shared by the repositories of one process."""

    def __init__(self, url_or_engine: str | AsyncEngine) -> None:
        self.engine = create_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        self._read_engine = self.engine.execution_options(**{READ_ONLY_OPTION: True})
        self._autocommit_engine = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.sessions = async_sessionmaker(self._read_engine, expire_on_commit=False)
        """Sessions for reading only; writes go through `transaction()`."""
        self._write_sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # SQLite has one writer at a time. Writers of this process queue here, first come first served, instead of
        # polling for the file lock in SQLite's busy handler (which sleeps up to 100 ms between tries and is
        # unfair: under load a writer could wait out the whole busy timeout). Other processes' writers still
        # meet the busy timeout. PostgreSQL locks rows, not the database: no queue.
        self._writers = _WriterQueue() if self.engine.dialect.name == "sqlite" else None
        self._sqlite_writer = _SqliteThread.for_engine(self.engine)
        self._sqlite_reader = _SqliteThread.for_engine(self.engine, read_only=True)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction: committed on exit, rolled back on an exception."""
        async with self._writer(), self._write_sessions.begin() as session:
            yield session

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside one writing transaction, without an ORM session: for the statements of the hot
        path (a chat turn), where the session's bookkeeping would cost more than the statement."""
        async with self._writer(), self.engine.begin() as connection:
            yield connection

    def _writer(self) -> AbstractAsyncContextManager[None]:
        return self._writers.turn() if self._writers is not None else nullcontext()

    async def write(self, work: Callable[[Connection], T]) -> T:
        """`work(connection)` inside one writing transaction, committed when it returns (rolled back when it raises):
        for the hot path's Core statements. On a SQLite file the whole transaction runs in one call on the writer
        thread, after the `write`s before it; on PostgreSQL through the async driver (`run_sync`)."""
        if self._sqlite_writer is not None:
            # The thread runs one transaction at a time, in order. It does not take the queue the async writers
            # share: that queue is held until the awaiting task runs again, a whole loop iteration on a busy
            # loop, and would make every turn's write wait for that; SQLite's own lock (and busy timeout)
            # orders the thread against the async writers, which are rare (commands, monitor runs).
            return await self._sqlite_writer.run(work)
        async with self._writer(), self.engine.begin() as connection:
            return await connection.run_sync(work)

    async def write_alone(
        self, statement: Any, parameters: dict[str, Any], *, patience: float = 0.0
    ) -> Row[Any] | None:
        """One writing statement in a transaction of its own, and its first row (None: it returned none). On
        PostgreSQL it runs in autocommit, so the server commits it as it runs it: one round trip, with no BEGIN
        or COMMIT around it. On SQLite as `write`.

        `patience` (PostgreSQL): for up to this many seconds, a connection that cannot be had because the database
        is unreachable (a restart) is asked for again; the statement was not sent, so waiting is always safe. A
        statement whose connection died while it ran is not run again (it may have committed)."""
        rows = await self.write_alone_rows(statement, parameters, patience=patience)
        return rows[0] if rows else None

    async def write_alone_rows(
        self, statement: Any, parameters: dict[str, Any], *, repeatable: bool = False, patience: float = 0.0
    ) -> list[Row[Any]]:
        """`write_alone`, with every row the statement returned (a multi-row `INSERT … RETURNING`).

        `repeatable`: running the statement twice does no harm (a rate slot: one taken too many only spends a
        slot). Then, on PostgreSQL, the pooled connection is not checked before it (one round trip less): a
        connection found dead by the statement is dropped (and every connection pooled before it, as after a
        check that failed) and the statement runs once more on a new one. A statement that must not run twice
        (a turn's mark) keeps the check: its connection may die after the server committed it."""
        if self.dialect != "postgresql":
            return await self.write(lambda connection: _rows(connection.execute(statement, parameters)))
        for attempt in (1, 2) if repeatable else (2,):
            unchecked = _UNCHECKED.set(repeatable)
            try:
                connection = await self._connect_patiently(self._autocommit_engine, patience)
            finally:
                _UNCHECKED.reset(unchecked)
            try:
                return _rows(await connection.execute(statement, parameters))
            except DBAPIError as error:
                if attempt == 2 or not error.connection_invalidated:
                    raise
                logger.info("a pooled connection was dead (%s); running the statement on a new one", error.orig)
            finally:
                await connection.close()
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _connect_patiently(self, engine: AsyncEngine, patience: float) -> AsyncConnection:
        """A connection of `engine`; while the database is unreachable, asked for again (at most
        `RECONNECT_DELAY_CAP` seconds apart) for up to `patience` seconds."""
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + patience, RECONNECT_DELAY_FIRST
        while True:
            try:
                return await engine.connect()
            except Exception as error:
                if not is_unreachable(error) or loop.time() + delay > deadline:
                    raise
                logger.info("the database is unreachable (%s); asking again in %.1f s", type(error).__name__, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_DELAY_CAP)

    async def read_alone(self, statement: Any, parameters: dict[str, Any]) -> list[Row[Any]]:
        """One reading statement and all its rows. On PostgreSQL it runs in autocommit (a single statement reads
        one snapshot anyway): one round trip, with no BEGIN or COMMIT around it. On SQLite as `read`."""
        if self.dialect != "postgresql":
            return await self.read(lambda connection: list(connection.execute(statement, parameters)))
        async with self._autocommit_engine.connect() as connection:
            return list(await connection.execute(statement, parameters))

    async def read(self, work: Callable[[Connection], T]) -> T:
        """`work(connection)` inside one reading transaction: for the reads of the hot path (a command's listing).
        On a SQLite file the whole transaction runs in one call on the reader thread (deferred: a snapshot that
        never waits for the writer); on PostgreSQL through the async driver (`run_sync`). `work` may open a plain
        ORM `Session` on the connection."""
        if self._sqlite_reader is not None:
            return await self._sqlite_reader.run(work)
        async with self.begin_read() as connection:
            return await connection.run_sync(work)

    @property
    def sync_engines(self) -> list[Engine]:
        """Every engine statements go through (for instrumentation: SQLAlchemy events listen on these)."""
        engines = [self.engine.sync_engine]
        engines += [thread._root for thread in (self._sqlite_writer, self._sqlite_reader) if thread is not None]
        return engines

    @asynccontextmanager
    async def begin_read(self) -> AsyncIterator[AsyncConnection]:
        """A connection inside one reading transaction (on SQLite a deferred one, which never waits for the
        writer), without an ORM session."""
        async with self._read_engine.begin() as connection:
            yield connection

    async def ping(self) -> bool:
        """Whether the database answers a trivial query (for /healthz); never raises. It reads (on SQLite a
        deferred transaction): a writer holding SQLite's lock delays writes, not the answer."""
        try:
            async with self._read_engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        except Exception as error:  # any failure means "not reachable"; the reason goes to the log
            logger.warning("database ping failed: %s", error)
            return False
        return True

    async def dispose(self) -> None:
        """Close every pooled connection."""
        for thread in (self._sqlite_writer, self._sqlite_reader):
            if thread is not None:
                await asyncio.to_thread(thread.dispose)
        await self.engine.dispose()
