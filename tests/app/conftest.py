"""Every app test starts from an empty environment in an empty directory, so the machine's config can't leak in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import Settings, load_settings
from tests.app.cluster import throwaway_database
from tests.backends import postgres_admin_url


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


@pytest.fixture
def job_queue_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Settings]:
    """Settings for JOB_QUEUE=procrastinate on a throwaway PostgreSQL database (skipped without TEST_DATABASE_URL);
    the environment holds them too, for the CLI."""
    with throwaway_database(postgres_admin_url()) as url:
        monkeypatch.setenv("DATABASE_URL", url)
        monkeypatch.setenv("JOB_QUEUE", "procrastinate")
        monkeypatch.setenv("DATA_DIR", str(tmp_path))
        yield load_settings()
