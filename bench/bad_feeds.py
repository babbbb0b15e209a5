"""Benchmark one monitor run over six broken feeds and one good one (issue #15's operator test).

The feeds are served by a separate process (this script with `--serve`), which counts the requests each feed
gets: one hanging for 120 s, one answering 500, an HTML page, a 20 MB body, a gzip body that does not
inflate, a valid feed of 5,000 items, and a good feed. The run is the real pipeline (`research.run_pipeline`,
no model, default options) on the real `HttpClient` with the production defaults (15 s read timeout, 10 MB
cap, 3 retries). Prints the wall time, the peak memory of the process, the requests each feed received and
the failures the run reports.

Run: uv run python bench/bad_feeds.py
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.fake_process import serving

FEEDS = ("hang", "error", "html", "huge", "gzip", "many", "good")
GOOD = (Path(__file__).resolve().parent.parent / "tests" / "sources" / "payloads" / "rss_tech.xml").read_bytes()


def serve(port: int) -> None:
    """The feeds, on 127.0.0.1:`port`; `/_counts` answers how many requests each path got."""
    from aiohttp import web

    from tests.fakes.feeds import many_items_feed

    counts: dict[str, int] = {}
    many, huge = many_items_feed(5000), b"<rss>" + b"x" * 20_000_000 + b"</rss>"

    async def handle(request: web.Request) -> web.StreamResponse:
        name = request.path.strip("/").removesuffix(".xml")
        if name == "_counts":
            return web.json_response(counts)
        counts[name] = counts.get(name, 0) + 1
        if name == "hang":
            await asyncio.sleep(120)
            return web.Response(text="<rss/>")
        if name == "error":
            return web.Response(status=500, text="Internal Server Error")
        if name == "html":
            return web.Response(text="<!doctype html><html><body>Welcome</body></html>", content_type="text/html")
        if name == "huge":
            return web.Response(body=huge, content_type="application/rss+xml")
        if name == "gzip":
            return web.Response(body=b"\x1f\x8b\x08\x00not deflate" * 10, headers={"Content-Encoding": "gzip"})
        if name == "many":
            return web.Response(body=many, content_type="application/rss+xml")
        return web.Response(body=GOOD, content_type="application/rss+xml")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def run_once(base: str, out_dir: Path) -> tuple[float, list[str], int]:
    from research import PipelineRequest, run_pipeline
    from sources import HttpClient, SourcesConfig
    from sources.rss import FeedSource

    now = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
    async with HttpClient(user_agent="LookoutBench/0.1", allow_private=True) as client:
        config = SourcesConfig(allow_private_urls=True)
        sources = [FeedSource(client=client, config=config, feed_url=f"{base}/{name}.xml") for name in FEEDS]
        request = PipelineRequest(topic="DeepSeek", sources=sources, since=now - timedelta(days=30), until=now)
        started = time.perf_counter()
        result = await run_pipeline(
            request, light_model=None, heavy_model=None, out_dir=out_dir, stem="bench", now=lambda: now
        )
        seconds = time.perf_counter() - started
    failures = getattr(result, "failed_sources", None)
    if failures is not None:  # this branch: one line per failed source
        lines = [failure.line for failure in failures]
    else:  # before: one entry per failed search
        lines = [f"{o.source}: {o.error_kind}: {(o.message or '')[:60]}" for o in result.source_errors]
    return seconds, lines, len(result.items)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
        return
    with serving(__file__, "--serve", ready="_counts") as base, tempfile.TemporaryDirectory() as out:
        seconds, lines, items = asyncio.run(run_once(base, Path(out)))
        counts = json.loads(urllib.request.urlopen(f"{base}/_counts", timeout=5).read())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"wall time: {seconds:.1f} s · peak memory (this process): {peak_mb:.0f} MB · items: {items}")
    print("| feed | requests |")
    print("|---|---|")
    for name in FEEDS:
        print(f"| {name} | {counts.get(name, 0)} |")
    print(f"failures reported ({len(lines)}):")
    for line in lines:
        print(f"  {line}")


if __name__ == "__main__":
    main()
