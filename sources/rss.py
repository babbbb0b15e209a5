"""Any RSS, Atom or JSON Feed URL as a source: fetched conditionally, filtered by the query's keywords."""

from __future__ import annotations

from urllib.parse import urlsplit

from sources.base import Item, SearchQuery, SourceBatch
from sources.config import SourcesConfig
from sources.feeds import in_window, matches_keywords, parse_feed
from sources.http import HttpClient


class FeedSource:
    """One feed. Its URL comes from a person or a model, so it is fetched behind the SSRF guard."""

    name = "rss"
    needs_key = False

    def __init__(self, *, client: HttpClient, config: SourcesConfig, feed_url: str) -> None:
        """`config` is taken like every source's; a feed needs nothing from it (the client holds the SSRF policy)."""
        self._client = client
        self.feed_url = feed_url.strip()

    def unavailable_reason(self) -> str | None:
        parts = urlsplit(self.feed_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"not an http(s) feed URL: {self.feed_url[:200]!r}"
        return None

    async def search(self, query: SearchQuery) -> SourceBatch:
        # An unchanged feed answers 304 and the client hands back the body it stored with the ETag.
        response = await self._client.get(self.feed_url, conditional=True, untrusted=True)
        if response.not_modified and not response.content:
            return SourceBatch()  # 304 but the body it validates was not kept: nothing to re-read
        batch = parse_feed(response.content, source=self.name, query=query.text, feed_url=response.url)
        matching = [
            item
            for item in batch.items
            if matches_keywords(f"{item.title}\n{item.text}", query.text)
            and in_window(item.published, since=query.since, until=query.until)
        ]
        matching.sort(key=_newest_first)
        return SourceBatch(items=matching[: query.limit], skipped=batch.skipped)


def _newest_first(item: Item) -> tuple[bool, float]:
    # Undated entries go last; among dated ones the newest comes first.
    return (item.published is None, -item.published.timestamp() if item.published else 0.0)
