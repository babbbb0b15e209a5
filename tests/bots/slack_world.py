"""What the Slack tests share: a migrated database, Hacker News at a local fake server, a monitor service."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai.models import Model

from app.monitor_service import build_monitor_service
from app.service import Process, assemble
from app.settings import load_settings
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research import ModelSet
from sources.base import Source
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource
from sources.http import HttpClient
from storage import Database, upgrade_database
from tests.backends import sqlite_url
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.fakes.slack import BOT_TOKEN

T0 = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""The tests' "now": a few hours after the recorded Hacker News stories, so they fall in the window."""
PAYLOADS = Path(__file__).parent.parent / "sources" / "payloads"
SIGNING_SECRET = "test-signing-secret-0123456789abcdef"


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


SOURCE_URL_SETTINGS = (
    "hn_api_url", "news_rss_url", "arxiv_api_url", "github_api_url", "reddit_api_url", "reddit_auth_url",
    "wikipedia_api_url", "openalex_api_url", "semanticscholar_api_url", "x_api_url",
)  # fmt: skip


def fake_source_urls(server: FakeHTTPServer) -> dict[str, str]:
    """Every source endpoint setting pointed at the fake server: Hacker News answers at `/api/v1` (see
    `serve_hacker_news`), the others get 404s, so no test reaches the internet however it is wired."""
    urls = {name: f"{server.url}/{name.removesuffix('_url')}" for name in SOURCE_URL_SETTINGS}
    urls["hn_api_url"] = f"{server.url}/api/v1"
    return urls


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


@asynccontextmanager
async def slack_process(
    database: Database,
    *,
    slack_api_url: str,
    sources: FakeHTTPServer,
    out_dir: Path,
    model: Model | None,
    app_token: str | None = None,
    signing_secret: str | None = SIGNING_SECRET,
) -> AsyncIterator[Process]:
    """The app as `lookout run` builds it for Slack (HTTP mode with the signing secret, or Socket Mode with an
    app token), through the composition root; sources at the fake server, the clock at `T0`, the chat model
    scripted. Nothing is started."""
    serve_hacker_news(sources)
    settings = load_settings(
        _env_file=None,
        data_dir=out_dir,
        database_url=database.engine.url.render_as_string(hide_password=False),
        slack_bot_token=BOT_TOKEN,
        slack_api_url=slack_api_url,
        slack_app_token=app_token,
        slack_signing_secret=None if app_token else signing_secret,
        llm_model="",
        allow_private_urls=True,
        **fake_source_urls(sources),
    )
    async with assemble(settings, database, clock=lambda: T0, models=ModelSet.of(model, None)) as process:
        yield process


def monitor_service(database, resolve, out_dir: Path, *, clock=lambda: T0) -> MonitorService:  # type: ignore[no-untyped-def]
    return build_monitor_service(
        database,
        resolve_sources=resolve,
        light_model=None,
        heavy_model=None,
        out_dir=out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=clock,
    )
