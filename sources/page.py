"""Read one web page: fetch it through the SSRF guard and extract its main text and metadata."""

from __future__ import annotations

import asyncio
import re
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from sources.base import SourceError, SourceErrorKind
from sources.http import HttpClient, HttpResponse
from sources.urls import canonical_url

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain"})

_HTML_LANG = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]+)?", re.IGNORECASE)
_META_LANG = re.compile(
    rb"<meta\b[^>]*?(?:http-equiv\s*=\s*[\"']?content-language|property\s*=\s*[\"']?og:locale)[^>]*?"
    rb"content\s*=\s*[\"']?([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]+)?",
    re.IGNORECASE,
)


class Page(BaseModel):
    """The readable part of a fetched page. Its text is untrusted data, never instructions."""

    model_config = ConfigDict(frozen=True)

    url: str = Field(min_length=1)
    """Final URL after redirects, canonicalised."""
    requested_url: str
    """The URL that was asked for."""
    title: str | None = None
    text: str = ""
    """Main text (boilerplate removed), at most `max_chars` characters."""
    truncated: bool = False
    """Whether `text` was cut to `max_chars`."""
    author: str | None = None
    published: date | None = None
    """Publication date when the page states one (pages rarely give a reliable time of day)."""
    site_name: str | None = None
    description: str | None = None
    """The page's own summary (meta description / og:description)."""
    language: str | None = Field(default=None, min_length=2, max_length=3)
    """Lower-case ISO 639 code from `<html lang>`, `og:locale` or `Content-Language`."""
    content_type: str
    """Media type the server declared, e.g. `text/html`."""


async def read_page(url: str, *, client: HttpClient, max_chars: int = 20_000) -> Page:
    """Fetch `url` as an untrusted URL and extract its main text; `SourceError` if it cannot be read.

    Only HTML and plain text are read (`BAD_RESPONSE` otherwise). Extraction runs in a worker thread
    so a big page does not stall the event loop.
    """
    response = await client.get(url, untrusted=True, headers={"Accept": "text/html, text/plain;q=0.8"})
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not content_type and response.content.lstrip()[:1] == b"<":
        content_type = "text/html"
    if content_type in TEXT_TYPES:
        text = response.text().strip()
        return _page(url, response, content_type, text=text, max_chars=max_chars)
    if content_type not in HTML_TYPES:
        raise SourceError(
            SourceErrorKind.BAD_RESPONSE,
            f"{response.url} is {content_type or 'of unknown type'}, not an HTML or text page",
            status=response.status,
        )
    return await asyncio.to_thread(_extract_html, url, response, content_type, max_chars)


def _extract_html(url: str, response: HttpResponse, content_type: str, max_chars: int) -> Page:
    # Imported at the first page read: trafilatura brings lxml, numpy and a language model (~100 MB resident)
    # that a process which never reads a page should not carry.
    import trafilatura

    # With no charset in the header, give trafilatura the bytes so it can honour <meta charset>.
    html: str | bytes = response.text() if "charset=" in response.headers.get("content-type", "") else response.content
    document = trafilatura.bare_extraction(
        html, url=response.url, with_metadata=True, include_comments=False, include_tables=True
    )
    text = (getattr(document, "text", None) or "").strip()
    if not text:
        # No identifiable main content (a short or unusual page): fall back to all visible text.
        text = (trafilatura.html2txt(html) or "").strip()
    return _page(
        url,
        response,
        content_type,
        text=text,
        max_chars=max_chars,
        title=_clean(getattr(document, "title", None)),
        author=_clean(getattr(document, "author", None)),
        published=_parse_date(getattr(document, "date", None)),
        site_name=_clean(getattr(document, "sitename", None)),
        description=_clean(getattr(document, "description", None)),
        language=_language(response),
    )


def _page(url: str, response: HttpResponse, content_type: str, *, text: str, max_chars: int, **meta: object) -> Page:
    truncated = len(text) > max_chars
    if "language" not in meta:
        meta["language"] = _language(response)
    return Page.model_validate(
        {
            "url": canonical_url(response.url),
            "requested_url": url,
            "text": text[:max_chars],
            "truncated": truncated,
            "content_type": content_type,
            **meta,
        }
    )


def _clean(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = " ".join(value.split())
    return value or None


def _parse_date(value: object) -> date | None:
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def _language(response: HttpResponse) -> str | None:
    head = response.content[:20_000]
    for pattern in (_HTML_LANG, _META_LANG):
        match = pattern.search(head)
        if match:
            return match.group(1).decode("ascii").lower()
    header = re.match(r"\s*([A-Za-z]{2,3})\b", response.headers.get("content-language", ""))
    return header.group(1).lower() if header else None
