"""Migrations: an empty database upgraded to head has exactly the models' schema, on both backends."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from storage import upgrade_database
from storage.engine import create_engine
from storage.migrate import migration_config, newest_revision, owned_by_lookout
from storage.models import Base


def _schema_diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True, "include_name": owned_by_lookout})
    return list(compare_metadata(context, Base.metadata))


async def _check_upgraded(url: str) -> None:
    await upgrade_database(url)
    await upgrade_database(url)  # a second upgrade is a no-op, as at every start
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            assert await connection.run_sync(_schema_diff) == []
            version = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            tables = set(await connection.run_sync(lambda sync: inspect(sync).get_table_names()))
    finally:
        await engine.dispose()
    head = ScriptDirectory.from_config(migration_config()).get_current_head()
    assert version == head
    assert set(Base.metadata.tables) <= tables


async def test_sqlite_upgrade_to_head_matches_models(tmp_path: Path) -> None:
    await _check_upgraded(f"sqlite+aiosqlite:///{tmp_path / 'new' / 'lookout.db'}")


@pytest.mark.postgres
async def test_postgres_upgrade_to_head_matches_models(fresh_postgres_url: str) -> None:
    await _check_upgraded(fresh_postgres_url)


async def test_upgrade_leaves_logging_alone(tmp_path: Path) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    await upgrade_database(f"sqlite+aiosqlite:///{tmp_path / 'log.db'}")
    assert root.handlers == handlers
    assert root.level == level


async def test_a_model_change_without_migration_shows_as_a_diff(tmp_path: Path) -> None:
    """Guards the guard: compare_metadata must notice a column the migrations lack."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'drift.db'}"
    await upgrade_database(url)
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("ALTER TABLE chats DROP COLUMN profile"))
            diff = await connection.run_sync(_schema_diff)
    finally:
        await engine.dispose()
    assert any(entry[0] == "add_column" and entry[3].name == "profile" for entry in diff)  # type: ignore[index]


def test_the_newest_revision_read_from_the_files_is_alembics_head() -> None:
    assert newest_revision() == ScriptDirectory.from_config(migration_config()).get_current_head()


async def test_a_database_at_head_is_recognised_without_alembic_and_an_older_one_is_upgraded(tmp_path: Path) -> None:
    # Every CLI command checks the migrations first: at head, one read and no Alembic import (a fresh process, so
    # nothing imported it before); a database left at an older revision still goes through Alembic to head.
    url = f"sqlite+aiosqlite:///{tmp_path / 'head.db'}"
    await upgrade_database(url)
    script = (
        "import asyncio, sys\n"
        "from storage import upgrade_database\n"
        f"asyncio.run(upgrade_database({url!r}))\n"
        "print('alembic' in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert ran.stdout.split() == ["False"]

    older = f"sqlite+aiosqlite:///{tmp_path / 'older.db'}"
    await upgrade_database(older, revision="0009")
    await upgrade_database(older)
    engine = create_engine(older)
    try:
        async with engine.connect() as connection:
            version = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    finally:
        await engine.dispose()
    assert version == newest_revision()
