"""Markdown from the agent as Telegram HTML: escaping, UTF-16-aware splitting, plain-text fallback, captions."""

from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser

import re
from collections.abc import Mapping
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

_TAG_FOR_STYLE = {"b": "b", "i": "i", "s": "s"}


def utf16_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units (an emoji outside the BMP counts two)."""
    return len(text.encode("utf-16-le")) // 2


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def markdown_to_telegram_html(text: str) -> str:
    """The markdown as Telegram HTML (parse_mode="HTML"), using only tags Telegram accepts."""
    return _render_blocks(parse_markdown(text), in_quote=False).strip()


def _render_blocks(blocks: list[Block], *, in_quote: bool) -> str:
    rendered: list[str] = []
    previous: Block | None = None
    for block in blocks:
        piece = _render_block(block, in_quote=in_quote)
        if not piece:
            continue
        if rendered:
            tight = isinstance(block, ListItem) and isinstance(previous, ListItem)
            rendered.append("\n" if tight else "\n\n")
        rendered.append(piece)
        previous = block
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
        return f"<code>{html.escape(node.text, quote=False)}</code>"
    if isinstance(node, Styled):
        inner = _render_inlines(node.children, active=active | {node.style})
        if node.style in active:  # the same style nested in itself adds nothing and Telegram may refuse it
            return inner
        tag = _TAG_FOR_STYLE[node.style]
        return f"<{tag}>{inner}</{tag}>"
    assert isinstance(node, Link)
    label = _render_inlines(node.children, active=active)
    if not is_safe_url(node.url, schemes=TELEGRAM_LINK_SCHEMES):
        return label
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


_Token = _Open | _Close | str  # a str token is one visible character


class _Tokenizer(HTMLParser):
    """Tags kept with their attributes; text decoded to characters so entities never get split."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[_Token] = []
        self.hrefs: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = "".join(
            f' {name}="{html.escape(value, quote=True)}"' if value is not None else f" {name}"
            for name, value in attrs
        )
        self.tokens.append(_Open(tag, f"<{tag}{attributes}>"))
        self.hrefs.append(dict(attrs).get("href") if tag == "a" else None)

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(_Close(tag))
        self.hrefs.append(None)

    def handle_data(self, data: str) -> None:
        self.tokens.extend(data)
        self.hrefs.extend([None] * len(data))


def _tokenize(markup: str) -> tuple[list[_Token], list[str | None]]:
    parser = _Tokenizer()
    parser.feed(markup)
    parser.close()
    return _balance(parser.tokens, parser.hrefs)


def _balance(tokens: list[_Token], hrefs: list[str | None]) -> tuple[list[_Token], list[str | None]]:
    """Drop stray end tags and close tags left open, so the stream nests properly."""
    balanced: list[_Token] = []
    kept_hrefs: list[str | None] = []
    stack: list[str] = []
    for token, href in zip(tokens, hrefs, strict=True):
        if isinstance(token, _Close):
            if token.name not in stack:
                continue
            while stack[-1] != token.name:
                balanced.append(_Close(stack.pop()))
                kept_hrefs.append(None)
            stack.pop()
        elif isinstance(token, _Open):
            stack.append(token.name)
        balanced.append(token)
        kept_hrefs.append(href)
    for name in reversed(stack):
        balanced.append(_Close(name))
        kept_hrefs.append(None)
    return balanced, kept_hrefs


def _emit(token: _Token) -> str:
    if isinstance(token, _Open):
        return token.raw
    if isinstance(token, _Close):
        return f"</{token.name}>"
    return html.escape(token, quote=False)


# ---------------------------------------------------------------------------------------------------------------
# Splitting


_PARAGRAPH, _LINE, _WORD = 3, 2, 1


def split_telegram_html(markup: str, *, limit: int = TELEGRAM_TEXT_LIMIT, raw_limit: int | None = None) -> list[str]:
    """Telegram HTML cut into messages of at most `limit` UTF-16 units of visible text each.

    Cuts fall on paragraph, then line, then word boundaries (a cut inside a single over-long word is the
    last resort); tags open at a cut are closed at the end of the part and reopened at the start of the
    next, so every part parses on its own. `raw_limit` bounds the HTML length of a part (tags and entities
    included; default four times `limit`). Parts with no visible text are dropped.
    """
    if limit < 2:
        raise ValueError("limit must allow at least one character of any kind (2 UTF-16 units)")
    raw_ceiling = raw_limit if raw_limit is not None else 4 * limit
    tokens, _ = _tokenize(markup)
    parts: list[str] = []
    stack: list[_Open] = []
    index = 0
    while index < len(tokens):
        text, index, stack = _fill_part(tokens, index, stack, limit=limit, raw_ceiling=raw_ceiling)
        if text is not None:
            parts.append(text)
    return parts


def _fill_part(
    tokens: list[_Token], start: int, reopened: list[_Open], *, limit: int, raw_ceiling: int
) -> tuple[str | None, int, list[_Open]]:
    """Fill one part from `start`; returns its HTML (None if it has nothing visible), the next index, open tags."""
    stack = list(reopened)
    visible = 0
    raw = sum(len(tag.raw) for tag in reopened)
    last_break: dict[int, int] = {}
    position = start
    cut: int | None = None
    while position < len(tokens):
        token = tokens[position]
        if isinstance(token, str):
            units = 2 if ord(token) > 0xFFFF else 1
            closing = sum(len(tag.name) + 3 for tag in stack)
            if visible + units > limit or raw + len(_emit(token)) + closing > raw_ceiling:
                cut = _choose_cut(tokens, start, position, last_break, limit=limit, visible=visible)
                break
            if token in " \n" and not any(tag.name in {"pre", "code"} for tag in stack):
                kind = _PARAGRAPH if token == "\n" and position > 0 and tokens[position - 1] == "\n" else _WORD
                kind = _LINE if token == "\n" and kind != _PARAGRAPH else kind
                last_break[kind] = position - 1 if kind == _PARAGRAPH else position
            elif token == "\n":
                last_break[_LINE] = position
            visible += units
        elif isinstance(token, _Open):
            stack.append(token)
        else:
            stack.pop()
        raw += len(_emit(token))
        position += 1
    end = len(tokens) if cut is None else cut
    # Tags opened right before the cut belong to the next part; tags closing right after it, to this one.
    while end > start and isinstance(tokens[end - 1], _Open):
        end -= 1
    while end < len(tokens) and isinstance(tokens[end], _Close):
        end += 1
    if end == start:  # nothing fits besides tags: take one character so every part makes progress
        end = start + 1
        while end < len(tokens) and not isinstance(tokens[end - 1], str):
            end += 1
    body = tokens[start:end]
    stack_at_end = list(reopened)
    for token in body:
        if isinstance(token, _Open):
            stack_at_end.append(token)
        elif isinstance(token, _Close):
            stack_at_end.pop()
    text = "".join(tag.raw for tag in reopened) + "".join(map(_emit, body))
    text += "".join(f"</{tag.name}>" for tag in reversed(stack_at_end))
    has_visible = any(isinstance(token, str) and not token.isspace() for token in body)
    next_index = _skip_break(tokens, end, in_code=any(tag.name in {"pre", "code"} for tag in stack_at_end))
    return (text if has_visible else None), next_index, stack_at_end


def _choose_cut(
    tokens: list[_Token], start: int, overflow: int, last_break: dict[int, int], *, limit: int, visible: int
) -> int:
    """Where to end a part that overflows at `overflow`: the best boundary that keeps the part reasonably full."""
    for kind in (_PARAGRAPH, _LINE, _WORD):
        position = last_break.get(kind)
        if position is not None and position > start and _visible_between(tokens, start, position) * 2 >= visible:
            return position
    candidates = [position for position in last_break.values() if position > start]
    if candidates:
        return max(candidates)
    return _grapheme_safe(tokens, start, overflow)


def _visible_between(tokens: list[_Token], start: int, end: int) -> int:
    return sum(1 for token in tokens[start:end] if isinstance(token, str))


def _grapheme_safe(tokens: list[_Token], start: int, cut: int) -> int:
    """Move a hard cut back so it does not separate an emoji from its modifiers or a letter from its accents."""
    position = cut
    while position - 1 > start and _joins_previous(tokens, position):
        position -= 1
    return position if position - 1 > start or not _joins_previous(tokens, position) else cut


def _joins_previous(tokens: list[_Token], position: int) -> bool:
    if position >= len(tokens):
        return False
    token, before = tokens[position], tokens[position - 1]
    if not isinstance(token, str) or not isinstance(before, str):
        return False
    code = ord(token)
    return (
        before == "\u200d"
        or code == 0x200D
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
        or unicodedata.category(token) in {"Mn", "Me", "Mc"}
    )


def _skip_break(tokens: list[_Token], position: int, *, in_code: bool) -> int:
    """The index after the whitespace a cut falls on (inside code only the one newline is dropped)."""
    if in_code:
        return position + 1 if position < len(tokens) and tokens[position] == "\n" else position
    while position < len(tokens) and isinstance(tokens[position], str) and str(tokens[position]).isspace():
        position += 1
    return position


# ---------------------------------------------------------------------------------------------------------------
# Plain text and captions


def html_to_plain_text(markup: str) -> str:
    """The visible text of Telegram HTML, links followed by their address, for resending without parse mode."""
    tokens, hrefs = _tokenize(markup)
    pieces: list[str] = []
    link_stack: list[tuple[str | None, int]] = []
    for token, href in zip(tokens, hrefs, strict=True):
        if isinstance(token, _Open) and token.name == "a":
            link_stack.append((href, len(pieces)))
        elif isinstance(token, _Close) and token.name == "a" and link_stack:
            target, begin = link_stack.pop()
            label = "".join(pieces[begin:])
            if target and target != label.strip():
                pieces.append(f" ({target})")
        elif isinstance(token, str):
            pieces.append(token)
    return "".join(pieces)


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
