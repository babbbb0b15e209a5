"""General web search through the `ddgs` metasearch library; best-effort (scrapes engines, no stable API)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final

from pydantic import BaseModel, Field, ValidationError

from sources.base import Item, SearchQuery, SourceBatch, SourceError, SourceErrorKind, covering_window, item_id
from sources.config import SourcesConfig
from sources.http import HttpClient
from sources.urls import canonical_url

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 20.0
MAX_RESULTS = 100
# Countries for a language when the query names no region (ddgs regions are `<country>-<language>`).
_LANGUAGE_COUNTRY = {"en": "us", "zh": "cn", "ja": "jp", "ko": "kr", "pt": "br", "uk": "ua", "sv": "se", "da": "dk"}


@dataclass(frozen=True, kw_only=True)
class WebSearchRequest:
    """What the web source asks a search backend for, in ddgs's terms."""

    text: str
    region: str = "us-en"
    """`<country>-<language>`, e.g. `us-en`, `cn-zh`."""
    timelimit: str | None = None
    """`d`, `w`, `m`, `y` (past day/week/month/year) or None for any time."""
    max_results: int = 20


class WebResult(BaseModel):
    """One search hit as ddgs's text search returns it (`title`, `href`, `body`)."""

    title: str = Field(min_length=1)
    href: str = Field(min_length=1, pattern=r"^https?://")
    body: str = ""


@dataclass(frozen=True, kw_only=True)
class WebResults:
    """The usable hits, and how many malformed ones were dropped."""

    results: list[WebResult] = field(default_factory=list)
    skipped: int = 0


WebSearchFn = Callable[[WebSearchRequest], Awaitable[WebResults]]
"""The seam: a backend that runs one web search. Tests pass a recording fake."""
TextSearch = Callable[..., list[dict[str, Any]]]
"""ddgs's `DDGS().text(query, region=..., timelimit=..., max_results=..., ...)`, or a stand-in."""


def ddgs_region(*, language: str | None, region: str | None) -> str:
    """A ddgs region from the query's language and country (`zh` → `cn-zh`, `en`+`GB` → `gb-en`)."""
    lang = (language or "en").split("-", 1)[0].lower()
    country = (region or _LANGUAGE_COUNTRY.get(lang, lang)).lower()
    return f"{country}-{lang}"


DDGS_TIMELIMITS: Final = (
    ("d", timedelta(days=1)),
    ("w", timedelta(days=7)),
    ("m", timedelta(days=31)),
    ("y", timedelta(days=366)),
)
"""ddgs's time limits, narrowest first."""


def ddgs_timelimit(since: datetime | None, *, now: datetime) -> str | None:
    """The narrowest ddgs time limit (d/w/m/y) that still covers `since`; None for older or no bound."""
    return covering_window(since, DDGS_TIMELIMITS, now=now)


def map_ddgs_results(raw: Sequence[Mapping[str, Any]]) -> WebResults:
    """Validate ddgs result dicts; entries without a title or an http(s) link are counted, not kept."""
    results: list[WebResult] = []
    skipped = 0
    for entry in raw:
        try:
            results.append(WebResult.model_validate(entry))
        except ValidationError:
            skipped += 1
    return WebResults(results=results, skipped=skipped)


def _ddgs_text(query: str, *, engine_timeout: int, **options: Any) -> list[dict[str, Any]]:
    from ddgs import DDGS  # imported lazily: it loads every engine module

    result: list[dict[str, Any]] = DDGS(timeout=engine_timeout).text(query, **options)
    return result


def make_ddgs_search(*, timeout: float = DEFAULT_TIMEOUT, text_search: TextSearch | None = None) -> WebSearchFn:
    """The default backend: ddgs's text search in a worker thread, bounded by `timeout` seconds.

    `text_search` replaces `DDGS().text` (tests hand in a function returning ddgs-shaped dicts). ddgs's
    exceptions become `SourceError`; its "No results found." becomes an empty result.
    """
    search: TextSearch = text_search or partial(_ddgs_text, engine_timeout=max(1, int(timeout)))

    async def run(request: WebSearchRequest) -> WebResults:
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        options: dict[str, Any] = {
            "region": request.region,
            "safesearch": "moderate",
            "timelimit": request.timelimit,
            "max_results": request.max_results,
        }
        try:
            # The worker thread cannot be cancelled; on timeout it finishes in the background and is ignored.
            raw = await asyncio.wait_for(asyncio.to_thread(search, request.text, **options), timeout)
        except TimeoutError:
            raise SourceError(SourceErrorKind.TIMEOUT, f"web search took longer than {timeout:g}s") from None
        except RatelimitException as exc:
            raise SourceError(SourceErrorKind.RATE_LIMITED, f"web search engines are rate limiting: {exc}") from None
        except TimeoutException as exc:
            raise SourceError(SourceErrorKind.TIMEOUT, f"web search timed out: {exc}") from None
        except DDGSException as exc:
            if "no results" in str(exc).lower():
                return WebResults()
            raise SourceError(SourceErrorKind.NETWORK, f"web search failed: {exc}") from None
        except Exception as exc:  # a scraping library can fail in any way; the source must not crash
            raise SourceError(SourceErrorKind.BAD_RESPONSE, f"web search failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(raw, list):
            raise SourceError(SourceErrorKind.BAD_RESPONSE, "web search returned no result list")
        return map_ddgs_results(raw)

    return run


class WebSearchSource:
    """General web pages for a query. Best-effort: ddgs scrapes search engines that may change or block."""

    name = "web"
    needs_key = False

    def __init__(
        self,
        *,
        client: HttpClient | None = None,
        config: SourcesConfig | None = None,
        search_fn: WebSearchFn | None = None,
    ) -> None:
        # `client` and `config` are accepted for a uniform constructor; ddgs has its own HTTP stack.
        self._search_fn = search_fn or make_ddgs_search()

    def unavailable_reason(self) -> str | None:
        return None

    async def search(self, query: SearchQuery) -> SourceBatch:
        if not query.text.strip():
            raise SourceError(SourceErrorKind.CLIENT, "web search needs a non-empty query")
        request = WebSearchRequest(
            text=query.text.strip(),
            region=ddgs_region(language=query.language, region=query.region),
            timelimit=ddgs_timelimit(query.since, now=datetime.now(UTC)),
            max_results=max(1, min(query.limit, MAX_RESULTS)),
        )
        outcome = await self._search_fn(request)
        items: list[Item] = []
        skipped = outcome.skipped
        seen: set[str] = set()
        for result in outcome.results:
            try:
                url = canonical_url(result.href)
                item = Item(
                    id=item_id(self.name, canonical=url),
                    source=self.name,
                    url=url,
                    title=result.title.strip(),
                    text=result.body.strip(),
                    query=query.text,
                )
            except ValueError:
                skipped += 1
                continue
            if item.id not in seen:
                seen.add(item.id)
                items.append(item)
        if skipped:
            logger.info("web: skipped %d malformed results", skipped)
        return SourceBatch(items=items[: query.limit], skipped=skipped)
