"""Chinese social platforms (Weibo, Bilibili, Tieba, Zhihu, Xiaohongshu, Douyin) through a self-hosted RSSHub."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

from sources.base import Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind
from sources.config import SourcesConfig

if TYPE_CHECKING:  # settings read `parse_platforms` from here: the feed parser and HTTP client load at first search
    from sources.http import HttpClient

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class RssHubRoute:
    """One RSSHub route used for a platform.

    RSSHub has real keyword-search routes only for some platforms; for the others (Zhihu, Xiaohongshu,
    Douyin) the best it offers is a trending list, which is fetched and filtered by the query's keywords.
    """

    path: str
    """Route path; `{keyword}` is replaced by the URL-encoded query text."""
    keyword_search: bool
    """True when RSSHub searches the platform for us; False when we filter a fixed list ourselves."""


# Route paths as declared in RSSHub's lib/routes/<namespace>/*.ts (namespace prefix included).
RSSHUB_ROUTES: dict[str, RssHubRoute] = {
    "weibo": RssHubRoute(path="/weibo/keyword/{keyword}", keyword_search=True),
    "bilibili": RssHubRoute(path="/bilibili/vsearch/{keyword}", keyword_search=True),
    "tieba": RssHubRoute(path="/baidu/tieba/search/{keyword}", keyword_search=True),
    "zhihu": RssHubRoute(path="/zhihu/hot", keyword_search=False),
    "xiaohongshu": RssHubRoute(path="/xiaohongshu/hot-search", keyword_search=False),
    "douyin": RssHubRoute(path="/douyin/hot-search", keyword_search=False),
}
DEFAULT_PLATFORMS: tuple[str, ...] = ("weibo", "bilibili", "zhihu", "xiaohongshu", "douyin")
"""Tieba's search route needs a Baidu cookie on most RSSHub instances, so it is opt-in."""


@dataclass(frozen=True, kw_only=True)
class RssHubBatch(SourceBatch):
    """A `SourceBatch` that also says which platform routes failed (the others still count)."""

    failed_routes: dict[str, SourceErrorKind] = field(default_factory=dict)
    """Platform name → why its route failed."""


def parse_platforms(spec: str | Sequence[str]) -> tuple[str, ...]:
    """Platform names from `"weibo+bilibili"`, `"weibo,zhihu"` or a list; unknown names raise ValueError."""
    names = spec.replace("+", ",").split(",") if isinstance(spec, str) else list(spec)
    platforms = tuple(dict.fromkeys(n.strip().lower() for n in names if n.strip()))
    unknown = [p for p in platforms if p not in RSSHUB_ROUTES]
    if unknown or not platforms:
        raise ValueError(
            f"unknown RSSHub platform(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(RSSHUB_ROUTES)}"
        )
    return platforms


class RssHubSource:
    """Keyword routes of a self-hosted RSSHub, one request per platform; a failing platform is counted."""

    name = "rsshub"
    needs_key = True

    def __init__(
        self,
        *,
        client: HttpClient,
        config: SourcesConfig,
        platforms: str | Sequence[str] = DEFAULT_PLATFORMS,
    ) -> None:
        self._client = client
        self._config = config
        self.platforms = parse_platforms(platforms)

    @property
    def spec(self) -> str:
        """How commands and reports name this source: `rsshub:weibo+zhihu`."""
        return "rsshub:" + "+".join(self.platforms)

    def unavailable_reason(self) -> str | None:
        if not self._config.rsshub_url:
            return "RSSHub needs a self-hosted instance: set RSSHUB_URL"
        return None

    def route_url(self, platform: str, keyword: str) -> str:
        """The feed URL of one platform's route for a keyword."""
        base = (self._config.rsshub_url or "").rstrip("/")
        path = RSSHUB_ROUTES[platform].path.replace("{keyword}", quote(keyword.strip(), safe=""))
        return base + path

    async def search(self, query: SearchQuery) -> RssHubBatch:
        reason = self.unavailable_reason()
        if reason is not None:
            raise SourceError(SourceErrorKind.UNAVAILABLE, reason)
        if not query.text.strip():
            raise SourceError(SourceErrorKind.CLIENT, "RSSHub keyword routes need a non-empty query")
        outcomes = await asyncio.gather(
            *(self._search_platform(platform, query) for platform in self.platforms), return_exceptions=True
        )
        items: list[Item] = []
        skipped = 0
        failures: dict[str, SourceError] = {}
        for platform, outcome in zip(self.platforms, outcomes, strict=True):
            if isinstance(outcome, SourceError):
                failures[platform] = outcome
                logger.warning("rsshub: %s route failed (%s): %s", platform, outcome.kind, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                items.extend(outcome.items)
                skipped += outcome.skipped
        if failures and len(failures) == len(self.platforms):
            first = next(iter(failures.values()))
            raise SourceError(
                first.kind,
                f"every RSSHub route failed ({', '.join(failures)}): {first}",
                status=first.status,
                retry_after=first.retry_after,
            )
        return RssHubBatch(
            items=items,
            skipped=skipped,
            failed_routes={platform: error.kind for platform, error in failures.items()},
        )

    async def _search_platform(self, platform: str, query: SearchQuery) -> SourceBatch:
        from sources.feeds import in_window, matches_keywords, parse_feed_response

        url = self.route_url(platform, query.text)
        # `limit` is one of RSSHub's common parameters, understood by every route.
        response = await self._client.get(url, params={"limit": max(1, query.limit)}, conditional=True)
        batch = parse_feed_response(response, source=self.name, query=query.text, feed_url=url)
        route = RSSHUB_ROUTES[platform]
        kept = [
            item
            for item in batch.items
            if in_window(item.published, since=query.since, until=query.until)
            and (route.keyword_search or matches_keywords(f"{item.title}\n{item.text}", query.text))
        ]
        return SourceBatch(items=kept[: query.limit], skipped=batch.skipped)
