"""Which character encoding a fetched document is in, chosen as a feed reader or browser would.

Order: UTF-16 or UTF-32 without a byte-order mark (told by the first bytes, as XML's appendix F says), the HTTP
`Content-Type` charset, then a byte-order mark, then the document's own declaration
(`<?xml … encoding="…"?>`), then valid UTF-8, then detection by charset-normalizer. A declared charset that
does not decode the bytes is passed over (servers and documents lie), and legacy labels are read as the
superset browsers use (WHATWG Encoding Standard: Shift_JIS → cp932, GB2312/GBK → GB18030, EUC-KR → cp949,
ISO-8859-1/ASCII → windows-1252), so a feed that declares GB2312 but uses a GBK character still decodes.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

import charset_normalizer

__all__ = ["Charset", "charset_of_content_type", "choose_charset", "decode_document"]

CharsetOrigin = Literal["wide", "http", "bom", "declaration", "utf-8", "detected", "fallback"]

_CONTENT_TYPE_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)
_XML_DECLARATION = re.compile(rb"^\s*<\?xml[^>]*?\bencoding\s*=\s*[\"']([A-Za-z0-9._:-]+)[\"']", re.IGNORECASE)
_BOMS = (
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
# UTF-32 and UTF-16 with no byte-order mark, told by how "<" and "<?" are spelt in the first bytes (XML 1.0, appendix
# F): no document in an ASCII-compatible charset starts with NUL bytes, so this comes before any label.
_WIDE_PROLOGS = (
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00<\x00?", "utf-16-be"),
    (b"<\x00?\x00", "utf-16-le"),
)
# Labels Python does not know, and the supersets browsers decode legacy labels with (keyed by codec name).
_ALIASES = {"x-sjis": "cp932", "windows-31j": "cp932", "x-euc-jp": "euc_jp", "x-gbk": "gb18030"}
_SUPERSETS = {
    "shift_jis": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "euc_kr": "cp949",
    "iso8859-1": "cp1252",
    "ascii": "cp1252",
    "big5": "big5hkscs",
}
# Never honoured: UTF-7 can smuggle markup past filters, and browsers refuse it for the same reason.
_REFUSED = frozenset({"utf-7"})
_DETECTION_BYTES = 200_000
"""Detection reads at most this much; enough for any feed's language, and it keeps a 10 MB body cheap."""


@dataclass(frozen=True, slots=True)
class Charset:
    """The codec to decode with (a Python codec name) and where the choice came from."""

    codec: str
    origin: CharsetOrigin


def charset_of_content_type(content_type: str | None) -> str | None:
    """The `charset=` parameter of a `Content-Type` header, as given; None when there is none."""
    match = _CONTENT_TYPE_CHARSET.search(content_type or "")
    return match.group(1) if match else None


def _codec(label: str | None) -> str | None:
    """The Python codec for an encoding label (superset for legacy labels); None when unknown or refused."""
    if not label:
        return None
    cleaned = label.strip().strip("\"'").lower()
    try:
        name = codecs.lookup(_ALIASES.get(cleaned, cleaned)).name
    except LookupError:
        return None
    if name in _REFUSED:
        return None
    return _SUPERSETS.get(name, name)


def _decodes(content: bytes, codec: str) -> bool:
    try:
        content.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def _bom(content: bytes) -> str | None:
    for mark, codec in _BOMS:
        if content.startswith(mark):
            return codec
    return None


def choose_charset(content: bytes, *, content_type: str | None = None) -> Charset:
    """The charset to decode `content` with: UTF-16/32 told by its first bytes, HTTP charset, BOM, XML declaration,
    UTF-8, detection (in that order; each declared one only if it decodes every byte), else windows-1252 (bytes it
    lacks are then replaced)."""
    for prolog, wide in _WIDE_PROLOGS:
        if content.startswith(prolog) and _decodes(content, wide):
            return Charset(wide, "wide")
    http = _codec(charset_of_content_type(content_type))
    if http is not None and _decodes(content, http):
        return Charset(http, "http")
    bom = _bom(content)
    if bom is not None and _decodes(content, bom):
        return Charset(bom, "bom")
    declaration = _XML_DECLARATION.match(content[:1024])
    declared = _codec(declaration.group(1).decode("ascii")) if declaration else None
    if declared is not None and not declared.startswith(("utf-16", "utf-32")) and _decodes(content, declared):
        return Charset(declared, "declaration")
    if _decodes(content, "utf-8"):
        return Charset("utf-8", "utf-8")
    best = charset_normalizer.from_bytes(content[:_DETECTION_BYTES]).best()
    detected = _codec(best.encoding) if best is not None else None
    if detected is not None and _decodes(content, detected):
        return Charset(detected, "detected")
    return Charset("cp1252", "fallback")


def decode_document(content: bytes, *, content_type: str | None = None) -> str:
    """The text of a document, decoded with `choose_charset` (a BOM is dropped; stray bytes are replaced)."""
    charset = choose_charset(content, content_type=content_type)
    text = content.decode(charset.codec, errors="replace")
    return text.removeprefix("\ufeff")
