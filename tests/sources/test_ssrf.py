"""The SSRF guard: which addresses are refused, that the checked address is the one connected to, redirects."""

from __future__ import annotations

import pytest

from sources.base import SourceError, SourceErrorKind
from sources.http import HttpClient
from sources.ssrf import AddressPolicy, blocked_reason
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory


class MapResolver:
    """A resolver from a fixed table; records every lookup. Unknown names do not resolve."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        if host not in self.table:
            raise SourceError(SourceErrorKind.NETWORK, f"cannot resolve {host}")
        return self.table[host]


def guarded_client(make: HttpClientFactory, resolver: MapResolver, **options: object) -> HttpClient:
    """A client with the guard ON, where the fake server's 127.0.0.1 counts as a public address."""
    return make(allow_private=False, resolver=resolver, exempt_addresses=["127.0.0.1"], **options)


BLOCKED_ADDRESSES = [
    "127.0.0.1",
    "127.1.2.3",
    "0.0.0.0",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "100.127.255.254",
    "224.0.0.1",
    "239.255.255.250",
    "255.255.255.255",
    "240.0.0.1",
    "198.18.0.1",
    "::1",
    "::",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::127.0.0.1",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd12:3456:789a::1",
    "fec0::1",
    "ff02::1",
    "2002:7f00:1::",  # 6to4 wrapping 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 wrapping 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 wrapping 127.0.0.1
    "64:ff9b::a00:1",  # NAT64 wrapping 10.0.0.1
    "2001:db8::1",
]
PUBLIC_ADDRESSES = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]


@pytest.mark.parametrize("address", BLOCKED_ADDRESSES)
def test_non_public_addresses_are_blocked(address: str) -> None:
    assert blocked_reason(address) is not None


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(address) is None


def test_policy_rejects_a_host_if_any_address_is_private() -> None:
    policy = AddressPolicy.build()
    with pytest.raises(SourceError) as caught:
        policy.check("mixed.example", ["8.8.8.8", "10.0.0.7"])
    assert caught.value.kind is SourceErrorKind.BLOCKED
    AddressPolicy.build(allow_private=True).check("mixed.example", ["8.8.8.8", "10.0.0.7"])
    AddressPolicy.build(exempt=["10.0.0.7"]).check("mixed.example", ["8.8.8.8", "10.0.0.7"])


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "169.254.169.254",
        "10.0.0.1",
        "100.64.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[fe80::1]",
        "[fc00::1]",
        "2130706433",  # 127.0.0.1 as one decimal number, which getaddrinfo accepts
        "0x7f.1",
        "localhost",
    ],
)
async def test_untrusted_literal_and_odd_hosts_are_refused(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, host: str
) -> None:
    fake_server.route("GET", "/secret", FakeResponse(body="internal"))
    client = make_http_client(allow_private=False)

    with pytest.raises(SourceError) as caught:
        await client.get(f"http://{host}:{fake_server.port}/secret", untrusted=True)

    assert caught.value.kind is SourceErrorKind.BLOCKED
    assert fake_server.requests == []


async def test_hostname_resolving_to_loopback_is_refused(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    fake_server.route("GET", "/secret", FakeResponse(body="internal"))
    resolver = MapResolver({"evil.example": ["127.0.0.1"]})
    client = make_http_client(allow_private=False, resolver=resolver)

    with pytest.raises(SourceError) as caught:
        await client.get(f"http://evil.example:{fake_server.port}/secret", untrusted=True)

    assert caught.value.kind is SourceErrorKind.BLOCKED
    assert resolver.lookups == ["evil.example"]
    assert fake_server.requests == []


async def test_the_checked_address_is_the_one_connected_to(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    # A rebinding DNS answers "public" once and private afterwards; only one lookup may happen, and
    # the system resolver must not be asked at all (it cannot resolve public.example).
    class RebindingResolver(MapResolver):
        async def __call__(self, host: str, port: int) -> list[str]:
            answer = await super().__call__(host, port)
            self.table[host] = ["10.0.0.1"]
            return answer

    fake_server.route("GET", "/page", FakeResponse(body="public page"))
    resolver = RebindingResolver({"public.example": ["127.0.0.1"]})
    client = guarded_client(make_http_client, resolver)

    response = await client.get(f"http://public.example:{fake_server.port}/page", untrusted=True)

    assert response.content == b"public page"
    assert resolver.lookups == ["public.example"]
    # The hostname, not the IP, is what the server saw.
    assert fake_server.received("/page")[0].headers["host"] == f"public.example:{fake_server.port}"


async def test_redirect_to_a_private_address_is_refused(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    resolver = MapResolver({"public.example": ["127.0.0.1"], "metadata.example": ["169.254.169.254"]})
    client = guarded_client(make_http_client, resolver)
    fake_server.route("GET", "/to-ip", FakeResponse(status=302, headers={"Location": "http://10.0.0.5/admin"}))
    fake_server.route(
        "GET", "/to-name", FakeResponse(status=307, headers={"Location": "http://metadata.example/latest/meta-data"})
    )
    fake_server.route(
        "GET", "/to-mapped", FakeResponse(status=301, headers={"Location": "http://[::ffff:192.168.0.1]/"})
    )

    for path in ("/to-ip", "/to-name", "/to-mapped"):
        with pytest.raises(SourceError) as caught:
            await client.get(f"http://public.example:{fake_server.port}{path}", untrusted=True)
        assert caught.value.kind is SourceErrorKind.BLOCKED, path

    assert [r.path for r in fake_server.requests] == ["/to-ip", "/to-name", "/to-mapped"]


async def test_redirect_to_the_same_allowed_host_is_followed(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    resolver = MapResolver({"public.example": ["127.0.0.1"]})
    client = guarded_client(make_http_client, resolver)
    fake_server.route("GET", "/a", FakeResponse(status=302, headers={"Location": "/b"}))
    fake_server.route("GET", "/b", FakeResponse(body="b"))

    response = await client.get(f"http://public.example:{fake_server.port}/a", untrusted=True)

    assert response.content == b"b"
    assert response.url == f"http://public.example:{fake_server.port}/b"


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.com/file", "gopher://127.0.0.1:70/_x", "javascript:alert(1)", "data:,hi"],
)
async def test_non_http_schemes_are_refused(make_http_client: HttpClientFactory, url: str) -> None:
    client = make_http_client(allow_private=True)  # even with the address check lifted
    with pytest.raises(SourceError) as caught:
        await client.get(url, untrusted=True)
    assert caught.value.kind is SourceErrorKind.BLOCKED


async def test_redirect_to_a_non_http_scheme_is_refused(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(allow_private=True)
    fake_server.route("GET", "/go", FakeResponse(status=302, headers={"Location": "file:///etc/passwd"}))

    with pytest.raises(SourceError) as caught:
        await client.get(fake_server.url + "/go", untrusted=True)

    assert caught.value.kind is SourceErrorKind.BLOCKED


def _chain(fake_server: FakeHTTPServer, hops: int) -> None:
    for index in range(hops):
        fake_server.route("GET", f"/hop{index}", FakeResponse(status=302, headers={"Location": f"/hop{index + 1}"}))
    fake_server.route("GET", f"/hop{hops}", FakeResponse(body="end"))


async def test_five_redirects_are_followed_six_are_not(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    resolver = MapResolver({"public.example": ["127.0.0.1"]})
    client = guarded_client(make_http_client, resolver)
    base = f"http://public.example:{fake_server.port}"
    _chain(fake_server, 6)

    five = await client.get(base + "/hop1", untrusted=True)
    fake_server.requests.clear()
    with pytest.raises(SourceError) as caught:
        await client.get(base + "/hop0", untrusted=True)

    assert five.content == b"end"
    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE
    assert "redirects" in str(caught.value)
    assert [r.path for r in fake_server.requests] == [f"/hop{i}" for i in range(6)]


async def test_allow_private_lifts_the_address_check(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    fake_server.route("GET", "/lan-feed", FakeResponse(body="self-hosted"))
    client = make_http_client(allow_private=True)

    response = await client.get(fake_server.url + "/lan-feed", untrusted=True)

    assert response.content == b"self-hosted"


async def test_trusted_endpoints_are_not_address_checked(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    # Configured API endpoints (e.g. a self-hosted RSSHub) are the operator's choice, not the user's.
    fake_server.route("GET", "/api", FakeResponse(body="configured"))
    client = make_http_client(allow_private=False)

    response = await client.get(fake_server.url + "/api")

    assert response.content == b"configured"


async def test_a_name_that_does_not_resolve_is_a_network_error(make_http_client: HttpClientFactory) -> None:
    client = make_http_client(allow_private=False, resolver=MapResolver({}))

    with pytest.raises(SourceError) as caught:
        await client.get("https://nowhere.example/feed.xml", untrusted=True)

    assert caught.value.kind is SourceErrorKind.NETWORK
