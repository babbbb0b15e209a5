"""Agent fixtures: a migrated SQLite file per test, a chat in it, and a clock the test moves by hand."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from storage import ChatRecord, Database, upgrade_database
from storage.repositories import ChatRepository
from tests.backends import sqlite_url
from tests.kit import FakeClock

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
"""The tests' starting "now"."""


@pytest.fixture(scope="session")
def agent_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once; each test copies it."""
    path = tmp_path_factory.mktemp("agent-template") / "lookout.db"
    asyncio.run(upgrade_database(sqlite_url(path)))
    return path


@pytest.fixture
def db_url(tmp_path: Path, agent_db_template: Path) -> str:
    path = tmp_path / "lookout.db"
    shutil.copy(agent_db_template, path)
    return sqlite_url(path)


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    db = Database(db_url)
    yield db
    await db.dispose()


@pytest.fixture
async def chat(database: Database) -> ChatRecord:
    return await ChatRepository(database).get_or_create("telegram", "1001", title="Alice")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)
