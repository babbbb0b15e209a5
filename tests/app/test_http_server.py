"""The HTTP server answers /healthz from real checks, serves on the shared loop and stops when told."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from app.http_server import build_http_app, serve_http


async def _ok() -> bool:
    return True


async def _down() -> bool:
    return False


async def _raises() -> bool:
    raise ConnectionError("database is gone")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_healthz_reports_each_check() -> None:
    app = build_http_app(checks={"database": _ok})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok"}}


async def test_healthz_degraded_when_a_check_fails_or_raises() -> None:
    app = build_http_app(checks={"database": _down, "scheduler": _raises, "slack": _ok})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "degraded",
        "checks": {"database": "failing", "scheduler": "failing", "slack": "ok"},
    }


async def test_serves_on_a_real_port_until_stopped() -> None:
    port = _free_port()
    stop = asyncio.Event()
    serving = asyncio.create_task(
        serve_http(build_http_app(checks={"database": _ok}), host="127.0.0.1", port=port, stop=stop)
    )
    async with httpx.AsyncClient() as client:
        for _ in range(100):
            try:
                response = await client.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
        else:
            pytest.fail("server never came up")
    assert response.json()["status"] == "ok"
    stop.set()
    await asyncio.wait_for(serving, timeout=10)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/healthz")


async def test_a_stop_lets_requests_in_flight_finish_within_the_grace_and_cuts_the_rest() -> None:
    async def takes(seconds: float) -> bool:
        await asyncio.sleep(seconds)
        return True

    async def quick() -> bool:
        return await takes(0.3)

    async def stuck() -> bool:
        return await takes(60)

    port = _free_port()
    stop = asyncio.Event()
    app = build_http_app(checks={}, routes=[Route("/quick", _check_route(quick)), Route("/stuck", _check_route(stuck))])
    serving = asyncio.create_task(serve_http(app, host="127.0.0.1", port=port, stop=stop, grace=lambda: 1.5))
    async with httpx.AsyncClient(timeout=90) as client:
        for _ in range(100):
            try:
                await client.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
        requests = [asyncio.create_task(client.get(f"http://127.0.0.1:{port}/{path}")) for path in ("quick", "stuck")]
        await asyncio.sleep(0.1)  # both in flight
        stopped = asyncio.get_running_loop().time()
        stop.set()
        await asyncio.wait_for(serving, timeout=90)
        took = asyncio.get_running_loop().time() - stopped
        quick_answer, stuck_answer = await asyncio.gather(*requests, return_exceptions=True)

    assert isinstance(quick_answer, httpx.Response) and quick_answer.status_code == 200  # finished within the grace
    # cut short: the connection closed (or an error status), not answered after its minute
    assert not (isinstance(stuck_answer, httpx.Response) and stuck_answer.status_code == 200)
    assert took < 3.0, f"serve_http returned {took:.1f} s after the stop, over the 1.5 s grace"


def _check_route(check: Callable[[], Awaitable[bool]]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(_request: Request) -> Response:
        return PlainTextResponse("ok" if await check() else "no")

    return endpoint


async def test_busy_port_is_an_error_not_an_exit() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="could not listen"):
            await serve_http(build_http_app(checks={}), host="127.0.0.1", port=port, stop=asyncio.Event())


async def test_healthz_names_the_components_that_are_off_and_why_without_degrading() -> None:
    app = build_http_app(checks={"database": _ok}, off={"slack": "SLACK_BOT_TOKEN is not set"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "slack": "off: SLACK_BOT_TOKEN is not set"}}
