"""Parse RSS 2.0, Atom and JSON Feed documents into Items, and filter text by a query's keywords."""

from __future__ import annotations

import io
import json
import re
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import feedparser
from pydantic import BaseModel, ConfigDict, ValidationError

from sources.base import Item, SourceBatch, SourceError, SourceErrorKind, item_id
from sources.urls import canonical_url
from sources.xmlguard import guard_xml

if TYPE_CHECKING:
    from sources.http import HttpResponse

# Elements after which a reader would see a break; their text must not run into the next word.
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure",
    "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
    "section", "table", "td", "th", "tr", "ul",
})  # fmt: skip
_INVISIBLE_TAGS = frozenset({"script", "style", "template", "noscript"})
# HTML's elements, current and obsolete (WHATWG): where a title's markup is only guessed at, a tag not named here is a
# word the author wrote ("C++ <vector>", "<T>"), not markup.
_HTML_ELEMENTS = frozenset({
    "a", "abbr", "acronym", "address", "applet", "area", "article", "aside", "audio", "b", "base", "basefont", "bdi",
    "bdo", "bgsound", "big", "blink", "blockquote", "body", "br", "button", "canvas", "caption", "center", "cite",
    "code", "col", "colgroup", "data", "datalist", "dd", "del", "details", "dfn", "dialog", "dir", "div", "dl", "dt",
    "em", "embed", "fieldset", "figcaption", "figure", "font", "footer", "form", "frame", "frameset", "h1", "h2",
    "h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "i", "iframe", "image", "img", "input", "ins",
    "isindex", "kbd", "keygen", "label", "legend", "li", "link", "listing", "main", "map", "mark", "marquee", "math",
    "menu", "meta", "meter", "multicol", "nav", "nobr", "noembed", "noframes", "noscript", "object", "ol",
    "optgroup", "option", "output", "p", "param", "picture", "plaintext", "pre", "progress", "q", "rb", "rp", "rt",
    "rtc", "ruby", "s", "samp", "script", "search", "section", "select", "slot", "small", "source", "spacer", "span",
    "strike", "strong", "style", "sub", "summary", "sup", "svg", "table", "tbody", "td", "template", "textarea",
    "tfoot", "th", "thead", "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr", "xmp",
})  # fmt: skip
_TITLE_FROM_TEXT_CHARS = 120

# Common English function words: requiring them would drop matches for no reason.
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "how", "in",
    "into", "is", "it", "its", "of", "on", "or", "that", "the", "their", "this", "to", "was", "were",
    "what", "when", "where", "which", "who", "why", "will", "with", "about", "after", "before", "new",
    "news", "latest",
})  # fmt: skip


class _TextExtractor(HTMLParser):
    """Collects the visible text of an HTML fragment (with `unknown_tags_as_text`, tags HTML lacks as written)."""

    def __init__(self, *, unknown_tags_as_text: bool = False) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden_depth = 0
        self._unknown_as_text = unknown_tags_as_text

    def _as_text(self, tag: str) -> bool:
        return self._unknown_as_text and tag not in _HTML_ELEMENTS

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._as_text(tag):
            self.handle_data(self.get_starttag_text() or "")
        else:
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._as_text(tag):
            self.handle_data(self.get_starttag_text() or "")
        elif tag in _INVISIBLE_TAGS:
            self._hidden_depth += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._as_text(tag):
            self.handle_data(f"</{tag}>")
        elif tag in _INVISIBLE_TAGS:
            self._hidden_depth = max(0, self._hidden_depth - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth:
            self.parts.append(data)


def html_to_text(html: str, *, unknown_tags_as_text: bool = False) -> str:
    """Plain text of an HTML fragment: tags dropped, entities decoded, whitespace collapsed.

    `unknown_tags_as_text`: a tag that is no HTML element stays as written, for text only guessed to be HTML."""
    if "<" not in html and "&" not in html:
        return " ".join(html.split())
    extractor = _TextExtractor(unknown_tags_as_text=unknown_tags_as_text)
    extractor.feed(html)
    extractor.close()
    return plain_text("".join(extractor.parts))


def plain_text(text: str) -> str:
    """Plain text tidied the way `html_to_text` leaves HTML's: each line's whitespace collapsed, blank lines dropped."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def construct_text(value: str, content_type: str | None) -> str:
    """The text of a feed's text construct (a title, a summary, a content) whose type the feed declares (Atom): HTML
    and XHTML as their visible text, plain text as written, so "History of the <blink> tag" keeps its brackets."""
    if content_type and "html" not in content_type.lower():
        return plain_text(value)
    return html_to_text(value)


def title_from_text(text: str) -> str:
    """A short title cut from the text on a word boundary, for entries that have no title."""
    first_line = text.strip().split("\n", 1)[0]
    if len(first_line) <= _TITLE_FROM_TEXT_CHARS:
        return first_line
    cut = first_line[:_TITLE_FROM_TEXT_CHARS].rsplit(" ", 1)[0]
    return cut + "…"


# ---------------------------------------------------------------------------------------------
# Keyword filter


_TERM = re.compile(r'"([^"]+)"|(\S+)')
_EDGE_PUNCTUATION = "\"'“”‘’«»()[]{}<>,.;:!?"


def _normalise(text: str) -> str:
    # NFKC folds full-width Latin and compatibility forms, casefold handles ß, Σ and friends.
    return unicodedata.normalize("NFKC", text).casefold()


def query_terms(query: str, *, drop_stop_words: bool = True) -> list[str]:
    """The terms of a query: quoted phrases kept whole, words stripped of edge punctuation.

    English stop-words are dropped unless nothing else would be left.
    """
    terms: list[str] = []
    for match in _TERM.finditer(query):
        phrase, word = match.group(1), match.group(2)
        # A leading "+" is the old "must contain" operator; a trailing one belongs to the word (C++).
        term = " ".join(phrase.split()) if phrase is not None else word.strip(_EDGE_PUNCTUATION).lstrip("+")
        if term:
            terms.append(term)
    if drop_stop_words:
        kept = [t for t in terms if " " in t or _normalise(t) not in STOP_WORDS]
        if kept:
            return kept
    return terms


def _term_pattern(term: str) -> re.Pattern[str]:
    normalised = _normalise(term)
    escaped = r"\s+".join(re.escape(part) for part in normalised.split())
    if not normalised.isascii():
        # Scripts without spaces (Chinese, Japanese) and inflected words: a substring must do.
        return re.compile(escaped)
    # Latin words must start on a word boundary ("ai" must not match "said") and may carry a plural
    # or possessive ending ("model" matches "models", "OpenAI's").
    prefix = r"(?<!\w)" if normalised[:1].isalnum() else ""
    suffix = r"(?:'s|’s|s|es)?(?!\w)" if normalised[-1:].isalnum() else ""
    return re.compile(prefix + escaped + suffix)


def matches_keywords(text: str, query: str) -> bool:
    """Whether every term of the query appears in the text (case-insensitive; quoted phrases together).

    An empty query matches everything.
    """
    terms = query_terms(query)
    if not terms:
        return True
    haystack = _normalise(text)
    return all(_term_pattern(term).search(haystack) for term in terms)


# ---------------------------------------------------------------------------------------------
# Feed parsing


@dataclass(frozen=True, kw_only=True)
class FeedEntry:
    """One usable entry of a feed, before it becomes an Item (sources add what they know)."""

    link: str
    """Absolute http(s) link as the feed gave it (not yet canonical)."""
    title: str
    text: str
    author: str | None
    published: datetime | None
    language: str | None
    """The entry's own language tag, when it has one."""
    language_hint: str | None = None
    """The feed-level language: many feeds declare one for everything they carry, so it only backs detection up."""
    source_name: str | None = None
    """The `<source>` element of RSS 2.0 (Google News puts the outlet there)."""
    source_url: str | None = None
    entry_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class ParsedFeed:
    """The usable entries of a feed and how many malformed ones were skipped."""

    entries: list[FeedEntry] = field(default_factory=list)
    skipped: int = 0
    title: str | None = None


class _JsonFeedAuthor(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str | None = None


class _JsonFeedItem(BaseModel):
    """The fields of a JSON Feed (1.0/1.1) item that become an Item."""

    model_config = ConfigDict(extra="ignore")
    id: str | int | None = None
    url: str | None = None
    external_url: str | None = None
    title: str | None = None
    content_html: str | None = None
    content_text: str | None = None
    summary: str | None = None
    date_published: str | None = None
    date_modified: str | None = None
    author: _JsonFeedAuthor | None = None
    """JSON Feed 1.0."""
    authors: list[_JsonFeedAuthor] = []
    """JSON Feed 1.1."""
    language: str | None = None


def _language_code(value: object) -> str | None:
    """`en-US` → `en`; anything that is not a language tag → None."""
    if not isinstance(value, str):
        return None
    code = value.strip().split("-")[0].split("_")[0].lower()
    return code if 2 <= len(code) <= 3 and code.isalpha() else None


def _absolute_http_link(link: object, base: str) -> str | None:
    if not isinstance(link, str) or not link.strip():
        return None
    absolute = urljoin(base, link.strip())
    parts = urlsplit(absolute)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return absolute


def struct_time_to_utc(value: object) -> datetime | None:
    """A feedparser date (a struct_time already converted to UTC) as an aware datetime; else None."""
    if not isinstance(value, time.struct_time):
        return None
    try:
        return datetime(*value[:6], tzinfo=UTC)
    except ValueError:
        return None


def as_utc(moment: datetime) -> datetime:
    """The same moment, UTC-aware; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def in_window(published: datetime | None, *, since: datetime | None, until: datetime | None) -> bool:
    """Whether a publication time falls in [since, until]; an unknown time is kept (it cannot be judged)."""
    if published is None:
        return True
    if since is not None and published < as_utc(since):
        return False
    return not (until is not None and published > as_utc(until))


def entry_published(entry: Any) -> datetime | None:
    """When a feedparser entry was published, else last updated, else created (Atom 0.3, `dcterms:created`), in UTC;
    None when unknown or unreadable."""
    # dict.get, not entry.get: feedparser's own lookup maps missing date keys onto each other and warns.
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        moment = struct_time_to_utc(dict.get(entry, key))
        if moment is not None:
            return moment
    return None


def parse_iso_datetime(value: str | None) -> datetime | None:
    """An RFC 3339 / ISO 8601 timestamp as a UTC-aware datetime; naive means UTC; garbage → None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return as_utc(parsed)


def _type_of(detail: object) -> str | None:
    value = detail.get("type") if isinstance(detail, dict) else None
    return value if isinstance(value, str) else None


def _entry_from_feedparser(entry: Any, *, base: str, feed_language: str | None, typed: bool) -> FeedEntry | None:
    """`typed`: the feed declares its constructs' types (Atom), so a plain-text one is shown as written."""
    link = _absolute_http_link(entry.get("link"), base)
    if link is None:
        for candidate in entry.get("links") or []:
            if candidate.get("rel", "alternate") == "alternate":
                link = _absolute_http_link(candidate.get("href"), base)
                if link:
                    break
    if link is None:
        return None
    raw_title = entry.get("title") or ""
    if typed:
        title = construct_text(raw_title, _type_of(entry.get("title_detail")))
    else:
        # RSS declares no type: its titles carry escaped HTML in the wild (feedparser's guess misses `<img …>Hi`),
        # and words in brackets ("C++ <vector>") too, so HTML's own tags go and any other stays.
        title = html_to_text(raw_title, unknown_tags_as_text=True)
    title = " ".join(title.split())
    body, body_type = entry.get("summary") or "", _type_of(entry.get("summary_detail"))
    for content in entry.get("content") or []:
        # Full content beats a teaser when the feed gives both.
        value = content.get("value") or ""
        if len(value) > len(body):
            body, body_type = value, _type_of(content)
    text = construct_text(body, body_type) if typed else html_to_text(body)
    if not title and not text:
        return None
    authors = [a.get("name") for a in entry.get("authors") or [] if a.get("name")]
    author = ", ".join(authors) if authors else entry.get("author") or None
    source = entry.get("source") or {}
    return FeedEntry(
        link=link,
        title=title or title_from_text(text),
        text=text,
        author=author,
        published=entry_published(entry),
        language=_language_code(entry.get("language")),
        language_hint=feed_language,
        source_name=html_to_text(source.get("title") or "") or None,
        source_url=source.get("href") or None,
        entry_id=entry.get("id") or None,
    )


def _read_xml_feed(content: bytes, *, feed_url: str, content_type: str | None) -> ParsedFeed:
    # Checked first (sources.xmlguard): feedparser falls back to a loose parser that expands entities, so no
    # document that declares or uses one may reach it. The guard also chooses the charset (sources.charsets),
    # handed to feedparser as the response's: alone it would read an undeclared KOI8-R feed as windows-1252.
    checked = guard_xml(content, noun="feed", content_type=content_type)
    # BytesIO, never bare bytes/str: feedparser treats a string as a URL or path and would fetch it.
    # No Content-Location either: relative links then resolve against the site's own link below (an
    # RSS feed is often served from a feed host), and xml:base still wins where a feed declares one.
    parsed = feedparser.parse(
        io.BytesIO(checked.content),
        response_headers={"content-type": f"application/xml; charset={checked.codec}"},
    )
    if not parsed.get("entries") and not parsed.get("version"):
        # An HTML page, an error page or plain garbage: say so instead of returning "no items".
        reason = parsed.get("bozo_exception") or "no RSS/Atom structure"
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"not a feed ({feed_url}): {reason}")
    feed_info = parsed.get("feed") or {}
    feed_language = _language_code(feed_info.get("language"))
    typed = str(parsed.get("version") or "").startswith("atom")
    base = feed_info.get("link") or feed_url
    entries: list[FeedEntry] = []
    skipped = 0
    for raw in parsed.get("entries") or []:
        try:
            entry = _entry_from_feedparser(
                raw, base=_absolute_http_link(base, feed_url) or feed_url, feed_language=feed_language, typed=typed
            )
        except (AttributeError, TypeError, ValueError):
            entry = None
        if entry is None:
            skipped += 1
        else:
            entries.append(entry)
    title = html_to_text(feed_info.get("title") or "") or None
    return ParsedFeed(entries=entries, skipped=skipped, title=title)


def _read_json_feed(document: dict[str, Any], *, feed_url: str) -> ParsedFeed:
    feed_language = _language_code(document.get("language"))
    base = document.get("home_page_url") or feed_url
    base = _absolute_http_link(base, feed_url) or feed_url
    raw_items = document.get("items")
    if not isinstance(raw_items, list):
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"JSON Feed without an items list ({feed_url})")
    entries: list[FeedEntry] = []
    skipped = 0
    for raw in raw_items:
        try:
            item = _JsonFeedItem.model_validate(raw)
        except ValidationError:
            skipped += 1
            continue
        link = _absolute_http_link(item.url, base) or _absolute_http_link(item.external_url, base)
        # JSON Feed 1.1: a title and a summary are plain text; only content_html is HTML.
        title = " ".join((item.title or "").split())
        text = (
            plain_text(item.content_text or "")
            or html_to_text(item.content_html or "")
            or plain_text(item.summary or "")
        )
        if link is None or (not title and not text):
            skipped += 1
            continue
        names = [a.name for a in item.authors if a.name] or (
            [item.author.name] if item.author and item.author.name else []
        )
        entries.append(
            FeedEntry(
                link=link,
                title=title or title_from_text(text),
                text=text,
                author=", ".join(names) or None,
                published=parse_iso_datetime(item.date_published or item.date_modified),
                language=_language_code(item.language),
                language_hint=feed_language,
                entry_id=str(item.id) if item.id is not None else None,
            )
        )
    feed_title = document.get("title")
    return ParsedFeed(entries=entries, skipped=skipped, title=feed_title if isinstance(feed_title, str) else None)


def _as_json_feed(content: bytes) -> dict[str, Any] | None:
    """The document when the bytes are a JSON Feed, else None (then it is XML, or garbage)."""
    head = content.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head != b"{":
        return None
    try:
        document = json.loads(content.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(SourceErrorKind.BAD_RESPONSE, f"feed is neither XML nor valid JSON: {exc}") from exc
    if not isinstance(document, dict) or "jsonfeed.org" not in str(document.get("version", "")):
        raise SourceError(SourceErrorKind.BAD_RESPONSE, "JSON document is not a JSON Feed")
    return document


def read_feed(content: bytes, *, feed_url: str, content_type: str | None = None) -> ParsedFeed:
    """Parse RSS 2.0 / RSS 1.0 / Atom / JSON Feed bytes into entries; malformed entries are counted.

    `content_type` is the response's `Content-Type`: its charset is the first choice for decoding.
    Raises `SourceError(BAD_RESPONSE)` when the document is not a feed at all, `UnsafeXml` (a `SourceError` whose
    message says why) when `sources.xmlguard` refuses it.
    """
    document = _as_json_feed(content)
    if document is not None:
        return _read_json_feed(document, feed_url=feed_url)
    return _read_xml_feed(content, feed_url=feed_url, content_type=content_type)


def entry_to_item(entry: FeedEntry, *, source: str, query: str) -> Item:
    """The Item for a feed entry; its id is the hash of the canonical link."""
    url = canonical_url(entry.link)
    return Item(
        id=item_id(source, canonical=url),
        source=source,
        url=url,
        title=entry.title,
        text=entry.text,
        author=entry.author,
        published=entry.published,
        language=entry.language,
        language_hint=entry.language_hint,
        query=query,
    )


def parse_feed(
    content: bytes, *, source: str, query: str, feed_url: str, content_type: str | None = None
) -> SourceBatch:
    """Items from RSS 2.0 / Atom / JSON Feed bytes; malformed entries are skipped and counted.

    No keyword filtering happens here (see `matches_keywords`). `content_type` is the response's header (its
    charset decides the decoding first). Raises `SourceError(BAD_RESPONSE)` when the bytes are not a feed at all.
    """
    parsed = read_feed(content, feed_url=feed_url, content_type=content_type)
    items: list[Item] = []
    skipped = parsed.skipped
    for entry in parsed.entries:
        try:
            items.append(entry_to_item(entry, source=source, query=query))
        except (ValueError, ValidationError):
            skipped += 1
    return SourceBatch(items=items, skipped=skipped)


def parse_feed_response(response: HttpResponse, *, source: str, query: str, feed_url: str) -> SourceBatch:
    """`parse_feed` over a fetched feed, decoded as its Content-Type says."""
    return parse_feed(
        response.content, source=source, query=query, feed_url=feed_url, content_type=response.content_type
    )
