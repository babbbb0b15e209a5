"""Shared fixtures: a fake HTTP server, a temporary data directory, and settings isolated from the machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.http_server import FakeHTTPServer, running_fake_server


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
