"""Benchmark `research.collect`: 10 real sources on the real HttpClient against local fake servers.

Every response is delayed by 100 ms. Prints, for a first and a repeat run of one query: wall time of the whole
collection, the slowest single source, the sum of all sources' times (what a sequential run would take), and
the bytes received, requests and 304 answers from the client's stats (conditional GET on the feeds).

Run: uv run python bench/collect.py
"""

from __future__ import annotations

import asyncio
import platform
import time
from pathlib import Path

from pydantic import SecretStr

from research.collect import Collection, collect
from sources.arxiv import ArxivSource
from sources.base import SearchQuery, Source
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource
from sources.http import HttpClient, HttpStats
from sources.news import GoogleNewsSource
from sources.openalex import OpenAlexSource
from sources.rss import FeedSource
from sources.rsshub import RssHubSource
from sources.semanticscholar import SemanticScholarSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, Handler, RecordedRequest

PAYLOADS = Path(__file__).resolve().parent.parent / "tests" / "sources" / "payloads"
LATENCY = 0.1
QUERY = SearchQuery(text="DeepSeek", limit=20)


class LoopbackServer(FakeHTTPServer):
    """A `FakeHTTPServer` on another loopback address. arXiv and Semantic Scholar set per-host rate limits
    on the client (1 per 3 s, 1 per s); on their own host names those limits do not throttle the others."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]


def payload(name: str) -> bytes:
    return (PAYLOADS / name).read_bytes()


def static(body: bytes, content_type: str) -> FakeResponse:
    return FakeResponse(body=body, content_type=content_type, delay=LATENCY)


def feed(body: bytes, content_type: str, etag: str) -> Handler:
    """A feed that answers 304 when the client sends back its ETag (what a well-behaved feed host does)."""
    last_modified = "Fri, 20 Nov 2026 12:00:00 GMT"

    def answer(request: RecordedRequest) -> FakeResponse:
        if request.headers.get("if-none-match") == etag:
            return FakeResponse(status=304, headers={"ETag": etag}, delay=LATENCY)
        return FakeResponse(
            body=body,
            content_type=content_type,
            headers={"ETag": etag, "Last-Modified": last_modified},
            delay=LATENCY,
        )

    return answer


def start_servers() -> tuple[FakeHTTPServer, LoopbackServer, LoopbackServer]:
    main, arxiv, s2 = FakeHTTPServer(), LoopbackServer("127.0.0.2"), LoopbackServer("127.0.0.3")
    for server in (main, arxiv, s2):
        server.start()
    main.route("GET", "/api/v1/search", static(payload("hn_search_by_date.json"), "application/json"))
    main.route("GET", "/rss/search", static(payload("news_search.xml"), "application/rss+xml"))
    main.route("GET", "/openalex/works", static(payload("openalex_works.json"), "application/json"))
    main.route(
        "GET", "/rsshub/weibo/keyword/DeepSeek", feed(payload("rsshub_weibo.xml"), "application/rss+xml", '"w1"')
    )
    feeds = {
        "/feeds/tech.xml": (payload("rss_tech.xml"), "application/rss+xml"),
        "/feeds/blog.atom": (payload("atom_blog.xml"), "application/atom+xml"),
        "/feeds/blog.json": (payload("jsonfeed_blog.json"), "application/feed+json"),
        "/feeds/tech-mirror.xml": (payload("rss_tech.xml"), "application/rss+xml"),
    }
    for index, (path, (body, content_type)) in enumerate(feeds.items()):
        main.route("GET", path, feed(body, content_type, f'"f{index}"'))
    arxiv.route("GET", "/api/query", static(payload("arxiv_query.xml"), "application/atom+xml"))
    s2.route("GET", "/graph/v1/paper/search", static(payload("s2_search.json"), "application/json"))
    return main, arxiv, s2


def build_sources(client: HttpClient, main: str, arxiv: str, s2: str) -> list[Source]:
    config = SourcesConfig(
        allow_private_urls=True,
        hn_api_url=f"{main}/api/v1",
        news_rss_url=f"{main}/rss",
        openalex_api_url=f"{main}/openalex",
        openalex_api_key=SecretStr("bench-key"),
        rsshub_url=f"{main}/rsshub",
        arxiv_api_url=f"{arxiv}/api/query",
        semanticscholar_api_url=f"{s2}/graph/v1",
    )
    sources: list[Source] = [
        HackerNewsSource(client=client, config=config),
        GoogleNewsSource(client=client, config=config),
        ArxivSource(client=client, config=config),
        SemanticScholarSource(client=client, config=config),
        OpenAlexSource(client=client, config=config),
        RssHubSource(client=client, config=config, platforms="weibo"),
    ]
    for path in ("/feeds/tech.xml", "/feeds/blog.atom", "/feeds/blog.json", "/feeds/tech-mirror.xml"):
        sources.append(FeedSource(client=client, config=config, feed_url=f"{main}{path}"))
    return sources


def delta(after: HttpStats, before: HttpStats) -> HttpStats:
    return HttpStats(
        requests=after.requests - before.requests,
        bytes_received=after.bytes_received - before.bytes_received,
        not_modified=after.not_modified - before.not_modified,
        retries=after.retries - before.retries,
        redirects=after.redirects - before.redirects,
    )


async def timed_run(
    client: HttpClient, sources: list[Source], *, concurrency: int
) -> tuple[float, Collection, HttpStats]:
    before = client.stats
    started = time.perf_counter()
    collection = await collect([QUERY], sources, concurrency=concurrency, timeout=30)
    return time.perf_counter() - started, collection, delta(client.stats, before)


def row(label: str, seconds: float, collection: Collection, stats: HttpStats) -> str:
    return (
        f"| {label} | {seconds * 1000:.0f} ms | {stats.requests} | {stats.bytes_received:,} B | "
        f"{stats.not_modified} | {len(collection.items)} | {len(collection.errors)} |"
    )


async def main() -> None:
    main_server, arxiv_server, s2_server = start_servers()
    try:
        async with HttpClient(user_agent="LookoutBench/0.1", allow_private=True, timeout=10) as client:
            sources = build_sources(client, main_server.url, arxiv_server.url, s2_server.url)
            first = await timed_run(client, sources, concurrency=10)
            # arXiv's gate (one request per 3 s) would otherwise hold the next run's arXiv search.
            await asyncio.sleep(3.1)
            repeat = await timed_run(client, sources, concurrency=10)
            await asyncio.sleep(3.1)
            alone = await timed_run(client, sources, concurrency=1)
        print(f"10 sources ({', '.join(s.name for s in sources)}), {LATENCY * 1000:.0f} ms latency per response")
        print(f"python {platform.python_version()} on {platform.machine()}\n")
        print("| run | wall time | requests | bytes received | 304s | items | errors |")
        print("|---|---|---|---|---|---|---|")
        print(row("first run, 10 at a time", *first))
        print(row("repeat run, 10 at a time", *repeat))
        print(row("repeat run, one at a time", *alone))
        slowest = max(alone[1].outcomes, key=lambda o: o.seconds)
        print(
            f"\nparallelism (repeat runs): all 10 together {repeat[0] * 1000:.0f} ms; slowest single source alone "
            f"{slowest.seconds * 1000:.0f} ms ({slowest.source}); one after another {alone[0] * 1000:.0f} ms"
        )
        saved = 1 - repeat[2].bytes_received / first[2].bytes_received if first[2].bytes_received else 0.0
        print(
            f"conditional GET: repeat run received {saved:.0%} fewer bytes ({repeat[2].not_modified} answers were 304)"
        )
        print("\n| source | alone | items |")
        print("|---|---|---|")
        for outcome in alone[1].outcomes:
            print(f"| {outcome.source} | {outcome.seconds * 1000:.0f} ms | {outcome.count} |")
        for outcome in first[1].errors:
            print(f"error: {outcome.source}: {outcome.error_kind}: {outcome.message}")
    finally:
        for server in (main_server, arxiv_server, s2_server):
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
