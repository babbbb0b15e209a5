"""A feed per monitor: Atom (RFC 4287) and JSON Feed 1.1 documents built from its stored runs, one entry per digest,
found by an unguessable token that a new token revokes.

Guarantees: a document holds only what the monitor's digests said (rendered from the same markdown the chats get,
with raw HTML refused and every text escaped by the XML or JSON writer); an unknown or revoked token finds nothing;
the same stored runs give byte-identical documents, so their ETag changes only when an entry does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit
from xml.etree import ElementTree

from markdown_it import MarkdownIt
from pydantic import ValidationError

from research import Digest, render_digest_markdown
from storage import Database, FeedTokenRepository, MonitorRecord, MonitorRepository, RunRecord, RunRepository

logger = logging.getLogger(__name__)

FeedKind = Literal["atom", "json"]
"""The two formats, named by their URL's extension."""

FEED_ENTRIES: Final = 30
"""Digests per document: a month of a daily monitor, enough for a reader that polls less than daily, while a
document stays small enough to build on every poll that is not a 304."""
TOKEN_BYTES: Final = 24
"""Random bytes in a token (32 URL-safe characters): unguessable, and short enough for a URL people paste."""
JSON_FEED_VERSION: Final = "https://jsonfeed.org/version/1.1"
ATOM_NS: Final = "http://www.w3.org/2005/Atom"
MEDIA_TYPES: Final[dict[FeedKind, str]] = {
    "atom": "application/atom+xml; charset=utf-8",
    "json": "application/feed+json; charset=utf-8",
}

_MARKDOWN: Final = MarkdownIt("commonmark", {"html": False, "breaks": True})
"""CommonMark with raw HTML off (a `<script>` in a title stays text; its link check refuses javascript: URLs), and a
line break where the markdown has one, as the chats show it (the list of sources is one line per source)."""


def feed_path(token: str, kind: FeedKind) -> str:
    """The path the HTTP server answers for a token: `/feeds/<token>.atom` or `/feeds/<token>.json`."""
    return f"/feeds/{token}.{kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedDocument:
    """One built feed, with what conditional GET compares."""

    body: bytes
    media_type: str
    etag: str
    """A strong validator: a quoted hash of the body."""
    last_modified: datetime
    """When the newest entry was written (the monitor's creation while it has none)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    run_id: int
    title: str
    link: str
    when: datetime
    html: str
    summary: str


class MonitorFeeds:
    """Issue, rotate and resolve monitors' feed tokens, and build their documents. Permission is the caller's:
    whoever may see the monitor may have its feed (commands check with `monitor_role`)."""

    def __init__(self, database: Database, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._tokens = FeedTokenRepository(database)
        self._monitors = MonitorRepository(database)
        self._runs = RunRepository(database)
        self._clock = clock

    async def token(self, monitor_id: int, *, rotate: bool = False) -> str:
        """The monitor's feed token, made on first use; `rotate`: a new one, and the old URLs answer 404."""
        return await self._tokens.issue(
            monitor_id, secrets.token_urlsafe(TOKEN_BYTES), replace=rotate, now=self._clock()
        )

    async def document(self, token: str, kind: FeedKind, *, base_url: str) -> FeedDocument | None:
        """The feed for `token` with its URLs under `base_url`, or None when no monitor has that token."""
        monitor_id = await self._tokens.monitor_of(token)
        monitor = await self._monitors.get(monitor_id) if monitor_id is not None else None
        if monitor is None:
            return None
        runs = await self._runs.digests_of_monitor(monitor.id, limit=FEED_ENTRIES)
        base = base_url.rstrip("/")
        self_url = base + feed_path(token, kind)
        entries = [entry for run in runs if (entry := _entry(run, fallback_link=self_url)) is not None]
        updated = max((entry.when for entry in entries), default=monitor.created_at)
        if kind == "atom":
            body = _atom(monitor, entries, base=base, token=token, updated=updated)
        else:
            body = _json_feed(monitor, entries, base=base, token=token)
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        return FeedDocument(body=body, media_type=MEDIA_TYPES[kind], etag=etag, last_modified=updated)


def digest_html(digest: Digest) -> str:
    """The digest as HTML, from the markdown every chat gets: its developments, citations and source links."""
    html: str = _MARKDOWN.render(render_digest_markdown(digest))
    return html


def _entry(run: RunRecord, *, fallback_link: str) -> _Entry | None:
    if not run.digest or not run.stats.get("delivered", True) or run.stats.get("nothing_new", False):
        return None  # what the chats got was a "nothing new" note, or nothing: no digest to list
    try:
        digest = Digest.model_validate(run.digest)
    except ValidationError:
        logger.warning("feed: run %s stores a digest this version cannot read; left out of the feed", run.id)
        return None
    if not digest.developments:  # "nothing new" runs sent nothing worth an entry
        return None
    lead = digest.developments[0].citations
    cited = {item.number: item.url for item in digest.cited}
    link = next((cited[n] for n in lead if n in cited), digest.cited[0].url if digest.cited else fallback_link)
    if urlsplit(link).scheme not in ("http", "https"):
        link = fallback_link
    return _Entry(
        run_id=run.id,
        title=digest.headline,
        link=link,
        when=run.finished_at or run.started_at,
        html=digest_html(digest),
        summary=digest.headline,
    )


def _tag(monitor: MonitorRecord, base: str, *parts: object) -> str:
    """A tag URI (RFC 4151): stable across token rotation, unique across Lookout installations."""
    host = urlsplit(base).hostname or "lookout.invalid"
    return f"tag:{host},{monitor.created_at.date().isoformat()}:monitor/{monitor.id}" + "".join(
        f"/{part}" for part in parts
    )


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _feed_title(monitor: MonitorRecord) -> str:
    return f"Lookout: {monitor.topic}"


def _atom(monitor: MonitorRecord, entries: Sequence[_Entry], *, base: str, token: str, updated: datetime) -> bytes:
    ElementTree.register_namespace("", ATOM_NS)

    def sub(parent: ElementTree.Element, tag: str, text: str | None = None, **attributes: str) -> ElementTree.Element:
        element = ElementTree.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attributes)
        element.text = text
        return element

    feed = ElementTree.Element(f"{{{ATOM_NS}}}feed")
    sub(feed, "id", _tag(monitor, base))
    sub(feed, "title", _feed_title(monitor))
    sub(feed, "subtitle", f"Cited digests of Lookout monitor #{monitor.id}")
    sub(feed, "updated", _iso(updated))
    sub(feed, "link", rel="self", type="application/atom+xml", href=base + feed_path(token, "atom"))
    sub(feed, "link", rel="alternate", type="application/feed+json", href=base + feed_path(token, "json"))
    author = sub(feed, "author")
    sub(author, "name", "Lookout")
    sub(feed, "generator", "Lookout")
    for entry in entries:
        item = sub(feed, "entry")
        sub(item, "id", _tag(monitor, base, "run", entry.run_id))
        sub(item, "title", entry.title)
        sub(item, "link", rel="alternate", type="text/html", href=entry.link)
        sub(item, "published", _iso(entry.when))
        sub(item, "updated", _iso(entry.when))
        sub(item, "summary", entry.summary)
        sub(item, "content", entry.html, type="html")
    body: bytes = ElementTree.tostring(feed, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + body


def _json_feed(monitor: MonitorRecord, entries: Sequence[_Entry], *, base: str, token: str) -> bytes:
    document: dict[str, Any] = {
        "version": JSON_FEED_VERSION,
        "title": _feed_title(monitor),
        "description": f"Cited digests of Lookout monitor #{monitor.id}",
        "feed_url": base + feed_path(token, "json"),
        "authors": [{"name": "Lookout"}],
        "items": [
            {
                "id": _tag(monitor, base, "run", entry.run_id),
                "url": entry.link,
                "title": entry.title,
                "summary": entry.summary,
                "content_html": entry.html,
                "date_published": _iso(entry.when),
                "date_modified": _iso(entry.when),
            }
            for entry in entries
        ],
    }
    return json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
