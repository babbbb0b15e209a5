"""A recording TCP proxy in front of a real PostgreSQL server: it passes every byte through unchanged and counts
the client's round trips, read from the frontend wire protocol (each simple `Query` message and each `Sync` that
ends an extended-protocol exchange is one wait for the server). `drop_connections` closes every proxied
connection at once, as a server restart does to its clients. `delay` holds back every chunk the server sends by
that many seconds (pipelined, in order): a database across a network, for the benchmarks.

The client must not ask for TLS (`?ssl=disable` on an asyncpg URL): the proxy reads the plain protocol.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url

_SLEEPERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="postgres-proxy-delay")
"""Threads that hold answers back (`time.sleep` keeps to a tenth of a millisecond); started only when used."""

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104


@dataclass
class PostgresProxy:
    """Counts what clients send through it; `url` is the database URL to connect through it."""

    url: str = ""
    round_trips: int = 0
    queries: list[str] = field(default_factory=list)
    """The text of each simple-protocol `Query` and `Parse` message, in order."""
    executed: list[str] = field(default_factory=list)
    """The text of each statement run: each simple `Query`, and each `Bind` of a statement parsed on that
    connection (a prepared statement run again counts again, unlike in `queries`)."""
    delay: float = 0.0
    """Seconds each chunk from the server is held back before the client gets it (0: passed on at once)."""
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    def reset(self) -> None:
        self.round_trips, self.queries, self.executed = 0, [], []

    async def drop_connections(self) -> None:
        """Close every proxied connection, both ways (what a PostgreSQL restart does to its clients)."""
        writers, self._writers = list(self._writers), set()
        for writer in writers:
            writer.close()
        for writer in writers:
            with suppress(OSError):
                await writer.wait_closed()

    async def _client_to_server(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        started = False
        prepared: dict[bytes, str] = {}  # this connection's statements by name ("" for the unnamed one)
        while True:
            if not started:  # untyped: SSLRequest/GSSENCRequest (answered by the server) or the startup message
                header = await reader.readexactly(4)
                (length,) = struct.unpack("!i", header)
                body = await reader.readexactly(length - 4)
                code = struct.unpack("!i", body[:4])[0]
                started = code not in (_SSL_REQUEST, _GSS_REQUEST)
                writer.write(header + body)
                continue
            kind = await reader.readexactly(1)
            header = await reader.readexactly(4)
            (length,) = struct.unpack("!i", header)
            body = await reader.readexactly(length - 4)
            if kind in (b"Q", b"S"):
                self.round_trips += 1
            if kind == b"Q":
                self.queries.append(body.rstrip(b"\0").decode())
                self.executed.append(self.queries[-1])
            elif kind == b"P":  # Parse: statement name, then the query text
                name, query = body.split(b"\0")[:2]
                self.queries.append(query.decode())
                prepared[name] = self.queries[-1]
            elif kind == b"B":  # Bind: portal name, then the statement's name
                self.executed.append(prepared.get(body.split(b"\0")[1], "?"))
            writer.write(kind + header + body)

    async def _server_to_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.delay <= 0:
            while chunk := await reader.read(65536):
                writer.write(chunk)
            return
        # Held back in a queue, not by sleeping in the pump: chunks in flight overlap, as on a wire.
        loop = asyncio.get_running_loop()
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def release() -> None:
            while True:
                due, chunk = await held.get()
                if (wait := due - loop.time()) > 0:
                    # not asyncio.sleep: the event loop's timers wake up on whole milliseconds (epoll)
                    await loop.run_in_executor(_SLEEPERS, time.sleep, wait)
                if not chunk:
                    return
                writer.write(chunk)

        releasing = asyncio.ensure_future(release())
        try:
            while True:
                chunk = await reader.read(65536)
                held.put_nowait((loop.time() + self.delay, chunk))
                if not chunk:
                    break
            await releasing
        finally:
            releasing.cancel()

    async def _serve(
        self, target: tuple[str, int], client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        server_r, server_w = await asyncio.open_connection(*target)
        self._writers |= {client_w, server_w}
        pumps = [
            asyncio.ensure_future(_until_closed(self._client_to_server(client_r, server_w))),
            asyncio.ensure_future(_until_closed(self._server_to_client(server_r, client_w))),
        ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            for writer in (client_w, server_w):
                self._writers.discard(writer)
                writer.close()


async def _until_closed(pump: Coroutine[None, None, None]) -> None:
    with suppress(asyncio.IncompleteReadError, ConnectionError, OSError):  # either side hung up: the pair ends
        await pump


@asynccontextmanager
async def postgres_proxy(database_url: str, *, delay: float = 0.0) -> AsyncIterator[PostgresProxy]:
    """A proxy on 127.0.0.1 in front of `database_url`'s server; `proxy.url` reaches the same database through it
    (every answer `delay` seconds late)."""
    url = make_url(database_url)
    target = (url.host or "127.0.0.1", url.port or 5432)
    proxy = PostgresProxy(delay=delay)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await proxy._serve(target, reader, writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy.url = url.set(host="127.0.0.1", port=port, query={"ssl": "disable"}).render_as_string(hide_password=False)
    try:
        yield proxy
    finally:
        await proxy.drop_connections()
        server.close()
        await server.wait_closed()
