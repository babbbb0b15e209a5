"""The registry: every named source built, `--sources` specs resolved, off sources reported with reasons."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import SecretStr

from sources.base import SearchQuery, Source, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.registry import (
    DEFAULT_SOURCES,
    SOURCE_NAMES,
    SourcesUnavailableError,
    build_sources,
    feed_factory,
    resolve_source_specs,
    rsshub_factory,
    source_status,
)
from sources.rss import FeedSource
from sources.rsshub import RssHubSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse

KEYED = {"reddit", "openalex", "x", "rsshub"}


def test_every_named_source_is_built_and_keeps_the_protocol(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())

    assert list(sources) == list(SOURCE_NAMES)
    for name, source in sources.items():
        assert isinstance(source, Source)
        assert source.name == name
    assert {
        "hn",
        "news",
        "arxiv",
        "github",
        "reddit",
        "wikipedia",
        "openalex",
        "semanticscholar",
        "web",
        "x",
        "rsshub",
    } == set(SOURCE_NAMES)


def test_defaults_are_keyless_and_usable_out_of_the_box(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())

    assert set(DEFAULT_SOURCES) <= set(SOURCE_NAMES)
    assert not set(DEFAULT_SOURCES) & KEYED
    resolved = resolve_source_specs(",".join(DEFAULT_SOURCES), available=sources)
    assert [s.name for s in resolved] == list(DEFAULT_SOURCES)


def test_status_lists_why_keyed_sources_are_off(http_client: HttpClient) -> None:
    status = dict(source_status(build_sources(client=http_client, config=SourcesConfig())))

    assert {name for name, reason in status.items() if reason is not None} == KEYED
    assert "REDDIT_CLIENT_ID" in (status["reddit"] or "")
    assert "OPENALEX_API_KEY" in (status["openalex"] or "")
    assert "X_BEARER_TOKEN" in (status["x"] or "")
    assert "RSSHUB_URL" in (status["rsshub"] or "")


def test_keys_turn_sources_on(http_client: HttpClient) -> None:
    config = SourcesConfig(
        reddit_client_id="app",
        reddit_client_secret=SecretStr("secret"),
        openalex_api_key=SecretStr("key"),
        x_bearer_token=SecretStr("token"),
        rsshub_url="http://rsshub.internal:1200",
    )

    status = source_status(build_sources(client=http_client, config=config).values())

    assert all(reason is None for _, reason in status)


def test_spec_parsing_keeps_order_and_drops_repeats(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())

    resolved = resolve_source_specs(" hn , News,wikipedia,hn", available=sources)
    assert [s.name for s in resolved] == ["hn", "news", "wikipedia"]
    assert resolve_source_specs(["arxiv", "github"], available=sources) == [sources["arxiv"], sources["github"]]


def test_unknown_names_list_the_valid_ones(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())

    with pytest.raises(ValueError) as caught:
        resolve_source_specs("hn,myspace,twitter", available=sources)

    message = str(caught.value)
    assert "myspace" in message and "twitter" in message
    for name in SOURCE_NAMES:
        assert name in message
    assert "rss:<feed url>" in message


def test_off_sources_are_reported_with_their_reason_or_kept_on_request(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())

    with pytest.raises(SourcesUnavailableError) as caught:
        resolve_source_specs("hn,x,reddit", available=sources)
    assert [name for name, _ in caught.value.off] == ["x", "reddit"]
    assert "x is off" in str(caught.value) and "X_BEARER_TOKEN" in str(caught.value)
    assert isinstance(caught.value, ValueError)

    kept = resolve_source_specs("hn,x", available=sources, on_unavailable="keep")
    assert [s.name for s in kept] == ["hn", "x"]


async def test_rss_specs_make_one_feed_source_per_url_that_really_fetches(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Callable[[str], bytes]
) -> None:
    fake_server.route(
        "GET", "/a/feed.xml", FakeResponse(body=payload("rsshub_weibo.xml"), content_type="application/rss+xml")
    )
    config = SourcesConfig(allow_private_urls=True)
    sources = build_sources(client=http_client, config=config)
    first, second = f"{fake_server.url}/a/feed.xml", f"{fake_server.url}/b/feed.xml"

    resolved = resolve_source_specs(
        f"hn,rss:{first},rss:{second},rss:{first}",
        available=sources,
        make_feed=feed_factory(client=http_client, config=config),
    )

    assert [s.name for s in resolved] == ["hn", "rss", "rss"]
    feeds = [s for s in resolved if isinstance(s, FeedSource)]
    assert [f.feed_url for f in feeds] == [first, second]
    batch = await feeds[0].search(SearchQuery(text="DeepSeek"))
    assert batch.items and fake_server.received("/a/feed.xml")


def test_rss_specs_need_a_factory_and_an_http_url(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())
    make_feed = feed_factory(client=http_client, config=SourcesConfig())

    with pytest.raises(ValueError, match="feed factory"):
        resolve_source_specs("rss:https://example.org/feed.xml", available=sources)
    with pytest.raises(ValueError, match="http"):
        resolve_source_specs("rss:file:///etc/passwd", available=sources, make_feed=make_feed)


def test_rsshub_platform_specs(http_client: HttpClient) -> None:
    config = SourcesConfig(rsshub_url="http://rsshub.internal:1200")
    sources = build_sources(client=http_client, config=config)
    make_rsshub = rsshub_factory(client=http_client, config=config)

    (source,) = resolve_source_specs("rsshub:weibo+zhihu", available=sources, make_rsshub=make_rsshub)

    assert isinstance(source, RssHubSource) and source.platforms == ("weibo", "zhihu")
    with pytest.raises(ValueError, match="myspace"):
        resolve_source_specs("rsshub:myspace", available=sources, make_rsshub=make_rsshub)


async def test_an_off_source_kept_in_the_list_fails_with_its_reason(http_client: HttpClient) -> None:
    sources = build_sources(client=http_client, config=SourcesConfig())
    (x_source,) = resolve_source_specs("x", available=sources, on_unavailable="keep")

    with pytest.raises(SourceError) as caught:
        await x_source.search(SearchQuery(text="deepseek"))

    assert caught.value.kind is SourceErrorKind.UNAVAILABLE and "X_BEARER_TOKEN" in str(caught.value)
