"""Markdown from the agent as Telegram HTML: escaping, UTF-16-aware splitting, plain-text fallback, captions."""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Literal
from urllib.parse import urlsplit

TELEGRAM_TEXT_LIMIT = 4096
"""Characters (UTF-16 code units) of a message's text after entity parsing."""
TELEGRAM_CAPTION_LIMIT = 1024
"""Characters (UTF-16 code units) of a media caption after entity parsing."""
TELEGRAM_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tg"})
"""Link schemes rendered as links; anything else (javascript:, data:, relative) stays plain text."""
RULE_LINE = "──────────"
ELLIPSIS = "…"


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (an emoji outside the BMP counts two)."""
    return len(text.encode("utf-16-le")) // 2


# ---------------------------------------------------------------------------------------------------------------
# Markdown parsing (shared with bots.slack_render): the small subset the agent and the digests write

Style = Literal["b", "i", "s"]


@dataclass(frozen=True, slots=True)
class Text:
    """Literal text."""

    text: str


@dataclass(frozen=True, slots=True)
class Code:
    """An inline code span."""

    text: str


@dataclass(frozen=True, slots=True)
class Styled:
    """Bold, italic or strikethrough around other inline nodes."""

    style: Style
    children: list[Inline]


@dataclass(frozen=True, slots=True)
class Link:
    """A link; its target is not yet checked for a safe scheme."""

    url: str
    children: list[Inline]


Inline = Text | Code | Styled | Link


@dataclass(frozen=True, slots=True)
class Paragraph:
    """Lines of inline text; line breaks inside are kept, as chat users expect."""

    inlines: list[Inline]


@dataclass(frozen=True, slots=True)
class Heading:
    """A `#` heading."""

    level: int
    inlines: list[Inline]


@dataclass(frozen=True, slots=True)
class ListItem:
    """One list item; `marker` is "•" or the item's number with a dot."""

    depth: int
    marker: str
    inlines: list[Inline]
    after_blank_line: bool = False
    """A blank line separates it from what came before (a loose list, a new list, a list after a paragraph)."""


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """A fenced code block."""

    language: str
    code: str


@dataclass(frozen=True, slots=True)
class Quote:
    """A `>` quote holding blocks."""

    blocks: list[Block]


@dataclass(frozen=True, slots=True)
class Rule:
    """A `---` thematic break."""


Block = Paragraph | Heading | ListItem | CodeBlock | Quote | Rule

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]*)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ITEM = re.compile(r"^([ \t]*)([-*+•]|\d{1,9}[.)])[ \t]+(.*)$")
_QUOTE = re.compile(r"^ {0,3}(?:>[ \t]?)+(.*)$")  # nested quotes are read as one: neither platform nests them
_CITATION = re.compile(r"\[(\d{1,4}(?:[ \t]*,[ \t]*\d{1,4})*)\](?!\()")
_CITED_SOURCE = re.compile(r"^[ \t]*\[(\d{1,4})\][ \t]+\[[^\]\n]*\]\(([^)\s]+)\)", re.MULTILINE)
# A link target: <anything> or a URL without spaces (one level of balanced parentheses), then an optional title.
_LINK_TARGET = re.compile(r'\([ \t]*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:[ \t]+"[^"\n]*")?[ \t]*\)')
_MAX_LABEL = 500
_MAX_NESTING = 16  # emphasis nested deeper than this is left as written, so hostile input cannot exhaust the stack
_BARE_URL = re.compile(r"https?://[^\s<>\"]+")
_ESCAPABLE = frozenset("\\`*_{}[]()#+-.!~>|")
_URL_TRAILING = ".,;:!?'\"*_~"


def is_safe_url(url: str, *, schemes: frozenset[str]) -> bool:
    """Whether a link target uses one of `schemes` (web links need a host) and holds no whitespace."""
    if not url or any(char.isspace() or ord(char) < 32 for char in url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    scheme = parts.scheme.lower()
    return scheme in schemes and (scheme not in {"http", "https"} or bool(parts.netloc))


def citation_urls(text: str) -> dict[int, str]:
    """Numbered sources listed as `[n] [title](url)` lines, so `[n]` markers elsewhere can link to them."""
    web = frozenset({"http", "https"})
    return {int(m.group(1)): m.group(2) for m in _CITED_SOURCE.finditer(text) if is_safe_url(m.group(2), schemes=web)}


def _starts_block(line: str) -> bool:
    return bool(_FENCE.match(line) or _RULE.match(line) or _HEADING.match(line) or _QUOTE.match(line))


def parse_markdown(text: str) -> list[Block]:
    """The markdown's blocks; `[n]` citation markers link to the numbered source list when there is one."""
    return _parse_blocks(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), citation_urls(text))


def _parse_blocks(lines: list[str], citations: Mapping[int, str]) -> list[Block]:
    blocks: list[Block] = []
    paragraph: list[str] = []
    indents: list[int] = []  # indentation of the enclosing list items, for nesting depth

    def flush() -> None:
        if paragraph:
            blocks.append(Paragraph(parse_inline("\n".join(paragraph), citations=citations)))
            paragraph.clear()

    index = 0
    blank_before = False
    while index < len(lines):
        line = lines[index]
        index += 1
        fence = _FENCE.match(line)
        item = _ITEM.match(line)
        if not line.strip():
            flush()
            blank_before = True
            continue
        if fence and not (fence.group(1)[0] == "`" and "`" in line[fence.end(1) :]):
            flush()
            marker, body = fence.group(1), []
            while index < len(lines) and not _closes_fence(lines[index], marker):
                body.append(lines[index])
                index += 1
            index += 1
            blocks.append(CodeBlock(fence.group(2), "\n".join(body)))
        elif _RULE.match(line):
            flush()
            blocks.append(Rule())
        elif heading := _HEADING.match(line):
            flush()
            blocks.append(Heading(len(heading.group(1)), parse_inline(heading.group(2), citations=citations)))
        elif quote := _QUOTE.match(line):
            flush()
            quoted = [quote.group(1)]
            while index < len(lines) and (inner := _QUOTE.match(lines[index])):
                quoted.append(inner.group(1))
                index += 1
            blocks.append(Quote(_parse_blocks(quoted, citations)))
        elif item:
            flush()
            indent = len(item.group(1).expandtabs(4))
            while indents and indents[-1] > indent:
                indents.pop()
            if not indents or indents[-1] < indent:
                indents.append(indent)
            content = [item.group(3)]
            while index < len(lines) and lines[index].strip() and not _starts_block(lines[index]):
                if _ITEM.match(lines[index]):
                    break
                content.append(lines[index].strip())
                index += 1
            bullet = item.group(2)
            marker = "•" if bullet in {"-", "*", "+", "•"} else bullet[:-1] + "."
            inlines = parse_inline(" ".join(content), citations=citations)
            blocks.append(ListItem(len(indents) - 1, marker, inlines, after_blank_line=blank_before))
            blank_before = False
            continue
        else:
            paragraph.append(line)
            blank_before = False
            continue
        indents.clear()
        blank_before = False
    flush()
    return blocks


def _closes_fence(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and set(stripped) == {marker[0]}


def parse_inline(text: str, *, citations: Mapping[int, str] | None = None) -> list[Inline]:
    """Inline markdown: code spans, links, bare URLs, citation markers, bold, italic and strikethrough."""
    return _InlineParser(text, citations or {}, links=True, depth=0).parse()


def _run_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] == text[start]:
        end += 1
    return end


def _code_span_end(text: str, start: int) -> tuple[int, int] | None:
    """(start of the closing backticks, end of them) for a code span opening at `start`."""
    opening_end = _run_end(text, start)
    run = opening_end - start
    search = opening_end
    while (close := text.find("`" * run, search)) >= 0:
        close_end = _run_end(text, close)
        if close_end - close == run:
            return close, close_end
        search = close_end
    return None


def _brackets_nest(label: str) -> bool:
    if label.count("[") != label.count("]"):
        return False
    depth = 0
    for char in label:
        depth += (char == "[") - (char == "]")
        if depth < 0:
            return False
    return depth == 0


def _trim_url(url: str) -> str:
    while url and (
        url[-1] in _URL_TRAILING
        or (url[-1] == ")" and url.count("(") < url.count(")"))
        or (url[-1] == "]" and url.count("[") < url.count("]"))
    ):
        url = url[:-1]
    return url


class _InlineParser:
    """A single left-to-right pass; emphasis contents are parsed recursively."""

    def __init__(self, text: str, citations: Mapping[int, str], *, links: bool, depth: int) -> None:
        self.text = text
        self.depth = depth
        self.citations = citations
        self.links = links
        self.no_closer_after: dict[str, int] = {}  # remembers failed searches so unmatched markers stay linear
        self.next_label_end = -1  # where the next "](" is, found once rather than once per "["

    def parse(self) -> list[Inline]:
        text, nodes, pending = self.text, list[Inline](), list[str]()

        def flush() -> None:
            if pending:
                nodes.append(Text("".join(pending)))
                pending.clear()

        index = 0
        while index < len(text):
            char = text[index]
            found: tuple[list[Inline], int] | None = None
            if char == "\\" and index + 1 < len(text) and text[index + 1] in _ESCAPABLE:
                pending.append(text[index + 1])
                index += 2
                continue
            if char == "`":
                span = _code_span_end(text, index)
                opening_end = _run_end(text, index)
                if span is None:
                    pending.append(text[index:opening_end])
                    index = opening_end
                    continue
                content = text[opening_end : span[0]]
                if len(content) > 2 and content[0] == " " and content[-1] == " " and content.strip():
                    content = content[1:-1]
                found = [Code(content)], span[1]
            elif char == "[":
                found = self._link(index) or self._citation(index)
            elif char == "h" and self.links and (index == 0 or not text[index - 1].isalnum()):
                found = self._bare_url(index)
            elif char in "*_~":
                found = self._emphasis(index)
                if found is None:
                    run_end = _run_end(text, index)
                    pending.append(text[index:run_end])
                    index = run_end
                    continue
            if found is None:
                pending.append(char)
                index += 1
                continue
            flush()
            nodes.extend(found[0])
            index = found[1]
        flush()
        return nodes

    def _link(self, start: int) -> tuple[list[Inline], int] | None:
        text = self.text
        if self.next_label_end < start:  # the label ends at the next "](", found once rather than per "["
            self.next_label_end = text.find("](", start) % (len(text) + 1)  # len(text) when there is none
        label_end = self.next_label_end
        if not self.links or label_end == len(text) or label_end - start > _MAX_LABEL:
            return None
        label = text[start + 1 : label_end]
        if "\n\n" in label or not _brackets_nest(label):
            return None  # "[1] [title](url)" or "[a [b](url)": the link is the inner one
        target = _LINK_TARGET.match(text, label_end + 1)
        url = target.group(1).removeprefix("<").removesuffix(">").strip() if target else ""
        if not target or not url:
            return None
        children: list[Inline] = _InlineParser(label, {}, links=False, depth=self.depth + 1).parse() or [Text(url)]
        return [Link(url, children)], target.end()

    def _citation(self, start: int) -> tuple[list[Inline], int] | None:
        match = _CITATION.match(self.text, start) if self.links else None
        if not match or not self.text[self.text.rfind("\n", 0, start) + 1 : start].strip():
            return None  # a marker opening a line is the source list's own numbering
        numbers = [number.strip() for number in match.group(1).split(",")]
        if not any(int(number) in self.citations for number in numbers):
            return None
        if len(numbers) == 1:
            return [Link(self.citations[int(numbers[0])], [Text(match.group())])], match.end()
        nodes: list[Inline] = [Text("[")]
        for position, number in enumerate(numbers):
            if position:
                nodes.append(Text(", "))
            url = self.citations.get(int(number))
            nodes.append(Link(url, [Text(number)]) if url else Text(number))
        nodes.append(Text("]"))
        return nodes, match.end()

    def _bare_url(self, start: int) -> tuple[list[Inline], int] | None:
        match = _BARE_URL.match(self.text, start)
        url = _trim_url(match.group()) if match else ""
        if not url or not urlsplit(url).netloc:
            return None
        return [Link(url, [Text(url)])], start + len(url)

    def _emphasis(self, start: int) -> tuple[list[Inline], int] | None:
        text, char = self.text, self.text[start]
        if self.depth >= _MAX_NESTING:
            return None
        run = _run_end(text, start) - start
        sizes = ((2,) if run >= 2 else ()) if char == "~" else ((2, 1) if run >= 2 else (1,))
        for size in sizes:
            inner_start = start + size
            if inner_start >= len(text) or text[inner_start].isspace():
                continue
            if char == "_" and start > 0 and text[start - 1].isalnum():
                continue  # snake_case words are not emphasis
            close = self._closer(char * size, inner_start)
            if close is not None:
                style: Style = "s" if char == "~" else ("b" if size == 2 else "i")
                inner = _InlineParser(text[inner_start:close], self.citations, links=self.links, depth=self.depth + 1)
                return [Styled(style, inner.parse())], close + size
        return None

    def _closer(self, delimiter: str, inner_start: int) -> int | None:
        """Where `delimiter` closes an emphasis whose content starts at `inner_start`, if anywhere."""
        text, char, size = self.text, delimiter[0], len(delimiter)
        if self.no_closer_after.get(delimiter, len(text) + 1) <= inner_start:
            return None
        index = inner_start + 1
        while index < len(text):
            current = text[index]
            if current == "\\":
                index += 2
                continue
            if current == "`":
                span = _code_span_end(text, index)
                index = span[1] if span else _run_end(text, index)
                continue
            if current != char:
                index += 1
                continue
            run_end = _run_end(text, index)
            run = run_end - index
            flanked = not text[index - 1].isspace() and not (
                char == "_" and run_end < len(text) and text[run_end].isalnum()
            )
            if flanked and (run == size or run >= 3):
                return run_end - size
            index = run_end
        self.no_closer_after[delimiter] = min(inner_start, self.no_closer_after.get(delimiter, inner_start))
        return None


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def markdown_to_telegram_html(text: str) -> str:
    """The markdown as Telegram HTML (parse_mode="HTML"), using only tags Telegram accepts."""
    return _render_blocks(parse_markdown(text), in_quote=False).strip()


def _render_blocks(blocks: list[Block], *, in_quote: bool) -> str:
    rendered: list[str] = []
    for block in blocks:
        piece = _render_block(block, in_quote=in_quote)
        if not piece:
            continue
        if rendered:
            tight = isinstance(block, ListItem) and not block.after_blank_line  # a list right under its lead-in
            rendered.append("\n" if tight else "\n\n")
        rendered.append(piece)
    return "".join(rendered)


def _render_block(block: Block, *, in_quote: bool) -> str:
    if isinstance(block, Paragraph):
        return _render_inlines(block.inlines, active=frozenset())
    if isinstance(block, Heading):
        # Headings become bold lines; bold inside them must not nest another <b>.
        return f"<b>{_render_inlines(block.inlines, active=frozenset({'b'}))}</b>"
    if isinstance(block, ListItem):
        return "  " * block.depth + block.marker + " " + _render_inlines(block.inlines, active=frozenset())
    if isinstance(block, CodeBlock):
        code = html.escape(block.code, quote=False)
        if not code.strip():
            return ""
        if in_quote:  # Telegram does not accept <pre> inside <blockquote>
            return code
        if block.language:
            return f'<pre><code class="language-{html.escape(block.language)}">{code}</code></pre>'
        return f"<pre>{code}</pre>"
    if isinstance(block, Quote):
        inner = _render_blocks(block.blocks, in_quote=True)
        # Telegram does not nest blockquotes: an inner quote is flattened into its parent.
        return inner if in_quote or not inner else f"<blockquote>{inner}</blockquote>"
    assert isinstance(block, Rule)
    return RULE_LINE


def _render_inlines(inlines: list[Inline], *, active: frozenset[str]) -> str:
    return "".join(_render_inline(node, active=active) for node in inlines)


def _render_inline(node: Inline, *, active: frozenset[str]) -> str:
    if isinstance(node, Text):
        return html.escape(node.text, quote=False)
    if isinstance(node, Code):
        code = html.escape(node.text, quote=False)
        return code if "a" in active else f"<code>{code}</code>"  # a link cannot contain a code entity
    if isinstance(node, Styled):
        inner = _render_inlines(node.children, active=active | {node.style})
        if node.style in active:  # the same style nested in itself adds nothing and Telegram may refuse it
            return inner
        return f"<{node.style}>{inner}</{node.style}>"
    assert isinstance(node, Link)
    if not is_safe_url(node.url, schemes=TELEGRAM_LINK_SCHEMES):
        return _render_inlines(node.children, active=active)
    label = _render_inlines(node.children, active=active | {"a"})
    return f'<a href="{html.escape(node.url, quote=True)}">{label}</a>'


# ---------------------------------------------------------------------------------------------------------------
# Reading our HTML back: a flat list of tags and characters


@dataclass(frozen=True, slots=True)
class _Open:
    name: str
    raw: str


@dataclass(frozen=True, slots=True)
class _Close:
    name: str


_Piece = _Open | _Close | str  # a str piece is one visible character


class _HTMLReader(HTMLParser):
    """Tags kept with their attributes; text decoded to characters so entities never get split."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[_Piece] = []
        self.hrefs: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = "".join(
            f' {name}="{html.escape(value, quote=True)}"' if value is not None else f" {name}" for name, value in attrs
        )
        self.pieces.append(_Open(tag, f"<{tag}{attributes}>"))
        self.hrefs.append(dict(attrs).get("href") if tag == "a" else None)

    def handle_endtag(self, tag: str) -> None:
        self.pieces.append(_Close(tag))
        self.hrefs.append(None)

    def handle_data(self, data: str) -> None:
        self.pieces.extend(data)
        self.hrefs.extend([None] * len(data))


def _read_html(markup: str) -> tuple[list[_Piece], list[str | None]]:
    parser = _HTMLReader()
    parser.feed(markup)
    parser.close()
    return _balance(parser.pieces, parser.hrefs)


def _balance(pieces: list[_Piece], hrefs: list[str | None]) -> tuple[list[_Piece], list[str | None]]:
    """Drop stray end tags and close tags left open, so the stream nests properly."""
    balanced: list[_Piece] = []
    kept_hrefs: list[str | None] = []
    stack: list[str] = []
    for piece, href in zip(pieces, hrefs, strict=True):
        if isinstance(piece, _Close):
            if piece.name not in stack:
                continue
            while stack[-1] != piece.name:
                balanced.append(_Close(stack.pop()))
                kept_hrefs.append(None)
            stack.pop()
        elif isinstance(piece, _Open):
            stack.append(piece.name)
        balanced.append(piece)
        kept_hrefs.append(href)
    for name in reversed(stack):
        balanced.append(_Close(name))
        kept_hrefs.append(None)
    return balanced, kept_hrefs


def _emit(piece: _Piece) -> str:
    if isinstance(piece, _Open):
        return piece.raw
    if isinstance(piece, _Close):
        return f"</{piece.name}>"
    return html.escape(piece, quote=False)


# ---------------------------------------------------------------------------------------------------------------
# Splitting


_PARAGRAPH, _LINE, _WORD = 3, 2, 1
_CODE_TAGS = frozenset({"pre", "code"})


def split_telegram_html(markup: str, *, limit: int = TELEGRAM_TEXT_LIMIT, raw_limit: int | None = None) -> list[str]:
    """Telegram HTML cut into messages of at most `limit` UTF-16 units of visible text each.

    Cuts fall on paragraph, then line, then word boundaries (a cut inside a single over-long word is the
    last resort, and keeps an emoji with its modifiers); tags open at a cut are closed at the end of the
    part and reopened at the start of the next, so every part parses on its own. `raw_limit` bounds the
    HTML length of a part, tags and entities included but not attribute values (default four times
    `limit`). The whitespace a cut falls on is dropped, and so are parts with no visible text.
    """
    if limit < 2:
        raise ValueError("limit must allow at least one character of any kind (2 UTF-16 units)")
    raw_ceiling = raw_limit if raw_limit is not None else 4 * limit
    pieces, _ = _read_html(markup)
    parts: list[str] = []
    stack: list[_Open] = []
    index = 0
    while index < len(pieces):
        part, index, stack = _fill_part(pieces, index, stack, limit=limit, raw_ceiling=raw_ceiling)
        if part is not None:
            parts.append(part)
    return parts


def _fill_part(
    pieces: list[_Piece], start: int, reopened: list[_Open], *, limit: int, raw_ceiling: int
) -> tuple[str | None, int, list[_Open]]:
    """One part from `start`: its HTML (None if nothing visible), where the next starts, the tags open there."""
    stack = list(reopened)
    visible = 0
    raw = sum(map(_raw_cost, reopened))
    last_break: dict[int, tuple[int, int]] = {}  # kind -> (piece index, visible units before it)
    position = start
    end = len(pieces)
    while position < len(pieces):
        piece = pieces[position]
        if isinstance(piece, str):
            units = 2 if ord(piece) > 0xFFFF else 1
            in_code = any(tag.name in _CODE_TAGS for tag in stack)
            if piece == "\n":  # a break is noted before the overflow check: the overflowing space is the best cut
                last_break[_LINE] = (position, visible)
                if position > start and pieces[position - 1] == "\n" and not in_code:
                    last_break[_PARAGRAPH] = (position - 1, visible - 1)
            elif piece == " " and not in_code:
                last_break[_WORD] = (position, visible)
            closing = sum(len(tag.name) + 3 for tag in stack)
            if visible + units > limit or raw + _raw_cost(piece) + closing > raw_ceiling:
                end = _choose_cut(pieces, start, position, last_break, visible=visible)
                break
            visible += units
        elif isinstance(piece, _Open):
            stack.append(piece)
        else:
            stack.pop()
        raw += _raw_cost(piece)
        position += 1
    # Tags opened right before the cut belong to the next part; tags closed right after it, to this one.
    while end > start and isinstance(pieces[end - 1], _Open):
        end -= 1
    while end < len(pieces) and isinstance(pieces[end], _Close):
        end += 1
    if end == start:  # nothing fits besides reopened tags: take one character so every part makes progress
        end = start + 1
        while end < len(pieces) and not isinstance(pieces[end - 1], str):
            end += 1
    body = pieces[start:end]
    stack = _apply(reopened, body)
    html_part = "".join(tag.raw for tag in reopened) + "".join(map(_emit, body))
    html_part += "".join(f"</{tag.name}>" for tag in reversed(stack))
    has_visible = any(isinstance(piece, str) and not piece.isspace() for piece in body)
    next_start, stack = _skip_break(pieces, end, stack)
    return (html_part if has_visible else None), next_start, stack


def _raw_cost(piece: _Piece) -> int:
    """HTML length, but a tag's attributes are not counted: a long link target must not shrink every part."""
    if isinstance(piece, str):
        return len(html.escape(piece, quote=False))
    return len(piece.name) + (2 if isinstance(piece, _Open) else 3)


def _apply(stack: list[_Open], pieces: list[_Piece]) -> list[_Open]:
    result = list(stack)
    for piece in pieces:
        if isinstance(piece, _Open):
            result.append(piece)
        elif isinstance(piece, _Close):
            result.pop()
    return result


def _choose_cut(
    pieces: list[_Piece], start: int, overflow: int, last_break: dict[int, tuple[int, int]], *, visible: int
) -> int:
    """Where a part that overflows at `overflow` ends: the strongest boundary that keeps it at least half full."""
    usable = {kind: found for kind, found in last_break.items() if found[0] > start}
    for kind in (_PARAGRAPH, _LINE, _WORD):
        if kind in usable and usable[kind][1] * 2 >= visible:
            return usable[kind][0]
    if usable:
        return max(position for position, _ in usable.values())
    return _grapheme_safe(pieces, start, overflow)


def _grapheme_safe(pieces: list[_Piece], start: int, cut: int) -> int:
    """Move a hard cut back so it does not part an emoji from its modifiers or a letter from its accents."""
    position = cut
    while position - 1 > start and _joins_previous(pieces, position):
        position -= 1
    return cut if _joins_previous(pieces, position) else position


def _joins_previous(pieces: list[_Piece], position: int) -> bool:
    if position >= len(pieces):
        return False
    piece, before = pieces[position], pieces[position - 1]
    if not isinstance(piece, str) or not isinstance(before, str):
        return False
    code = ord(piece)
    return (
        before == "\u200d"
        or code == 0x200D
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
        or unicodedata.category(piece) in {"Mn", "Me", "Mc"}
    )


def _skip_break(pieces: list[_Piece], position: int, stack: list[_Open]) -> tuple[int, list[_Open]]:
    """Past the whitespace a cut falls on (in code only the newline), and past tags closing right there."""
    stack = list(stack)
    in_code = any(tag.name in _CODE_TAGS for tag in stack)
    if in_code and position < len(pieces) and pieces[position] == "\n":
        position += 1
    while position < len(pieces):
        piece = pieces[position]
        if isinstance(piece, _Close):
            stack.pop()  # already closed at the end of the previous part; reopening it would leave it empty
        elif not (isinstance(piece, str) and piece.isspace() and not in_code):
            break
        position += 1
    return position, stack


# ---------------------------------------------------------------------------------------------------------------
# Plain text and captions


def html_to_plain_text(markup: str) -> str:
    """The visible text of Telegram HTML, links followed by their address, for resending without parse mode."""
    pieces, hrefs = _read_html(markup)
    out: list[str] = []
    link_stack: list[tuple[str | None, int]] = []
    for piece, href in zip(pieces, hrefs, strict=True):
        if isinstance(piece, _Open) and piece.name == "a":
            link_stack.append((href, len(out)))
        elif isinstance(piece, _Close) and piece.name == "a" and link_stack:
            target, begin = link_stack.pop()
            label = "".join(out[begin:])
            if target and target != label.strip():
                out.append(f" ({target})")
        elif isinstance(piece, str):
            out.append(piece)
    return "".join(out)


def split_telegram_text(text: str, *, limit: int = TELEGRAM_TEXT_LIMIT) -> list[str]:
    """Plain text (no parse mode) cut into messages of at most `limit` UTF-16 units, at the same boundaries."""
    return [html.unescape(part) for part in split_telegram_html(html.escape(text, quote=False), limit=limit)]


def caption(text: str, *, limit: int = TELEGRAM_CAPTION_LIMIT) -> str:
    """Plain text shortened to a caption of at most `limit` UTF-16 units, ending in an ellipsis when cut."""
    if utf16_len(text.strip()) <= limit:
        return text.strip()
    parts = split_telegram_text(text, limit=limit - 1)
    return parts[0].rstrip() + ELLIPSIS if parts else ""


def caption_html(markup: str, *, limit: int = TELEGRAM_CAPTION_LIMIT) -> str:
    """Telegram HTML shortened to a caption of at most `limit` visible UTF-16 units, still well-formed."""
    parts = split_telegram_html(markup, limit=limit - 1)
    if len(parts) <= 1:
        return parts[0] if parts else ""
    return parts[0] + ELLIPSIS
