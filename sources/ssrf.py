"""SSRF guard: which URLs and addresses an untrusted fetch may reach, and the httpx transport enforcing it."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

from sources.base import PRIVATE_URLS_SETTING, SourceError, SourceErrorKind

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolve `(host, port)` to IP address strings. Injectable so tests can make a name point anywhere."""

ALLOWED_SCHEMES = frozenset({"http", "https"})

# Listed explicitly rather than trusting `ipaddress.is_private`, whose tables changed between 3.11 patch
# releases; a fetch may only reach globally routable unicast space.
_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "::/96",  # unspecified, loopback, deprecated IPv4-compatible
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments incl. Teredo, ORCHID
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
# Prefixes that carry an IPv4 address inside: judge the embedded address.
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def blocked_reason(address: str | IPAddress) -> str | None:
    """Why a fetch must not reach this address, or `None` when it is public unicast."""
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return f"not an IP address: {address!r}"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = blocked_reason(embedded)
            return f"{ip} embeds {embedded}: {inner}" if inner else None
        for net in _BLOCKED_V6:
            if ip in net:
                return f"{ip} is in non-public range {net}"
    else:
        for net4 in _BLOCKED_V4:
            if ip in net4:
                return f"{ip} is in non-public range {net4}"
    # Belt and braces: whatever the running Python considers non-global stays blocked too.
    if not ip.is_global or ip.is_multicast:
        return f"{ip} is not a global unicast address"
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    for net in _NAT64:
        if ip in net:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True, kw_only=True)
class AddressPolicy:
    """Which resolved addresses a connection may use."""

    allow_private: bool = False
    """Lift the address check entirely (self-hosted feeds on a LAN)."""
    exempt: frozenset[IPAddress] = field(default_factory=frozenset)
    """Specific addresses treated as public anyway (a known internal service; the fake server in tests)."""

    @classmethod
    def build(cls, *, allow_private: bool = False, exempt: Iterable[str] = ()) -> AddressPolicy:
        return cls(allow_private=allow_private, exempt=frozenset(ipaddress.ip_address(a) for a in exempt))

    def check(self, host: str, addresses: Iterable[str]) -> None:
        """Raise `SourceError(BLOCKED)` if ANY address of `host` is off-limits."""
        if self.allow_private:
            return
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError:
                raise SourceError(
                    SourceErrorKind.BLOCKED, f"{host} resolved to something that is not an IP: {address!r}"
                ) from None
            if ip in self.exempt:
                continue
            reason = blocked_reason(ip)
            if reason is not None:
                raise SourceError(
                    SourceErrorKind.BLOCKED,
                    f"refusing to connect to {host}: {reason} (private and loopback addresses need "
                    f"{PRIVATE_URLS_SETTING}=true)",
                )


def check_scheme(scheme: str, url: str) -> None:
    """Raise `SourceError(BLOCKED)` unless the URL is http or https."""
    if scheme.lower() not in ALLOWED_SCHEMES:
        raise SourceError(SourceErrorKind.BLOCKED, f"only http and https URLs may be fetched, not {url[:200]!r}")


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the event loop's getaddrinfo; addresses in the system's preferred order, no repeats."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise SourceError(SourceErrorKind.NETWORK, f"cannot resolve {host}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def resolve(host: str, port: int, resolver: Resolver) -> list[str]:
    """Addresses for `host`: an IP literal stands for itself, anything else goes to the resolver."""
    literal = host.strip("[]")
    try:
        return [str(ipaddress.ip_address(literal))]
    except ValueError:
        pass
    addresses = await resolver(host, port)
    if not addresses:
        raise SourceError(SourceErrorKind.NETWORK, f"{host} resolved to no address")
    return addresses


class GuardedNetworkBackend(AsyncNetworkBackend):
    """Resolve once, check every address, then connect to a checked address (no second DNS lookup).

    httpcore still does TLS with the URL's hostname (SNI, certificate check) and httpx still sends the
    hostname in `Host`, so only the TCP connect uses the checked IP. `policy=None` resolves without
    checking (trusted endpoints with an injected resolver).
    """

    def __init__(self, *, resolver: Resolver, policy: AddressPolicy | None) -> None:
        self._resolver = resolver
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 — httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        addresses = await resolve(host, port, self._resolver)
        if self._policy is not None:
            self._policy.check(host, addresses)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 — httpcore's backend interface
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        raise SourceError(SourceErrorKind.BLOCKED, "unix sockets are not reachable through this client")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process: loading the CA bundle costs tens of milliseconds each time."""
    return httpx.create_ssl_context()


class _PoolStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        closer = getattr(self._stream, "aclose", None)
        if closer is not None:
            await closer()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose connections go through `GuardedNetworkBackend`.

    httpx offers no way to plug a network backend into its own transport, so this maps requests onto an
    httpcore pool directly. httpcore exceptions pass through unmapped; the caller handles both families.
    """

    def __init__(self, *, resolver: Resolver, policy: AddressPolicy | None) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=shared_ssl_context(),
            network_backend=GuardedNetworkBackend(resolver=resolver, policy=policy),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        core_response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=core_response.status,
            headers=core_response.headers,
            stream=_PoolStream(core_response.stream),
            extensions=core_response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
