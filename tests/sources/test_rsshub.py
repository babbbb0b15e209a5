"""RSSHub: keyword routes per platform, trending lists filtered by keywords, a failing route is counted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote

import pytest

from sources.base import SearchQuery, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.rsshub import DEFAULT_PLATFORMS, RSSHUB_ROUTES, RssHubSource, parse_platforms
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory

KEYWORD = "DeepSeek"


def rsshub_config(server: FakeHTTPServer) -> SourcesConfig:
    return SourcesConfig(rsshub_url=server.url + "/")


def rss(payload: Callable[[str], bytes], name: str) -> FakeResponse:
    return FakeResponse(body=payload(name), headers={"Content-Type": "application/xml; charset=utf-8"})


def route_feeds(server: FakeHTTPServer, payload: Callable[[str], bytes], keyword: str = KEYWORD) -> None:
    server.route("GET", f"/weibo/keyword/{keyword}", rss(payload, "rsshub_weibo.xml"))
    server.route("GET", f"/bilibili/vsearch/{keyword}", rss(payload, "rsshub_bilibili.xml"))
    server.route("GET", "/zhihu/hot", rss(payload, "rsshub_zhihu_hot.xml"))


async def test_off_without_an_rsshub_url(http_client: HttpClient) -> None:
    source = RssHubSource(client=http_client, config=SourcesConfig())

    assert "RSSHUB_URL" in (source.unavailable_reason() or "")
    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text=KEYWORD))
    assert caught.value.kind is SourceErrorKind.UNAVAILABLE


async def test_keyword_routes_are_requested_and_merged(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    route_feeds(fake_server, payload)
    source = RssHubSource(client=http_client, config=rsshub_config(fake_server), platforms="weibo+bilibili")

    batch = await source.search(SearchQuery(text=KEYWORD, limit=20))

    paths = sorted(r.path for r in fake_server.requests)
    assert paths == [f"/bilibili/vsearch/{KEYWORD}", f"/weibo/keyword/{KEYWORD}"]
    assert all(r.query == {"limit": "20"} for r in fake_server.requests)
    assert batch.failed_routes == {}
    assert batch.skipped == 1  # the weibo entry with neither link nor text
    titles = [item.title for item in batch.items]
    assert "科技小王: DeepSeek 新模型开源了，中文写作能力提升明显" in titles
    assert "【实测】DeepSeek-V4 本地部署全流程，4090 能跑吗？" in titles
    weibo = next(item for item in batch.items if item.title.startswith("科技小王"))
    assert weibo.source == "rsshub"
    assert weibo.url == "https://weibo.com/1642634100/PaBcD1234"
    assert weibo.author == "科技小王"
    assert weibo.published == datetime(2026, 11, 21, 12, 40, 2, tzinfo=UTC)
    assert "<img" not in weibo.text and "已经在本地跑起来了" in weibo.text
    assert weibo.query == KEYWORD


async def test_non_ascii_keywords_are_percent_encoded_in_the_path(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    keyword = "深度求索 模型"
    fake_server.route("GET", f"/weibo/keyword/{keyword}", rss(payload, "rsshub_weibo.xml"))
    source = RssHubSource(client=http_client, config=rsshub_config(fake_server), platforms=["weibo"])

    batch = await source.search(SearchQuery(text=keyword))

    (request,) = fake_server.requests
    assert request.path == f"/weibo/keyword/{keyword}"  # aiohttp hands the fake the decoded path
    assert source.route_url("weibo", keyword).endswith("/weibo/keyword/" + quote(keyword, safe=""))
    assert len(batch.items) == 3


async def test_trending_lists_are_filtered_by_the_query(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    route_feeds(fake_server, payload)
    source = RssHubSource(client=http_client, config=rsshub_config(fake_server), platforms="zhihu")

    batch = await source.search(SearchQuery(text=KEYWORD))

    assert [item.url for item in batch.items] == ["https://www.zhihu.com/question/700000001"]


async def test_since_drops_old_posts(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    route_feeds(fake_server, payload)
    source = RssHubSource(client=http_client, config=rsshub_config(fake_server), platforms="weibo")

    batch = await source.search(SearchQuery(text=KEYWORD, since=datetime(2026, 11, 1, tzinfo=UTC)))

    assert len(batch.items) == 2
    assert all("OldPost01" not in item.url for item in batch.items)


async def test_one_failing_route_is_counted_not_fatal(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Callable[[str], bytes]
) -> None:
    route_feeds(fake_server, payload)
    fake_server.route(
        "GET",
        "/xiaohongshu/hot-search",
        FakeResponse(status=503, body=payload("rsshub_error.html"), content_type="text/html"),
    )
    fake_server.route("GET", "/douyin/hot-search", FakeResponse(status=200, body="<html>not a feed</html>"))
    source = RssHubSource(
        client=make_http_client(max_retries=1),
        config=rsshub_config(fake_server),
        platforms=["weibo", "xiaohongshu", "douyin"],
    )

    batch = await source.search(SearchQuery(text=KEYWORD))

    assert batch.failed_routes == {"xiaohongshu": SourceErrorKind.SERVER, "douyin": SourceErrorKind.BAD_RESPONSE}
    assert len(batch.items) == 3  # weibo still counts
    assert len(fake_server.received("/xiaohongshu/hot-search")) == 2  # the 503 was retried once


async def test_every_route_failing_raises(fake_server: FakeHTTPServer, make_http_client: HttpClientFactory) -> None:
    fake_server.route(
        "GET", f"/weibo/keyword/{KEYWORD}", FakeResponse(status=429, body="slow down", headers={"Retry-After": "300"})
    )
    source = RssHubSource(
        client=make_http_client(max_retry_wait=1.0), config=rsshub_config(fake_server), platforms="weibo"
    )

    with pytest.raises(SourceError) as caught:
        await source.search(SearchQuery(text=KEYWORD))

    assert caught.value.kind is SourceErrorKind.RATE_LIMITED
    assert caught.value.retry_after == 300
    assert "weibo" in str(caught.value)


def test_platform_option_parsing() -> None:
    assert parse_platforms("weibo+Zhihu") == ("weibo", "zhihu")
    assert parse_platforms("weibo,bilibili,weibo") == ("weibo", "bilibili")
    assert set(DEFAULT_PLATFORMS) <= set(RSSHUB_ROUTES)
    with pytest.raises(ValueError, match="choose from weibo, bilibili"):
        parse_platforms("weibo+myspace")
    with pytest.raises(ValueError):
        parse_platforms("")


def test_default_platforms_cover_the_chinese_platforms(http_client: HttpClient) -> None:
    source = RssHubSource(client=http_client, config=SourcesConfig(rsshub_url="http://rsshub.internal:1200"))
    assert source.platforms == DEFAULT_PLATFORMS
    assert {"weibo", "bilibili", "zhihu", "xiaohongshu", "douyin"} <= set(source.platforms)
    assert (
        source.route_url("bilibili", "AI 芯片")
        == "http://rsshub.internal:1200/bilibili/vsearch/AI%20%E8%8A%AF%E7%89%87"
    )


async def test_an_unchanged_route_costs_a_304_and_still_yields_its_items(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    etag = 'W/"rsshub-7a1c"'
    fake_server.route(
        "GET",
        f"/bilibili/vsearch/{KEYWORD}",
        [
            FakeResponse(body=payload("rsshub_bilibili.xml"), content_type="application/xml", headers={"ETag": etag}),
            FakeResponse(status=304, headers={"ETag": etag}),
        ],
    )
    source = RssHubSource(client=http_client, config=rsshub_config(fake_server), platforms="bilibili")

    first = await source.search(SearchQuery(text=KEYWORD))
    second = await source.search(SearchQuery(text=KEYWORD))

    requests = fake_server.received(f"/bilibili/vsearch/{KEYWORD}")
    assert "if-none-match" not in requests[0].headers
    assert requests[1].headers["if-none-match"] == etag
    assert (
        [i.url for i in second.items] == [i.url for i in first.items] == ["http://www.bilibili.com/video/BV1xK4y1a7Zq"]
    )
