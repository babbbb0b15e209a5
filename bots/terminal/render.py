"""Markdown replies for a terminal, drawn from the shared markdown AST: styled (rich) or plain (pipes, logs).

Guarantees: line breaks, lists, quotes, code and links are kept; text is shown as written, never read as
markup (`<b>` and `[red]` print as typed); control characters that could move the cursor or recolour the
terminal (ESC sequences in a feed title) are replaced. Plain output is never wrapped; styled output wraps
prose at word boundaries to the given width and leaves a long URL whole (the terminal folds it, so a copied
URL has no line break inside it).
"""

from __future__ import annotations

import io
import re

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text as RichText

from bots.markdown import (
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
    Styled,
    Text,
    is_tight,
    parse_markdown,
)

__all__ = ["markdown_to_lines", "markdown_to_plain", "render_markdown", "terminal_safe"]

_STYLES = {"b": "bold", "i": "italic", "s": "strike"}
_CODE_STYLE = "cyan"
_LINK_STYLE = "underline"
_URL_STYLE = "dim"
_QUOTE_BAR = "│ "
_INDENT = "  "
_CITATION_LABEL = re.compile(r"\[\d{1,4}\]")
_WORD = re.compile(r"\S+\s*")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` with control characters other than newline and tab replaced by `�` (no escape reaches the tty)."""
    # Bidirectional overrides can make a line read differently from what it is: replaced too.
    return _CONTROL.sub("\ufffd", text.replace("\r\n", "\n"))


# ---- inlines ---------------------------------------------------------------------------------------------


def _inline_text(nodes: list[Inline], *, styled: bool) -> RichText:
    out = RichText()
    _append_inlines(out, nodes, style="", styled=styled)
    return out


def _append_inlines(out: RichText, nodes: list[Inline], *, style: str, styled: bool) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(terminal_safe(node.text), style=style or None)
        elif isinstance(node, Code):
            out.append(terminal_safe(node.text), style=f"{style} {_CODE_STYLE}".strip() if styled else None)
        elif isinstance(node, Styled):
            inner = f"{style} {_STYLES[node.style]}".strip() if styled else ""
            _append_inlines(out, node.children, style=inner, styled=styled)
        else:
            _append_link(out, node, style=style, styled=styled)


def _append_link(out: RichText, link: Link, *, style: str, styled: bool) -> None:
    label = RichText()
    _append_inlines(label, link.children, style=f"{style} {_LINK_STYLE}".strip() if styled else "", styled=styled)
    out.append_text(label)
    url = terminal_safe(link.url)
    # The address stays visible (a terminal has no hidden link targets to hover), unless the label is it or
    # the link is a citation marker `[n]`, whose address the numbered source list shows.
    if label.plain.strip() != url and not _CITATION_LABEL.fullmatch(label.plain):
        out.append(" (")
        out.append(url, style=_URL_STYLE if styled else None)
        out.append(")")


# ---- blocks ----------------------------------------------------------------------------------------------


def _separator(block: Block, *, first: bool) -> str:
    if first:
        return ""
    return "\n" if is_tight(block) else "\n\n"


def markdown_to_plain(markdown: str) -> str:
    """The markdown's words and structure as plain text with no styling and no wrapping (pipes, logs, tests)."""
    return _plain_blocks(parse_markdown(markdown)).strip("\n")


def _plain_blocks(blocks: list[Block]) -> str:
    parts: list[str] = []
    for block in blocks:
        piece = _plain_block(block)
        if piece:
            parts.append(_separator(block, first=not parts) + piece)
    return "".join(parts)


def _plain_block(block: Block) -> str:
    if isinstance(block, Paragraph | Heading):
        return _inline_text(block.inlines, styled=False).plain
    if isinstance(block, ListItem):
        return _INDENT * block.depth + block.marker + " " + _inline_text(block.inlines, styled=False).plain
    if isinstance(block, CodeBlock):
        return "\n".join(_INDENT + line for line in terminal_safe(block.code).split("\n")) if block.code.strip() else ""
    if isinstance(block, Quote):
        inner = _plain_blocks(block.blocks)
        return "\n".join(_QUOTE_BAR + line for line in inner.split("\n")) if inner else ""
    return RULE_LINE


def markdown_to_lines(markdown: str, *, width: int) -> list[RichText]:
    """The markdown as styled lines wrapped to `width`: emphasis as styles, hanging indents for list items."""
    return _rich_blocks(parse_markdown(markdown), width)


def _console(file: io.StringIO, *, width: int) -> Console:
    return Console(file=file, force_terminal=True, width=width, highlight=False, emoji=False, markup=False)


def _rich_blocks(blocks: list[Block], width: int) -> list[RichText]:
    lines: list[RichText] = []
    for block in blocks:
        piece = _rich_block(block, width)
        if not piece:
            continue
        if lines and _separator(block, first=False) == "\n\n":
            lines.append(RichText())
        lines.extend(piece)
    return lines


def _rich_block(block: Block, width: int) -> list[RichText]:
    if isinstance(block, Paragraph | Heading):
        text = _inline_text(block.inlines, styled=True)
        if isinstance(block, Heading):
            text.stylize("bold")
        return _wrap(text, width)
    if isinstance(block, ListItem):
        lead = _INDENT * block.depth + block.marker + " "
        body = _wrap(_inline_text(block.inlines, styled=True), width - len(lead))
        return [RichText.assemble(lead if n == 0 else " " * len(lead), line) for n, line in enumerate(body)]
    if isinstance(block, CodeBlock):
        if not block.code.strip():
            return []
        return [RichText(_INDENT + line, style=_CODE_STYLE) for line in terminal_safe(block.code).split("\n")]
    if isinstance(block, Quote):
        inner = _rich_blocks(block.blocks, width - len(_QUOTE_BAR))
        return [RichText.assemble((_QUOTE_BAR, "dim"), line) for line in inner]
    return [RichText(RULE_LINE, style="dim")]


def _wrap(text: RichText, width: int) -> list[RichText]:
    """Lines of at most `width` cells, broken between words; line breaks in the text are kept. A word longer
    than a line (a URL) is left whole for the terminal to fold, so a copied URL has no line break inside it."""
    lines: list[RichText] = []
    for line in text.split("\n", allow_blank=True):
        for part in line.divide(_break_offsets(line.plain, max(width, 20))):
            part.rstrip()
            lines.append(part)
    return lines


def _break_offsets(plain: str, width: int) -> list[int]:
    offsets: list[int] = []
    column = 0
    for word in _WORD.finditer(plain):
        if column and column + cell_len(word.group().rstrip()) > width:
            offsets.append(word.start())
            column = 0
        column += cell_len(word.group())
    return offsets


def render_markdown(markdown: str, *, styled: bool, width: int = 100) -> str:
    """The markdown ready to write: ANSI-styled and wrapped to `width` columns, or plain and unwrapped.

    Every line ends in a newline; trailing spaces that wrapping leaves are removed.
    """
    if not styled:
        plain = markdown_to_plain(markdown)
        return plain + "\n" if plain else ""
    lines = markdown_to_lines(markdown, width=width)
    if not lines:
        return ""
    buffer = io.StringIO()
    _console(buffer, width=width).print(RichText("\n").join(lines), soft_wrap=True)
    return buffer.getvalue()
