"""A recording proxy in front of a real OpenAI-compatible model server: Lookout talks to it through the `openai`
client (OPENAI_BASE_URL), it forwards every request to the server and keeps each exchange — the request as Lookout
sent it, the server's answer, its status and the seconds it took — for the tests and the benchmark to read.

It changes one thing, and records that it did: a Chat Completions request without an output limit gets
`SAFETY_MAX_TOKENS`, so a model that never stops cannot hold the suite for minutes (the exchange still says the
request came without a limit, and the tests fail on it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.http_server import ThreadedFakeServer

Json = dict[str, Any]

SAFETY_MAX_TOKENS = 256
"""Output limit the proxy adds to a request that came without one (a base model repeats itself until the context
is full: ~3 minutes per request on 2 cores)."""

FORWARD_TIMEOUT_SECONDS = 600.0
"""How long the proxy waits for the server; Lookout's own timeout should end a request well before."""


@dataclass
class Exchange:
    """One request through the proxy and what came back."""

    method: str
    path: str
    request: Json
    status: int
    response: Json
    seconds: float
    had_output_limit: bool
    started: float
    """`time.monotonic()` when the request arrived."""

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    @property
    def output_limit(self) -> int | None:
        value = self.request.get("max_tokens")
        return int(value) if value is not None and self.had_output_limit else None

    @property
    def usage(self) -> Json:
        usage = self.response.get("usage")
        return usage if isinstance(usage, dict) else {}

    @property
    def prompt_tokens(self) -> int:
        return int(self.usage.get("prompt_tokens") or 0)

    @property
    def output_tokens(self) -> int:
        return int(self.usage.get("completion_tokens") or 0)

    @property
    def messages(self) -> list[Json]:
        return list(self.request.get("messages") or [])

    @property
    def system_messages(self) -> list[Json]:
        return [m for m in self.messages if m.get("role") in ("system", "developer")]

    @property
    def finish_reasons(self) -> list[str]:
        return [str(choice.get("finish_reason")) for choice in self.response.get("choices") or []]

    @property
    def answer_text(self) -> str:
        return "\n".join(
            str((choice.get("message") or {}).get("content") or "") for choice in self.response.get("choices") or []
        )

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offered."""
        return [str((tool.get("function") or {}).get("name")) for tool in self.request.get("tools") or []]

    @property
    def error_text(self) -> str:
        error = self.response.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(self.response.get("detail") or error or "")


class ModelProxy(ThreadedFakeServer):
    """Forwards `/v1/...` to `upstream` (the server's base URL, ending in /v1); `exchanges` in arrival order."""

    def __init__(self, upstream: str) -> None:
        super().__init__(thread_name="model-proxy")
        self.upstream = upstream
        self.exchanges: list[Exchange] = []
        self._session: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL is set to."""
        return f"{self.url}/v1"

    def chat_exchanges(self) -> list[Exchange]:
        return [exchange for exchange in self.exchanges if exchange.is_chat]

    def since(self, mark: int) -> list[Exchange]:
        """Chat exchanges after the first `mark` exchanges (`mark = len(proxy.exchanges)` taken before a step)."""
        return [exchange for exchange in self.exchanges[mark:] if exchange.is_chat]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.monotonic()
        raw = await request.read()
        try:
            payload: Json = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        had_limit = True
        body = raw
        if request.path.endswith("/chat/completions") and isinstance(payload, dict):
            # llama-cpp-python reads `max_tokens` only: a request with just `max_completion_tokens` has no limit there
            had_limit = payload.get("max_tokens") is not None
            if not had_limit:
                body = json.dumps({**payload, "max_tokens": SAFETY_MAX_TOKENS}).encode()
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_SECONDS))
        target = self.upstream.rstrip("/") + request.path.removeprefix("/v1")
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        try:
            async with self._session.request(request.method, target, data=body or None, headers=headers) as answer:
                status, answer_body = answer.status, await answer.read()
                content_type = answer.content_type
        except (TimeoutError, aiohttp.ClientError) as error:
            status, answer_body, content_type = 502, json.dumps({"error": {"message": repr(error)}}).encode(), None
        try:
            parsed = json.loads(answer_body) if answer_body else {}
        except ValueError:
            parsed = {"text": answer_body.decode(errors="replace")}
        self.exchanges.append(
            Exchange(
                method=request.method,
                path=request.path,
                request=payload if isinstance(payload, dict) else {},
                status=status,
                response=parsed if isinstance(parsed, dict) else {"value": parsed},
                seconds=time.monotonic() - started,
                had_output_limit=had_limit,
                started=started,
            )
        )
        return web.Response(status=status, body=answer_body, content_type=content_type or "application/json")

    async def _stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        await super()._stop()


@contextmanager
def running_proxy(upstream: str) -> Iterator[ModelProxy]:
    proxy = ModelProxy(upstream=upstream)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def totals(exchanges: Sequence[Exchange]) -> tuple[int, int, float]:
    """Prompt tokens, output tokens and seconds of `exchanges`, added up."""
    return (
        sum(e.prompt_tokens for e in exchanges),
        sum(e.output_tokens for e in exchanges),
        sum(e.seconds for e in exchanges),
    )
