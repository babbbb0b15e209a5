"""Reddit search through the OAuth API (client-credentials app token); off without app credentials."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import BaseModel, Field, NonNegativeInt, ValidationError

from sources.api import ApiSource, Page, read_pages
from sources.base import (
    Engagement,
    Item,
    SearchQuery,
    SourceBatch,
    SourceError,
    SourceErrorKind,
    covering_window,
    item_id,
)
from sources.config import SourcesConfig
from sources.http import HttpClient, HttpResponse
from sources.urls import canonical_url

REDDIT_WEB = "https://www.reddit.com"
MAX_LIMIT = 100
"""Reddit's listing endpoints return at most 100 children per request."""
MAX_PAGES = 10
"""Reddit serves about 1000 results per listing, whatever the page size."""
TOKEN_EARLY_REFRESH = 60.0
"""Seconds before expiry at which a cached token is treated as expired, so no request races it."""


class RedditToken(BaseModel):
    """The access-token response of `POST /api/v1/access_token`."""

    access_token: str = Field(min_length=1)
    token_type: str = "bearer"  # noqa: S105 - a scheme name, not a secret
    expires_in: float = Field(default=3600, gt=0)
    """Lifetime in seconds (Reddit gives 86400 for app-only tokens)."""


class RedditPost(BaseModel):
    """The fields we use of a `t3` (link/self post) child of a search listing."""

    id: str = Field(min_length=1)
    title: str
    permalink: str = Field(min_length=1)
    """Site-relative path of the discussion, e.g. `/r/python/comments/abc/title/`."""
    created_utc: float
    selftext: str = ""
    url: str | None = None
    """Where a link post points (for a self post, the discussion itself)."""
    author: str | None = None
    subreddit: str | None = None
    score: int = 0
    num_comments: NonNegativeInt = 0
    is_self: bool = False


REDDIT_WINDOWS: Final = (
    ("hour", timedelta(hours=1)),
    ("day", timedelta(days=1)),
    ("week", timedelta(days=7)),
    ("month", timedelta(days=31)),
    ("year", timedelta(days=366)),
)
"""Reddit's `t` windows short of `all`, narrowest first."""


def reddit_time_window(since: datetime | None, *, now: datetime) -> str:
    """The coarsest of Reddit's `t` windows (hour … all) that still covers `since`."""
    return covering_window(since, REDDIT_WINDOWS, now=now) or "all"


class RedditSource(ApiSource):
    """Reddit posts matching the query, newest first."""

    name = "reddit"
    needs_key = True

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._token: str | None = None
        self._token_expires_at = 0.0
        self._token_lock = asyncio.Lock()

    def unavailable_reason(self) -> str | None:
        secret = self._config.reddit_client_secret
        if not self._config.reddit_client_id or secret is None or not secret.get_secret_value():
            return "Reddit needs approved OAuth app credentials: set REDDIT_CLIENT_ID and REDDIT_CLIENT_SECRET"
        return None

    async def search(self, query: SearchQuery) -> SourceBatch:
        self._ensure_available()
        return await read_pages(
            self.name,
            lambda request: self._fetch_page(query, after=request.cursor, size=min(MAX_LIMIT, request.wanted)),
            lambda response, _: self._parse_listing(response, query),
            limit=query.limit,
            max_pages=MAX_PAGES,
        )

    async def _fetch_page(self, query: SearchQuery, *, after: str | None, size: int) -> HttpResponse:
        try:
            token = await self._access_token()
            try:
                return await self._search_once(query, token, after=after, size=size)
            except SourceError as error:
                if error.status != 401:
                    raise
                # The token was revoked or expired early: fetch a new one, once.
                self._token = None
                return await self._search_once(query, await self._access_token(), after=after, size=size)
        except SourceError as error:
            raise self._scrubbed(error) from None

    async def _search_once(self, query: SearchQuery, token: str, *, after: str | None, size: int) -> HttpResponse:
        now = datetime.now(UTC)
        params: dict[str, str | int] = {
            "q": query.text,
            "sort": "new",
            "t": reddit_time_window(query.since, now=now),
            "type": "link",
            "limit": max(1, size),
            "raw_json": 1,  # plain text instead of HTML-escaped `&amp;` in titles
        }
        if after is not None:
            params["after"] = after
        return await self._client.get(
            f"{self._config.reddit_api_url.rstrip('/')}/search",
            params=params,
            headers={"Authorization": f"bearer {token}"},
        )

    async def _access_token(self) -> str:
        async with self._token_lock:
            if self._token is not None and time.monotonic() < self._token_expires_at:
                return self._token
            client_id = self._config.reddit_client_id or ""
            secret = self._config.reddit_client_secret
            try:
                response = await self._client.post(
                    self._config.reddit_auth_url,
                    data={"grant_type": "client_credentials"},
                    auth=(client_id, secret.get_secret_value() if secret else ""),
                )
            except SourceError as error:
                if error.status in (400, 401, 403):
                    raise SourceError(
                        SourceErrorKind.CLIENT,
                        f"reddit refused the app credentials (HTTP {error.status})",
                        status=error.status,
                    ) from None
                raise
            try:
                token = RedditToken.model_validate_json(response.content)
            except ValidationError:
                raise SourceError(
                    SourceErrorKind.BAD_RESPONSE, "reddit's token endpoint returned no usable token"
                ) from None
            self._token = token.access_token
            # A token that lives less than the margin is used for this request only.
            self._token_expires_at = time.monotonic() + token.expires_in - TOKEN_EARLY_REFRESH
            return self._token

    def _scrubbed(self, error: SourceError) -> SourceError:
        """The same error with any credential or token removed from its message."""
        message = str(error)
        secrets = [self._token or ""]
        if self._config.reddit_client_secret is not None:
            secrets.append(self._config.reddit_client_secret.get_secret_value())
        for secret in secrets:
            if secret:
                message = message.replace(secret, "***")
        return SourceError(error.kind, message, status=error.status, retry_after=error.retry_after)

    def _parse_listing(self, response: HttpResponse, query: SearchQuery) -> Page[str]:
        try:
            data = response.json()["data"]
            children = data["children"]
            after = data.get("after")
        except (KeyError, TypeError, AttributeError):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "reddit returned something other than a listing") from None
        if not isinstance(children, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "reddit listing has no children list")
        items: list[Item] = []
        skipped = 0
        reached_since = False
        for child in children:
            try:
                if child.get("kind") != "t3":
                    raise ValueError("not a post")
                item = self._to_item(RedditPost.model_validate(child["data"]), query)
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped += 1
                continue
            published = item.published
            if query.since is not None and published is not None and published < query.since:
                reached_since = True  # sorted newest first: everything after this is older
                continue
            if query.until is not None and published is not None and published > query.until:
                continue
            items.append(item)
        # A post older than `since` was seen: later pages hold nothing wanted.
        more = isinstance(after, str) and bool(after) and not reached_since
        return Page(items=items, skipped=skipped, next=after if more else None)

    def _to_item(self, post: RedditPost, query: SearchQuery) -> Item:
        discussion = canonical_url(REDDIT_WEB + "/" + post.permalink.lstrip("/"))
        text = post.selftext.strip()
        if not post.is_self and post.url and not text:
            text = f"Link: {post.url}"
        return Item(
            id=item_id(self.name, native_id=post.id),
            source=self.name,
            url=discussion,
            title=post.title.strip(),
            text=text,
            author=post.author if post.author and post.author != "[deleted]" else None,
            published=datetime.fromtimestamp(post.created_utc, UTC),
            engagement=Engagement(points=max(post.score, 0), comments=post.num_comments),
            query=query.text,
        )
