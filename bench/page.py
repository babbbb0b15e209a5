"""Time to first byte of a digest's web page (`/digests/<token>`, 50 stories of three reports, 7 developments) from
the real HTTP server (uvicorn, `page_routes`) running in a process of its own, over a new loopback connection per
request:

- cold: the first request a freshly started server answers, one server per round: at once, while it is still
  warming up (`DigestPages.warm`: the template engine imported and compiled, the database's first connection opened
  and the page's queries compiled), and one second later;
- first render: a page the running server has not rendered yet (another stored run each time);
- warm: a page it rendered before (kept in memory by ETag: one query for the run, then the kept bytes);
- 304: a conditional GET with the page's ETag (one query, no body).

A throwaway SQLite database, migrated; each row is the median (and worst) of the rounds, in milliseconds.

    uv run python bench/page.py [--rounds 15] [--stories 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.fake_process import free_port

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` lives at the repository's root

PUBLIC = "https://lookout.example.org"


async def _prepare(folder: Path, runs: int, stories: int) -> tuple[str, list[str]]:
    """A migrated database holding `runs` stored digests; their page tokens."""
    from monitors import DigestPages
    from storage import Database, upgrade_database
    from storage.repositories import RunRepository
    from tests.monitors.stored_run import store_digest_run

    url = f"sqlite+aiosqlite:///{folder / 'pages.db'}"
    await upgrade_database(url)
    database = Database(url)
    tokens = []
    try:
        pages = DigestPages(database, public_url=PUBLIC)
        for n in range(runs):
            stored = await store_digest_run(database, folder / "exports", stories=stories, chat=str(2000 + n))
            run = await RunRepository(database).get(stored.run_id)
            assert run is not None
            page = await pages.url(run)
            assert page is not None
            tokens.append(page.rsplit("/", 1)[1])
    finally:
        await database.dispose()
    return url, tokens


async def _serve(database_url: str, port: int) -> None:
    """The server process: the HTTP app with the page routes, on `port`, until killed."""
    from app.http_server import build_http_app, page_routes, serve_http
    from monitors import DigestPages
    from storage import Database

    database = Database(database_url)
    app = build_http_app(checks={}, routes=page_routes(DigestPages(database, public_url=PUBLIC)))
    print("serving", flush=True)
    await serve_http(app, host="127.0.0.1", port=port, stop=asyncio.Event())


def _first_byte_ms(port: int, path: str, headers: str = "") -> tuple[float, bytes]:
    """Milliseconds from sending the request to the first byte of the answer; and the whole answer."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n".encode()
        started = time.perf_counter()
        sock.sendall(request)
        first = sock.recv(1)
        elapsed = (time.perf_counter() - started) * 1000
        chunks = [first]
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return elapsed, b"".join(chunks)


def _start(database_url: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", database_url, "--port", str(port)], stdout=subprocess.PIPE
    )
    assert server.stdout is not None
    assert server.stdout.readline().strip() == b"serving"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return server, port
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("the server never listened")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    server.wait(timeout=10)


def _row(name: str, times: list[float], size: int) -> str:
    return f"| {name} | {statistics.median(times):.1f} | {max(times):.1f} | {size:,} |"


def main(rounds: int, stories: int) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        database_url, tokens = asyncio.run(_prepare(folder, rounds + 1, stories))
        cold: dict[float, list[float]] = {0.0: [], 1.0: []}
        size = 0
        for token in tokens[:rounds]:
            for delay, times in cold.items():
                server, port = _start(database_url)
                try:
                    time.sleep(delay)
                    elapsed, answer = _first_byte_ms(port, f"/digests/{token}")
                    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
                    times.append(elapsed)
                    size = len(answer.partition(b"\r\n\r\n")[2])
                finally:
                    _stop(server)
        server, port = _start(database_url)
        try:
            _first_byte_ms(port, f"/digests/{tokens[-1]}")  # the server's own first request, counted above
            first_render, warm, not_modified = [], [], []
            for token in tokens[:rounds]:
                elapsed, answer = _first_byte_ms(port, f"/digests/{token}")
                first_render.append(elapsed)
                etag = next(
                    line.split(b":", 1)[1].strip().decode()
                    for line in answer.split(b"\r\n")
                    if line.lower().startswith(b"etag:")
                )
                elapsed, _ = _first_byte_ms(port, f"/digests/{token}")
                warm.append(elapsed)
                elapsed, answer = _first_byte_ms(port, f"/digests/{token}", f"If-None-Match: {etag}\r\n")
                assert answer.startswith(b"HTTP/1.1 304"), answer[:200]
                not_modified.append(elapsed)
        finally:
            _stop(server)
        print(f"{stories} stories × 3 reports, {rounds} rounds; first byte in ms on a new loopback connection")
        print()
        print("| request | median (ms) | worst (ms) | body bytes |")
        print("|---|---:|---:|---:|")
        print(_row("cold: a new server's first request, as it starts listening", cold[0.0], size))
        print(_row("cold: a new server's first request, 1 s after (warmed up)", cold[1.0], size))
        print(_row("first render (a page not rendered yet)", first_render, size))
        print(_row("warm (a page rendered before)", warm, size))
        print(_row("304 (If-None-Match)", not_modified, 0))
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stories", type=int, default=50)
    parser.add_argument("--serve", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        asyncio.run(_serve(arguments.serve, arguments.port))
    else:
        main(arguments.rounds, arguments.stories)
