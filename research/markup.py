"""Lookout's markdown as text: a person's words or a title inside it, shown as written by every renderer, and the one
splitter that cuts it into a platform's messages. No dependencies, so listings (`/monitors`, `lookout monitors
list`) draw without loading the digest's model library."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

Measure = Callable[[str], int]
"""How a platform counts a text's length (characters, UTF-16 code units)."""
Atoms = Callable[[str], list[str]]
"""A line as the pieces a cut must never fall inside."""

_PARAGRAPHS = re.compile(r"\n\n+")

# A bare URL is read whole before any mark inside it, so it is matched first and left as it is.
_INLINE_MARKUP = re.compile(r"(?<!\w)https?://[^\s<>\"]+|[\\`*_~]|(?<=\])\(")
_LINE_START_MARKUP = re.compile(r"^([ \t]*(?:\d{1,9})?)([#>+\-|.)])", re.MULTILINE)


def escape_markdown(text: str) -> str:
    """Text (a topic, a title, a person's words) to put inside markdown so that every renderer shows it as
    written: emphasis marks, code ticks, link targets and line-opening list or quote marks are
    backslash-escaped (the shared markdown parser reads `\\x` as a literal `x`). `[n]` citations stay live."""
    escaped = _INLINE_MARKUP.sub(lambda m: m.group() if len(m.group()) > 1 else "\\" + m.group(), text)
    return _LINE_START_MARKUP.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)


def pack_pieces(pieces: Sequence[str], separator: str, limit: int, *, units: Measure = len) -> list[str]:
    """Pieces (each within `limit`) joined greedily with `separator` into as few texts within `limit` as possible;
    blank texts are dropped."""
    packed: list[str] = []
    size = 0  # of the last packed text
    gap = units(separator)
    for piece in pieces:
        piece_size = units(piece)
        if packed and size + gap + piece_size <= limit:
            packed[-1] += separator + piece
            size += gap + piece_size
        else:
            packed.append(piece)
            size = piece_size
    return [text for text in packed if text.strip()]


def split_words(line: str, limit: int, *, units: Measure = len, atoms: Atoms = list) -> list[str]:
    """One line in pieces of at most `limit` units, cut at the last space that fits, else between two atoms (the
    smallest pieces never cut: characters by default, a platform's links or entities); the spaces cut at go."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for atom in atoms(line):
        if size + units(atom) > limit and current:
            spaces = [index for index, held in enumerate(current) if held == " " and index > 0]
            cut = spaces[-1] if spaces else len(current)
            pieces.append("".join(current[:cut]))
            current = current[cut + 1 :] if spaces else []
            size = sum(map(units, current))
        current.append(atom)
        size += units(atom)
    pieces.append("".join(current))
    return [piece for piece in pieces if piece.strip()]


def split_text(text: str, limit: int, *, units: Measure = len, atoms: Atoms = list) -> list[str]:
    """Markdown in pieces of at most `limit` units, cut between paragraphs, else lines, else words, else atoms.

    The one splitter under every platform's: `units` is how the platform counts (characters; Telegram and Slack:
    UTF-16 code units), `atoms` what it must never cut (see `split_words`)."""
    limit = max(limit, 16)
    pieces: list[str] = []
    for paragraph in _PARAGRAPHS.split(text):
        paragraph = paragraph.strip("\n")
        if units(paragraph) <= limit:
            pieces.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.split("\n"):
            fits = units(line) <= limit
            lines.extend([line] if fits else split_words(line, limit, units=units, atoms=atoms))
        pieces.extend(pack_pieces(lines, "\n", limit, units=units))
    return pack_pieces(pieces, "\n\n", limit, units=units)
