"""The contract every source keeps: the query it takes, the `Item` it returns, and how it fails."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

from kernel import utc_now


class Engagement(BaseModel):
    """Whatever engagement counts a source gives; `None` means the source does not report it."""

    model_config = ConfigDict(frozen=True)

    points: NonNegativeInt | None = None
    """Score, upvotes or stars."""
    likes: NonNegativeInt | None = None
    reposts: NonNegativeInt | None = None
    """Reposts, retweets, forks: copies that spread the item."""
    comments: NonNegativeInt | None = None

    def total(self) -> int:
        """Sum of the counts that are known, for ranking."""
        return sum(v for v in (self.points, self.likes, self.reposts, self.comments) if v is not None)


class Item(BaseModel):
    """One thing a source found: a story, post, paper, release or page."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    """Stable id: `<source>:<source's own id>` when the source has one, else a hash of the canonical URL."""
    source: str = Field(min_length=1)
    """Short name of the source that returned it (`hn`, `news`, `rss`, ...)."""
    url: str = Field(min_length=1)
    """Canonical URL (see `sources.urls.canonical_url`)."""
    title: str
    text: str = ""
    """Body, abstract or snippet; plain text."""
    author: str | None = None
    published: AwareDatetime | None = None
    """When it was published, in UTC; `None` when the source does not say."""
    engagement: Engagement = Field(default_factory=Engagement)
    language: str | None = None
    """ISO 639-1 code when known."""
    language_hint: str | None = Field(default=None, exclude=True)
    """What the whole feed declared (`<language>`): not the item's language, which is told from its text where it
    can be (`research.language`); the hint stands only where the text is too short to tell. Never serialised."""
    query: str = ""
    """The query text that found it."""
    collected_at: AwareDatetime = Field(default_factory=utc_now)


def item_id(source: str, *, native_id: str | None = None, canonical: str | None = None) -> str:
    """Build an `Item.id`: the source's own id when there is one, else a hash of the canonical URL."""
    if native_id:
        return f"{source}:{native_id}"
    if not canonical:
        raise ValueError("an item needs either a native id or a canonical URL")
    return "url:" + hashlib.sha256(canonical.encode()).hexdigest()[:24]


@dataclass(frozen=True, kw_only=True)
class SearchQuery:
    """What to look for. Sources use what they can of it and ignore the rest."""

    text: str
    since: datetime | None = None
    until: datetime | None = None
    language: str | None = None
    """ISO 639-1 code, e.g. `en`, `zh`."""
    region: str | None = None
    """ISO 3166 country code, e.g. `US`, `CN` (Google News uses it)."""
    limit: int = 50


@dataclass(frozen=True, kw_only=True)
class SourceBatch:
    """What one `search` call returned: the items, how many malformed entries were skipped, and why it is partial."""

    items: list[Item] = field(default_factory=list)
    skipped: int = 0
    stopped: str | None = None
    """Why the search ended before it had all it asked for (a later page failed); None when it did not."""


class SourceErrorKind(StrEnum):
    """Why a source failed, coarse enough to show a person and to decide on retrying."""

    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    SERVER = "server_error"
    CLIENT = "client_error"
    NETWORK = "network"
    BLOCKED = "blocked_address"
    TOO_LARGE = "too_large"
    BAD_RESPONSE = "bad_response"
    UNAVAILABLE = "unavailable"


class SourceError(Exception):
    """A source could not answer. Collection records it and goes on with the other sources."""

    def __init__(
        self,
        kind: SourceErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after


PRIVATE_URLS_SETTING = "ALLOW_PRIVATE_URLS"
"""The setting (`SourcesConfig.allow_private_urls`) that lifts the SSRF guard's address check; every refusal
names it, so whoever runs Lookout knows what to change for a feed on their own network."""


_UNRESOLVED = ("resolve", "Name or service not known", "nodename nor servname", "getaddrinfo", "DNS")
"""Signs in a network error's message that the host name did not resolve (offline, or a typo in a feed URL)."""


def covering_window(since: datetime | None, windows: Sequence[tuple[str, timedelta]], *, now: datetime) -> str | None:
    """The narrowest of an API's named time windows (narrowest first) that still covers `since`; None when there is
    no bound or `since` is older than the widest."""
    if since is None:
        return None
    age = now - since
    return next((name for name, span in windows if age <= span), None)


def failure_reason(kind: str, message: str, *, status: int | None = None) -> str:
    """A source's failure in a few words for a person (`HTTP 500`, `timed out`, `not a feed`): the full message
    names the URL and the server's words, which the line showing this already names or does not need."""
    flat = " ".join(message.split())
    match kind:
        case SourceErrorKind.TIMEOUT:
            return "timed out" if "within" not in flat else flat
        case SourceErrorKind.RATE_LIMITED:
            return f"rate-limited (HTTP {status})" if status else "rate-limited"
        case SourceErrorKind.SERVER | SourceErrorKind.CLIENT if status:
            return f"HTTP {status}"
        case SourceErrorKind.NETWORK:
            unresolved = any(sign in flat for sign in _UNRESOLVED)
            return "cannot resolve the host name" if unresolved else "cannot connect"
        case SourceErrorKind.TOO_LARGE:
            return "too large"
        case SourceErrorKind.BAD_RESPONSE if flat.startswith("not a feed"):
            return "not a feed"
        case SourceErrorKind.BAD_RESPONSE if "undecodable body" in flat:
            return "unreadable body (broken compression)"
        case SourceErrorKind.BLOCKED if PRIVATE_URLS_SETTING in flat:
            return f"private address refused (allow with {PRIVATE_URLS_SETTING}=true)"
        case "unexpected":
            return "unexpected error, see the log"
    return flat[:120] + ("…" if len(flat) > 120 else "") or str(kind)


@runtime_checkable
class Source(Protocol):
    """A public source of items."""

    name: str
    """Short name used in commands and CSVs (`hn`, `news`, `rss`, ...)."""
    needs_key: bool
    """Whether the source needs credentials to work at all."""

    def unavailable_reason(self) -> str | None:
        """Why the source is off (e.g. a missing key), or `None` when it can be used."""
        ...

    async def search(self, query: SearchQuery) -> SourceBatch:
        """Find items for the query. Raises `SourceError` when the source cannot answer."""
        ...
