"""What every source over the shared HTTP client has in common: the client, the sources' settings, the rule that
a source missing what it needs (a key) says why and refuses to search, and the page loop of the paged APIs: a later
page's failure keeps what the earlier pages brought."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, SecretStr, ValidationError

from sources.base import Item, SourceBatch, SourceError, SourceErrorKind
from sources.config import SourcesConfig
from sources.http import HttpClient

logger = logging.getLogger(__name__)


def secret_text(secret: SecretStr | None) -> str:
    """A configured secret's text ("" when none is set)."""
    return secret.get_secret_value() if secret is not None else ""


def json_object(content: bytes, *, who: str) -> dict[str, Any]:
    """A JSON API's answer as an object; `SourceError(BAD_RESPONSE)` naming `who` for anything else."""
    try:
        document = json.loads(content)
    except ValueError:
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"{who} returned something other than JSON") from None
    if not isinstance(document, dict):
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"{who} returned an unexpected document")
    return document


_ModelT = TypeVar("_ModelT", bound=BaseModel)


def parsed_items(
    raws: Iterable[object], model: type[_ModelT], to_item: Callable[[_ModelT], Item]
) -> tuple[list[Item], int]:
    """An API page's records as items, and how many were malformed (skipped, never failing the page)."""
    items: list[Item] = []
    skipped = 0
    for raw in raws:
        try:
            items.append(to_item(model.model_validate(raw)))
        except (ValidationError, ValueError):
            skipped += 1
    return items, skipped


_CursorT = TypeVar("_CursorT")
_RawT = TypeVar("_RawT")


@dataclass(frozen=True, kw_only=True)
class PageRequest(Generic[_CursorT]):
    """Which page of a search to fetch next."""

    number: int
    """1 for the first page."""
    cursor: _CursorT | None
    """What the previous page named as the next one (`Page.next`); None on the first page."""
    wanted: int
    """Items still wanted, so a billed API is never asked for more."""


@dataclass(frozen=True, kw_only=True)
class Page(Generic[_CursorT]):
    """One page of a search, parsed."""

    items: list[Item] = field(default_factory=list)
    skipped: int = 0
    """Malformed records on the page (skipped, never failing it)."""
    next: _CursorT | None = None
    """The cursor (or page number) of the following page; None when nothing wanted can follow."""


async def read_pages(
    who: str,
    fetch: Callable[[PageRequest[_CursorT]], Awaitable[_RawT]],
    parse: Callable[[_RawT, PageRequest[_CursorT]], Page[_CursorT]],
    *,
    limit: int,
    max_pages: int,
) -> SourceBatch:
    """Fetch and parse pages until `limit` items, the last page or `max_pages`.

    `parse` raises `SourceError(BAD_RESPONSE)` for a page it cannot read. A `SourceError` from fetching or parsing
    the first page is the search's failure; on a later page it ends the search with the earlier pages' items, logged
    as a warning and named in `SourceBatch.stopped`."""
    items: list[Item] = []
    skipped = 0
    stopped: str | None = None
    cursor: _CursorT | None = None
    for number in range(1, max_pages + 1):
        request = PageRequest(number=number, cursor=cursor, wanted=limit - len(items))
        try:
            page = parse(await fetch(request), request)
        except SourceError as error:
            if number == 1:
                raise
            stopped = f"stopped after page {number - 1}: page {number} failed: {error}"
            logger.warning("%s: %s (%s)", who, stopped, error.kind)
            break
        items.extend(page.items)
        skipped += page.skipped
        if page.next is None or len(items) >= limit:
            break
        cursor = page.next
    if skipped:
        logger.info("%s: skipped %d malformed entries", who, skipped)
    return SourceBatch(items=items[:limit], skipped=skipped, stopped=stopped)


class ApiSource:
    """A source reached through the process's one `HttpClient`, configured by `SourcesConfig`."""

    name: str
    needs_key = False
    key_setting: ClassVar[str | None] = None
    """The `SourcesConfig` field holding the source's key or token (None: it takes none)."""
    missing_key: ClassVar[str] = ""
    """Why the source cannot search while `needs_key` and the key is not set (names the setting)."""

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        self._client = client
        self._config = config

    def unavailable_reason(self) -> str | None:
        """Why the source cannot search now (a key is missing); None when it can."""
        return self.missing_key if self.needs_key and self.key_setting and not self._key() else None

    def _key(self) -> str:
        """The configured key or token ("" when none is set)."""
        secret: SecretStr | None = getattr(self._config, self.key_setting) if self.key_setting else None
        return secret_text(secret)

    def _without_key(self, error: SourceError, *, kind: SourceErrorKind | None = None) -> SourceError:
        """`error` again with the key scrubbed from its message, as written and URL-quoted (the client's messages
        quote URLs, where a key may travel), and `kind` instead of its own when given."""
        message, key = str(error), self._key()
        if key:
            for form in {key, quote(key, safe=""), quote_plus(key)}:
                message = message.replace(form, "***")
        return SourceError(kind or error.kind, message, status=error.status, retry_after=error.retry_after)

    def _ensure_available(self) -> None:
        """Raise `SourceError(UNAVAILABLE)` with the reason when the source cannot search."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise SourceError(SourceErrorKind.UNAVAILABLE, reason)
