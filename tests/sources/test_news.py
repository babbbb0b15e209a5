"""Google News RSS search against a fake server replaying recorded feeds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from sources.base import SearchQuery, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.news import GoogleNewsSource, decode_google_news_link, edition, time_operators
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory

REUTERS_LINK = (
    "https://news.google.com/rss/articles/"
    "CBMiQWh0dHBzOi8vd3d3LnJldXRlcnMuY29tL3RlY2hub2xvZ3kvZGVlcHNlZWstdjQtbGF1bmNoLTIwMjYtMTEtMjAv0gEA?oc=5"
)
NEW_STYLE_LINK = (
    "https://news.google.com/rss/articles/"
    "CBMiN0FVX3lxTE9zOXEyTGsxYVdaMGZZcThlOWtIM20ydlB6N1huQnFSNHREY0p3RWVVb0E1aUc2bE3SAQA?oc=5"
)


def _source(fake_server: FakeHTTPServer, client: HttpClient) -> GoogleNewsSource:
    return GoogleNewsSource(client=client, config=SourcesConfig(news_rss_url=fake_server.url + "/rss"))


def _rss(body: bytes) -> FakeResponse:
    return FakeResponse(body=body, headers={"Content-Type": "application/xml; charset=UTF-8"})


async def test_default_edition_outlets_and_resolved_links(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/rss/search", _rss(payload("news_search.xml")))

    batch = await _source(fake_server, http_client).search(SearchQuery(text="DeepSeek"))

    (request,) = fake_server.received("/rss/search")
    assert request.query == {"q": "DeepSeek", "hl": "en-US", "gl": "US", "ceid": "US:en"}
    assert batch.skipped == 1  # the entry without a link
    reuters, verge, handelsblatt, daily = batch.items

    # Old-style article ids carry the publisher URL: decoded for free, then canonicalised.
    assert reuters.url == "https://www.reuters.com/technology/deepseek-v4-launch-2026-11-20"
    assert reuters.id == item_id("news", canonical=reuters.url)
    assert reuters.title == "DeepSeek unveils V4 model, shaking up AI stocks"
    assert reuters.author == "Reuters"
    assert reuters.text == ""  # the description only repeated headline and outlet
    assert reuters.published == datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    assert (reuters.language, reuters.language_hint) == (None, "en")  # the edition's: told from the text later
    assert reuters.source == "news"

    assert verge.url == "https://www.theverge.com/2026/11/20/deepseek-v4-open-weights"  # utm dropped
    assert verge.title == "DeepSeek's V4 is here, and it's open weights"
    assert verge.author == "The Verge"
    # Related coverage stays as text, the item's own headline does not.
    assert verge.text == "Nvidia shares slip as DeepSeek releases cheaper model CNBC"

    # New-style ids need a request to Google per link: kept as Google's redirect.
    assert handelsblatt.url == NEW_STYLE_LINK
    assert handelsblatt.title == "Nvidia-Aktie fällt nach DeepSeek-Start – was Anleger wissen müssen"
    assert handelsblatt.author == "Handelsblatt"

    # Only the " - Outlet" suffix goes; a dash inside the headline stays.
    assert daily.title == "DeepSeek - Wikipedia roundup"


async def test_language_and_region_choose_the_edition(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/rss/search", _rss(payload("news_search_zh.xml")))

    batch = await _source(fake_server, http_client).search(SearchQuery(text="深度求索", language="zh"))

    (request,) = fake_server.received("/rss/search")
    assert request.query == {"q": "深度求索", "hl": "zh-CN", "gl": "CN", "ceid": "CN:zh-Hans"}
    (item,) = batch.items
    assert item.title == "深度求索发布V4模型 价格再降一半"
    assert item.author == "新浪财经"
    assert (item.language, item.language_hint) == (None, "zh")
    assert item.url == NEW_STYLE_LINK.replace("?oc=5", "?hl=zh-CN&oc=5")


@pytest.mark.parametrize(
    ("language", "region", "expected"),
    [
        (None, None, ("en-US", "US", "US:en")),
        ("en", "GB", ("en-GB", "GB", "GB:en")),
        ("zh", "TW", ("zh-TW", "TW", "TW:zh-Hant")),
        ("ja", None, ("ja", "JP", "JP:ja")),
        ("de", None, ("de", "DE", "DE:de")),
        ("pt", None, ("pt-BR", "BR", "BR:pt-419")),
        ("es", "MX", ("es-MX", "MX", "MX:es-419")),
    ],
)
def test_edition(language: str | None, region: str | None, expected: tuple[str, str, str]) -> None:
    assert edition(language, region) == expected


async def test_explicit_window_uses_after_before_and_filters_exactly(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/rss/search", _rss(payload("news_search.xml")))
    since = datetime(2026, 11, 19, tzinfo=UTC)
    until = datetime(2026, 11, 20, 7, 50, tzinfo=UTC)

    batch = await _source(fake_server, http_client).search(SearchQuery(text="DeepSeek", since=since, until=until))

    (request,) = fake_server.received("/rss/search")
    assert request.query["q"] == "DeepSeek after:2026-11-19 before:2026-11-21"
    # Reuters (08:00) is after `until`, the Nov 2 roundup before `since`.
    assert [item.author for item in batch.items] == ["The Verge", "Handelsblatt"]


def test_time_operators_for_recent_windows() -> None:
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    assert time_operators(SearchQuery(text="x", since=now - timedelta(minutes=90)), now=now) == ["when:2h"]
    assert time_operators(SearchQuery(text="x", since=now - timedelta(days=9, hours=23)), now=now) == ["when:10d"]
    assert time_operators(SearchQuery(text="x", since=now - timedelta(days=60)), now=now) == ["after:2026-09-21"]
    # A naive datetime counts as UTC.
    assert time_operators(SearchQuery(text="x", since=datetime(2026, 11, 20, 11, 0)), now=now) == ["when:1h"]
    assert time_operators(SearchQuery(text="x"), now=now) == []


async def test_recent_since_sends_when_operator(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route("GET", "/rss/search", _rss(payload("news_empty.xml")))
    since = datetime.now(UTC) - timedelta(minutes=90)

    batch = await _source(fake_server, http_client).search(SearchQuery(text="zzqxv flurbl", since=since))

    (request,) = fake_server.received("/rss/search")
    assert request.query["q"] == "zzqxv flurbl when:2h"
    assert batch.items == []
    assert batch.skipped == 0


def test_decode_google_news_link() -> None:
    assert decode_google_news_link(REUTERS_LINK) == "https://www.reuters.com/technology/deepseek-v4-launch-2026-11-20/"
    assert decode_google_news_link(NEW_STYLE_LINK) is None
    assert decode_google_news_link("https://news.google.com/rss/articles/%%%not-base64") is None
    assert decode_google_news_link("https://news.google.com/rss/articles/CBMi") is None
    assert decode_google_news_link("https://www.reuters.com/technology/x") is None


async def test_rate_limit_then_success(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET",
        "/rss/search",
        [FakeResponse(status=429, headers={"Retry-After": "0"}), _rss(payload("news_search.xml"))],
    )

    batch = await _source(fake_server, http_client).search(SearchQuery(text="DeepSeek"))

    assert len(fake_server.received("/rss/search")) == 2
    assert len(batch.items) == 4


async def test_server_error_and_garbage_are_reported(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory
) -> None:
    client = make_http_client(max_retries=0)
    fake_server.route("GET", "/rss/search", FakeResponse(status=500, body="Internal Server Error"))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, client).search(SearchQuery(text="DeepSeek"))
    assert raised.value.kind is SourceErrorKind.SERVER

    # Google's consent or captcha page instead of a feed.
    fake_server.route("GET", "/rss/search", FakeResponse(body="<html><body>Before you continue</body></html>"))
    with pytest.raises(SourceError) as raised:
        await _source(fake_server, client).search(SearchQuery(text="DeepSeek"))
    assert raised.value.kind is SourceErrorKind.BAD_RESPONSE
