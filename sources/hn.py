"""Hacker News stories and comments through the Algolia search API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sources.api import ApiSource
from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.feeds import as_utc, html_to_text, parse_iso_datetime, query_terms, title_from_text
from sources.http import HttpClient
from sources.urls import canonical_url

MAX_HITS_PER_PAGE = 1000
"""Algolia's HN index answers at most 1000 hits per query."""
MAX_KEYWORDS = 4
"""Algolia requires every word, so a long query finds nothing; keep the first few terms that matter."""
HN_ITEM_URL = "https://news.ycombinator.com/item?id={id}"


class AlgoliaHit(BaseModel):
    """The fields of one Algolia HN hit (story or comment) that become an Item."""

    model_config = ConfigDict(extra="ignore")

    objectID: str  # the API's name
    """HN item id."""
    title: str | None = None
    """Story title; comments have `story_title` instead."""
    url: str | None = None
    """The story's link; absent for Ask/Show HN text posts and for comments."""
    author: str | None = None
    story_text: str | None = None
    """HTML body of a text post."""
    comment_text: str | None = None
    """HTML body of a comment."""
    story_title: str | None = None
    """Title of the story a comment belongs to."""
    points: int | None = None
    num_comments: int | None = None
    created_at_i: int | None = None
    created_at: str | None = None


class AlgoliaSearchResponse(BaseModel):
    """The envelope of `/search` and `/search_by_date`; hits are validated one by one."""

    model_config = ConfigDict(extra="ignore")

    hits: list[dict[str, Any]]
    nbHits: int | None = None  # the API's name


def search_keywords(text: str) -> str:
    """At most `MAX_KEYWORDS` terms of the query, stop-words dropped, quoted phrases kept quoted."""
    terms = query_terms(text)[:MAX_KEYWORDS]
    return " ".join(f'"{term}"' if " " in term else term for term in terms)


def _numeric_filters(query: SearchQuery) -> str | None:
    filters = []
    if query.since is not None:
        filters.append(f"created_at_i>{int(as_utc(query.since).timestamp())}")
    if query.until is not None:
        filters.append(f"created_at_i<{int(as_utc(query.until).timestamp())}")
    return ",".join(filters) or None


def _non_negative(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def hit_to_item(hit: AlgoliaHit, *, query: str) -> Item | None:
    """The Item for one hit, or None when the hit has nothing to show (no title and no text)."""
    is_comment = hit.comment_text is not None and not hit.title
    text = html_to_text(hit.comment_text or hit.story_text or "")
    if is_comment:
        title = f"Re: {html_to_text(hit.story_title)}" if hit.story_title else title_from_text(text)
    else:
        title = html_to_text(hit.title or "")
    if not title and not text:
        return None
    # Comments and text posts have no outside link: their HN page is the item.
    link = hit.url if hit.url and not is_comment else HN_ITEM_URL.format(id=hit.objectID)
    if hit.created_at_i is not None:
        published: datetime | None = datetime.fromtimestamp(hit.created_at_i, UTC)
    else:
        published = parse_iso_datetime(hit.created_at)
    return Item(
        id=item_id("hn", native_id=hit.objectID),
        source="hn",
        url=canonical_url(link),
        title=title,
        text=text,
        author=hit.author or None,
        published=published,
        engagement=Engagement(
            points=_non_negative(hit.points),
            comments=None if is_comment else _non_negative(hit.num_comments),
        ),
        query=query,
    )


class HackerNewsSource(ApiSource):
    """Stories and comments from Hacker News, newest first when a time window is given."""

    name = "hn"

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._base_url = config.hn_api_url.rstrip("/")

    async def search(self, query: SearchQuery) -> SourceBatch:
        keywords = search_keywords(query.text)
        if not keywords:
            return SourceBatch()
        # With a time window the newest matter most; without one, Algolia's relevance ranking does.
        windowed = query.since is not None or query.until is not None
        endpoint = "/search_by_date" if windowed else "/search"
        params: dict[str, str | int] = {
            "query": keywords,
            "tags": "(story,comment)",
            "hitsPerPage": max(1, min(query.limit, MAX_HITS_PER_PAGE)),
        }
        numeric_filters = _numeric_filters(query)
        if numeric_filters:
            params["numericFilters"] = numeric_filters
        response = await self._client.get(self._base_url + endpoint, params=params)
        try:
            envelope = AlgoliaSearchResponse.model_validate(response.json())
        except ValidationError as exc:
            raise SourceError(
                SourceErrorKind.BAD_RESPONSE, f"unexpected Algolia answer: {exc.error_count()} errors"
            ) from exc
        items: list[Item] = []
        skipped = 0
        for raw in envelope.hits:
            try:
                item = hit_to_item(AlgoliaHit.model_validate(raw), query=query.text)
            except (ValidationError, ValueError, OverflowError, OSError):
                item = None
            if item is None:
                skipped += 1
            else:
                items.append(item)
        return SourceBatch(items=items[: query.limit], skipped=skipped)
