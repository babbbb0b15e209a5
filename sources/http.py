"""The one polite HTTP client every source uses: timeouts, size cap, retries, per-host limits, 304s, SSRF guard."""

from __future__ import annotations

import asyncio
import base64
import json as jsonlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Protocol, Self

import httpcore
import httpx

from kernel import Backoff, parse_retry_after
from sources.base import SourceError, SourceErrorKind
from sources.charsets import decode_document
from sources.ssrf import (
    AddressPolicy,
    GuardedTransport,
    Resolver,
    check_scheme,
    resolve,
    shared_ssl_context,
    system_resolver,
)

__all__ = [
    "HostPolicy",
    "HttpClient",
    "HttpResponse",
    "HttpStats",
    "MemoryValidatorStore",
    "Resolver",
    "StoredResponse",
    "ValidatorStore",
]

MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, kw_only=True)
class HostPolicy:
    """How hard one host may be hit."""

    concurrency: int = 4
    """Simultaneous requests to that host."""
    min_interval: float = 0.0
    """Seconds between the starts of two requests to that host."""

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.min_interval < 0:
            raise ValueError(f"invalid host policy: {self}")


DEFAULT_HOST_POLICIES: Mapping[str, HostPolicy] = {
    # arXiv asks for one request every 3 seconds over a single connection.
    "export.arxiv.org": HostPolicy(concurrency=1, min_interval=3.0),
}


@dataclass(frozen=True)
class HttpResponse:
    """A fully read response (2xx, or 304)."""

    url: str
    """Final URL, after redirects."""
    status: int
    headers: Mapping[str, str]
    """Case-insensitive."""
    content: bytes
    not_modified: bool = False
    """A 304 came back; `content` is the body stored from the last 200 (empty if none was stored)."""

    @property
    def content_type(self) -> str | None:
        """The Content-Type header (its charset is the first word on how the body decodes), if sent."""
        return self.headers.get("content-type")

    def text(self) -> str:
        """The body decoded as `sources.charsets.choose_charset` decides (the declared charset when it fits the
        bytes, else UTF-8, else detection); undecodable bytes are replaced."""
        return decode_document(self.content, content_type=self.content_type)

    def json(self) -> Any:
        """The body parsed as JSON; `SourceError(BAD_RESPONSE)` when it is not JSON."""
        try:
            return jsonlib.loads(self.content)
        except ValueError as exc:
            raise SourceError(
                SourceErrorKind.BAD_RESPONSE, f"{self.url} did not return JSON: {exc}", status=self.status
            ) from exc


@dataclass(frozen=True)
class HttpStats:
    """Counters since the client was created (benchmarks and run reports)."""

    requests: int = 0
    """Requests sent over the wire, counting retries and redirect hops."""
    bytes_received: int = 0
    """Response bytes as transferred (before decompression)."""
    not_modified: int = 0
    """304 answers."""
    retries: int = 0
    redirects: int = 0


@dataclass(frozen=True, kw_only=True)
class StoredResponse:
    """What conditional GET remembers for one URL: its validators and the body they describe."""

    etag: str | None = None
    last_modified: str | None = None
    content: bytes
    content_type: str | None = None


class ValidatorStore(Protocol):
    """Where conditional GET keeps validators and bodies, keyed by the full request URL."""

    async def get(self, key: str) -> StoredResponse | None: ...

    async def put(self, key: str, stored: StoredResponse) -> None: ...


class MemoryValidatorStore:
    """A `ValidatorStore` in memory, least recently used entries dropped past `max_entries`."""

    def __init__(self, *, max_entries: int = 1024) -> None:
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()
        self._max_entries = max_entries

    async def get(self, key: str) -> StoredResponse | None:
        stored = self._entries.get(key)
        if stored is not None:
            self._entries.move_to_end(key)
        return stored

    async def put(self, key: str, stored: StoredResponse) -> None:
        self._entries[key] = stored
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class _Hop:
    """One request on the wire: a redirect makes the next hop from it (`dataclasses.replace`)."""

    method: str
    target: httpx.URL
    headers: httpx.Headers
    body: dict[str, Any] | None
    """`client.build_request`'s `data`, `json` or `content`."""
    untrusted: bool
    """Sent through the SSRF-guarded client, every hop checked again."""


@dataclass(frozen=True)
class _Answer:
    """One wire response, read (body empty for redirects)."""

    url: httpx.URL
    status: int
    headers: httpx.Headers
    content: bytes


class _TransportFailure(SourceError):
    """Timeout or network failure; `sent` says whether the request may have reached the server."""

    def __init__(self, kind: SourceErrorKind, message: str, *, sent: bool) -> None:
        super().__init__(kind, message)
        self.sent = sent


class _Retryable(SourceError):
    """A failure worth another try (429, 5xx, a request that never reached the server or was idempotent)."""


class _HostGate:
    """Per-host concurrency slots and spacing between request starts."""

    def __init__(self, policy: HostPolicy) -> None:
        self._policy = policy
        self._slots = asyncio.Semaphore(policy.concurrency)
        self._spacing = asyncio.Lock()
        self._next_start = 0.0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            if self._policy.min_interval > 0:
                async with self._spacing:
                    loop = asyncio.get_running_loop()
                    wait = self._next_start - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    self._next_start = loop.time() + self._policy.min_interval
            yield


def quota_exhausted_for(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds until an exhausted `X-RateLimit-Remaining: 0` quota resets (`X-RateLimit-Reset`, epoch), or None."""
    if headers.get("x-ratelimit-remaining", "").strip() != "0":
        return None
    try:
        reset = float(headers.get("x-ratelimit-reset", ""))
    except ValueError:
        return None
    current = (now or datetime.now(UTC)).timestamp()
    return max(0.0, reset - current)


class HttpClient:
    """Shared async HTTP client; every failure surfaces as `SourceError`."""

    def __init__(
        self,
        *,
        user_agent: str,
        allow_private: bool = False,
        timeout: float = 15.0,
        max_bytes: int = 10_000_000,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        max_retry_wait: float = 60.0,
        validators: ValidatorStore | None = None,
        resolver: Resolver | None = None,
        exempt_addresses: Iterable[str] = (),
        attempt_deadline: float | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        """`exempt_addresses` count as public for untrusted URLs (an internal service you vouch for).

        `attempt_deadline` caps one attempt end to end (default twice `timeout`) so a server dripping
        bytes cannot hold a request forever; `timeout` bounds each read, `connect_timeout` the connect.
        """
        self._user_agent = user_agent
        self._max_bytes = max_bytes
        self._backoff = Backoff(
            attempts=max_retries + 1, base=backoff_base, cap=max_retry_wait, max_wait=max_retry_wait
        )
        self._validators: ValidatorStore = validators if validators is not None else MemoryValidatorStore()
        self._attempt_deadline = attempt_deadline if attempt_deadline is not None else 2 * timeout
        self._policies: dict[str, HostPolicy] = dict(DEFAULT_HOST_POLICIES)
        self._gates: dict[str, _HostGate] = {}
        self._stats = HttpStats()
        httpx_timeout = httpx.Timeout(timeout, connect=connect_timeout or min(timeout, 10.0))
        common: dict[str, Any] = {"timeout": httpx_timeout, "follow_redirects": False, "verify": shared_ssl_context()}
        # Trusted endpoints (configured APIs) may go through a proxy from the environment; untrusted
        # URLs never do, since the guard must see the address that is actually connected to.
        trusted_transport = GuardedTransport(resolver=resolver, policy=None) if resolver else None
        self._trusted = httpx.AsyncClient(transport=trusted_transport, **common)
        guard = AddressPolicy.build(allow_private=allow_private, exempt=exempt_addresses)
        self._guard, self._untrusted_resolver = guard, resolver or system_resolver
        self._untrusted = httpx.AsyncClient(
            transport=GuardedTransport(resolver=self._untrusted_resolver, policy=guard),
            trust_env=False,
            **common,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._trusted.aclose()
        await self._untrusted.aclose()

    @property
    def stats(self) -> HttpStats:
        return self._stats

    def host_policy(self, host: str) -> HostPolicy:
        """The limits that apply to `host`."""
        return self._policies.get(host.lower(), HostPolicy())

    def set_host_policy(self, host: str, policy: HostPolicy) -> None:
        """Limit requests to `host` (exact host name, lower case); requests already waiting keep the old one.

        Setting the policy a host already has changes nothing, so a second source built on the same
        client cannot reset the spacing of requests in flight (arXiv's one per 3 s is process-wide).
        """
        host = host.lower()
        if self._policies.get(host) == policy:
            return
        self._policies[host] = policy
        self._gates.pop(host, None)

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        conditional: bool = False,
        untrusted: bool = False,
        retries: int | None = None,
    ) -> HttpResponse:
        """GET `url` (+ `params`). `conditional` sends stored validators; `untrusted` applies the SSRF guard;
        `retries` overrides the client's `max_retries` for this call (0: one request, whatever happens)."""
        target = self._build_url(url, params, untrusted=untrusted)
        request_headers = self._headers(headers)
        stored: StoredResponse | None = None
        key = str(target)
        if conditional:
            stored = await self._validators.get(key)
            if stored is not None:
                if stored.etag:
                    request_headers["If-None-Match"] = stored.etag
                if stored.last_modified:
                    request_headers["If-Modified-Since"] = stored.last_modified
        answer = await self._follow(_Hop("GET", target, request_headers, None, untrusted), retries=retries)
        if answer.status == 304:
            self._bump(not_modified=1)
            merged = httpx.Headers(answer.headers)
            if stored is not None and stored.content_type and "content-type" not in merged:
                merged["content-type"] = stored.content_type
            body = stored.content if stored is not None else b""
            return HttpResponse(str(answer.url), 304, merged, body, not_modified=True)
        if conditional:
            etag = answer.headers.get("etag")
            last_modified = answer.headers.get("last-modified")
            if etag or last_modified:
                await self._validators.put(
                    key,
                    StoredResponse(
                        etag=etag,
                        last_modified=last_modified,
                        content=answer.content,
                        content_type=answer.headers.get("content-type"),
                    ),
                )
        return HttpResponse(str(answer.url), answer.status, answer.headers, answer.content)

    async def check_untrusted(self, url: str) -> None:
        """Raise `SourceError(BLOCKED)` (or `CLIENT` for a URL that is not one) when an untrusted fetch of `url`
        would be refused: the scheme, then every address the host resolves to, checked by the same guard the
        fetch goes through. For refusing a feed when a person adds it, not only when it is first fetched. A host
        that does not resolve right now is not refused (it may resolve when the fetch happens)."""
        target = self._build_url(url, None, untrusted=True)
        port = target.port or (443 if target.scheme == "https" else 80)
        try:
            addresses = await resolve(target.host, port, self._untrusted_resolver)
        except SourceError as error:
            if error.kind is SourceErrorKind.NETWORK:
                return
            raise
        self._guard.check(target.host, addresses)

    async def post(
        self,
        url: str,
        *,
        data: Mapping[str, str] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        untrusted: bool = False,
        content: bytes | None = None,
        retries: int | None = None,
    ) -> HttpResponse:
        """POST a form (`data`), a JSON body or raw bytes (`content`, e.g. a signed body sent exactly as signed).
        Retried only where the server cannot have acted on it; `retries` overrides how often (0: once)."""
        target = self._build_url(url, None, untrusted=untrusted)
        request_headers = self._headers(headers)
        if auth is not None:
            token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
            request_headers["Authorization"] = f"Basic {token}"
        body: dict[str, Any] = {}
        if data is not None:
            body["data"] = dict(data)
        if json is not None:
            body["json"] = json
        if content is not None:
            body["content"] = content
        answer = await self._follow(_Hop("POST", target, request_headers, body, untrusted), retries=retries)
        return HttpResponse(str(answer.url), answer.status, answer.headers, answer.content)

    # -- internals ---------------------------------------------------------------------------------

    def _build_url(self, url: str, params: Mapping[str, str | int] | None, *, untrusted: bool) -> httpx.URL:
        try:
            target = httpx.URL(url.strip())
            if params:
                target = target.copy_merge_params(dict(params))
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise SourceError(SourceErrorKind.CLIENT, f"invalid URL {url[:200]!r}: {exc}") from exc
        self._check_target(target, untrusted=untrusted)
        return target

    def _check_target(self, target: httpx.URL, *, untrusted: bool) -> None:
        if untrusted:
            check_scheme(target.scheme, str(target))
        elif target.scheme not in ("http", "https"):
            raise SourceError(SourceErrorKind.CLIENT, f"unsupported URL scheme in {str(target)[:200]!r}")
        if not target.host:
            raise SourceError(SourceErrorKind.CLIENT, f"URL has no host: {str(target)[:200]!r}")

    def _headers(self, extra: Mapping[str, str] | None) -> httpx.Headers:
        """Our User-Agent plus the caller's headers (which win, compared case-insensitively)."""
        headers = httpx.Headers({"User-Agent": self._user_agent})
        headers.update(extra or {})
        return headers

    def _bump(self, **deltas: int) -> None:
        values = {name: getattr(self._stats, name) + delta for name, delta in deltas.items()}
        self._stats = HttpStats(**{**self._stats.__dict__, **values})

    async def _follow(self, request: _Hop, *, retries: int | None = None) -> _Answer:
        """Send, following up to `MAX_REDIRECTS` redirects ourselves so each hop is checked again."""
        target = request.target
        for hop in range(MAX_REDIRECTS + 1):
            answer = await self._send_with_retries(request, retries=retries)
            if answer.status not in _REDIRECT_STATUSES:
                return self._accept(answer)
            location = answer.headers.get("location")
            if not location:
                raise SourceError(
                    SourceErrorKind.BAD_RESPONSE,
                    f"{answer.status} redirect without Location from {target}",
                    status=answer.status,
                )
            if hop == MAX_REDIRECTS:
                break
            try:
                next_target = target.join(location.strip())
            except (httpx.InvalidURL, ValueError) as exc:
                raise SourceError(SourceErrorKind.BAD_RESPONSE, f"bad redirect Location {location!r}") from exc
            self._check_target(next_target, untrusted=request.untrusted)
            headers = request.headers
            if next_target.scheme != target.scheme or next_target.host != target.host:
                # Never carry credentials to another origin.
                headers = httpx.Headers(headers)
                headers.pop("authorization", None)
            request = replace(request, target=next_target, headers=headers)
            if answer.status == 303 or (answer.status in (301, 302) and request.method == "POST"):
                request = replace(request, method="GET", body=None)
            target = next_target
            self._bump(redirects=1)
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"more than {MAX_REDIRECTS} redirects from {target}")

    def _accept(self, answer: _Answer) -> _Answer:
        if 200 <= answer.status < 300 or answer.status == 304:
            return answer
        snippet = answer.content[:200].decode("utf-8", errors="replace").strip()
        quota_reset = quota_exhausted_for(answer.headers)
        if answer.status == 403 and quota_reset is not None:
            # APIs such as GitHub's answer an exhausted quota with 403 and say when it refills.
            kind = SourceErrorKind.RATE_LIMITED
        elif 400 <= answer.status < 500:
            kind = SourceErrorKind.CLIENT
        elif answer.status >= 500:
            kind = SourceErrorKind.SERVER
        else:
            kind = SourceErrorKind.BAD_RESPONSE
        raise SourceError(
            kind, f"HTTP {answer.status} from {answer.url}: {snippet}", status=answer.status, retry_after=quota_reset
        )

    async def _send_with_retries(self, request: _Hop, *, retries: int | None = None) -> _Answer:
        """One hop, retried per the shared `Backoff` on 429, 5xx, timeouts and connection failures (a request the
        server may have acted on only when it is idempotent); a Retry-After over `max_retry_wait` fails at once.
        `retries` overrides how many retries this call may make."""
        method, target = request.method, request.target
        idempotent = method in ("GET", "HEAD")
        backoff = self._backoff if retries is None else replace(self._backoff, attempts=max(retries, 0) + 1)
        tries = 0

        async def attempt() -> _Answer:
            nonlocal tries
            tries += 1
            if tries > 1:
                self._bump(retries=1)
            try:
                answer = await self._send_once(request)
            except _TransportFailure as exc:
                if exc.sent and not idempotent:
                    raise SourceError(exc.kind, str(exc)) from None
                raise _Retryable(exc.kind, str(exc)) from None
            status = answer.status
            if status != 429 and (status < 500 or (not idempotent and status != 503)):
                return answer
            retry_after = parse_retry_after(answer.headers.get("retry-after"))
            if retry_after is None and status == 429:
                retry_after = quota_exhausted_for(answer.headers)
            kind = SourceErrorKind.RATE_LIMITED if status == 429 else SourceErrorKind.SERVER
            snippet = answer.content[:200].decode("utf-8", errors="replace").strip()
            raise _Retryable(kind, f"HTTP {status} from {target}: {snippet}", status=status, retry_after=retry_after)

        return await backoff.call(
            attempt,
            retry_on=lambda error: isinstance(error, _Retryable),
            retry_after=lambda error: getattr(error, "retry_after", None),
            what=f"{method} {target.host}",
        )

    def _gate(self, host: str) -> _HostGate:
        gate = self._gates.get(host)
        if gate is None:
            gate = self._gates[host] = _HostGate(self.host_policy(host))
        return gate

    async def _send_once(self, hop: _Hop) -> _Answer:
        target = hop.target
        client = self._untrusted if hop.untrusted else self._trusted
        request = client.build_request(hop.method, target, headers=hop.headers, **(hop.body or {}))
        sent = False
        async with self._gate(target.host).slot():
            try:
                async with asyncio.timeout(self._attempt_deadline):
                    self._bump(requests=1)
                    response = await client.send(request, stream=True)
                    sent = True
                    try:
                        content = await self._read_capped(response)
                    finally:
                        await response.aclose()
                        self._bump(bytes_received=response.num_bytes_downloaded)
            except (TimeoutError, httpx.TimeoutException, httpcore.TimeoutException) as exc:
                sent = sent or not isinstance(exc, httpx.ConnectTimeout | httpcore.ConnectTimeout)
                raise _TransportFailure(SourceErrorKind.TIMEOUT, f"timed out fetching {target}", sent=sent) from exc
            except (httpx.ConnectError, httpcore.ConnectError) as exc:
                raise _TransportFailure(
                    SourceErrorKind.NETWORK, f"cannot connect to {target.host}: {exc}", sent=False
                ) from exc
            except httpx.DecodingError as exc:
                raise SourceError(SourceErrorKind.BAD_RESPONSE, f"undecodable body from {target}") from exc
            except (httpx.TransportError, httpcore.NetworkError, httpcore.ProtocolError) as exc:
                if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
                    raise SourceError(SourceErrorKind.CLIENT, f"cannot send {target}: {exc}") from exc
                raise _TransportFailure(
                    SourceErrorKind.NETWORK, f"network error fetching {target}: {exc}", sent=True
                ) from exc
        return _Answer(response.url, response.status_code, response.headers, content)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        if response.status_code in _REDIRECT_STATUSES:
            return b""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise SourceError(
                SourceErrorKind.TOO_LARGE,
                f"{response.url} declares {declared} bytes, over the {self._max_bytes} cap",
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise SourceError(SourceErrorKind.TOO_LARGE, f"{response.url} sent more than {self._max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
