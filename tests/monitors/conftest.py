"""Monitor fixtures: a migrated SQLite file per test, a fake clock, fake sources, chats and a MonitorService."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.monitor_service import build_monitor_service
from monitors.delivery import DeliveryWorker
from monitors.runner import PipelineFunction
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research.embeddings import ItemEmbedder
from research.pipeline import run_pipeline
from sources.base import SearchQuery
from storage import ChatRecord, Database
from storage.repositories import ChatRepository
from tests.backends import sqlite_url
from tests.kit import FakeClock
from tests.monitors.fakes import RecordingSender, resolver
from tests.research.fake_sources import RecordingSource, make_item

T0 = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""The tests' "now": an hour after the fake sources' BASE_TIME, so their items fall in the window."""


@pytest.fixture
def db_path(tmp_path: Path, sqlite_template: Path) -> Path:
    """A copy of the suite's migrated SQLite template (`tests.backends`)."""
    path = tmp_path / "lookout.db"
    shutil.copy(sqlite_template, path)
    return path


@pytest.fixture
async def database(db_path: Path) -> AsyncIterator[Database]:
    db = Database(sqlite_url(db_path))
    yield db
    await db.dispose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def story_source(name: str) -> RecordingSource:
    """A source answering every query with the same three stories (stable ids, in the window)."""

    def answer(query: SearchQuery) -> list:  # type: ignore[type-arg]
        return [
            make_item(name, f"{name}-{n}", title=f"{name.upper()} story {n} about DeepSeek", text="DeepSeek", points=10)
            for n in range(3)
        ]

    return RecordingSource(name, answer)


@dataclass
class World:
    """Everything a monitor test touches."""

    database: Database
    clock: FakeClock
    sources: dict[str, RecordingSource]
    out_dir: Path
    chats: list[ChatRecord] = field(default_factory=list)
    sender: RecordingSender = field(default_factory=RecordingSender)

    def service(
        self,
        *,
        pipeline: PipelineFunction | None = None,
        failure_notice_after: int = 1,
        embedder: ItemEmbedder | None = None,
    ) -> MonitorService:
        return build_monitor_service(
            self.database,
            resolve_sources=resolver(self.sources),
            light_model=None,
            heavy_model=None,
            out_dir=self.out_dir,
            settings=MonitorSettings(min_interval_seconds=900, failure_notice_after=failure_notice_after),
            clock=self.clock,
            pipeline=pipeline or run_pipeline,
            embedder=embedder,
        )

    def worker(self, database: Database | None = None) -> DeliveryWorker:
        return DeliveryWorker(database or self.database, {"telegram": self.sender}, clock=self.clock)

    def searches(self) -> int:
        """How many searches every fake source answered so far."""
        return sum(len(source.queries) for source in self.sources.values())


@pytest.fixture
async def world(database: Database, clock: FakeClock, tmp_path: Path) -> World:
    chats = ChatRepository(database)
    created = [await chats.get_or_create("telegram", str(100 + n), title=f"chat {n}") for n in range(3)]
    return World(
        database=database,
        clock=clock,
        sources={"hn": story_source("hn"), "news": story_source("news")},
        out_dir=tmp_path / "exports",
        chats=created,
    )
