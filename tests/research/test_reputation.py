"""Who published an item, as the digest names it: a site, an account on a social site, or an address."""

from __future__ import annotations

from datetime import UTC, datetime

from research.reputation import outlet_of
from sources import Engagement, Item


def item(url: str, *, source: str = "rss", author: str | None = None) -> Item:
    return Item(
        id=url, source=source, url=url, title="A story", author=author, engagement=Engagement(),
        collected_at=datetime(2026, 11, 22, tzinfo=UTC),
    )  # fmt: skip


def test_a_feed_addressed_by_ip_or_a_bare_host_is_named_by_that_host() -> None:
    """#9.13: `http://127.0.0.1:8000/feed` was shown as the outlet "0.1"."""
    assert outlet_of(item("http://127.0.0.1:8000/posts/1")) == "127.0.0.1"
    assert outlet_of(item("http://[::1]:8000/posts/1")) == "::1"
    assert outlet_of(item("http://192.168.1.20/feed/item")) == "192.168.1.20"
    assert outlet_of(item("http://localhost:8080/item")) == "localhost"


def test_subdomains_of_one_outlet_are_one_site() -> None:
    assert outlet_of(item("https://blog.reuters.com/a")) == "reuters.com"
    assert outlet_of(item("https://www.reuters.com/b")) == "reuters.com"
    assert outlet_of(item("https://news.bbc.co.uk/x")) == "bbc.co.uk"
