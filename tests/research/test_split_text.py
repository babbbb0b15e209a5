"""The one splitter under every platform's: cuts between paragraphs, then lines, then words, counting in the
platform's unit and never inside an atom."""

from __future__ import annotations

import re

from research import split_text


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_cuts_between_paragraphs_before_lines_and_words() -> None:
    text = "first paragraph here\n\nsecond one\nwith two lines\n\nthird"
    assert split_text(text, 30) == ["first paragraph here", "second one\nwith two lines", "third"]
    assert split_text(text, 100) == [text]


def test_counts_in_the_platforms_unit() -> None:
    text = " ".join(["🎉ok"] * 40)  # each word is 3 characters but 4 UTF-16 units
    by_characters = split_text(text, 50)
    by_units = split_text(text, 50, units=_utf16)
    assert all(len(piece) <= 50 for piece in by_characters)
    assert all(_utf16(piece) <= 50 for piece in by_units)
    assert any(_utf16(piece) > 50 for piece in by_characters)  # the unit matters
    assert " ".join(by_units).split() == text.split()


def test_never_cuts_inside_an_atom() -> None:
    link = "<https://example.org/a/long/path|a link>"
    text = "x" * 30 + link + "y" * 30
    pieces = split_text(text, 50, atoms=re.compile(r"<[^<>]*>|.", re.DOTALL).findall)
    assert any(link in piece for piece in pieces)
    assert "".join(pieces) == text
