"""The page reader on recorded pages served by the fake server: main text, metadata, limits, refusals."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import pytest

from sources.base import SourceError, SourceErrorKind
from sources.http import HttpClient
from sources.page import read_page
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.sources.conftest import HttpClientFactory

Payload = Callable[[str], bytes]


async def test_article_text_and_metadata(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Payload
) -> None:
    path = "/tech/2026/11/20/deepseek-open-weight-reasoning-model"
    fake_server.route(
        "GET",
        path,
        FakeResponse(body=payload("page_article.html"), headers={"Content-Type": "text/html; charset=utf-8"}),
    )

    page = await read_page(fake_server.url + path + "?utm_source=rss#top", client=http_client)

    assert page.title == "DeepSeek releases open-weight reasoning model trained for a fraction of rivals' cost"
    assert page.author == "Priya Raman"
    assert page.published == date(2026, 11, 20)
    assert page.site_name == "The Daily Circuit"
    assert page.language == "en"
    assert page.description is not None and page.description.startswith("The Hangzhou lab says")
    assert page.content_type == "text/html"
    assert "published the weights of a new reasoning model" in page.text
    assert "Shares in several chipmakers fell" in page.text
    for boilerplate in ("cookies", "Subscribe for £1", "All rights reserved", "Privacy policy", "First! Can't wait"):
        assert boilerplate not in page.text
    assert page.truncated is False
    assert page.url == fake_server.url + path  # canonical: tracking and fragment gone
    assert fake_server.received(path)[0].headers["accept"].startswith("text/html")


async def test_text_is_capped(fake_server: FakeHTTPServer, http_client: HttpClient, payload: Payload) -> None:
    fake_server.route("GET", "/a", FakeResponse(body=payload("page_article.html"), content_type="text/html"))

    page = await read_page(fake_server.url + "/a", client=http_client, max_chars=200)

    assert len(page.text) == 200
    assert page.truncated is True


async def test_charset_from_meta_tag_and_chinese_language(
    fake_server: FakeHTTPServer, http_client: HttpClient, payload: Payload
) -> None:
    # The server declares no charset; the page's <meta> says GBK.
    fake_server.route(
        "GET", "/zh", FakeResponse(body=payload("page_gbk_zh.html"), headers={"Content-Type": "text/html"})
    )

    page = await read_page(fake_server.url + "/zh", client=http_client)

    assert page.title == "深度求索发布开源推理模型"
    assert "深度求索正式发布新一代开源推理模型" in page.text
    assert page.language == "zh"
    assert page.published == date(2026, 11, 21)
    assert "登录" not in page.text


async def test_plain_text_is_read_as_is(fake_server: FakeHTTPServer, http_client: HttpClient) -> None:
    fake_server.route(
        "GET",
        "/notes.txt",
        FakeResponse(
            body="Release notes\n\n- faster\n", headers={"Content-Language": "en-US"}, content_type="text/plain"
        ),
    )

    page = await read_page(fake_server.url + "/notes.txt", client=http_client)

    assert page.text == "Release notes\n\n- faster"
    assert page.content_type == "text/plain"
    assert page.language == "en"
    assert page.title is None


@pytest.mark.parametrize("content_type", ["application/pdf", "image/png", "application/octet-stream"])
async def test_other_content_types_are_refused(
    fake_server: FakeHTTPServer, http_client: HttpClient, content_type: str
) -> None:
    fake_server.route("GET", "/file", FakeResponse(body=b"%PDF-1.7 binary", content_type=content_type))

    with pytest.raises(SourceError) as caught:
        await read_page(fake_server.url + "/file", client=http_client)

    assert caught.value.kind is SourceErrorKind.BAD_RESPONSE
    assert content_type in str(caught.value)


async def test_page_with_no_main_content_falls_back_to_visible_text(
    fake_server: FakeHTTPServer, http_client: HttpClient
) -> None:
    fake_server.route(
        "GET", "/tiny", FakeResponse(body="<html><body><p>Just one line.</p></body></html>", content_type="text/html")
    )

    page = await read_page(fake_server.url + "/tiny", client=http_client)

    assert page.text == "Just one line."


async def test_pages_are_fetched_through_the_ssrf_guard(
    fake_server: FakeHTTPServer, make_http_client: HttpClientFactory, payload: Payload
) -> None:
    fake_server.route("GET", "/a", FakeResponse(body=payload("page_article.html"), content_type="text/html"))
    guarded = make_http_client(allow_private=False)

    with pytest.raises(SourceError) as caught:
        await read_page(fake_server.url + "/a", client=guarded)

    assert caught.value.kind is SourceErrorKind.BLOCKED
    assert fake_server.requests == []
