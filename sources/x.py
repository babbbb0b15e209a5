"""Posts from the X API v2 recent search (last 7 days); pay-per-use, off without a bearer token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import AwareDatetime, BaseModel, Field, NonNegativeInt, ValidationError

from sources.api import ApiSource, Page, PageRequest, json_object, parsed_items, read_pages
from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.feeds import title_from_text
from sources.urls import canonical_url

MIN_RESULTS, MAX_RESULTS = 10, 100
"""`max_results` must lie in 10..100 for recent search."""
RECENT_WINDOW = timedelta(days=7)
WINDOW_MARGIN = timedelta(minutes=1)
"""Kept off the 7-day edge: a `start_time` a second too old is a 400."""
END_TIME_LAG = timedelta(seconds=10)
"""`end_time` must be at least 10 seconds before the request."""
MAX_QUERY_CHARS = 512
TWEET_FIELDS = "created_at,public_metrics,lang,author_id"
MAX_PAGES = 5
"""At most 500 posts per search: X bills every post read."""


class XPublicMetrics(BaseModel):
    retweet_count: NonNegativeInt = 0
    reply_count: NonNegativeInt = 0
    like_count: NonNegativeInt = 0
    quote_count: NonNegativeInt = 0


class XTweet(BaseModel):
    """One post of `data`, with the fields we ask for."""

    id: str = Field(min_length=1, pattern=r"^\d+$")
    text: str = Field(min_length=1)
    created_at: AwareDatetime | None = None
    author_id: str | None = None
    lang: str | None = None
    """BCP 47 tag; `und` when X could not tell, `qme`/`zxx` for media or no language."""
    public_metrics: XPublicMetrics | None = None


class XUser(BaseModel):
    id: str
    username: str = Field(min_length=1)
    name: str | None = None


def search_window(since: datetime | None, until: datetime | None, *, now: datetime) -> tuple[datetime, datetime | None]:
    """`start_time` clamped into the 7 days recent search allows, and `end_time` if it is worth sending."""
    oldest = now - RECENT_WINDOW + WINDOW_MARGIN
    start = oldest if since is None else min(max(since, oldest), now - END_TIME_LAG)
    end: datetime | None = None
    if until is not None and until < now - END_TIME_LAG:
        end = max(until, start + timedelta(seconds=1))
    return start, end


def _x_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _language(tag: str | None) -> str | None:
    if not tag or tag in ("und", "qme", "qst", "qam", "qct", "qht", "zxx"):
        return None
    return tag.split("-", 1)[0].lower()


class XSource(ApiSource):
    """Recent posts on X matching the query; likes, retweets and replies as engagement."""

    name = "x"
    needs_key = True
    key_setting = "x_bearer_token"
    missing_key = "X is pay-per-use and needs a bearer token: set X_BEARER_TOKEN"

    async def search(self, query: SearchQuery) -> SourceBatch:
        self._ensure_available()
        text = query.text.strip()
        if query.language and "lang:" not in text:
            text = f"{text} lang:{query.language.split('-', 1)[0].lower()}"
        if len(text) > MAX_QUERY_CHARS:
            raise SourceError(SourceErrorKind.CLIENT, f"X queries are limited to {MAX_QUERY_CHARS} characters")
        start, end = search_window(query.since, query.until, now=datetime.now(UTC))
        params: dict[str, str | int] = {
            "query": text,
            "start_time": _x_time(start),
            "tweet.fields": TWEET_FIELDS,
            "expansions": "author_id",
            "user.fields": "username",
        }
        if end is not None:
            params["end_time"] = _x_time(end)

        async def fetch(request: PageRequest[str]) -> dict[str, Any]:
            # Every post read is billed, so never ask for more than is still wanted.
            page_params = {**params, "max_results": max(MIN_RESULTS, min(request.wanted, MAX_RESULTS))}
            if request.cursor is not None:
                page_params["next_token"] = request.cursor
            return await self._fetch_page(page_params)

        return await read_pages(
            self.name,
            fetch,
            lambda document, _: self._parse_page(document, query),
            limit=query.limit,
            max_pages=MAX_PAGES,
        )

    async def _fetch_page(self, params: dict[str, str | int]) -> dict[str, Any]:
        try:
            response = await self._client.get(
                f"{self._config.x_api_url.rstrip('/')}/tweets/search/recent",
                params=params,
                headers={"Authorization": f"Bearer {self._key()}"},
            )
        except SourceError as error:
            raise self._without_key(error) from None
        return json_object(response.content, who="X")

    def _parse_page(self, document: dict[str, Any], query: SearchQuery) -> Page[str]:
        # No match: `{"meta": {"result_count": 0}}` without `data`.
        tweets = document.get("data", [])
        includes = document.get("includes") or {}
        users_raw = includes.get("users", []) if isinstance(includes, dict) else None
        if not isinstance(tweets, list) or not isinstance(users_raw, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "X `data` or `includes.users` is not a list")
        usernames: dict[str, str] = {}
        for raw_user in users_raw:
            try:
                user = XUser.model_validate(raw_user)
            except ValidationError:
                continue
            usernames[user.id] = user.username
        items, skipped = parsed_items(tweets, XTweet, lambda tweet: self._to_item(tweet, usernames, query))
        meta = document.get("meta")
        next_token = meta.get("next_token") if isinstance(meta, dict) else None
        has_next = isinstance(next_token, str) and bool(next_token)
        return Page(items=items, skipped=skipped, next=next_token if has_next else None)

    def _to_item(self, tweet: XTweet, usernames: dict[str, str], query: SearchQuery) -> Item:
        username = usernames.get(tweet.author_id or "")
        url = f"https://x.com/{username}/status/{tweet.id}" if username else f"https://x.com/i/web/status/{tweet.id}"
        metrics = tweet.public_metrics
        engagement = (
            Engagement(likes=metrics.like_count, reposts=metrics.retweet_count, comments=metrics.reply_count)
            if metrics is not None
            else Engagement()
        )
        return Item(
            id=item_id(self.name, native_id=tweet.id),
            source=self.name,
            url=canonical_url(url),
            title=title_from_text(tweet.text),
            text=tweet.text,
            author=f"@{username}" if username else None,
            published=tweet.created_at,
            engagement=engagement,
            language=_language(tweet.lang),
            query=query.text,
        )
