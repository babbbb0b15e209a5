"""The one ASGI app (starlette, served by uvicorn on the shared loop): `/healthz`, the platforms' webhooks, the
monitors' feeds (`/feeds/<token>.atom|.json`) and the digests' pages (`/digests/<token>`, its `.json` document, its
chart and CSV under it) — each answered 304 to a conditional GET and 404, with nothing more, to a token nothing has."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

import uvicorn
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from monitors import DigestPages, FeedKind, MonitorFeeds, PageKind

logger = logging.getLogger(__name__)

FEED_MAX_AGE_SECONDS = 300
"""How long a reader or proxy may reuse a feed without asking: digests come at most every few minutes."""

PAGE_MAX_AGE_SECONDS = 3600
"""How long a browser may reuse a digest page or file without asking: a finished run's page does not change."""
PAGE_HEADERS: Mapping[str, str] = {
    "Referrer-Policy": "no-referrer",
    "X-Robots-Tag": "noindex, nofollow",
    "X-Content-Type-Options": "nosniff",
}
"""On every page answer: the token never leaves in a Referer (a click on a cited article would carry it), and search
engines index nothing even if a link leaks."""
PAGE_CSP = (
    "default-src 'none'; img-src 'self' {origin}; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
"""The page runs no script at all (none is served, and none would run) and loads only its own chart."""

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
    # Telegram update is one POST in webhook mode (`bench/chat.py --web-processes`).
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


def not_modified(request: Request, etag: str, last_modified: datetime) -> bool:
    """Whether a conditional GET already holds this version (RFC 9110: If-None-Match, when sent, decides alone)."""
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag in tags
    if_modified_since = request.headers.get("if-modified-since")
    if if_modified_since is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False
    if since.tzinfo is None:
        return False
    return last_modified.replace(microsecond=0) <= since


def feed_routes(feeds: MonitorFeeds, *, public_url: str | None) -> list[BaseRoute]:
    """`/feeds/<token>.atom` and `/feeds/<token>.json`; their URLs inside start with `public_url` (else with the
    address the request came to)."""

    async def feed(request: Request) -> Response:
        name = str(request.path_params["name"])
        token, _, extension = name.rpartition(".")
        if extension not in ("atom", "json") or not token:
            return PlainTextResponse("Not Found", status_code=404)
        base = public_url or str(request.base_url)
        document = await feeds.document(token, cast("FeedKind", extension), base_url=base)
        if document is None:
            return PlainTextResponse("Not Found", status_code=404)
        headers = {
            "ETag": document.etag,
            "Last-Modified": format_datetime(
                document.last_modified.astimezone(UTC).replace(microsecond=0), usegmt=True
            ),
            "Cache-Control": f"max-age={FEED_MAX_AGE_SECONDS}",
        }
        if not_modified(request, document.etag, document.last_modified):
            return Response(status_code=304, headers=headers)
        return Response(document.body, media_type=document.media_type, headers=headers)

    return [Route("/feeds/{name}", feed, methods=["GET", "HEAD"])]


def _not_found() -> Response:
    return PlainTextResponse("Not Found", status_code=404, headers=PAGE_HEADERS)


def _validators(etag: str, last_modified: datetime, max_age: int) -> dict[str, str]:
    return {
        "ETag": etag,
        "Last-Modified": format_datetime(last_modified.astimezone(UTC).replace(microsecond=0), usegmt=True),
        "Cache-Control": f"private, max-age={max_age}",
    }


_warming: set[asyncio.Task[None]] = set()
"""Warm-up tasks still running (the loop keeps only weak references to tasks)."""


def page_routes(pages: DigestPages) -> list[BaseRoute]:
    """`/digests/<token>` (the page), `/digests/<token>.json` (its digest document) and `/digests/<token>/chart.png`,
    `/digests/<token>/digest.csv`; their URLs inside start with the pages' PUBLIC_URL (else with the address the
    request came to). A token no page has is a bare 404, whatever follows it. Built inside a running event loop, it
    starts warming the pages up (`DigestPages.warm`) in the background."""
    with contextlib.suppress(RuntimeError):  # no running loop: nothing to warm up on
        _warming.add(task := asyncio.get_running_loop().create_task(pages.warm(), name="warm digest pages"))
        task.add_done_callback(_warming.discard)

    async def page(request: Request) -> Response:
        name = str(request.path_params["name"])
        token, dot, extension = name.partition(".")
        if dot and extension != "json":
            return _not_found()
        kind: PageKind = "json" if dot else "html"
        run = await pages.find(token)
        if run is None:
            return _not_found()
        base = str(request.base_url)
        etag = pages.etag(run, kind, token=token, base_url=base)
        headers = {**PAGE_HEADERS, **_validators(etag, pages.last_modified(run), PAGE_MAX_AGE_SECONDS)}
        if kind == "html":
            origin = urlsplit(pages.public_url or base)
            headers["Content-Security-Policy"] = PAGE_CSP.format(origin=f"{origin.scheme}://{origin.netloc}")
        if not_modified(request, etag, pages.last_modified(run)):
            return Response(status_code=304, headers=headers)
        body = await pages.body(run, kind, token=token, base_url=base)
        if body is None:
            return _not_found()
        return Response(body, media_type=pages.media_type(kind), headers=headers)

    async def file(request: Request) -> Response:
        found = await pages.file(str(request.path_params["token"]), str(request.path_params["file"]))
        if found is None:
            return _not_found()
        try:
            stat = found.path.stat()
        except OSError:
            return _not_found()
        etag = '"' + hashlib.sha256(f"{found.path}:{stat.st_mtime_ns}:{stat.st_size}".encode()).hexdigest()[:32] + '"'
        modified = datetime.fromtimestamp(stat.st_mtime, UTC)
        headers = {**PAGE_HEADERS, **_validators(etag, modified, PAGE_MAX_AGE_SECONDS)}
        if not_modified(request, etag, modified):
            return Response(status_code=304, headers=headers)
        return FileResponse(
            found.path,
            media_type=found.media_type,
            filename=found.filename,
            content_disposition_type="attachment" if found.media_type.startswith("text/csv") else "inline",
            headers=headers,
            stat_result=stat,
        )

    return [
        Route("/digests/{name}", page, methods=["GET", "HEAD"]),
        Route("/digests/{token}/{file}", file, methods=["GET", "HEAD"]),
    ]
