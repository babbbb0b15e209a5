"""Conditional GET survives a restart: validators and bodies live in the database."""

from __future__ import annotations

from pathlib import Path

from app.http_cache import DatabaseValidatorStore
from sources.http import HttpClient
from storage import Database, upgrade_database
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest

FEED = "<rss version='2.0'><channel><title>Café</title></channel></rss>".encode("latin-1")


def feed_or_not_modified(request: RecordedRequest) -> FakeResponse:
    if request.headers.get("if-none-match") == '"v1"':
        return FakeResponse(status=304, headers={"ETag": '"v1"'})
    return FakeResponse(
        body=FEED,
        headers={"ETag": '"v1"', "Last-Modified": "Sun, 22 Nov 2026 08:00:00 GMT"},
        content_type="application/rss+xml",
    )


async def test_a_new_process_gets_a_304_and_the_stored_body(fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/cache.db"
    await upgrade_database(url)
    fake_server.route("GET", "/feed.xml", feed_or_not_modified)
    feed_url = f"{fake_server.url}/feed.xml"

    for run in range(2):  # two "processes": a fresh database handle and client each time
        database = Database(url)
        client = HttpClient(user_agent="t", validators=DatabaseValidatorStore(database))
        try:
            response = await client.get(feed_url, conditional=True)
        finally:
            await client.aclose()
            await database.dispose()
        assert response.content == FEED
        assert response.not_modified is (run == 1)

    first, second = fake_server.received("/feed.xml")
    assert "if-none-match" not in first.headers
    assert second.headers["if-none-match"] == '"v1"'
    assert second.headers["if-modified-since"] == "Sun, 22 Nov 2026 08:00:00 GMT"
