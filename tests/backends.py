"""Fixtures for tests that run on both storage backends: SQLite (a temp file) and, with TEST_DATABASE_URL,
PostgreSQL (a throwaway database per session). A test asking for `database` runs once per backend.

Registered for the whole suite in `tests/conftest.py`; a directory's own `database` fixture overrides this one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from storage import Database, upgrade_database
from storage.models import Base

POSTGRES_ENV = "TEST_DATABASE_URL"


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once; each test gets a copy (faster than migrating per test)."""
    path = tmp_path_factory.mktemp("template") / "lookout.db"
    asyncio.run(upgrade_database(sqlite_url(path)))
    return path


async def _admin_execute(admin_url: str, *statements: str) -> None:
    database = Database(admin_url)
    try:
        async with database.engine.connect() as connection:
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            for statement in statements:
                await connection.execute(text(statement))
    finally:
        await database.dispose()


async def _drop_database(admin_url: str, name: str) -> None:
    """Drop a throwaway database, retrying while another backend still holds it.

    A plain DROP comes first: PostgreSQL itself cancels an autovacuum worker on the database, whereas
    `WITH (FORCE)` refuses outright when that worker (a superuser process) is connected and our role
    is not a superuser. FORCE is the fallback for a connection of ours that a test leaked.
    """
    last_error: Exception | None = None
    for attempt in range(10):
        statement = f'DROP DATABASE IF EXISTS "{name}"' + (" WITH (FORCE)" if attempt % 2 else "")
        try:
            await _admin_execute(admin_url, statement)
        except Exception as error:  # asyncpg's errors arrive wrapped by SQLAlchemy
            last_error = error
            await asyncio.sleep(0.5)
        else:
            return
    warnings.warn(f"could not drop test database {name}: {last_error}", stacklevel=1)


def postgres_admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return url


@contextmanager
def throwaway_postgres(admin_url: str, *, prefix: str = "lookout_test", migrate: bool = False) -> Iterator[str]:
    """A new PostgreSQL database (migrated to head with `migrate`), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin_execute(admin_url, f'CREATE DATABASE "{name}"'))
    try:
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        if migrate:
            asyncio.run(upgrade_database(url))
        yield url
    finally:
        asyncio.run(_drop_database(admin_url, name))


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    """An empty, throwaway PostgreSQL database (dropped afterwards)."""
    with throwaway_postgres(postgres_admin_url()) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_session_url() -> Iterator[str]:
    """One PostgreSQL database for the session, migrated to head; tests truncate it before use."""
    admin_url = postgres_admin_url()
    name = f"lookout_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin_execute(admin_url, f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        asyncio.run(upgrade_database(url))
        yield url
    finally:
        asyncio.run(_drop_database(admin_url, name))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A migrated, empty database of the parametrized backend."""
    if backend == "sqlite":
        path = tmp_path / "db" / "lookout.db"
        path.parent.mkdir()
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return sqlite_url(path)
    return str(request.getfixturevalue("postgres_session_url"))


@pytest.fixture
async def database(database_url: str, backend: str) -> AsyncIterator[Database]:
    db = Database(database_url)
    if backend == "postgresql":
        # DELETE beats TRUNCATE on tables this small (TRUNCATE swaps files for each table).
        async with db.engine.begin() as connection:
            for table in reversed(Base.metadata.sorted_tables):
                await connection.execute(table.delete())
    yield db
    await db.dispose()
