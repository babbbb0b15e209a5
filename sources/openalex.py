"""Scholarly works from OpenAlex (`/works` search, newest first); needs a free API key since 2026."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, Field, NonNegativeInt

from sources.api import ApiSource, Page, PageRequest, parsed_items, read_pages
from sources.base import Engagement, Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.feeds import parse_iso_datetime
from sources.urls import canonical_url

MAX_PER_PAGE = 200
"""OpenAlex allows at most 200 results per page."""
MAX_PAGES = 5
"""Each search page costs from the daily allowance; 1000 works per search is plenty."""
OPENALEX_ID_PREFIX = "https://openalex.org/"
ARXIV_DOI = re.compile(r"^https://doi\.org/10\.48550/arxiv\.(.+)$", re.IGNORECASE)


class OpenAlexAuthor(BaseModel):
    display_name: str | None = None


class OpenAlexAuthorship(BaseModel):
    author: OpenAlexAuthor = Field(default_factory=OpenAlexAuthor)


class OpenAlexLocation(BaseModel):
    landing_page_url: str | None = None


class OpenAlexWork(BaseModel):
    """The fields we use of one work in `results`."""

    id: str = Field(min_length=1)
    """`https://openalex.org/W…`."""
    title: str | None = None
    display_name: str | None = None
    doi: str | None = None
    """`https://doi.org/…` when the work has a DOI."""
    publication_date: str | None = None
    """`YYYY-MM-DD`."""
    language: str | None = None
    cited_by_count: NonNegativeInt = 0
    abstract_inverted_index: dict[str, list[int]] | None = None
    """Each word mapped to the positions where it occurs (OpenAlex does not ship plain abstracts)."""
    authorships: list[OpenAlexAuthorship] = Field(default_factory=list)
    primary_location: OpenAlexLocation | None = None


def rebuild_abstract(inverted_index: dict[str, list[int]] | None) -> str:
    """The abstract text from OpenAlex's word → positions index."""
    if not inverted_index:
        return ""
    positions: dict[int, str] = {}
    for word, places in inverted_index.items():
        for place in places:
            if place >= 0:
                positions[place] = word
    return " ".join(positions[index] for index in sorted(positions))


def _author_line(authorships: list[OpenAlexAuthorship], *, most: int = 5) -> str | None:
    names = [a.author.display_name for a in authorships if a.author.display_name]
    if not names:
        return None
    line = ", ".join(names[:most])
    return line + (" et al." if len(names) > most else "")


class OpenAlexSource(ApiSource):
    """Recent papers, books and datasets from OpenAlex; citations count as points."""

    name = "openalex"
    needs_key = True
    key_setting = "openalex_api_key"
    missing_key = "OpenAlex needs a (free) API key since 2026: set OPENALEX_API_KEY"

    async def search(self, query: SearchQuery) -> SourceBatch:
        self._ensure_available()
        per_page = max(1, min(query.limit, MAX_PER_PAGE))

        def parse(results: list[object], request: PageRequest[int]) -> Page[int]:
            items, skipped = parsed_items(results, OpenAlexWork, lambda work: self._to_item(work, query))
            # A short page is the last one; a full page may be followed by more, usable or not.
            return Page(items=items, skipped=skipped, next=request.number + 1 if len(results) >= per_page else None)

        return await read_pages(
            self.name,
            lambda request: self._fetch_page(query, page=request.number, per_page=per_page),
            parse,
            limit=query.limit,
            max_pages=MAX_PAGES,
        )

    async def _fetch_page(self, query: SearchQuery, *, page: int, per_page: int) -> list[object]:
        filters = []
        if query.since is not None:
            filters.append(f"from_publication_date:{query.since.date().isoformat()}")
        if query.until is not None:
            filters.append(f"to_publication_date:{query.until.date().isoformat()}")
        params: dict[str, str | int] = {
            "search": query.text,
            "sort": "publication_date:desc",
            "per-page": per_page,
            "api_key": self._key(),
        }
        if page > 1:
            params["page"] = page
        if filters:
            params["filter"] = ",".join(filters)
        try:
            response = await self._client.get(f"{self._config.openalex_api_url.rstrip('/')}/works", params=params)
        except SourceError as error:
            # The key travels in the query string. OpenAlex documents 403 as "rate limit exceeded" (429 is the daily
            # allowance).
            kind = SourceErrorKind.RATE_LIMITED if error.status == 403 else error.kind
            raise self._without_key(error, kind=kind) from None
        try:
            results = json.loads(response.content)["results"]
        except (ValueError, KeyError, TypeError):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "openalex returned no `results` list") from None
        if not isinstance(results, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "openalex `results` is not a list")
        return results

    def _to_item(self, work: OpenAlexWork, query: SearchQuery) -> Item:
        title = (work.title or work.display_name or "").strip()
        if not title:
            raise ValueError("work without a title")
        landing = work.primary_location.landing_page_url if work.primary_location else None
        url = work.doi or landing or work.id
        arxiv_doi = ARXIV_DOI.match(work.doi or "")
        if arxiv_doi:
            # arXiv's DOIs: point at the abstract page, as the arXiv source does, so duplicates line up.
            url = f"https://arxiv.org/abs/{arxiv_doi.group(1)}"
        native = work.id.removeprefix(OPENALEX_ID_PREFIX)
        return Item(
            id=item_id(self.name, native_id=native),
            source=self.name,
            url=canonical_url(url),
            title=title,
            text=rebuild_abstract(work.abstract_inverted_index),
            author=_author_line(work.authorships),
            published=parse_iso_datetime(work.publication_date),
            engagement=Engagement(points=work.cited_by_count),
            language=work.language,
            query=query.text,
        )
