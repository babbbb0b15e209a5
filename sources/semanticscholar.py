"""Papers from the Semantic Scholar Graph API (`/paper/search`); a key is optional but spares its 429s."""

from __future__ import annotations

import logging
from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, NonNegativeInt

from sources.api import ApiSource, json_object, parsed_items
from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.config import SourcesConfig
from sources.feeds import parse_iso_datetime
from sources.http import HostPolicy, HttpClient
from sources.urls import canonical_url

logger = logging.getLogger(__name__)

MAX_LIMIT = 100
"""`/paper/search` returns at most 100 papers per request."""
MAX_RESULTS = 1000
"""`offset + limit` may not exceed 1000 on `/paper/search`."""
MIN_INTERVAL = 1.0
"""Seconds between requests: an API key's introductory rate is 1 request/s, and the keyless pool is shared."""
PAPER_FIELDS = "title,abstract,url,year,publicationDate,authors,citationCount,externalIds"
PAPER_PAGE = "https://www.semanticscholar.org/paper/"


class S2Author(BaseModel):
    author_id: str | None = Field(default=None, alias="authorId")
    name: str | None = None


class S2Paper(BaseModel):
    """One paper of `data`, with the fields we ask for."""

    paper_id: str = Field(alias="paperId", min_length=1)
    title: str | None = None
    abstract: str | None = None
    url: str | None = None
    """The paper's Semantic Scholar page."""
    year: int | None = None
    publication_date: str | None = Field(default=None, alias="publicationDate")
    """`YYYY-MM-DD` when known (often only `year` is)."""
    authors: list[S2Author] = Field(default_factory=list)
    citation_count: NonNegativeInt | None = Field(default=None, alias="citationCount")
    external_ids: dict[str, str | int | None] | None = Field(default=None, alias="externalIds")
    """`DOI`, `ArXiv`, `CorpusId`, ..."""


def paper_url(paper: S2Paper) -> str:
    """Where the paper lives, preferring ids other sources share (arXiv, DOI) so duplicates line up."""
    ids = paper.external_ids or {}
    arxiv_id = ids.get("ArXiv")
    if arxiv_id:
        return f"https://arxiv.org/abs/{arxiv_id}"
    doi = ids.get("DOI")
    if doi:
        return f"https://doi.org/{doi}"
    return paper.url or PAPER_PAGE + paper.paper_id


def publication_range(since: datetime | None, until: datetime | None) -> str | None:
    """The `publicationDateOrYear` filter for a time window (`2026-11-01:` or `:2026-11-30`)."""
    if since is None and until is None:
        return None
    start = since.date().isoformat() if since is not None else ""
    end = until.date().isoformat() if until is not None else ""
    return f"{start}:{end}"


class SemanticScholarSource(ApiSource):
    """Papers matching the query; citations count as points."""

    name = "semanticscholar"
    key_setting = "semanticscholar_api_key"
    """Optional: a key raises the rate limit."""

    def __init__(self, *, client: HttpClient, config: SourcesConfig, min_interval: float = MIN_INTERVAL) -> None:
        super().__init__(client=client, config=config)
        self._min_interval = min_interval
        self._policed_hosts: set[str] = set()

    async def search(self, query: SearchQuery) -> SourceBatch:
        self._police_host()
        wanted = max(1, min(query.limit, MAX_RESULTS))
        items: list[Item] = []
        skipped = 0
        offset = 0
        while True:
            size = min(MAX_LIMIT, wanted - len(items), MAX_RESULTS - offset)
            try:
                papers, next_offset = await self._fetch_page(query, offset=offset, size=size)
            except SourceError as error:
                if offset == 0:
                    raise
                logger.warning("semanticscholar: stopped at offset %d: %s (%s)", offset, error.kind, error)
                break
            page_items, malformed = parsed_items(papers, S2Paper, lambda paper: self._to_item(paper, query))
            items.extend(page_items)
            skipped += malformed
            if next_offset is None or next_offset <= offset or next_offset >= MAX_RESULTS or len(items) >= wanted:
                break
            offset = next_offset
        if skipped:
            logger.info("semanticscholar: skipped %d malformed papers", skipped)
        return SourceBatch(items=items[:wanted], skipped=skipped)

    def _police_host(self) -> None:
        host = (urlsplit(self._config.semanticscholar_api_url).hostname or "").lower()
        if host and host not in self._policed_hosts:
            self._client.set_host_policy(host, HostPolicy(concurrency=1, min_interval=self._min_interval))
            self._policed_hosts.add(host)

    async def _fetch_page(self, query: SearchQuery, *, offset: int, size: int) -> tuple[list[object], int | None]:
        """One page of papers and the offset of the next (None on the last page)."""
        params: dict[str, str | int] = {"query": query.text, "fields": PAPER_FIELDS, "limit": size}
        if offset:
            params["offset"] = offset
        window = publication_range(query.since, query.until)
        if window is not None:
            params["publicationDateOrYear"] = window
        headers = {"x-api-key": self._key()} if self._key() else {}
        url = f"{self._config.semanticscholar_api_url.rstrip('/')}/paper/search"
        try:
            response = await self._client.get(url, params=params, headers=headers)
        except SourceError as error:
            if error.status == 429:
                message = "semanticscholar is rate limiting (HTTP 429); an API key raises the limit"
                raise SourceError(
                    SourceErrorKind.RATE_LIMITED, message, status=error.status, retry_after=error.retry_after
                ) from None
            raise self._without_key(error) from None
        document = json_object(response.content, who="semanticscholar")
        # With no match the API answers `{"total": 0, "offset": 0}` without a `data` list.
        papers = document.get("data", [])
        if not isinstance(papers, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "semanticscholar `data` is not a list")
        next_offset = document.get("next")
        return papers, next_offset if isinstance(next_offset, int) else None

    def _to_item(self, paper: S2Paper, query: SearchQuery) -> Item:
        title = (paper.title or "").strip()
        if not title:
            raise ValueError("paper without a title")
        names = [a.name for a in paper.authors if a.name]
        author = ", ".join(names[:5]) + (" et al." if len(names) > 5 else "") if names else None
        return Item(
            id=item_id(self.name, native_id=paper.paper_id),
            source=self.name,
            url=canonical_url(paper_url(paper)),
            title=title,
            text=(paper.abstract or "").strip(),
            author=author,
            published=parse_iso_datetime(paper.publication_date),
            engagement=Engagement(points=paper.citation_count),
            query=query.text,
        )
