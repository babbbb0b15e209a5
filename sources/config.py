"""Endpoints and credentials of every source; `app` fills this from settings, tests point it at fakes."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr

DEFAULT_USER_AGENT = "Lookout/0.1 (+https://github.com/lookout-bot/lookout; monitoring bot)"


@dataclass(frozen=True, kw_only=True)
class SourcesConfig:
    """Where each source lives and what keys it has. Defaults are the public endpoints."""

    user_agent: str = DEFAULT_USER_AGENT
    allow_private_urls: bool = False
    """Let user-supplied URLs (feeds, pages) reach private/loopback addresses: self-hosted feeds, tests."""

    hn_api_url: str = "https://hn.algolia.com/api/v1"
    news_rss_url: str = "https://news.google.com/rss"
    arxiv_api_url: str = "https://export.arxiv.org/api/query"
    github_api_url: str = "https://api.github.com"
    github_token: SecretStr | None = None
    reddit_api_url: str = "https://oauth.reddit.com"
    reddit_auth_url: str = "https://www.reddit.com/api/v1/access_token"
    reddit_client_id: str | None = None
    reddit_client_secret: SecretStr | None = None
    wikipedia_api_url: str = "https://{lang}.wikipedia.org/w/api.php"
    """`{lang}` is replaced by the query's language (default `en`)."""
    openalex_api_url: str = "https://api.openalex.org"
    openalex_api_key: SecretStr | None = None
    semanticscholar_api_url: str = "https://api.semanticscholar.org/graph/v1"
    semanticscholar_api_key: SecretStr | None = None
    x_api_url: str = "https://api.x.com/2"
    x_bearer_token: SecretStr | None = None
    rsshub_url: str | None = None
    """Base URL of a self-hosted RSSHub; the source is off without it."""
    rsshub_platforms: tuple[str, ...] = ("weibo", "bilibili", "zhihu", "xiaohongshu", "douyin")
    """Platforms the plain `rsshub` source searches (see `sources.rsshub.RSSHUB_ROUTES`)."""
