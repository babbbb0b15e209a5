"""Wikipedia article search through the MediaWiki API of the query's language edition, one request at a time."""

from __future__ import annotations

import logging
import re
from datetime import datetime
from urllib.parse import quote, urlsplit

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, ValidationError

from sources.api import ApiSource, json_object
from sources.base import Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.feeds import html_to_text
from sources.http import HostPolicy, HttpClient
from sources.urls import canonical_url

logger = logging.getLogger(__name__)

DEFAULT_LANGUAGE = "en"
MAX_LIMIT = 500
"""MediaWiki caps `srlimit` at 500 for ordinary clients."""
WIKIPEDIA_POLICY = HostPolicy(concurrency=1, min_interval=0.0)
"""Wikimedia's API etiquette: requests in series, not in parallel."""
_EDITION_CODE = re.compile(r"^[a-z]{2,12}$")
"""Wikipedia edition codes (`en`, `zh`, `simple`, ...); anything else must not reach a host name."""


class WikipediaHit(BaseModel):
    """One entry of `query.search` (formatversion=2)."""

    pageid: int = Field(gt=0)
    title: str = Field(min_length=1)
    snippet: str = ""
    """HTML: matches wrapped in `<span class="searchmatch">`."""
    timestamp: AwareDatetime | None = None
    """When the page was last edited."""
    wordcount: NonNegativeInt | None = None


def wikipedia_edition(language: str | None) -> str:
    """The edition code for a query language (`zh-Hans` → `zh`); `en` when unknown or unusable."""
    if not language:
        return DEFAULT_LANGUAGE
    # Script and region subtags are not editions (`zh-Hans` reads the `zh` edition).
    code = language.strip().lower().replace("_", "-").split("-", 1)[0]
    return code if _EDITION_CODE.match(code) else DEFAULT_LANGUAGE


def article_url(edition: str, title: str) -> str:
    """The public article URL for a title in an edition."""
    return f"https://{edition}.wikipedia.org/wiki/{quote(title.replace(' ', '_'), safe='/:()_,')}"


class WikipediaSource(ApiSource):
    """Wikipedia articles for background on a topic; `published` is the time of the last edit."""

    name = "wikipedia"

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._policed_hosts: set[str] = set()

    async def search(self, query: SearchQuery) -> SourceBatch:
        edition = wikipedia_edition(query.language)
        endpoint = self._config.wikipedia_api_url.replace("{lang}", edition)
        host = (urlsplit(endpoint).hostname or "").lower()
        if host and host not in self._policed_hosts:
            self._client.set_host_policy(host, WIKIPEDIA_POLICY)
            self._policed_hosts.add(host)
        response = await self._client.get(
            endpoint,
            params={
                "action": "query",
                "list": "search",
                "srsearch": query.text,
                "srlimit": max(1, min(query.limit, MAX_LIMIT)),
                "srprop": "snippet|timestamp|wordcount",
                "format": "json",
                "formatversion": 2,
                "utf8": 1,
            },
        )
        document = json_object(response.content, who="wikipedia")
        error = document.get("error")
        if isinstance(error, dict):
            # MediaWiki reports errors with HTTP 200 and an `error` object.
            code = error.get("code", "unknown")
            kind = SourceErrorKind.RATE_LIMITED if code in ("ratelimited", "maxlag") else SourceErrorKind.CLIENT
            raise SourceError(kind, f"wikipedia API error {code}: {str(error.get('info', ''))[:200]}")
        hits = (document.get("query") or {}).get("search")
        if hits is None:
            return SourceBatch()
        if not isinstance(hits, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "wikipedia search results are not a list")
        items: list[Item] = []
        skipped = 0
        for raw in hits:
            try:
                hit = WikipediaHit.model_validate(raw)
                items.append(self._to_item(hit, edition=edition, query=query))
            except (ValidationError, ValueError):
                skipped += 1
        if skipped:
            logger.info("wikipedia: skipped %d malformed hits", skipped)
        return SourceBatch(items=items, skipped=skipped)

    def _to_item(self, hit: WikipediaHit, *, edition: str, query: SearchQuery) -> Item:
        published: datetime | None = hit.timestamp
        return Item(
            id=item_id(self.name, native_id=f"{edition}:{hit.pageid}"),
            source=self.name,
            url=canonical_url(article_url(edition, hit.title)),
            title=hit.title,
            text=html_to_text(hit.snippet),
            published=published,
            language=edition,
            query=query.text,
        )
