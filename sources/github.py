"""GitHub repositories matching a query, plus the latest releases of the most starred of them."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sources.api import ApiSource
from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.feeds import as_utc, in_window, parse_feed_response, parse_iso_datetime, query_terms
from sources.http import HttpClient
from sources.urls import canonical_url

logger = logging.getLogger(__name__)

MAX_PER_PAGE = 100
MAX_TERMS = 5
RELEASE_REPOS = 3
"""How many of the most starred repositories found get their releases looked at."""
RELEASES_PER_REPO = 3
API_VERSION = "2022-11-28"


class GitHubOwner(BaseModel):
    model_config = ConfigDict(extra="ignore")
    login: str


class GitHubRepository(BaseModel):
    """The fields of a repository search result that become an Item."""

    model_config = ConfigDict(extra="ignore")

    id: int
    full_name: str = Field(min_length=3)
    """`owner/name`."""
    html_url: str
    description: str | None = None
    owner: GitHubOwner | None = None
    stargazers_count: int = Field(default=0, ge=0)
    forks_count: int = Field(default=0, ge=0)
    topics: list[str] = []
    pushed_at: str | None = None
    updated_at: str | None = None
    created_at: str | None = None


class GitHubSearchResponse(BaseModel):
    """The envelope of `/search/repositories`; items are validated one by one."""

    model_config = ConfigDict(extra="ignore")

    total_count: int
    incomplete_results: bool = False
    items: list[dict[str, Any]]


def _timestamp(moment: datetime) -> str:
    return f"{as_utc(moment):%Y-%m-%dT%H:%M:%SZ}"


def search_q(query: SearchQuery) -> str:
    """The `q` value: a few terms (phrases quoted) and a `pushed:` qualifier for the time window."""
    terms = [f'"{t}"' if " " in t else t for t in query_terms(query.text)[:MAX_TERMS]]
    if query.since is not None and query.until is not None:
        terms.append(f"pushed:{_timestamp(query.since)}..{_timestamp(query.until)}")
    elif query.since is not None:
        terms.append(f"pushed:>{_timestamp(query.since)}")
    elif query.until is not None:
        terms.append(f"pushed:<{_timestamp(query.until)}")
    return " ".join(terms)


def web_base_url(api_url: str) -> str:
    """Where the github.com pages live for an API base: `api.github.com` → `github.com`, GHE `/api/v3` → host.

    Any other base (a mirror, a test fake) serves both from the same root.
    """
    base = api_url.rstrip("/")
    parts = urlsplit(base)
    if parts.hostname == "api.github.com":
        return "https://github.com"
    if parts.path.endswith("/api/v3"):
        return base[: -len("/api/v3")]
    return base


def repository_to_item(repo: GitHubRepository, *, query: str) -> Item:
    """A repository as an Item: stars are points, forks are reposts, last push is its date."""
    text = repo.description or ""
    if repo.topics:
        text = f"{text}\nTopics: {', '.join(repo.topics)}".strip()
    return Item(
        id=item_id("github", native_id=f"repo:{repo.id}"),
        source="github",
        url=canonical_url(repo.html_url),
        title=repo.full_name,
        text=text,
        author=repo.owner.login if repo.owner else repo.full_name.split("/")[0],
        published=parse_iso_datetime(repo.pushed_at or repo.updated_at or repo.created_at),
        engagement=Engagement(points=repo.stargazers_count, reposts=repo.forks_count),
        query=query,
    )


def rate_limited(error: SourceError) -> SourceError:
    """GitHub signals its limits with 403 or 429 and a "rate limit" message: report it as such."""
    if error.kind is SourceErrorKind.RATE_LIMITED or (
        error.status in (403, 429) and "rate limit" in str(error).lower()
    ):
        return SourceError(
            SourceErrorKind.RATE_LIMITED,
            f"GitHub rate limit reached (set GITHUB_TOKEN for 5000 requests/hour): {error}",
            status=error.status,
            retry_after=error.retry_after,
        )
    return error


class GitHubSource(ApiSource):
    """Repositories recently pushed to, and their releases. Works without a token (60 requests/hour)."""

    name = "github"

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._api_url = config.github_api_url.rstrip("/")
        self._web_url = web_base_url(config.github_api_url)
        self._headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        if config.github_token is not None and config.github_token.get_secret_value():
            self._headers["Authorization"] = f"Bearer {config.github_token.get_secret_value()}"

    async def search(self, query: SearchQuery) -> SourceBatch:
        if not query_terms(query.text):
            return SourceBatch()
        q = search_q(query)
        params: dict[str, str | int] = {"q": q, "per_page": max(1, min(query.limit, MAX_PER_PAGE))}
        if query.since is not None:
            # A window asks "what moved lately": newest activity first. Otherwise GitHub's best match.
            params.update(sort="updated", order="desc")
        try:
            response = await self._client.get(
                self._api_url + "/search/repositories", params=params, headers=self._headers
            )
        except SourceError as exc:
            raise rate_limited(exc) from exc
        try:
            envelope = GitHubSearchResponse.model_validate(response.json())
        except ValidationError as exc:
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "unexpected GitHub search answer") from exc
        repos: list[GitHubRepository] = []
        items: list[Item] = []
        skipped = 0
        for raw in envelope.items:
            try:
                repo = GitHubRepository.model_validate(raw)
                items.append(repository_to_item(repo, query=query.text))
            except ValueError:  # pydantic's ValidationError included
                skipped += 1
                continue
            repos.append(repo)
        items = items[: query.limit]
        top = sorted(repos, key=lambda r: r.stargazers_count, reverse=True)[:RELEASE_REPOS]
        release_batches = await asyncio.gather(*(self._releases(repo, query) for repo in top))
        for release_batch in release_batches:
            items.extend(release_batch.items)
            skipped += release_batch.skipped
        return SourceBatch(items=items, skipped=skipped)

    async def _releases(self, repo: GitHubRepository, query: SearchQuery) -> SourceBatch:
        """The repository's latest releases from its `releases.atom` (free: outside the API rate limit).

        A failing feed only costs this repository's releases, never the search.
        """
        feed_url = f"{self._web_url}/{quote(repo.full_name, safe='/')}/releases.atom"
        try:
            response = await self._client.get(feed_url, conditional=True)
            batch = parse_feed_response(response, source=self.name, query=query.text, feed_url=feed_url)
        except SourceError as exc:
            logger.info("no releases for %s: %s", repo.full_name, exc)
            return SourceBatch()
        releases = [
            release.model_copy(update={"title": f"{repo.full_name} {release.title}"})
            for release in batch.items
            if in_window(release.published, since=query.since, until=query.until)
        ]
        return SourceBatch(items=releases[:RELEASES_PER_REPO], skipped=batch.skipped)
