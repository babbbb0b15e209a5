"""Agent fixtures: a migrated SQLite file per test, a chat in it, and a clock the test moves by hand."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from storage import ChatRecord, ChatRepository, Database, upgrade_database

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
"""The tests' starting "now"."""


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


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
