"""A scriptable HTTP server on 127.0.0.1 that records every request; the base of every fake in the tests.

It runs on its own thread and event loop, so sync tests (CLI runs) and async tests can both use it.
Routes answer with canned `FakeResponse`s (a queue, then the last one repeats) or a handler function.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

CHUNK_PAUSE = 0.002
"""Between two chunks of a body served in chunks (`serve_in_chunks`): long enough that each arrives on its own."""


@dataclass
class RecordedRequest:
    """One request as it arrived."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode()))


@dataclass
class FakeResponse:
    """A canned answer. `delay` seconds pass before it is sent (latency, timeouts)."""

    status: int = 200
    body: bytes | str = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    delay: float = 0.0

    @classmethod
    def json(cls, payload: Any, *, status: int = 200, **kw: Any) -> FakeResponse:
        return cls(status=status, body=json.dumps(payload), content_type="application/json", **kw)


Handler = Callable[[RecordedRequest], FakeResponse]


class ThreadedFakeServer:
    """An aiohttp server on 127.0.0.1 running on its own thread and loop; subclasses answer in `_handle`."""

    def __init__(self, *, thread_name: str = "fake-server") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=thread_name)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError("a fake server answers requests in _handle")

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A response still sleeping at the end of a test (a feed that "hangs") must not hold up its teardown.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        # Handlers still sleeping (a feed that "hangs") end here, not as "Task was destroyed" at exit.
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class FakeHTTPServer(ThreadedFakeServer):
    """Serve scripted responses; `requests` holds everything received, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[RecordedRequest] = []
        self._routes: dict[tuple[str, str], Handler | list[FakeResponse]] = {}

    def route(self, method: str, path: str, answer: Handler | FakeResponse | list[FakeResponse]) -> None:
        """Answer `method path` with a handler, one response, or a queue of responses (last repeats)."""
        if isinstance(answer, FakeResponse):
            answer = [answer]
        self._routes[(method.upper(), path)] = answer

    def received(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path and (method is None or r.method == method)]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
        )
        self.requests.append(recorded)
        answer = self._routes.get((request.method, request.path))
        if answer is None:
            return web.Response(status=404, text=f"no fake route for {request.method} {request.path}")
        if callable(answer):
            response = answer(recorded)
        else:
            response = answer.pop(0) if len(answer) > 1 else answer[0]
        if response.delay:
            await asyncio.sleep(response.delay)
        payload = response.body.encode() if isinstance(response.body, str) else response.body
        return web.Response(
            status=response.status,
            body=payload,
            headers=response.headers,
            content_type=response.content_type,
        )


@contextmanager
def running_fake_server() -> Iterator[FakeHTTPServer]:
    server = FakeHTTPServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def serve_in_chunks(request: web.Request, content: bytes, *, chunk_size: int) -> tuple[web.StreamResponse, int]:
    """Send `content` as a chunked body, `chunk_size` bytes at a time with a short pause between, as a file host
    streams a large file; stops when the client hangs up. Returns the response and how many bytes were written
    (what the client took, plus what the sockets' buffers held when it hung up)."""
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    written = 0
    try:
        for start in range(0, len(content), chunk_size):
            await response.write(content[start : start + chunk_size])
            written += len(content[start : start + chunk_size])
            await asyncio.sleep(CHUNK_PAUSE)
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client stopped reading and closed the connection
        pass
    return response, written
