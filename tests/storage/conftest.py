"""Storage fixtures: every test runs on SQLite and, with TEST_DATABASE_URL, on PostgreSQL (`tests.backends`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from storage import ChatRecord, Database
from storage.repositories import ChatRepository

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
"""A fixed instant the tests build their times from."""


@pytest.fixture
async def chat(database: Database) -> ChatRecord:
    return await ChatRepository(database).get_or_create("telegram", "1001", title="Alice")
