"""A person's words or a title inside Lookout's markdown, shown as written by every renderer. No dependencies, so
listings (`/monitors`, `lookout monitors list`) draw without loading the digest's model library."""

from __future__ import annotations

import re

# A bare URL is read whole before any mark inside it, so it is matched first and left as it is.
_INLINE_MARKUP = re.compile(r"(?<!\w)https?://[^\s<>\"]+|[\\`*_~]|(?<=\])\(")
_LINE_START_MARKUP = re.compile(r"^([ \t]*(?:\d{1,9})?)([#>+\-|.)])", re.MULTILINE)


def escape_markdown(text: str) -> str:
    """Text (a topic, a title, a person's words) to put inside markdown so that every renderer shows it as
    written: emphasis marks, code ticks, link targets and line-opening list or quote marks are
    backslash-escaped (the shared markdown parser reads `\\x` as a literal `x`). `[n]` citations stay live."""
    escaped = _INLINE_MARKUP.sub(lambda m: m.group() if len(m.group()) > 1 else "\\" + m.group(), text)
    return _LINE_START_MARKUP.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)
