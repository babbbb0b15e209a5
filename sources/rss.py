"""Any RSS, Atom or JSON Feed URL as a source: fetched once per run, filtered by each query's keywords.

One fetch serves every query asked of the feed within `REUSE_SECONDS` (a feed is one document, whatever the
query), and that fetch is a single request: no retry, since the next scheduled run is the retry and a broken
feed must not be hit again and again. A failed fetch is shared the same way, so a run asks a failing feed once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final
from urllib.parse import urlsplit

from sources.base import Item, SearchQuery, SourceBatch
from sources.config import SourcesConfig
from sources.feeds import in_window, matches_keywords, parse_feed
from sources.http import HttpClient

REUSE_SECONDS: Final = 600.0
"""How long one fetch of a feed (or its failure) answers further queries: longer than any run's searches."""


class FeedSource:
    """One feed. Its URL comes from a person or a model, so it is fetched behind the SSRF guard."""

    name = "rss"
    needs_key = False

    def __init__(self, *, client: HttpClient, config: SourcesConfig, feed_url: str) -> None:
        """`config` is taken like every source's; a feed needs nothing from it (the client holds the SSRF policy)."""
        self._client = client
        self.feed_url = feed_url.strip()
        self._fetch: asyncio.Task[SourceBatch] | None = None
        self._fetched_at = 0.0

    @property
    def spec(self) -> str:
        """How commands and reports name this feed: `rss:<url>`."""
        return f"rss:{self.feed_url}"

    def unavailable_reason(self) -> str | None:
        parts = urlsplit(self.feed_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"not an http(s) feed URL: {self.feed_url[:200]!r}"
        return None

    async def check_address(self) -> None:
        """Raise `SourceError(BLOCKED)` now if fetching this feed would be refused (`HttpClient.check_untrusted`)."""
        await self._client.check_untrusted(self.feed_url)

    async def search(self, query: SearchQuery) -> SourceBatch:
        batch = await self._items()
        matching = [
            item.model_copy(update={"query": query.text})
            for item in batch.items
            if matches_keywords(f"{item.title}\n{item.text}", query.text)
            and in_window(item.published, since=query.since, until=query.until)
        ]
        matching.sort(key=_newest_first)
        return SourceBatch(items=matching[: query.limit], skipped=batch.skipped)

    async def _items(self) -> SourceBatch:
        """Every item of the feed, from the one fetch shared by concurrent and later queries (or its error)."""
        now = time.monotonic()
        if self._fetch is None or (self._fetch.done() and now - self._fetched_at > REUSE_SECONDS):
            self._fetched_at = now
            self._fetch = asyncio.ensure_future(self._fetch_items())
            # Read the outcome even if no query waits for it any more (all cancelled), so it is never "unretrieved".
            self._fetch.add_done_callback(lambda task: task.cancelled() or task.exception())
        # Shielded: one query giving up (its time ran out) must not cancel the fetch the others wait for.
        return await asyncio.shield(self._fetch)

    async def _fetch_items(self) -> SourceBatch:
        # An unchanged feed answers 304 and the client hands back the body it stored with the ETag.
        response = await self._client.get(self.feed_url, conditional=True, untrusted=True, retries=0)
        if response.not_modified and not response.content:
            return SourceBatch()  # 304 but the body it validates was not kept: nothing to re-read
        # Parsing a big feed takes seconds: off the event loop, so the bot keeps answering meanwhile.
        return await asyncio.to_thread(
            parse_feed,
            response.content,
            source=self.name,
            query="",
            feed_url=response.url,
            content_type=response.content_type,
        )


def _newest_first(item: Item) -> tuple[bool, float]:
    # Undated entries go last; among dated ones the newest comes first.
    return (item.published is None, -item.published.timestamp() if item.published else 0.0)
