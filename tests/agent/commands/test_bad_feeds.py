"""One monitor, six broken feeds and one good one: each broken feed is asked once per run, and every failure is
named with its URL in the /digest reply, in /monitors and in the run's JSON.

The feeds are served by the fake server as the real failures look on the wire: a feed that never answers, an
HTTP 500, an HTML page, a 20 MB body, a gzip body that does not inflate, and a (valid) feed of 5,000 items.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import Database
from storage.repositories import RunRepository
from tests.agent.commands.router_world import PAYLOADS, RouterWorld, open_world
from tests.fakes.feeds import many_items_feed
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

BAD = ("hang", "error", "html", "huge", "gzip", "many")


def route_bad_feeds(server: FakeHTTPServer) -> None:
    server.route("GET", "/feeds/hang.xml", FakeResponse(body="<rss/>", delay=120.0))
    server.route("GET", "/feeds/error.xml", FakeResponse(status=500, body="Internal Server Error"))
    server.route(
        "GET",
        "/feeds/html.xml",
        FakeResponse(body="<!doctype html><html><body><h1>Welcome</h1></body></html>", content_type="text/html"),
    )
    server.route("GET", "/feeds/huge.xml", FakeResponse(body=b"<rss>" + b"x" * 20_000_000 + b"</rss>"))
    server.route(
        "GET",
        "/feeds/gzip.xml",
        FakeResponse(body=b"\x1f\x8b\x08\x00garbage, not deflate data" * 10, headers={"Content-Encoding": "gzip"}),
    )
    server.route("GET", "/feeds/many.xml", FakeResponse(body=many_items_feed(5000), content_type="application/rss+xml"))
    server.route(
        "GET", "/feeds/good.xml", FakeResponse(body=(PAYLOADS / "rss_tech.xml").read_bytes(), content_type="text/xml")
    )


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        route_bad_feeds(fake_server)
        yield opened


async def test_six_bad_feeds_are_each_asked_once_and_all_named_with_their_urls(world: RouterWorld) -> None:
    base = world.server.url
    feeds = ",".join(f"rss:{base}/feeds/{name}.xml" for name in (*BAD, "good"))
    tracked = await world.say(f"/track DeepSeek daily from {feeds}")
    assert tracked.text.startswith("Tracking **DeepSeek** as monitor #1."), tracked.text

    said = await world.say("/digest 1")
    listed = await world.say("/monitors")

    # each feed was requested once in the whole run (both search rounds), broken or not
    for name in (*BAD, "good"):
        assert len(world.server.received(f"/feeds/{name}.xml")) == 1, name
    shown = base.removeprefix("http://")
    expected = [
        f"rss {shown}/feeds/hang.xml: timed out",
        f"rss {shown}/feeds/error.xml: HTTP 500",
        f"rss {shown}/feeds/html.xml: not a feed",
        f"rss {shown}/feeds/huge.xml: too large",
        f"rss {shown}/feeds/gzip.xml: unreadable body (broken compression)",
    ]
    # the reply names every failure, each once, with its URL; the feed of 5,000 items worked
    assert said.text.startswith("Monitor #1 ran: "), said.text
    assert said.text.endswith("Sources that failed:\n" + "\n".join(f"- {line}" for line in expected))
    assert "many.xml" not in said.text
    # /monitors' last result names them all too
    assert "5 sources failed: " + "; ".join(expected) in listed.text
    # and so does the run's JSON, with the full messages
    [run] = await RunRepository(world.database).list_for_monitor(1)
    report = json.loads(Path(str(run.artifacts["json"])).read_text(encoding="utf-8"))
    failed = {entry["spec"].removeprefix(f"rss:{base}/feeds/"): entry["reason"] for entry in report["failed_sources"]}
    assert failed == {
        "hang.xml": "timed out",
        "error.xml": "HTTP 500",
        "html.xml": "not a feed",
        "huge.xml": "too large",
        "gzip.xml": "unreadable body (broken compression)",
    }
    assert all(entry["message"] for entry in report["failed_sources"])
