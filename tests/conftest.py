"""Shared fixtures: a fake HTTP server, a temporary data directory, and settings isolated from the machine; real
model requests blocked in every test. The rest of the kit: `tests/kit.py` (clock, `eventually`, the scripted
model), `tests/backends.py` (database URLs, throwaway databases)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from pydantic_ai import models

from tests.fakes.http_server import FakeHTTPServer, running_fake_server

# No test reaches a real model: one that talks to a fake model server (tests/fakes/gemini.py) wraps its run in
# `models.override_allow_model_requests(True)`; scripted models (`tests.kit`, TestModel) are always allowed.
models.ALLOW_MODEL_REQUESTS = False

pytest_plugins = ["tests.backends"]  # `database` on SQLite and PostgreSQL, for the tests that ask for it

# CI explores the same examples on every run, so a submission's result does not depend on luck; local runs
# keep searching new ones (and hypothesis's database replays what failed before).
settings.register_profile("ci", derandomize=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


@pytest.fixture
def fake_server() -> Iterator[FakeHTTPServer]:
    """A recording HTTP server on 127.0.0.1; routes are scripted per test."""
    with running_fake_server() as server:
        yield server


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path
