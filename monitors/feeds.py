"""A feed per monitor and per chat's briefing: Atom (RFC 4287) and JSON Feed 1.1 documents built from stored runs, one
entry per digest (or briefing) that went out, found by an unguessable token that a new token revokes.

Guarantees: a document holds only what the digests and briefings said (rendered from the same markdown the chats get,
with raw HTML refused and every text escaped by the XML or JSON writer); an unknown or revoked token finds nothing;
the same stored runs give byte-identical documents, so their ETag changes only when an entry does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape as escape_html
from typing import Any, Final, Literal
from urllib.parse import urlsplit
from xml.etree import ElementTree
from zoneinfo import ZoneInfo

from markdown_it import MarkdownIt

from kernel import Clock, utc_now
from monitors.document import digest_went_out, page_urls, run_time, stored_digest
from monitors.tokens import new_token
from research import Digest, render_digest_markdown
from storage import Database, FeedSubject, RunRecord
from storage.repositories import ChatRepository, FeedTokenRepository, MonitorRepository, RunRepository

logger = logging.getLogger(__name__)

FeedKind = Literal["atom", "json"]
"""The two formats, named by their URL's extension."""

FEED_ENTRIES: Final = 30
"""Digests per document: a month of a daily monitor, enough for a reader that polls less than daily, while a
document stays small enough to build on every poll that is not a 304."""
FEED_FORMAT: Final = 2
"""Part of every ETag: raise it when a change to this module changes what the same runs render to, so readers that
hold the old rendering fetch the new one."""
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


class FeedDocument:
    """One feed: what conditional GET compares, known from the stored runs alone, and its body, rendered only when
    asked for (rendering is most of a feed's cost, and a reader that already has this version gets a 304 without it).
    """

    def __init__(self, *, media_type: str, etag: str, last_modified: datetime, render: Callable[[], bytes]) -> None:
        self.media_type = media_type
        self.etag = etag
        """A strong validator: a quoted hash of what the document is built from (runs do not change once finished)."""
        self.last_modified = last_modified
        """When the newest entry was written (the monitor's or chat's creation while it has none)."""
        self._render = render

    @functools.cached_property
    def body(self) -> bytes:
        return self._render()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    id: str
    title: str
    link: str
    when: datetime
    html: str
    summary: str
    page: str | None = None
    """The digest's web page, when it has one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Feed:
    """What a document says about itself: its id (a tag URI), title and description, and when its monitor or chat was
    made (the feed's date while it lists nothing)."""

    id: str
    title: str
    description: str
    created: datetime

    @classmethod
    def of(cls, host: str, path: str, *, title: str, description: str, created: datetime) -> _Feed:
        """The feed of what `path` names (`monitor/3`), its id a tag URI minted on `host` the day it was made."""
        return cls(
            id=f"tag:{host},{created.date().isoformat()}:{path}", title=title, description=description, created=created
        )


class MonitorFeeds:
    """Issue, rotate and resolve the feed tokens of monitors and of chats' briefings, and build their documents.
    Permission is the caller's: whoever may see the monitor may have its feed (commands check with `monitor_role`);
    a chat's briefing feed is the chat's."""

    def __init__(self, database: Database, *, clock: Clock = utc_now) -> None:
        self._database = database
        self._tokens = FeedTokenRepository(database)
        self._monitors = MonitorRepository(database)
        self._chats = ChatRepository(database)
        self._runs = RunRepository(database)
        self._clock = clock

    async def token(self, monitor_id: int, *, rotate: bool = False) -> str:
        """The monitor's feed token, made on first use; `rotate`: a new one, and the old URLs answer 404."""
        return await self._issue(FeedSubject(monitor_id=monitor_id), rotate=rotate)

    async def briefing_token(self, chat_id: int, *, rotate: bool = False) -> str:
        """The token of the chat's briefing feed, made on first use; `rotate`: a new one, the old URLs answer 404."""
        return await self._issue(FeedSubject(chat_id=chat_id), rotate=rotate)

    async def _issue(self, subject: FeedSubject, *, rotate: bool) -> str:
        return await self._tokens.issue(subject, new_token(), replace=rotate, now=self._clock())

    async def document(self, token: str, kind: FeedKind, *, base_url: str) -> FeedDocument | None:
        """The feed for `token` with its URLs under `base_url`, or None when nothing has that token."""
        subject = await self._tokens.subject_of(token)
        if subject is None:
            return None
        base = base_url.rstrip("/")
        self_url = base + feed_path(token, kind)
        host = urlsplit(base).hostname or "lookout.invalid"
        if subject.monitor_id is not None:
            monitor = await self._monitors.get(subject.monitor_id)
            if monitor is None:
                return None
            feed = _Feed.of(
                host,
                f"monitor/{monitor.id}",
                title=f"Lookout: {monitor.topic}",
                description=f"Cited digests of Lookout monitor #{monitor.id}",
                created=monitor.created_at,
            )
            tag = feed.id
            runs = [
                run
                for run in await self._runs.digests_of_monitor(monitor.id, limit=FEED_ENTRIES)
                if digest_went_out(run)
            ]

            pages: dict[int, str] = await page_urls(self._database, runs, base_url=base)

            def entries() -> list[_Entry]:
                return [
                    entry
                    for run in runs
                    if (entry := _entry(run, tag=tag, fallback_link=self_url, page=pages.get(run.id))) is not None
                ]

        else:
            chat = await self._chats.get(subject.chat_id) if subject.chat_id is not None else None
            if chat is None:
                return None
            feed = _Feed.of(
                host,
                f"briefing/{chat.id}",
                title=f"Lookout briefing: {chat.title or 'your chat'}",
                description="The briefings Lookout sends this chat, every topic it reads that way",
                created=chat.created_at,
            )
            tag = feed.id
            runs = await self._runs.briefings_of_chat(chat.id, limit=FEED_ENTRIES)
            zone = chat.timezone
            pages = {}

            def entries() -> list[_Entry]:
                return [_briefing_entry(run, zone, tag=tag, link=self_url) for run in runs]

        updated = max((run_time(run) for run in runs), default=feed.created)
        basis = [
            FEED_FORMAT,
            kind,
            self_url,
            feed.title,
            feed.description,
            [[run.id, _iso(run_time(run)), pages.get(run.id)] for run in runs],
        ]
        etag = '"' + hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:32] + '"'

        def render() -> bytes:
            if kind == "atom":
                return _atom(feed, entries(), base=base, token=token, updated=updated)
            return _json_feed(feed, entries(), base=base, token=token)

        return FeedDocument(media_type=MEDIA_TYPES[kind], etag=etag, last_modified=updated, render=render)


def digest_html(digest: Digest) -> str:
    """The digest as HTML, from the markdown every chat gets: its developments, citations and source links."""
    return markdown_html(render_digest_markdown(digest))


def markdown_html(markdown: str) -> str:
    """Markdown Lookout wrote (a digest, a briefing; an email destination's body) as HTML: CommonMark, raw HTML
    refused, unsafe links dropped."""
    html: str = _MARKDOWN.render(markdown)
    return html


def _entry(run: RunRecord, *, tag: str, fallback_link: str, page: str | None) -> _Entry | None:
    digest = stored_digest(run)
    if digest is None:  # logged; left out of the feed
        return None
    if not digest.developments:  # "nothing new" runs sent nothing worth an entry
        return None
    lead = digest.developments[0].citations
    cited = {item.number: item.url for item in digest.cited}
    link = next((cited[n] for n in lead if n in cited), digest.cited[0].url if digest.cited else fallback_link)
    if urlsplit(link).scheme not in ("http", "https"):
        link = fallback_link
    return _Entry(
        id=f"{tag}/run/{run.id}",
        title=digest.headline,
        link=link,
        when=run_time(run),
        html=digest_html(digest) + (f'<p><a href="{escape_html(page)}">Full digest</a></p>\n' if page else ""),
        summary=digest.headline,
        page=page,
    )


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _briefing_entry(run: RunRecord, timezone: str, *, tag: str, link: str) -> _Entry:
    when = run_time(run)
    day = when.astimezone(ZoneInfo(timezone)).strftime("%Y-%m-%d %H:%M")
    topics = run.stats.get("topics")
    title = f"Briefing of {day}" + (f" ({topics} topics)" if isinstance(topics, int) and topics > 1 else "")
    text = str(run.stats.get("text", ""))
    html: str = _MARKDOWN.render(text)
    return _Entry(id=f"{tag}/run/{run.id}", title=title, link=f"{link}#briefing-{run.id}", when=when, html=html,
                  summary=title)  # fmt: skip


def _atom(feed_info: _Feed, entries: Sequence[_Entry], *, base: str, token: str, updated: datetime) -> bytes:
    ElementTree.register_namespace("", ATOM_NS)

    def sub(parent: ElementTree.Element, tag: str, text: str | None = None, **attributes: str) -> ElementTree.Element:
        element = ElementTree.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attributes)
        element.text = text
        return element

    feed = ElementTree.Element(f"{{{ATOM_NS}}}feed")
    sub(feed, "id", feed_info.id)
    sub(feed, "title", feed_info.title)
    sub(feed, "subtitle", feed_info.description)
    sub(feed, "updated", _iso(updated))
    sub(feed, "link", rel="self", type="application/atom+xml", href=base + feed_path(token, "atom"))
    sub(feed, "link", rel="alternate", type="application/feed+json", href=base + feed_path(token, "json"))
    author = sub(feed, "author")
    sub(author, "name", "Lookout")
    sub(feed, "generator", "Lookout")
    for entry in entries:
        item = sub(feed, "entry")
        sub(item, "id", entry.id)
        sub(item, "title", entry.title)
        sub(item, "link", rel="alternate", type="text/html", href=entry.link)
        if entry.page:
            sub(item, "link", rel="related", type="text/html", href=entry.page, title="Full digest")
        sub(item, "published", _iso(entry.when))
        sub(item, "updated", _iso(entry.when))
        sub(item, "summary", entry.summary)
        sub(item, "content", entry.html, type="html")
    body: bytes = ElementTree.tostring(feed, encoding="utf-8", xml_declaration=False)
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + body


def _json_feed(feed: _Feed, entries: Sequence[_Entry], *, base: str, token: str) -> bytes:
    document: dict[str, Any] = {
        "version": JSON_FEED_VERSION,
        "title": feed.title,
        "description": feed.description,
        "feed_url": base + feed_path(token, "json"),
        "authors": [{"name": "Lookout"}],
        "items": [
            {
                "id": entry.id,
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
