"""The check every XML document from outside (a feed, an OPML file) passes before any other parser sees it.

The document is decoded as `sources.charsets` decides and run through defusedxml's expat parser, which refuses an
entity declaration (internal, external or unparsed) the moment it reads it, before anything is expanded; a
counting target builds no tree and refuses nesting over `MAX_XML_DEPTH` and more than `MAX_XML_ITEMS` items. A
reference to an entity the document does not define (one from an external DTD, which is never fetched) is refused
too, so `&xxe;` never reaches a reader as text. HTML's named entities (`&nbsp;` in a sloppy feed) are rewritten
as character references and the document is checked again. A document that is still not well-formed may go on to
a lenient parser (feedparser's loose mode) only when it declares no DTD subset and no entity: that is where such
parsers expand entities.

Guarantee: `guard_xml` returns only documents of at most `max_bytes` bytes that declare no entity, use none that
neither they nor HTML define, and hold at most `MAX_XML_ITEMS` items; a well-formed one also nests at most
`MAX_XML_DEPTH` deep (a lenient parser's nesting is its own, bounded by the bytes). Otherwise it raises
`UnsafeXml` with one sentence for a person.
"""

from __future__ import annotations

import html.entities
import re
from dataclasses import dataclass
from typing import Final
from xml.etree.ElementTree import ParseError

from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
from defusedxml.ElementTree import DefusedXMLParser

from sources.base import SourceError, SourceErrorKind
from sources.charsets import choose_charset

__all__ = ["MAX_XML_BYTES", "MAX_XML_DEPTH", "MAX_XML_ITEMS", "CheckedXml", "UnsafeXml", "guard_xml"]

MAX_XML_BYTES: Final = 10_000_000
"""The most bytes of one XML document read (the HTTP client's own cap; big feeds are ~2 MB)."""
MAX_XML_DEPTH: Final = 200
"""Deepest element nesting accepted: feeds nest a few levels, XHTML content a few dozen."""
MAX_XML_ITEMS: Final = 10_000
"""Most `item`/`entry`/`outline` elements accepted: past any real feed or subscription list, far below what
would make feedparser's per-entry dictionaries a memory problem."""
_CHUNK_CHARS: Final = 65_536
"""Characters fed to the parser at a time, so a refusal comes as soon as the offending part is read."""
_ITEM_TAGS: Final = frozenset({"item", "entry", "outline"})
_PREDEFINED: Final = frozenset({"amp", "lt", "gt", "quot", "apos"})
_HTML_ENTITIES: Final = html.entities.name2codepoint
_ENTITY_REFERENCE = re.compile(r"&([A-Za-z_:][\w.:-]*);")
_DOCTYPE = re.compile(r"<!DOCTYPE", re.IGNORECASE)
_DECLARES = re.compile(r"<!ENTITY|<!DOCTYPE[^>\[]*\[", re.IGNORECASE)
_ITEM_START = re.compile(r"<(?:[\w.-]+:)?(?:item|entry|outline)[\s>/]", re.IGNORECASE)


class UnsafeXml(SourceError):
    """A document refused before parsing; its message is the reason, one sentence for a person."""

    def __init__(self, reason: str) -> None:
        super().__init__(SourceErrorKind.BAD_RESPONSE, reason)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class CheckedXml:
    """A document that passed: its bytes for the next parser, the codec they are in, and whether it is
    well-formed (False: only a lenient parser will read it; it declares no entity and uses none unknown)."""

    content: bytes
    codec: str
    well_formed: bool


class _Limit(Exception):
    """Raised from inside the parser by the counting target."""


class _Counter:
    """An ElementTree parser target that keeps nothing: it counts depth and items, and stops at a limit."""

    def __init__(self, *, noun: str) -> None:
        self._noun = noun
        self._depth = 0
        self._items = 0

    def start(self, tag: str, _attributes: dict[str, str]) -> None:
        self._depth += 1
        if self._depth > MAX_XML_DEPTH:
            raise _Limit(f"this {self._noun} nests elements over {MAX_XML_DEPTH} deep, which Lookout does not read")
        if tag.rpartition("}")[2].lower() in _ITEM_TAGS:
            self._items += 1
            if self._items > MAX_XML_ITEMS:
                raise _Limit(f"this {self._noun} has over {MAX_XML_ITEMS:,} entries, more than Lookout reads")

    def end(self, _tag: str) -> None:
        self._depth -= 1

    def data(self, _text: str) -> None:
        # Kept although it keeps nothing: only with it does ElementTree raise on an entity a DOCTYPE leaves
        # undefined (`&nbsp;` in an RSS 0.91 feed), which the guard then rewrites instead of letting it vanish.
        return None

    def close(self) -> None:
        return None


def _strict_problem(text: str, *, noun: str) -> ParseError | None:
    """Parse the text with defusedxml; None when well-formed, the ParseError when not. Raises UnsafeXml."""
    parser = DefusedXMLParser(target=_Counter(noun=noun), forbid_dtd=False, forbid_entities=True, forbid_external=True)
    try:
        for start in range(0, len(text), _CHUNK_CHARS):
            parser.feed(text[start : start + _CHUNK_CHARS])
        parser.close()
    except EntitiesForbidden as error:
        if error.sysid or error.pubid:
            raise UnsafeXml(f"this {noun} declares an external XML entity, which Lookout does not fetch") from None
        raise UnsafeXml(f"this {noun} defines XML entities, which Lookout does not expand") from None
    except ExternalReferenceForbidden:
        raise UnsafeXml(f"this {noun} refers to an external XML entity, which Lookout does not fetch") from None
    except DTDForbidden:  # not asked for (forbid_dtd=False); kept so every defusedxml refusal is named
        raise UnsafeXml(f"this {noun} declares a DTD, which Lookout does not read") from None
    except _Limit as error:
        raise UnsafeXml(str(error)) from None
    except ParseError as error:
        return error
    return None


def _unknown_entities(text: str) -> list[str]:
    """Entity references that neither XML nor HTML defines (`&xxe;`), in order of first use."""
    names = (match.group(1) for match in _ENTITY_REFERENCE.finditer(text))
    return list(dict.fromkeys(n for n in names if n not in _PREDEFINED and n not in _HTML_ENTITIES))


def _html_entities_as_references(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in _PREDEFINED or name not in _HTML_ENTITIES:
            return match.group(0)
        return f"&#{_HTML_ENTITIES[name]};"

    return _ENTITY_REFERENCE.sub(replace, text)


def guard_xml(
    content: bytes, *, noun: str = "feed", max_bytes: int = MAX_XML_BYTES, content_type: str | None = None
) -> CheckedXml:
    """Check a document before a lenient parser reads it (see the module's guarantee); `noun` names it in the
    reason ("feed", "file"). Raises `UnsafeXml`, or `SourceError(TOO_LARGE)` over `max_bytes`."""
    if len(content) > max_bytes:
        raise SourceError(SourceErrorKind.TOO_LARGE, f"this {noun} is over {max_bytes:,} bytes")
    codec = choose_charset(content, content_type=content_type).codec
    text = content.decode(codec, errors="replace").removeprefix("\ufeff")
    problem = _strict_problem(text, noun=noun)
    # Expat lets a document with an external DTD use entities it never declares (in attributes, silently): with
    # a DOCTYPE, or when the parse failed, every reference must be one XML or HTML defines.
    if problem is not None and _DECLARES.search(text):
        raise UnsafeXml(f"this {noun} is not well-formed XML and declares a DTD or entities, which Lookout refuses")
    if problem is not None or _DOCTYPE.search(text):
        unknown = _unknown_entities(text)
        if unknown:
            shown = ", ".join(f"&{name};" for name in unknown[:3])
            raise UnsafeXml(
                f"this {noun} uses XML entities it does not define ({shown}), which Lookout does not expand"
            )
    if problem is None:
        return CheckedXml(content=content, codec=codec, well_formed=True)
    fixed = _html_entities_as_references(text)
    if fixed != text:
        # Only HTML's named entities (`&nbsp;`) broke it: as character references the XML parser reads them.
        utf8 = fixed.encode("utf-8")
        problem = _strict_problem(fixed, noun=noun)
        if problem is None:
            return CheckedXml(content=utf8, codec="utf-8", well_formed=True)
    if len(_ITEM_START.findall(text)) > MAX_XML_ITEMS:
        raise UnsafeXml(f"this {noun} has over {MAX_XML_ITEMS:,} entries, more than Lookout reads")
    return CheckedXml(content=content, codec=codec, well_formed=False)
