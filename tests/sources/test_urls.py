"""URL canonicalisation: one spelling per page, and no crash on junk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.urls import canonical_url, host_of, is_tracking_param

CASES = [
    # scheme and host case, default ports, fragment
    ("HTTPS://Example.COM/Path", "https://example.com/Path"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("https://example.com:8443/a", "https://example.com:8443/a"),
    ("http://example.com:443/a", "http://example.com:443/a"),
    ("https://example.com/a#section-2", "https://example.com/a"),
    ("https://example.com./a", "https://example.com/a"),
    # root path and trailing slashes
    ("https://example.com", "https://example.com/"),
    ("https://example.com/", "https://example.com/"),
    ("https://example.com/news/", "https://example.com/news"),
    ("https://example.com/news//", "https://example.com/news"),
    ("https://example.com/?q=1", "https://example.com/?q=1"),
    # tracking parameters
    (
        "https://example.com/story?utm_source=twitter&utm_medium=social&utm_campaign=x&id=7",
        "https://example.com/story?id=7",
    ),
    ("https://example.com/s?fbclid=IwAR0abc", "https://example.com/s"),
    ("https://example.com/s?gclid=abc&dclid=d&msclkid=m&yclid=y", "https://example.com/s"),
    ("https://example.com/s?mc_cid=1&mc_eid=2&_hsenc=3&_hsmi=4&igshid=5", "https://example.com/s"),
    ("https://twitter.com/x/status/1?ref_src=twsrc%5Etfw&s=20", "https://twitter.com/x/status/1?s=20"),
    ("https://item.taobao.com/item.htm?id=123&spm=a21wu.1", "https://item.taobao.com/item.htm?id=123"),
    ("https://example.com/s?UTM_Source=x&Page=2", "https://example.com/s?Page=2"),
    ("https://example.com/s?utm_source=x", "https://example.com/s"),
    # parameter order and encoding
    ("https://example.com/s?b=2&a=1&c=3", "https://example.com/s?a=1&b=2&c=3"),
    ("https://example.com/s?tag=b&tag=a", "https://example.com/s?tag=b&tag=a"),
    ("https://example.com/s?a=1&&b=2&", "https://example.com/s?a=1&b=2"),
    ("https://example.com/s?flag&a=1", "https://example.com/s?a=1&flag"),
    ("https://example.com/s?q=a%2fb", "https://example.com/s?q=a%2Fb"),
    ("https://example.com/%7Euser/a%2Db", "https://example.com/~user/a-b"),
    ("https://example.com/a b?q=x y", "https://example.com/a%20b?q=x%20y"),
    ("https://example.com/s?q=%E4%B8%AD%E6%96%87", "https://example.com/s?q=%E4%B8%AD%E6%96%87"),
    ("https://example.com/s?q=中文", "https://example.com/s?q=%E4%B8%AD%E6%96%87"),
    # a GitHub `ref` is content, not tracking
    ("https://github.com/o/r/blob/main/x.py?ref=v2", "https://github.com/o/r/blob/main/x.py?ref=v2"),
    # dot segments
    ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ("https://example.com/../a", "https://example.com/a"),
    # hosts
    ("https://BÜCHER.example/Straße", "https://xn--bcher-kva.example/Stra%C3%9Fe"),
    ("http://[2001:DB8::1]:80/x", "http://[2001:db8::1]/x"),
    ("https://user:pw@Example.com/", "https://user:pw@example.com/"),
    ("  https://example.com/a  ", "https://example.com/a"),
    # not http(s), or junk: returned stripped, never raised
    ("mailto:someone@example.com", "mailto:someone@example.com"),
    ("ftp://Example.com/A", "ftp://Example.com/A"),
    ("/relative/path", "/relative/path"),
    ("  not a url ", "not a url"),
    ("", ""),
    ("http://[::1", "http://[::1"),
    ("http://example.com:99999/", "http://example.com:99999/"),
    ("https://", "https://"),
]


@pytest.mark.parametrize(("url", "expected"), CASES)
def test_canonical_url(url: str, expected: str) -> None:
    assert canonical_url(url) == expected


@pytest.mark.parametrize(("url", "expected"), CASES)
def test_canonical_url_is_idempotent(url: str, expected: str) -> None:
    assert canonical_url(expected) == expected


@given(st.text())
def test_canonical_url_never_raises(text: str) -> None:
    assert isinstance(canonical_url(text), str)


URL_PIECES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20)


@given(host=st.from_regex(r"[a-zA-Z][a-zA-Z0-9-]{0,10}\.[a-z]{2,5}", fullmatch=True), path=URL_PIECES, query=URL_PIECES)
def test_canonical_url_is_stable_on_generated_web_urls(host: str, path: str, query: str) -> None:
    once = canonical_url(f"https://{host}/{path}?{query}")
    assert canonical_url(once) == once


def test_tracking_param_names() -> None:
    assert is_tracking_param("utm_content")
    assert is_tracking_param("FBCLID")
    assert not is_tracking_param("id")
    assert not is_tracking_param("ref")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://News.Example.com:8080/a", "news.example.com"),
        ("https://www.example.com/", "www.example.com"),
        ("http://[::1]:80/", "::1"),
        ("junk", ""),
        ("http://[bad", ""),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


def test_host_of_can_drop_www() -> None:
    assert host_of("https://WWW.example.com/a", strip_www=True) == "example.com"
