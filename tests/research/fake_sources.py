"""In-test sources that keep the `Source` protocol, record the queries they got and answer from a script."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind

BASE_TIME = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def make_item(
    source: str,
    key: str,
    *,
    title: str | None = None,
    text: str = "",
    points: int | None = None,
    comments: int | None = None,
    hours_ago: float = 1.0,
    url: str | None = None,
    language: str | None = "en",
    query: str = "",
) -> Item:
    """An item with a stable id and URL derived from `key`."""
    return Item(
        id=f"{source}:{key}",
        source=source,
        url=url or f"https://example.com/{source}/{key}",
        title=title or f"Story {key}",
        text=text,
        engagement=Engagement(points=points, comments=comments),
        published=BASE_TIME - timedelta(hours=hours_ago),
        language=language,
        query=query,
    )


class RecordingSource:
    """Answers each query with `answer(query)`; remembers every query."""

    needs_key = False

    def __init__(
        self,
        name: str,
        answer: Callable[[SearchQuery], list[Item]] | None = None,
        *,
        skipped: int = 0,
        stopped: str | None = None,
        delay: float = 0.0,
    ) -> None:
        self.name = name
        self.queries: list[SearchQuery] = []
        self._answer = answer or (lambda q: [make_item(name, _key(q.text, i)) for i in range(3)])
        self._skipped = skipped
        self._stopped = stopped
        self._delay = delay

    def unavailable_reason(self) -> str | None:
        return None

    async def search(self, query: SearchQuery) -> SourceBatch:
        self.queries.append(query)
        if self._delay:
            await asyncio.sleep(self._delay)
        return SourceBatch(items=self._answer(query), skipped=self._skipped, stopped=self._stopped)


class FailingSource(RecordingSource):
    """Raises the given exception on every search."""

    def __init__(self, name: str, error: Exception) -> None:
        super().__init__(name)
        self._error = error

    async def search(self, query: SearchQuery) -> SourceBatch:
        self.queries.append(query)
        raise self._error


class SlowSource(RecordingSource):
    """Never answers within any reasonable timeout; records whether it was cancelled."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.cancelled = 0

    async def search(self, query: SearchQuery) -> SourceBatch:
        self.queries.append(query)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return SourceBatch()


class UnavailableSource(RecordingSource):
    """Off, with a reason, like a keyed source without its key."""

    needs_key = True

    def unavailable_reason(self) -> str | None:
        return "X_BEARER_TOKEN is not set"


def rate_limited(name: str) -> FailingSource:
    return FailingSource(name, SourceError(SourceErrorKind.RATE_LIMITED, "429 Too Many Requests", status=429))


def _key(text: str, index: int) -> str:
    return hashlib.sha1(f"{text}|{index}".encode()).hexdigest()[:10]
