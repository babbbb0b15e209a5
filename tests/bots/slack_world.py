"""What the Slack tests share: a migrated database, Hacker News at a local fake server, a monitor service."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from agent.access import AccessPolicy
from agent.chat.agent import ChatAgent
from agent.commands.router import CommandRouter
from agent.context import ConversationSettings, Services
from agent.conversation import Conversation
from bots.dispatcher import Dispatcher
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research import ModelSet
from sources.base import Source
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource
from sources.http import HttpClient
from storage import upgrade_database
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

T0 = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""The tests' "now": a few hours after the recorded Hacker News stories, so they fall in the window."""
PAYLOADS = Path(__file__).parent.parent / "sources" / "payloads"
SIGNING_SECRET = "test-signing-secret-0123456789abcdef"


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def migrated_template(directory: Path) -> Path:
    """A SQLite file migrated to head (run once per session; each test copies it)."""
    path = directory / "lookout.db"
    asyncio.run(upgrade_database(sqlite_url(path)))
    return path


def copy_database(template: Path, directory: Path) -> str:
    path = directory / "lookout.db"
    shutil.copy(template, path)
    return sqlite_url(path)


def serve_hacker_news(server: FakeHTTPServer) -> None:
    """The recorded Algolia answer for every search (by date and by relevance)."""
    body = (PAYLOADS / "hn_search_by_date.json").read_bytes()
    for path in ("/api/v1/search_by_date", "/api/v1/search"):
        server.route("GET", path, FakeResponse(body=body, content_type="application/json"))


def http_client() -> HttpClient:
    """A real HttpClient that may reach 127.0.0.1 and retries without real waits."""
    return HttpClient(
        user_agent="LookoutTest/0.1 (+https://example.org/lookout-tests)",
        allow_private=True,
        timeout=5.0,
        backoff_base=0.001,
        max_retry_wait=1.0,
    )


def hn_resolver(server: FakeHTTPServer, client: HttpClient):  # type: ignore[no-untyped-def]
    """Source specs to sources: only `hn`, pointed at the fake server."""
    config = SourcesConfig(hn_api_url=f"{server.url}/api/v1", allow_private_urls=True)
    hn = HackerNewsSource(client=client, config=config)

    def resolve(specs: Sequence[str] | str | None) -> list[Source]:
        names = [specs] if isinstance(specs, str) else list(specs or ["hn"])
        names = [name.strip() for spec in names for name in spec.split(",") if name.strip()]
        unknown = [name for name in names if name != "hn"]
        if unknown:
            raise ValueError(f"unknown source(s): {', '.join(unknown)}. Valid: hn")
        return [hn]

    return resolve


def conversation_dispatcher(database, resolve, client: HttpClient, out_dir: Path, *, model) -> Dispatcher:  # type: ignore[no-untyped-def]
    """The real dispatcher over the real conversation (commands and the chat agent), open to everyone."""
    services = Services(
        database=database,
        monitors=monitor_service(database, resolve, out_dir),
        resolve_sources=resolve,
        http=client,
        models=ModelSet.of(model, None),
        settings=ConversationSettings(exports_dir=out_dir),
        clock=lambda: T0,
    )
    conversation = Conversation(
        commands=CommandRouter(services), free_text=ChatAgent(services), settings=services.settings
    )
    return Dispatcher(database, conversation, AccessPolicy())


def monitor_service(database, resolve, out_dir: Path, *, clock=lambda: T0) -> MonitorService:  # type: ignore[no-untyped-def]
    return MonitorService(
        database,
        resolve_sources=resolve,
        light_model=None,
        heavy_model=None,
        out_dir=out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=clock,
    )
