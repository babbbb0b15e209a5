"""Markdown from the agent as Telegram HTML: escaping, UTF-16-aware splitting, plain-text fallback, captions."""

from __future__ import annotations

import functools
import html
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser

from bots.markdown import (
    ELLIPSIS,
    RULE_LINE,
    Block,
    Code,
    CodeBlock,
    Heading,
    Inline,
    Link,
    ListItem,
    Paragraph,
    Quote,
    Rule,
    Styled,
    Text,
    is_safe_url,
    is_tight,
    parse_markdown,
    utf16_len,
)

TELEGRAM_TEXT_LIMIT = 4096
"""Characters (UTF-16 code units) of a message's text after entity parsing."""
TELEGRAM_CAPTION_LIMIT = 1024
"""Characters (UTF-16 code units) of a media caption after entity parsing."""
TELEGRAM_LINK_SCHEMES = frozenset({"http", "https", "mailto", "tg"})
"""Link schemes rendered as links; anything else (javascript:, data:, relative) stays plain text."""


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def markdown_to_telegram_html(text: str) -> str:
    """The markdown as Telegram HTML (parse_mode="HTML"), using only tags Telegram accepts."""
    return _render_blocks(parse_markdown(text), in_quote=False).strip()


RENDERED_TEXTS_KEPT = 256
"""How many texts `telegram_html_parts` keeps rendered: the static ones (/help, /start, usage lines) and the digest
sent to every subscriber of a monitor stay, while one-off answers pass through."""


@functools.lru_cache(maxsize=RENDERED_TEXTS_KEPT)
def telegram_html_parts(text: str) -> tuple[str, ...]:
    """The markdown as Telegram HTML messages (`markdown_to_telegram_html`, then `split_telegram_html`).

    Rendered once per distinct text and kept (bounded, least recently used out): rendering and splitting a
    2,000-character help text costs about 2 ms of CPU, more than the rest of answering the command."""
    return tuple(split_telegram_html(markdown_to_telegram_html(text)))


def _render_blocks(blocks: list[Block], *, in_quote: bool) -> str:
    rendered: list[str] = []
    for block in blocks:
        piece = _render_block(block, in_quote=in_quote)
        if not piece:
            continue
        if rendered:
            rendered.append("\n" if is_tight(block) else "\n\n")
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
        if type(piece) is str:  # most pieces are characters: one cheap test before the tag cases
            balanced.append(piece)
            kept_hrefs.append(href)
            continue
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
    if _fits(pieces, limit=limit, raw_ceiling=raw_ceiling):
        # Most replies fit one message: emitted whole, without the per-character search for a cut below (the
        # part of sending a short reply that cost the most CPU). Same result: nothing overflows, nothing is cut.
        has_visible = any(isinstance(piece, str) and not piece.isspace() for piece in pieces)
        return [_emit_all(pieces)] if has_visible else []
    parts: list[str] = []
    stack: list[_Open] = []
    index = 0
    while index < len(pieces):
        part, index, stack = _fill_part(pieces, index, stack, limit=limit, raw_ceiling=raw_ceiling)
        if part is not None:
            parts.append(part)
    return parts


def _fits(pieces: list[_Piece], *, limit: int, raw_ceiling: int) -> bool:
    """Whether the whole balanced stream fits one part (visible UTF-16 units and raw HTML length)."""
    text = "".join(piece for piece in pieces if isinstance(piece, str))
    if len(text.encode("utf-16-le")) // 2 > limit:
        return False
    tags = sum(_raw_cost(piece) for piece in pieces if not isinstance(piece, str))
    return len(html.escape(text, quote=False)) + tags <= raw_ceiling


def _emit_all(pieces: list[_Piece]) -> str:
    """`"".join(map(_emit, pieces))`, escaping runs of text at once."""
    out: list[str] = []
    run: list[str] = []
    for piece in pieces:
        if type(piece) is str:
            run.append(piece)
            continue
        if run:
            out.append(html.escape("".join(run), quote=False))
            run = []
        out.append(_emit(piece))
    if run:
        out.append(html.escape("".join(run), quote=False))
    return "".join(out)


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
