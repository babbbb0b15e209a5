"""Benchmark hostile XML (issue #30): each file read the way Lookout reads it, in a fresh process, measuring the
peak memory it adds to that process and how long it takes.

Feeds are served over HTTP by this script (127.0.0.1, the parent process) and fetched by the child through the real
`HttpClient` and `FeedSource` (production caps: 10 MB, 15 s); OPML files are read by the child as `/import` reads
them (`read_import_file`, then `read_monitor_file`), the named pipe fed 50 MB by the parent. The child warms up on a
small good feed first, so "idle" is a process that has already parsed a feed. A valid feed of 5,000 items is the
yardstick for what reading a big real feed costs, and the largest feed accepted (10,000 items, just under 10 MB)
bounds what any feed that passes the guard can cost.

Target: every hostile file refused with a named reason, peak memory ≤ 100 MB above idle.

Run: uv run python bench/hostile_xml.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FEED_CASES = ("quadratic", "billion_laughs", "xxe", "external_dtd", "parameter_entity", "deep_nesting", "50mb")
OPML_CASES = (*FEED_CASES, "named_pipe_50mb")
TARGET_MB = 100


def _peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> None:
    # Linux: writing 5 to clear_refs resets VmHWM to the current resident size.
    Path("/proc/self/clear_refs").write_text("5")


def child(kind: str, target: str) -> None:
    """Read one document (a feed URL or a file path), print JSON: outcome, peak delta (MB), seconds."""
    from sources.base import SearchQuery, SourceError
    from sources.config import SourcesConfig
    from sources.http import HttpClient
    from sources.rss import FeedSource

    async def fetch(url: str) -> str:
        client = HttpClient(user_agent="LookoutBench/0.1", allow_private=True)
        try:
            source = FeedSource(client=client, config=SourcesConfig(allow_private_urls=True), feed_url=url)
            batch = await source.search(SearchQuery(text="", limit=100_000))
            return f"read: {len(batch.items)} items"
        except SourceError as error:
            return f"refused: {error}"
        finally:
            await client.aclose()

    from monitors import read_import_file, read_monitor_file

    def read_file(path: str) -> str:
        try:
            plan = read_monitor_file(read_import_file(Path(path)))
        except ValueError as error:
            return f"refused: {error}"
        return f"refused: {plan.problem}" if plan.problem else f"read: {len(plan.entries)} monitors"

    base = os.environ["BENCH_BASE"]
    asyncio.run(fetch(f"{base}/warmup"))
    _reset_peak()
    idle = _peak_kb()
    started = time.perf_counter()
    outcome = asyncio.run(fetch(target)) if kind == "feed" else read_file(target)
    seconds = time.perf_counter() - started
    print(json.dumps({"outcome": outcome, "peak_mb": (_peak_kb() - idle) / 1024, "seconds": seconds}))


def _serve(documents: dict[str, bytes]) -> tuple[str, threading.Event]:
    from aiohttp import web

    ready, stop = threading.Event(), threading.Event()
    address: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        body = documents.get(request.path.lstrip("/"))
        if body is None:
            return web.Response(status=404)
        # Chunked, no Content-Length: the client's cap must hold on the bytes it reads, not on a declared size.
        response = web.StreamResponse(headers={"Content-Type": "application/rss+xml"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for start in range(0, len(body), 65_536):
                await response.write(body[start : start + 65_536])
        except ConnectionError:
            return response  # the client stopped reading: what a cap does
        await response.write_eof()
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{name}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        address.append(f"http://127.0.0.1:{port}")
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await runner.cleanup()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    ready.wait()
    return address[0], stop


def _run_child(kind: str, target: str, base: str) -> dict[str, object]:
    completed = subprocess.run(
        [sys.executable, __file__, "--child", kind, target],
        capture_output=True,
        text=True,
        env={**os.environ, "BENCH_BASE": base},
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        return {"outcome": f"CRASHED: {completed.stderr.strip().splitlines()[-1:]}", "peak_mb": 0.0, "seconds": 0.0}
    result: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def _feed_pipe(path: Path) -> threading.Thread:
    def write() -> None:
        try:
            with path.open("wb") as stream:
                for _ in range(50_000_000 // 65_536):
                    stream.write(b" " * 65_536)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def main() -> None:
    from sources.xmlguard import MAX_XML_ITEMS
    from tests.fakes.feeds import many_items_feed
    from tests.fakes.hostile_xml import hostile_document

    # The largest feed accepted: 10,000 items (the item limit) in just under 10 MB (the byte cap).
    padded = many_items_feed(MAX_XML_ITEMS).replace(b"Nothing about", b"Nothing " + b"more " * 165 + b"about")
    documents: dict[str, bytes] = {
        "warmup": many_items_feed(20),
        "real_5000_items": many_items_feed(5000),
        "largest_accepted": padded,
    }
    base, stop = _serve(documents)
    for name in FEED_CASES:
        documents[name] = hostile_document(name, "feed", dtd_url=f"{base}/evil.dtd")
    rows: list[tuple[str, str, int, dict[str, object]]] = []
    for name in ("real_5000_items", "largest_accepted", *FEED_CASES):
        rows.append(("feed", name, len(documents[name]), _run_child("feed", f"{base}/{name}", base)))
    with tempfile.TemporaryDirectory() as folder:
        for name in OPML_CASES:
            path = Path(folder) / f"{name}.opml"
            if name == "named_pipe_50mb":
                os.mkfifo(path)
                writer = _feed_pipe(path)
                rows.append(("opml", name, 50_000_000, _run_child("opml", str(path), base)))
                writer.join(timeout=10)
            else:
                path.write_bytes(hostile_document(name, "opml", dtd_url=f"{base}/evil.dtd"))
                rows.append(("opml", name, path.stat().st_size, _run_child("opml", str(path), base)))
    stop.set()

    print(f"| kind | file | bytes | outcome | peak RSS Δ (MB) | seconds | ≤ {TARGET_MB} MB |")
    print("|---|---|---|---|---|---|---|")
    for kind, name, size, result in rows:
        peak = float(str(result["peak_mb"]))
        seconds = float(str(result["seconds"]))
        ok = "yes" if peak <= TARGET_MB else "**no**"
        print(f"| {kind} | {name} | {size:,} | {result['outcome']} | {peak:.1f} | {seconds:.2f} | {ok} |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
