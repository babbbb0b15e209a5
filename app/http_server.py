"""The one ASGI app (starlette, served by uvicorn on the shared loop): `/healthz` now, platform webhooks later."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence

import uvicorn
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

logger = logging.getLogger(__name__)

HealthCheck = Callable[[], Awaitable[bool]]
"""Answers whether one component works; an exception counts as not working."""


class Health(BaseModel):
    """What `/healthz` reports."""

    status: str
    """`ok` when every check passed, else `degraded`; a component that is off does not degrade it."""
    checks: dict[str, str]
    """Component name → `ok`, `failing`, or `off: <why>` for a component this process does not run (a frontend
    whose token is not set), so a probe sees every frontend Lookout has and why one is missing."""


HEALTH_CHECK_SECONDS = 5.0
"""A check that takes longer counts as failing (a database that went away may leave a connection attempt hanging)."""


async def run_health_checks(checks: Mapping[str, HealthCheck], off: Mapping[str, str] | None = None) -> Health:
    """Every check at once (while the database is away each may take its whole timeout: one answer in 5 s, not
    one per check)."""

    async def run(name: str, check: HealthCheck) -> str:
        try:
            ok = await asyncio.wait_for(check(), timeout=HEALTH_CHECK_SECONDS)
        except Exception as error:
            logger.warning("health check %s failed: %s", name, f"{type(error).__name__}: {error}"[:300])
            ok = False
        return "ok" if ok else "failing"

    outcomes = await asyncio.gather(*(run(name, check) for name, check in checks.items()))
    results = dict(zip(checks, outcomes, strict=True))
    status = "ok" if all(v == "ok" for v in results.values()) else "degraded"
    results.update({name: f"off: {why}" for name, why in (off or {}).items() if name not in results})
    return Health(status=status, checks=results)


def build_http_app(
    *, checks: Mapping[str, HealthCheck], off: Mapping[str, str] | None = None, routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """The ASGI app: `/healthz` (the checks, and the components that are `off` with why) plus the frontends' routes."""

    async def healthz(_: Request) -> JSONResponse:
        health = await run_health_checks(checks, off)
        return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)

    return Starlette(routes=[Route("/healthz", healthz, methods=["GET"]), *routes])


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the process that embeds it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(host: str, port: int) -> socket.socket:
    # Bind here rather than in uvicorn: uvicorn calls sys.exit() when it cannot bind, and an
    # embedded server must fail with an error the process can report, not end the process.
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise OSError(f"the HTTP server could not listen on {host}:{port} ({exc.strerror})") from None


async def serve_http(
    app: Starlette, *, host: str, port: int, stop: asyncio.Event, grace: Callable[[], float] | None = None
) -> None:
    """Serve `app` until `stop` is set; in-flight requests finish before this returns, or are cancelled once
    `grace()` (asked when `stop` is set: what is left of the shutdown's grace) has passed."""
    listener = _listen(host, port)
    # httptools (a dependency) parses each request for about half the CPU of uvicorn's pure-Python h11: every
    # Telegram update is one POST in webhook mode (bench/README.md, seventh session, webcmd).
    config = uvicorn.Config(app, http="httptools", log_config=None, access_log=False, lifespan="off")
    server = _EmbeddedServer(config)
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if grace is not None:
            # uvicorn reads it once it shuts down (typed int, used as the timeout of asyncio.wait_for: seconds)
            config.timeout_graceful_shutdown = grace()  # type: ignore[assignment]
        server.should_exit = True
        await serving
    finally:
        stopping.cancel()
        listener.close()
