"""Fixtures shared by source tests: a real `HttpClient` pointed at the fake server, payload loading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sources.http import HttpClient

PAYLOADS = Path(__file__).parent / "payloads"
TEST_USER_AGENT = "LookoutTest/0.1 (+https://example.org/lookout-tests)"

HttpClientFactory = Callable[..., HttpClient]


@pytest.fixture
def payload() -> Callable[[str], bytes]:
    """Load a recorded response body from `tests/sources/payloads/<name>`."""

    def load(name: str) -> bytes:
        return (PAYLOADS / name).read_bytes()

    return load


@pytest.fixture
async def make_http_client() -> AsyncIterator[HttpClientFactory]:
    """Build `HttpClient`s for tests (private addresses allowed, tiny backoff); all closed at teardown.

    Keyword arguments override the test defaults, e.g. `make_http_client(max_retries=0)`.
    """
    clients: list[HttpClient] = []

    def make(**overrides: Any) -> HttpClient:
        options: dict[str, Any] = {
            "user_agent": TEST_USER_AGENT,
            "allow_private": True,
            "timeout": 2.0,
            "backoff_base": 0.001,
            "max_retry_wait": 5.0,
        }
        options.update(overrides)
        client = HttpClient(**options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def http_client(make_http_client: HttpClientFactory) -> HttpClient:
    """A real `HttpClient` that may reach the fake server on 127.0.0.1 and retries without real waits."""
    return make_http_client()
