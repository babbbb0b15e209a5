"""The markdown subset the agent and digests write, parsed into blocks and inlines for each platform's renderer."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

RULE_LINE = "──────────"
"""A horizontal rule drawn in text, for platforms without one."""
ELLIPSIS = "…"


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (an emoji outside the BMP counts two)."""
    return len(text.encode("utf-16-le")) // 2


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


def is_tight(block: Block) -> bool:
    """Whether the block follows the one before it on the next line rather than after a blank line: a list item
    right under its lead-in (every renderer keeps a tight list tight)."""
    return isinstance(block, ListItem) and not block.after_blank_line


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
            # Only an indented line continues the item: the line after a list that starts at the margin is the
            # paragraph after it ("…\n- a\n- b\nUse /x to …"), as every message written for a chat means it.
            while index < len(lines) and lines[index][:1].isspace() and lines[index].strip():
                if _ITEM.match(lines[index]) or _starts_block(lines[index]):
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
