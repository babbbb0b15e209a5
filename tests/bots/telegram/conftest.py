"""The Telegram tests' database: one migrated SQLite template per session, copied for each test (`db_url`). A module
that needs both backends overrides `db_url` with the kit's `database`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bots.slack_world import copy_database, migrated_template


@pytest.fixture(scope="session")
def telegram_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("telegram-template"))


@pytest.fixture
def db_url(tmp_path: Path, telegram_db_template: Path) -> str:
    return copy_database(telegram_db_template, tmp_path)
