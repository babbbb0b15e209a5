"""A monitor's feeds through the real HTTP server (uvicorn on a port): both formats read back, a conditional GET is
answered 304, a wrong or revoked token is a bare 404, and PUBLIC_URL starts every URL inside."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import feedparser
import httpx
import pytest

from app.http_server import build_http_app, feed_routes, serve_http
from monitors import MonitorFeeds
from research import Digest
from research.digest import CitedItem, Development, QualityCheck
from storage import Database, RunOutcome
from storage.repositories import ChatRepository, DeliveryRepository, MonitorRepository, RunRepository

PUBLIC = "https://lookout.example.org/base"
FINISHED = datetime(2026, 11, 20, 9, 5, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _digest(day: int) -> Digest:
    return Digest(
        headline=f"DeepSeek news of day {day} & <more>",
        developments=[Development(text=f"Something happened on day {day} [1].", citations=[1])],
        quality=QualityCheck(completeness=0.8, quality=0.7),
        cited=[CitedItem(number=1, title=f"Report {day}", url=f"https://example.com/{day}", source="hn")],
    )


@dataclass
class Served:
    url: str
    feeds: MonitorFeeds
    monitor_id: int
    token: str


@pytest.fixture
async def served(database: Database) -> AsyncIterator[Served]:
    chat = await ChatRepository(database).get_or_create("telegram", "1001")
    monitor = await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily")
    runs, deliveries = RunRepository(database), DeliveryRepository(database)
    for day in (1, 2):
        run = await runs.open_run(monitor.id, FINISHED + timedelta(days=day) - timedelta(minutes=5))
        assert run is not None
        outcome = RunOutcome(finished_at=FINISHED + timedelta(days=day), digest=_digest(day).model_dump(mode="json"))
        await deliveries.complete_run(run.id, outcome=outcome, deliver=False)
    feeds = MonitorFeeds(database)
    token = await feeds.token(monitor.id)
    port = _free_port()
    stop = asyncio.Event()
    app = build_http_app(checks={}, routes=feed_routes(feeds, public_url=PUBLIC))
    serving = asyncio.create_task(serve_http(app, host="127.0.0.1", port=port, stop=stop))
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as client:
        for _ in range(100):
            try:
                await client.get(f"{url}/healthz")
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("server never came up")
    try:
        yield Served(url=url, feeds=feeds, monitor_id=monitor.id, token=token)
    finally:
        stop.set()
        await asyncio.wait_for(serving, timeout=10)


async def test_atom_and_json_feed_over_http_with_public_urls(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        atom = await client.get(f"/feeds/{served.token}.atom")
        as_json = await client.get(f"/feeds/{served.token}.json")

    assert atom.status_code == 200 and atom.headers["content-type"] == "application/atom+xml; charset=utf-8"
    parsed = feedparser.parse(atom.content, response_headers=dict(atom.headers))
    assert not parsed.bozo
    assert [entry.title for entry in parsed.entries] == [
        "DeepSeek news of day 2 & <more>",
        "DeepSeek news of day 1 & <more>",
    ]
    assert [entry.link for entry in parsed.entries] == ["https://example.com/2", "https://example.com/1"]
    assert all(entry.published_parsed for entry in parsed.entries)
    assert {link.href for link in parsed.feed.links} == {
        f"{PUBLIC}/feeds/{served.token}.atom",
        f"{PUBLIC}/feeds/{served.token}.json",
    }
    assert atom.headers["last-modified"] == "Sun, 22 Nov 2026 09:05:00 GMT"

    assert as_json.status_code == 200 and as_json.headers["content-type"].startswith("application/feed+json")
    feed = json.loads(as_json.content)
    assert feed["version"] == "https://jsonfeed.org/version/1.1" and feed["title"] == "Lookout: DeepSeek"
    assert feed["feed_url"] == f"{PUBLIC}/feeds/{served.token}.json"
    assert [item["url"] for item in feed["items"]] == ["https://example.com/2", "https://example.com/1"]
    assert all(item["id"] and item["content_html"] and item["date_published"] for item in feed["items"])
    assert '<a href="https://example.com/2">Report 2</a>' in feed["items"][0]["content_html"]


async def test_a_conditional_get_is_answered_304(served: Served) -> None:
    path = f"/feeds/{served.token}.atom"
    async with httpx.AsyncClient(base_url=served.url) as client:
        first = await client.get(path)
        by_etag = await client.get(path, headers={"If-None-Match": first.headers["etag"]})
        by_date = await client.get(path, headers={"If-Modified-Since": first.headers["last-modified"]})
        stale_etag = await client.get(path, headers={"If-None-Match": '"something-else"'})
        older_date = await client.get(path, headers={"If-Modified-Since": "Sat, 21 Nov 2026 09:05:00 GMT"})

    assert first.status_code == 200 and first.headers["etag"].startswith('"')
    assert by_etag.status_code == 304 and by_etag.content == b""
    assert by_etag.headers["etag"] == first.headers["etag"]
    assert by_date.status_code == 304
    assert stale_etag.status_code == 200 and stale_etag.content == first.content
    assert older_date.status_code == 200


async def test_a_wrong_or_revoked_token_is_a_bare_404(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as client:
        wrong = await client.get("/feeds/guessed-wrong.atom")
        other_kind = await client.get(f"/feeds/{served.token}.rss")
        no_token = await client.get("/feeds/.json")
        rotated = await served.feeds.token(served.monitor_id, rotate=True)
        revoked = await client.get(f"/feeds/{served.token}.json")
        fresh = await client.get(f"/feeds/{rotated}.json")

    for response in (wrong, other_kind, no_token, revoked):
        assert response.status_code == 404
        assert response.text == "Not Found" and "etag" not in response.headers
    assert fresh.status_code == 200 and rotated in fresh.text
