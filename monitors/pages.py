"""A web page per digest: the digest with its stories, citations, tone, chart and CSV, server-rendered HTML (Jinja2,
autoescaped, no JavaScript) at `/digests/<token>`, with the run's document at `<page>.json` and its files under it.

Guarantees: everything is found by the page's token alone, and an unknown token (or one whose run no longer has a
digest that went out) finds nothing, so the caller answers a bare 404; everything a page shows is escaped by the
template (autoescape; citation links are built around escaped text), and only http(s) URLs become links; the same run
gives the same bytes, so the ETag changes only when the page would.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

from monitors.document import (
    FILE_NAMES,
    MEDIA_TYPES,
    DigestDocument,
    DocumentCited,
    DocumentItem,
    DocumentMonitor,
    DocumentNovelty,
    DocumentRun,
    DocumentStory,
    digest_went_out,
    file_name,
    page_path,
    page_urls,
    run_document,
    run_files,
    run_time,
)
from monitors.tokens import looks_like_token
from research import CITATION
from storage import Database, RunRecord
from storage.repositories import DigestPageRepository, ItemRepository

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

__all__ = ["PAGE_FORMAT", "DigestPages", "PageFile", "PageKind"]

logger = logging.getLogger(__name__)

PAGE_FORMAT: Final = 1
"""Part of every ETag: raise it when a change here changes what the same run renders to."""
RENDERED_PAGES: Final = 64
"""Rendered pages kept in memory by ETag: a link posted to a busy chat is opened by many people at once, and a kept
page answers without reading the run's items again."""
PAGE_TEMPLATE: Final = "digest_page.html"

PageKind = Literal["html", "json"]
"""The page itself, or its digest document (`<page>.json`)."""
PAGE_MEDIA_TYPES: Final[dict[PageKind, str]] = {
    "html": "text/html; charset=utf-8",
    "json": "application/json",
}


@dataclass(frozen=True, slots=True)
class PageFile:
    """One of a page's files on disk, with the name its download gets."""

    path: Path
    filename: str
    media_type: str


@functools.cache
def _templates() -> jinja2.Environment:
    import jinja2  # only a process that serves a page pays for importing it

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("monitors", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.tests["web_url"] = _web_url
    environment.filters["cite"] = _cite
    environment.filters["not_inline"] = _not_inline
    return environment


def _not_inline(numbers: Sequence[int], text: str) -> list[int]:
    """The citation numbers `text` does not already carry inline (the chats' `with_citations` appends the same)."""
    inline = {int(number) for match in CITATION.finditer(text) for number in match.group(1).split(",")}
    return [number for number in dict.fromkeys(numbers) if number not in inline]


def _cite(text: str, cited: Mapping[int, DocumentCited]) -> Markup:
    """Plain `text` escaped, its `[n]` and `[n, m]` citations made links to the cited items (unknown numbers and
    non-web URLs stay text)."""
    from markupsafe import Markup, escape

    def link(number: int) -> Markup:
        item = cited.get(number)
        if item is None or not _web_url(item.url):
            return escape(number)
        return Markup('<a href="{}" title="{}" rel="noreferrer noopener">{}</a>').format(item.url, item.title, number)

    parts: list[Markup] = []
    end = 0
    for match in CITATION.finditer(text):
        numbers = [link(int(number)) for number in match.group(1).split(",")]
        parts += [escape(text[end : match.start()]), Markup("["), Markup(", ").join(numbers), Markup("]")]
        end = match.end()
    parts.append(escape(text[end:]))
    return Markup("").join(parts)


def _web_url(url: object) -> bool:
    """Whether an item's URL may be a link: http(s) only (a `javascript:` URL from a feed stays text)."""
    return isinstance(url, str) and urlsplit(url).scheme in ("http", "https")


def render_page(document: DigestDocument, *, page_url: str) -> str:
    """The page's HTML for a document (its file URLs under `page_url`)."""
    files = {file.kind: file for file in document.files}
    return (
        _templates()
        .get_template(PAGE_TEMPLATE)
        .render(
            doc=document,
            cited={cited.number: cited for cited in document.cited},
            page_url=page_url,
            chart=files.get("chart"),
            csv=files.get("csv"),
            finished=(document.run.finished_at or document.run.scheduled_for).astimezone(UTC),
            story_count=len(document.stories),
            item_count=sum(len(story.items) for story in document.stories),
        )
    )


_SAMPLE = DigestDocument(
    monitor=DocumentMonitor(id=1, topic="sample"),
    run=DocumentRun(id=1, scheduled_for=datetime(2026, 1, 1, tzinfo=UTC), finished_at=None),
    headline="sample",
    markdown="**sample** [1](https://lookout.invalid/)",
    developments=[],
    disputed=[],
    cited=[],
    tone=None,
    quality=None,
    without_model=None,
    failed_sources=[],
    novelty=DocumentNovelty(items=1, new_items=1, nothing_new=False, changes_since_last=None),
    stories=[
        DocumentStory(
            cluster_id=None, rank=1, score=None, relevance=None, credibility=None,
            items=[
                DocumentItem(id="x", title="sample", url="https://lookout.invalid/", source="x", published_at=None,
                             language=None, relevance=None, credibility=None, score=None, rank=1, delivered=True)
            ],
        )
    ],
    files=[],
    page_url=None,
)  # fmt: skip
"""What `warm` renders: one story with one item, enough to run every part of the template once."""


class DigestPages:
    """Find, validate and render digest pages; issue their URLs under PUBLIC_URL for messages and feeds."""

    def __init__(self, database: Database, *, public_url: str | None = None) -> None:
        self._database = database
        self._pages = DigestPageRepository(database)
        self._public_url = public_url.rstrip("/") if public_url else None
        self._rendered: OrderedDict[str, bytes] = OrderedDict()

    async def warm(self) -> None:
        """Do once, before the first reader comes, what a server's first page would otherwise pay for (~150 ms here):
        import the template engine and compile the template, open a database connection and compile the page's
        queries, render a sample page. Failing (the database is away) only leaves that to the first request."""
        try:
            await asyncio.to_thread(_templates().get_template, PAGE_TEMPLATE)
            await self._pages.run_of("-" * 32)  # no token has that form
            await ItemRepository(self._database).of_runs([0])
            render_page(_SAMPLE, page_url="https://lookout.invalid/digests/sample")
        except Exception as error:
            logger.warning("digest pages: warming up failed (%s); the first page pays for it", type(error).__name__)

    @property
    def public_url(self) -> str | None:
        return self._public_url

    async def url(self, run: RunRecord) -> str | None:
        """The run's page URL under PUBLIC_URL (its token made on first use); None without PUBLIC_URL or for a run
        that has no page (not a digest that went out)."""
        if self._public_url is None:
            return None
        return (await page_urls(self._database, [run], base_url=self._public_url)).get(run.id)

    async def document(self, run: RunRecord) -> DigestDocument | None:
        """The run's digest document (what a webhook sends), with its page's URL under PUBLIC_URL when the run has a
        page and PUBLIC_URL is set; None for a run without a readable digest (see `run_document`)."""
        return await run_document(self._database, run, page_url=await self.url(run))

    async def find(self, token: str) -> RunRecord | None:
        """The run of a page token, when it has a page; None for anything else."""
        if not looks_like_token(token):
            return None
        run = await self._pages.run_of(token)
        return run if run is not None and digest_went_out(run) else None

    def etag(self, run: RunRecord, kind: PageKind, *, token: str, base_url: str) -> str:
        """A strong validator of what `body` gives: runs do not change once finished; its files may be cleaned up."""
        files = sorted(run_files(run))
        basis = [PAGE_FORMAT, kind, run.id, run_time(run).isoformat(), self._base(base_url) + page_path(token), files]
        return '"' + hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:32] + '"'

    @staticmethod
    def last_modified(run: RunRecord) -> datetime:
        return run_time(run)

    @staticmethod
    def media_type(kind: PageKind) -> str:
        return PAGE_MEDIA_TYPES[kind]

    async def body(self, run: RunRecord, kind: PageKind, *, token: str, base_url: str) -> bytes | None:
        """The page (or its document) under `base_url`; None when the run's digest cannot be read any more."""
        etag = self.etag(run, kind, token=token, base_url=base_url)
        kept = self._rendered.get(etag)
        if kept is not None:
            self._rendered.move_to_end(etag)
            return kept
        page_url = self._base(base_url) + page_path(token)
        document = await run_document(self._database, run, page_url=page_url)
        if document is None:
            return None
        if kind == "json":
            body = document.model_dump_json(indent=1).encode()
        else:
            body = render_page(document, page_url=page_url).encode()
        self._rendered[etag] = body
        while len(self._rendered) > RENDERED_PAGES:
            self._rendered.popitem(last=False)
        return body

    async def file(self, token: str, name: str) -> PageFile | None:
        """A page's file by its name under the page (`chart.png`, `digest.csv`), when the run still has it."""
        kind = next((kind for kind, file in FILE_NAMES.items() if file == name), None)
        if kind is None:
            return None
        run = await self.find(token)
        if run is None:
            return None
        path = run_files(run).get(kind)
        if path is None:
            return None
        return PageFile(path=path, filename=file_name(run, kind), media_type=MEDIA_TYPES[kind])

    def _base(self, base_url: str) -> str:
        return self._public_url or base_url.rstrip("/")
