"""Google News through its RSS search: headlines from many outlets, per language and region."""

from __future__ import annotations

import base64
import binascii
import math
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from kernel import utc_now
from sources.api import ApiSource
from sources.base import Item, SearchQuery, SourceBatch, item_id
from sources.config import SourcesConfig
from sources.feeds import FeedEntry, as_utc, in_window, read_feed
from sources.http import HttpClient
from sources.urls import canonical_url

DEFAULT_LANGUAGE = "en"
# The edition Google News serves by default for a language when the query names no region.
DEFAULT_REGION = {
    "en": "US", "zh": "CN", "ja": "JP", "ko": "KR", "de": "DE", "fr": "FR", "es": "ES", "it": "IT",
    "pt": "BR", "ru": "RU", "nl": "NL", "pl": "PL", "tr": "TR", "uk": "UA", "ar": "EG", "he": "IL",
    "hi": "IN", "id": "ID", "vi": "VN", "th": "TH", "sv": "SE", "no": "NO", "cs": "CZ", "el": "GR",
}  # fmt: skip
# Languages whose editions carry a regional variant in `hl` (`en-GB`, `pt-BR`, `zh-TW`).
_REGIONAL_HL = frozenset({"en", "zh", "pt", "es"})
WHEN_MAX_DAYS = 30
"""Beyond this a relative `when:` window is replaced by an `after:` date."""


def edition(language: str | None, region: str | None) -> tuple[str, str, str]:
    """Google News `hl`, `gl` and `ceid` for a language and region (default English, United States)."""
    lang = (language or DEFAULT_LANGUAGE).lower().split("-")[0]
    country = (region or DEFAULT_REGION.get(lang, "US")).upper()
    hl = f"{lang}-{country}" if lang in _REGIONAL_HL else lang
    ceid_lang = lang
    if lang == "zh":
        ceid_lang = "zh-Hant" if country in ("TW", "HK", "MO") else "zh-Hans"
    elif lang == "pt":
        ceid_lang = "pt-150" if country == "PT" else "pt-419"
    elif lang == "es" and country != "ES":
        ceid_lang = "es-419"
    return hl, country, f"{country}:{ceid_lang}"


def time_operators(query: SearchQuery, *, now: datetime) -> list[str]:
    """Search operators for the query's window: `when:Nh`/`when:Nd` when recent, else `after:`/`before:`."""
    operators: list[str] = []
    since = as_utc(query.since) if query.since is not None else None
    until = as_utc(query.until) if query.until is not None else None
    if since is not None and until is None:
        age = now - since
        hours = math.ceil(age.total_seconds() / 3600)
        if hours <= 48:
            return [f"when:{max(1, hours)}h"]
        if age <= timedelta(days=WHEN_MAX_DAYS):
            return [f"when:{math.ceil(age.total_seconds() / 86400)}d"]
    if since is not None:
        operators.append(f"after:{since.date().isoformat()}")
    if until is not None:
        # `before:` excludes its day; the day after `until` keeps `until`'s own day in.
        operators.append(f"before:{(until.date() + timedelta(days=1)).isoformat()}")
    return operators


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def decode_google_news_link(link: str) -> str | None:
    """The publisher URL inside a Google News article link, when it is there to read; else None.

    Older article ids (`CBMi…`) are base64 of a small protobuf whose field 4 is the URL itself: free
    to decode. Newer ids (`AU_yqL…` inside) only resolve through a request to Google per link, which
    is not cheap, so those links are kept as they are (they still redirect a reader correctly).
    """
    parts = urlsplit(link)
    if parts.hostname != "news.google.com":
        return None
    segments = [s for s in parts.path.split("/") if s]
    if "articles" not in segments[:-1]:
        return None
    token = segments[segments.index("articles") + 1]
    try:
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None
    position = 0
    try:
        while position < len(data):
            key, position = _read_varint(data, position)
            field_number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                _, position = _read_varint(data, position)
            elif wire_type == 2:
                length, position = _read_varint(data, position)
                value = data[position : position + length]
                position += length
                if field_number == 4 and value.startswith((b"http://", b"https://")):
                    url = value.decode("ascii")
                    return url if url.isprintable() and " " not in url else None
            else:
                return None
    except (ValueError, UnicodeDecodeError):
        return None
    return None


def _strip_outlet(title: str, outlet: str | None) -> str:
    if outlet:
        suffix = f" - {outlet}"
        if title.endswith(suffix) and len(title) > len(suffix):
            return title[: -len(suffix)].rstrip()
    return title


def _related_text(text: str, *, headline: str, outlet: str | None) -> str:
    """The description minus the lines that only repeat the headline and outlet."""
    repeats = {headline, f"{headline} {outlet}" if outlet else headline}
    kept = [line for line in text.split("\n") if line.strip() and line.strip() not in repeats]
    return "\n".join(kept)


def entry_to_news_item(entry: FeedEntry, *, query: SearchQuery) -> Item:
    """An Item for a Google News entry: outlet as author, outlet suffix off the title, link decoded if cheap."""
    outlet = entry.source_name
    headline = _strip_outlet(entry.title, outlet)
    url = canonical_url(decode_google_news_link(entry.link) or entry.link)
    return Item(
        id=item_id("news", canonical=url),
        source="news",
        url=url,
        title=headline,
        text=_related_text(entry.text, headline=headline, outlet=outlet),
        author=outlet or entry.author,
        published=entry.published,
        # The edition's language is not the headline's (an English edition carries Chinese headlines too): only
        # what the entry itself states; collection detects the rest from the text, the edition's only a hint.
        language=entry.language.lower().split("-")[0] if entry.language else None,
        language_hint=entry.language_hint,
        query=query.text,
    )


class GoogleNewsSource(ApiSource):
    """Headlines from Google News RSS search (unofficial; links redirect through Google)."""

    name = "news"

    def __init__(self, *, client: HttpClient, config: SourcesConfig) -> None:
        super().__init__(client=client, config=config)
        self._search_url = config.news_rss_url.rstrip("/") + "/search"

    async def search(self, query: SearchQuery) -> SourceBatch:
        text = " ".join(query.text.split())
        if not text:
            return SourceBatch()
        hl, gl, ceid = edition(query.language, query.region)
        q = " ".join([text, *time_operators(query, now=utc_now())])
        response = await self._client.get(self._search_url, params={"q": q, "hl": hl, "gl": gl, "ceid": ceid})
        parsed = read_feed(response.content, feed_url=response.url, content_type=response.content_type)
        items: list[Item] = []
        skipped = parsed.skipped
        for entry in parsed.entries:
            try:
                item = entry_to_news_item(entry, query=query)
            except ValueError:
                skipped += 1
                continue
            # The operators work by day or hour; the exact window is applied here.
            if in_window(item.published, since=query.since, until=query.until):
                items.append(item)
        return SourceBatch(items=items[: query.limit], skipped=skipped)
