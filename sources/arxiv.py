"""arXiv papers through its Atom API, newest submissions first, at most one request per 3 s."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import feedparser

from kernel import utc_now
from sources.api import ApiSource
from sources.base import Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.feeds import as_utc, entry_published, html_to_text, in_window, query_terms
from sources.http import HostPolicy, HttpClient
from sources.urls import canonical_url
from sources.xmlguard import guard_xml

ARXIV_POLICY = HostPolicy(concurrency=1, min_interval=3.0)
"""arXiv's terms: one request every three seconds, over a single connection."""
MAX_RESULTS = 2000
"""arXiv serves at most 2000 entries per request."""
MAX_TERMS = 6
MAX_AUTHORS = 10
_ABS_ID = re.compile(r"arxiv\.org/abs/(?P<id>.+?)(?:v\d+)?$")
_EARLIEST = datetime(1991, 1, 1, tzinfo=UTC)


def search_query(query: SearchQuery, *, now: datetime) -> str:
    """The `search_query` value: every term in all fields, and the submission window when given."""
    clauses = [f'all:"{t}"' if " " in t else f"all:{t}" for t in query_terms(query.text)[:MAX_TERMS]]
    if query.since is not None or query.until is not None:
        start = as_utc(query.since) if query.since is not None else _EARLIEST
        end = as_utc(query.until) if query.until is not None else now
        clauses.append(f"submittedDate:[{start:%Y%m%d%H%M} TO {end:%Y%m%d%H%M}]")
    return " AND ".join(clauses)


def arxiv_id(entry_id: str) -> str | None:
    """`http://arxiv.org/abs/2411.01234v2` → `2411.01234` (old style `hep-th/9901001` too)."""
    match = _ABS_ID.search(entry_id.strip())
    return match.group("id") if match else None


def _authors(entry: Any) -> str | None:
    names = [a.get("name", "").strip() for a in entry.get("authors") or []]
    names = [n for n in names if n]
    if not names:
        return None
    if len(names) > MAX_AUTHORS:
        return ", ".join(names[:MAX_AUTHORS]) + " et al."
    return ", ".join(names)


def entry_to_item(entry: Any, *, query: str) -> Item | None:
    """The Item for one Atom entry, or None when it lacks an arXiv id or a title."""
    native = arxiv_id(entry.get("id") or "")
    title = " ".join(html_to_text(entry.get("title") or "").split())
    if not native or not title:
        return None
    abstract = " ".join(html_to_text(entry.get("summary") or "").split())
    category = (entry.get("arxiv_primary_category") or {}).get("term")
    # Item has no field for it; the primary category closes the text so readers and ranking see it.
    text = f"{abstract}\n[{category}]" if category and abstract else abstract or (f"[{category}]" if category else "")
    return Item(
        id=item_id("arxiv", native_id=native),
        source="arxiv",
        url=canonical_url(f"https://arxiv.org/abs/{native}"),
        title=title,
        text=text,
        author=_authors(entry),
        published=entry_published(entry),
        query=query,
    )


class ArxivSource(ApiSource):
    """Papers from arXiv. The host limit is set on the shared client, so it holds process-wide."""

    name = "arxiv"

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._api_url = config.arxiv_api_url
        host = urlsplit(config.arxiv_api_url).hostname
        if host:
            client.set_host_policy(host, ARXIV_POLICY)

    async def search(self, query: SearchQuery) -> SourceBatch:
        if not query_terms(query.text):
            return SourceBatch()
        params: dict[str, str | int] = {
            "search_query": search_query(query, now=utc_now()),
            "sortBy": "submittedDate",
            "sortOrder": "descending",
            "start": 0,
            "max_results": max(1, min(query.limit, MAX_RESULTS)),
        }
        response = await self._client.get(self._api_url, params=params)
        # BytesIO: feedparser would treat bytes that look like a URL or path as something to open.
        checked = guard_xml(response.content, noun="arXiv answer", content_type=response.content_type)
        parsed = feedparser.parse(
            io.BytesIO(checked.content), response_headers={"content-type": f"application/xml; charset={checked.codec}"}
        )
        entries = parsed.get("entries") or []
        if not entries and not parsed.get("version"):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "arXiv did not answer with an Atom feed")
        items: list[Item] = []
        skipped = 0
        for entry in entries:
            if "/api/errors" in (entry.get("id") or ""):
                # arXiv reports a bad query as a feed holding one "Error" entry.
                detail = html_to_text(entry.get("summary") or "unknown error")
                raise SourceError(SourceErrorKind.CLIENT, f"arXiv rejected the query: {detail}")
            try:
                item = entry_to_item(entry, query=query.text)
            except ValueError:
                item = None
            if item is None:
                skipped += 1
            elif in_window(item.published, since=query.since, until=query.until):
                items.append(item)
        return SourceBatch(items=items[: query.limit], skipped=skipped)
