"""Tell the language of an item's text when its source does not say, with py3langid (a maintained langid.py fork).

Guarantees: the model is loaded once per process, on first use, under a lock (so threads may call in at once);
text without letters, or too short to judge, gives `None` rather than a guess; the answer is an ISO 639-1 code
(`en`, `zh`, `ja`, ...), the form `Item.language` uses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from sources import Item

__all__ = ["detect_language", "with_languages"]

MIN_LETTERS = 4
"""Shorter texts (`OK`, `AI`, a lone name) carry too little to tell a language by."""

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""A few Han characters are a whole headline; they count as enough to judge."""

_identifier: Any = None
_lock = threading.Lock()


def _classify(text: str) -> str:
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    language, _ = _identifier.classify(text)
    return str(language)


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the language `text` is written in, or `None` when it cannot be told."""
    flat = " ".join(text.split())
    if len(_LETTER.findall(flat)) < MIN_LETTERS and not _HAN.search(flat):
        return None
    return _classify(flat[:1000])


def with_languages(items: Iterable[Item], *, lead_chars: int = 300) -> list[Item]:
    """The items with `language` filled in from their title and lead where the source left it empty."""
    out: list[Item] = []
    for item in items:
        if item.language:
            out.append(item)
            continue
        language = detect_language(f"{item.title}\n{item.text[:lead_chars]}")
        out.append(item.model_copy(update={"language": language}) if language else item)
    return out
