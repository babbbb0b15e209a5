"""Shared fixtures: a fake HTTP server, a temporary data directory, and settings isolated from the machine; real
model requests blocked in every test. The rest of the kit: `tests/kit.py` (clock, `eventually`, the scripted
model), `tests/backends.py` (database URLs, throwaway databases)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from pydantic_ai import models

from tests.fakes.http_server import FakeHTTPServer, running_fake_server
from tests.kit import NameLookups

# No test reaches a real model: one that talks to a fake model server (tests/fakes/gemini.py) wraps its run in
# `models.override_allow_model_requests(True)`; scripted models (`tests.kit`, TestModel) are always allowed.
models.ALLOW_MODEL_REQUESTS = False

pytest_plugins = ["tests.backends"]  # `database` on SQLite and PostgreSQL, for the tests that ask for it

# CI explores the same examples on every run, so a submission's result does not depend on luck; local runs
# keep searching new ones (and hypothesis's database replays what failed before).
settings.register_profile("ci", derandomize=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


LOCAL_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})
"""Host names a test may resolve: they name this machine and never leave it."""


@pytest.fixture(autouse=True)
def no_internet_lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[NameLookups]:
    """Refuse (and fail the test for) any name lookup that would leave this machine.

    Every client Lookout uses (httpx, aiohttp, asyncio's `loop.getaddrinfo`, ddgs's stacks) resolves through
    `socket.getaddrinfo`; an address literal resolves locally and passes, as do the loopback names. Any other
    name is answered with the error an offline machine gives (so the code under test takes its offline path) and
    recorded, and the test fails at teardown naming the host unless it listed it in `expected`: a test that looked a
    name up on the internet would pass or fail by the network it ran on.
    """
    real = socket.getaddrinfo
    lookups = NameLookups()

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or (isinstance(name, str) and name.lower() in LOCAL_NAMES):
            return real(host, *args, **kwargs)
        flags = kwargs.pop("flags", args[4] if len(args) > 4 else 0)  # (port, family, type, proto, flags)
        positional = args[:4]
        try:
            return real(host, *positional, flags=flags | socket.AI_NUMERICHOST, **kwargs)
        except socket.gaierror:
            with lookups.lock:
                lookups.refused.append(str(name))
            refusal = f"tests may not resolve {name!r}: no test touches the internet"
            raise socket.gaierror(socket.EAI_NONAME, refusal) from None

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield lookups
    unexpected = lookups.unexpected()
    if unexpected:
        pytest.fail(f"the test looked up non-local host names: {unexpected}", pytrace=False)


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
