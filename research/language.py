"""Tell the language of an item's text when its source does not say, with py3langid (a maintained langid.py fork).

Guarantees: the model is loaded once per process, on first use, under a lock (so threads may call in at once);
text without letters, or too short to judge, gives `None` rather than a guess; the answer is an ISO 639-1 code
(`en`, `zh`, `ja`, ...), the form `Item.language` uses. A batch (`detect_languages`) gives exactly the answers
`detect_language` gives one text at a time, for a fraction of the work per text.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from sources import Item

__all__ = ["detect_language", "detect_languages", "item_languages", "language_text", "with_languages"]

MIN_LETTERS = 4
"""Shorter texts (`OK`, `AI`, a lone name) carry too little to tell a language by."""

LEAD_CHARS = 300
"""How much of an item's text, after its title, its language is told from."""

JUDGED_CHARS = 1000
"""Only this much of a text is read: a language shows in its first sentences."""

FEW_TEXTS = 24
"""Below this many texts still being read, stepping them together in numpy costs more than reading each in Python."""

_ENOUGH_LETTERS = re.compile(rf"[^\W\d_](?:[\W\d_]*[^\W\d_]){{{MIN_LETTERS - 1}}}", re.UNICODE)
"""`MIN_LETTERS` letters, anything but letters between them (found without counting every letter of the text)."""
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""A few Han characters are a whole headline; they count as enough to judge."""

_identifier: Any = None
_lock = threading.Lock()


def _model() -> Any:
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    return _identifier


def _judged(text: str) -> str | None:
    """The part of `text` the model reads, or None when it is too short to judge."""
    flat = " ".join(text.split())
    if not _ENOUGH_LETTERS.search(flat) and not _HAN.search(flat):
        return None
    return flat[:JUDGED_CHARS]


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the language `text` is written in, or `None` when it cannot be told."""
    judged = _judged(text)
    if judged is None:
        return None
    language, _ = _model().classify(judged)
    return str(language)


def detect_languages(texts: Sequence[str]) -> list[str | None]:
    """`detect_language` of each text, in one pass over the batch.

    The model's byte automaton is stepped for every text at once (numpy, one step per byte position instead of one
    Python step per byte of each text), and the naive-Bayes scores of the whole batch are one sparse product; the
    model, its features and its decision (argmax over the languages, script aliases folded) are py3langid's.
    """
    import numpy as np
    from py3langid.langid import RAW_FLOOR
    from scipy import sparse

    out: list[str | None] = [None] * len(texts)
    positions: list[int] = []
    encoded: list[bytes] = []
    for position, text in enumerate(texts):
        judged = _judged(text)
        if judged is None:
            continue
        if judged.isupper():  # as py3langid reads text: all-caps lowered, NFC, UTF-8
            judged = judged.lower()
        positions.append(position)
        encoded.append(unicodedata.normalize("NFC", judged).encode("utf8", errors="surrogatepass"))
    if not encoded:
        return out
    model = _model()
    transitions, row_base, outputs = _automaton(model)

    # Longest first, so the texts still being read at any step are a prefix of the batch.
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
    lengths = np.asarray([len(encoded[i]) for i in order], dtype=np.int64)
    width = int(lengths[0])
    grid = np.zeros((len(order), width), dtype=np.int64)
    for row, i in enumerate(order):
        grid[row, : len(encoded[i])] = np.frombuffer(encoded[i], dtype=np.uint8)
    reading = np.searchsorted(-lengths, -np.arange(1, width + 1), side="right")
    """How many texts are at least k + 1 bytes long, for each step k."""
    state = np.zeros(len(order), dtype=np.int64)
    rows: list[Any] = []
    features: list[Any] = []
    for step in range(width):
        active = int(reading[step])
        if active < FEW_TEXTS:
            # The few long texts left are read byte by byte: a numpy step costs the same for 2 texts as for 200.
            _walk_rest(model, encoded, order, state, step, active, rows, features)
            break
        current = transitions[row_base[state[:active]] + grid[:active, step]]
        state[:active] = current
        found = outputs[current]
        hit = np.flatnonzero(found >= 0)
        if len(hit):
            rows.append(hit)
            features.append(found[hit])
    count = len(order)
    scores = np.full((count, len(model.nb_classes)), RAW_FLOOR, dtype=np.float32)
    if rows:
        all_rows, all_features = np.concatenate(rows), np.concatenate(features)
        used, columns = np.unique(all_features, return_inverse=True)
        counts = sparse.csr_matrix(
            (np.ones(len(all_rows), dtype=np.float32), (all_rows, columns.ravel())), shape=(count, len(used))
        )
        counts.sum_duplicates()
        counts.data = np.log1p(counts.data)
        has_features = np.diff(counts.indptr) > 0
        table = np.asarray(model.nb_ptc[used], dtype=np.float32)
        scores[has_features] = (counts @ table)[has_features] + model.nb_pc
    for first, duplicate in model._alias_pairs:  # script aliases (srl -> sr): one score per label
        scores[:, first] = np.maximum(scores[:, first], scores[:, duplicate])
        scores[:, duplicate] = RAW_FLOOR
    best = scores.argmax(axis=1)
    for row, i in enumerate(order):
        out[positions[i]] = str(model.nb_classes[int(best[row])])
    return out


def _walk_rest(
    model: Any,
    encoded: Sequence[bytes],
    order: Sequence[int],
    state: Any,
    step: int,
    active: int,
    rows: list[Any],
    features: list[Any],
) -> None:
    """Read the remaining bytes of the first `active` texts (from byte `step` on) one text at a time."""
    import numpy as np

    transitions, row_base, outputs = model.tk_nextmove, model._rowbase, model.tk_output
    for row in range(active):
        current = int(state[row])
        found: list[int] = []
        for byte in encoded[order[row]][step:]:
            current = transitions[row_base[current] + byte]
            feature = outputs[current]
            if feature >= 0:
                found.append(feature)
        if found:
            rows.append(np.full(len(found), row, dtype=np.int64))
            features.append(np.asarray(found, dtype=np.int64))


_AUTOMATON: tuple[Any, Any, Any] | None = None


def _automaton(model: Any) -> tuple[Any, Any, Any]:
    """The model's byte automaton as numpy arrays (transitions, row offsets, feature per state), built once."""
    global _AUTOMATON
    if _AUTOMATON is None:
        import numpy as np

        with _lock:
            if _AUTOMATON is None:
                _AUTOMATON = (
                    np.frombuffer(model.tk_nextmove, dtype=np.dtype(model.tk_nextmove.typecode)).astype(np.int64),
                    np.asarray(model.tk_row, dtype=np.int64) << 8,
                    np.asarray(model.tk_output, dtype=np.int64),
                )
    return _AUTOMATON


def language_text(title: str, text: str) -> str:
    """What an item's language is told from: its title and the start of its text (`LEAD_CHARS`)."""
    return f"{title}\n{text[:LEAD_CHARS]}"


def item_languages(items: Sequence[Item]) -> list[str | None]:
    """Each item's language: the one its source gave, or else told from its `language_text` (the items without one
    in one `detect_languages` pass); None where it cannot be told."""
    languages: list[str | None] = [item.language or None for item in items]
    unknown = [index for index, language in enumerate(languages) if language is None]
    told = detect_languages([language_text(items[index].title, items[index].text) for index in unknown])
    for index, language in zip(unknown, told, strict=True):
        languages[index] = language
    return languages


def with_languages(items: Iterable[Item]) -> list[Item]:
    """The items with `language` filled in from their title and lead where the source left it empty."""
    listed = list(items)
    return [
        item if item.language or not language else item.model_copy(update={"language": language})
        for item, language in zip(listed, item_languages(listed), strict=True)
    ]
