"""Words of a text, for ranking and for telling stories apart, in every script, with how telling each word is.

Two tokenisers, for two jobs:
- `tokens` is quick and language-blind (words for space-separated scripts, character bigrams for CJK and Thai):
  ranking, keyword matching and query planning use it;
- `story_terms` reads the language: Chinese is segmented into words by jieba's dictionary and algorithm (rjieba,
  its Rust port), Japanese by MeCab (fugashi with the IPA dictionary), other space-separated languages are split on
  words; Korean and Thai keep character bigrams. Each term comes with a weight from how rare the word is in the
  language at large (wordfreq's frequency lists), so a story's key words keep their weight however many items of
  one batch repeat them. Chinese and Japanese words are read so that outlets' wordings meet: a katakana word's
  long-vowel mark is left out of its term, a figure's thousands commas are dropped, a word the list lacks counts as
  `CJK_UNKNOWN_FREQUENCY`, and a hiragana-only word (a particle, an ending) as no rarer than a particle.

Guarantees: the segmenters and frequency lists load lazily, once per process, under a lock; a language without a
frequency list falls back to the list of its script's most common language (English for Latin script), and a word
missing from the list counts as rare (`RARE_FREQUENCY`; a Chinese or Japanese one, `CJK_UNKNOWN_FREQUENCY`); only the
words a list gives as more frequent than that are read into memory, so every rarity is what the whole list gives. Text
with no Chinese, Japanese, Korean or Thai in it is read as it was before any of the CJK rules. Where the IPA
dictionary's word table ships gzipped (the container image), the first Japanese text unpacks it once (`_mecab_args`).
"""

from __future__ import annotations

import atexit
import gzip
import importlib.util
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kernel import THIS_HOST, process_runs
from research.trim import return_freed_memory

logger = logging.getLogger(__name__)

__all__ = [
    "CJK_UNKNOWN_FREQUENCY",
    "HIRAGANA_WORD_FREQUENCY",
    "Acronyms",
    "StoryTerms",
    "acronym_term",
    "acronyms",
    "has_word_list",
    "is_stop_word",
    "normalise",
    "rarity",
    "story_terms",
    "tokens",
]

# ---- normalisation and the quick tokeniser ---------------------------------------------------------------

_WORD = re.compile(r"[^\W_]+(?:[.,'’][^\W_]+)*", re.UNICODE)
_NO_SPACE_SCRIPTS = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u0e00-\u0e7f]+"
)


def _word_set(*lines: str) -> frozenset[str]:
    return frozenset(" ".join(lines).split())


_STOP_WORDS = _word_set(
    # English
    "a an the and or but of to in on at by for with from as is are was were be been its it this that "
    "these those has have had will would can could may says said say after over into about than more "
    "new up out off amid as after before than all its their his her he she they we you not no"
    # German, French, Spanish, Portuguese, Italian, Dutch: the commonest function words only
    " der die das und ein eine im in zu den dem des mit von für auf ist sind bei nach um"
    " le la les un une des du de et au aux en pour sur dans par est sont"
    " el los las y del al por con para una es se su lo como"
    " o os as do da dos das em um uma com"
    " il lo gli di e che per con"
    " het een en van op te voor met"
    # Russian
    " и в во на по с со к о об от за из для не что это как у же",
)

_DIGIT = re.compile(r"\d")
_AMOUNT_UNIT = re.compile(r"(\d)(bn|billion|m|mn|million|k|tn|trillion)\b")
"""`$57bn` and `57 billion` should meet: split the unit off the number."""
_UNITS = {"bn": "billion", "mn": "million", "m": "million", "tn": "trillion", "k": "thousand"}


def normalise(text: str) -> str:
    """NFKC, case-folded, with accents kept (they carry meaning in many languages) and spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _split_units(text: str) -> str:
    """`text` with amounts' units split off their figures ("57bn" -> "57 bn"); most text has none, and a search
    that finds nothing is cheaper than a substitution that changes nothing."""
    return _AMOUNT_UNIT.sub(r"\1 \2", text) if _AMOUNT_UNIT.search(text) else text


def is_stop_word(word: str) -> bool:
    """Whether a word is a function word ("the", "der", "и", ...) in one of the languages we know."""
    return normalise(word) in _STOP_WORDS


def _word_token(word: str) -> str | None:
    word = _UNITS.get(word, word)
    if word in _STOP_WORDS or (len(word) < 2 and not word.isdigit()):
        return None
    return _stem(word)


def _stem(word: str) -> str:
    word = word.replace("’", "'")
    word = word.replace(",", ".") if _DIGIT.search(word) else word
    if word.endswith("'s"):
        word = word[:-2]
    # A light plural strip so "chips"/"chip" and "recalls"/"recall" meet; never on short words or numbers.
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss") and word.isalpha():
        word = word[:-1]
    return word


def _bigrams(piece: str) -> list[str]:
    return [piece[i : i + 2] for i in range(max(len(piece) - 1, 1))]


def tokens(text: str, *, limit: int | None = None) -> list[str]:
    """Tokens of `text`: words for space-separated scripts, character bigrams for CJK and Thai."""
    out: list[str] = []
    for match in _WORD.finditer(_split_units(normalise(text))):
        run = match.group()
        position = 0
        for chunk in _NO_SPACE_SCRIPTS.finditer(run):
            if chunk.start() > position:
                token = _word_token(run[position : chunk.start()])
                if token:
                    out.append(token)
            out.extend(_bigrams(chunk.group()))
            position = chunk.end()
        if position < len(run):
            token = _word_token(run[position:])
            if token:
                out.append(token)
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


# ---- language-aware terms with global weights ------------------------------------------------------------

_HAN_OR_KANA = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HIRAGANA_WORD = re.compile(r"[\u3041-\u309f]+")
_LONG_VOWEL = re.compile(r"(?<=[\u30a1-\u30fa])\u30fc")
"""The katakana long-vowel mark after a katakana letter: outlets write one loanword or name with it or without it
("アルカーイダ" / "アルカイダ", "ハマース" / "ハマス")."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_HANGUL_OR_THAI = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u0e00-\u0e7f]+")
_NO_SPACE = re.compile(
    r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+|[\uac00-\ud7af\u1100-\u11ff\u0e00-\u0e7f]+)"
)

CHINESE_VARIANTS = frozenset({"zh", "yue", "wuu", "gan", "hak", "cmn", "lzh"})
"""Detector codes that are written in Chinese characters and read with the Chinese frequency list."""

RARE_FREQUENCY = 1e-7
"""What a word missing from the frequency list counts as: rarer than nearly every listed word."""
FIGURE_FREQUENCY = 3e-6
"""What a figure ("239,000", "1.8") counts as; the lists fold digits together, so they say little of one number."""
CJK_UNKNOWN_FREQUENCY = 2e-6
"""What a Chinese or Japanese word missing from the frequency list (or rarer there than `RARE_FREQUENCY`) counts as:
rare, about as telling as a figure, not rarer than every listed word, because the segmenters' dictionaries hold
compound names ("三井信託銀行") that other outlets write in parts, and at `RARE_FREQUENCY` one such word outweighed the
rest of a headline."""
HIRAGANA_WORD_FREQUENCY = 0.01
"""What a Japanese word written in hiragana alone counts as at most: as common as a particle, so the particles,
endings and auxiliaries MeCab splits off ("に", "よる") carry no weight; they stay terms, so a lead's term limit stops
where it would."""


@dataclass(frozen=True)
class StoryTerms:
    """A text's terms (distinct, in order of first appearance) and each one's rarity in its language."""

    terms: tuple[str, ...]
    rarity: dict[str, float]
    """-ln(frequency) of the word in the language at large: ~3 for "the", ~10 for "bitcoin", 16.1 if unknown."""


_load_lock = threading.RLock()

_KEPT_CENTIBELS = round(-100 * math.log10(RARE_FREQUENCY))
"""wordfreq files its words by frequency in centibels (bucket n: 10 ** (-n / 100)); buckets from this one on hold
words no more frequent than `RARE_FREQUENCY`, which `rarity` scores as unlisted anyway, so they are never read (in
the large lists, two thirds to three quarters of all words)."""


@cache
def _wordfreq_data() -> Path | None:
    """wordfreq's data folder, found without importing wordfreq: its import brings langcodes, regex and its
    tokenisers, and `wordfreq.chinese` Python's jieba, none of which is used here."""
    spec = importlib.util.find_spec("wordfreq")
    folders = spec.submodule_search_locations if spec is not None else None
    return Path(folders[0], "data") if folders else None


@cache
def _wordlists() -> dict[str, Path]:
    """wordfreq's list file per language, the large one where there is one (what wordfreq calls "best")."""
    data = _wordfreq_data()
    found: dict[str, Path] = {}
    if data is None:
        return found
    for size in ("small", "large"):
        for path in sorted(data.glob(f"{size}_*.msgpack.gz")):
            found[path.name.split(".")[0].partition("_")[2]] = path
    return found


@cache
def _simplified() -> dict[int, int | str]:
    """wordfreq's traditional-to-simplified character map (what `wordfreq.chinese.simplify_chinese` translates by),
    read from its data file, so the Chinese list is looked up as it was counted."""
    data = _wordfreq_data()
    if data is None:
        return {}
    import msgpack

    with gzip.open(data / "_chinese_mapping.msgpack.gz", "rb") as packed:
        mapping: dict[int, int | str] = msgpack.unpack(packed, raw=False, strict_map_key=False)
    return mapping


_BUCKET_FREQUENCIES = tuple(10 ** (-centibels / 100) for centibels in range(_KEPT_CENTIBELS))
"""The frequency of each kept bucket, as wordfreq computes it (`cB_to_freq`)."""


class WordList:
    """One language's listed words with their frequencies, held as two sorted arrays, the words' hashes (8 bytes)
    and their buckets (2 bytes), instead of a dict of strings (about 100 bytes a word): the lists of the five
    languages of a multilingual digest take 6 MB, not 50. A lookup is a binary search (2-3 µs; `rarity` keeps
    what it found). Two different words with one 64-bit hash would share a frequency: about one chance in 10^9 per
    list."""

    __slots__ = ("_buckets", "_hashes")

    def __init__(self, hashes: array[int], buckets: array[int]) -> None:
        self._hashes, self._buckets = hashes, buckets

    @classmethod
    def read(cls, buckets: Iterable[Iterable[str]]) -> WordList:
        """The list of the words in `buckets` (bucket n: frequency 10 ** (-n / 100))."""
        import numpy as np

        # Gathered into flat arrays and sorted by numpy (no Python object per word outlives its bucket, so building
        # leaves no scattered garbage behind); a word listed twice keeps its last (rarer) bucket, as
        # `wordfreq.get_frequency_dict` does.
        keys, found = array("q"), array("H")
        for bucket, words in enumerate(buckets):
            for word in words:
                keys.append(_key(word))
                found.append(bucket)
        key_of = np.frombuffer(keys, dtype=np.int64) if keys else np.zeros(0, dtype=np.int64)
        bucket_of = np.frombuffer(found, dtype=np.uint16) if found else np.zeros(0, dtype=np.uint16)
        order = np.lexsort((bucket_of, key_of))
        key_of, bucket_of = key_of[order], bucket_of[order]
        last = np.append(key_of[1:] != key_of[:-1], True) if len(key_of) else np.zeros(0, dtype=bool)
        return cls(array("q", key_of[last].tobytes()), array("H", bucket_of[last].tobytes()))

    def __len__(self) -> int:
        return len(self._hashes)

    def frequency(self, word: str) -> float:
        """`word`'s frequency in the list, or 0.0 when it is not listed (or no more frequent than
        `RARE_FREQUENCY`)."""
        key = _key(word)
        position = bisect_left(self._hashes, key)
        if position < len(self._hashes) and self._hashes[position] == key:
            return _BUCKET_FREQUENCIES[self._buckets[position]]
        return 0.0


def _key(word: str) -> int:
    """A word's 64-bit key: the hash of its UTF-8 bytes (a `str`'s own hash reads its internal buffer, in which "つ"
    and "d0" are the same two bytes)."""
    return hash(word.encode("utf-8", "surrogatepass"))


_NO_WORDS = WordList(array("q"), array("H"))


@cache
def _frequencies(language: str) -> WordList:
    """`language`'s list: each word more frequent than `RARE_FREQUENCY` with its frequency (wordfreq's values, as
    `wordfreq.get_frequency_dict` gives them). Read bucket by bucket from the packed file, stopping at
    `_KEPT_CENTIBELS`, so the rarer words are never read."""
    path = _wordlists().get(language)
    if path is None:
        return _NO_WORDS
    import msgpack

    with _load_lock, gzip.open(path, "rb") as packed:
        unpacker = msgpack.Unpacker(packed, raw=False)
        buckets = unpacker.read_array_header() - 1
        header = unpacker.unpack()
        if not isinstance(header, dict) or header.get("format") != "cB" or header.get("version") != 1:
            raise ValueError(f"{path.name}: not a wordfreq list (header {header!r})")
        words = WordList.read(unpacker.unpack() for _ in range(min(buckets, _KEPT_CENTIBELS)))
    return_freed_memory(collect=False)  # what reading left free (a few MB of buffers and strings per list)
    return words


def has_word_list(language: str) -> bool:
    """Whether `language` (an ISO 639-1 code) has a frequency list of its own, rather than its script's fallback."""
    return language in _wordlists()


@cache
def _frequency_language(language: str | None) -> str:
    if language in CHINESE_VARIANTS:
        return "zh"
    return language if language and language in _wordlists() else "en"


_RARITY_CACHE: dict[tuple[str, str | None], float] = {}
_RARITY_CACHE_SIZE = 200_000


def rarity(word: str, language: str | None) -> float:
    """-ln(frequency) of `word` (already normalised) in `language`; rare and unknown words score high."""
    key = (word, language)
    found = _RARITY_CACHE.get(key)
    if found is not None:
        return found
    if _DIGIT.search(word):
        value = -math.log(FIGURE_FREQUENCY)
    else:
        frequency = _frequencies(_frequency_language(language)).frequency(word)
        value = -math.log(max(frequency, RARE_FREQUENCY))
    if len(_RARITY_CACHE) >= _RARITY_CACHE_SIZE:
        _RARITY_CACHE.clear()  # a crude bound: the cache only saves lookups, and refills in one batch
    _RARITY_CACHE[key] = value
    return value


@cache
def _chinese_segmenter() -> Callable[[str], list[str]]:
    with _load_lock:
        import rjieba

        simplified = _simplified()

    # jieba's dictionary and algorithm (DAG + HMM for unknown words) in Rust (jieba-rs through rjieba): the same
    # words as the Python jieba on every Chinese clause of the bench sets, ~10x cheaper, no dictionary build at start.
    # Its `cut` only reads the dictionary, so one instance serves every thread.
    cut = rjieba.cut

    def segment(text: str) -> list[str]:
        return [word for word in cut(text.translate(simplified).casefold(), True) if word.strip()]

    return segment


PACKED_IPADIC_TABLE = "sys.dic.gz"
"""The IPA dictionary's word table gzipped (12 MB for 49 MB), as the container image ships it: there `sys.dic` beside
it is a link to where the table is unpacked on first use, a writable place (`docker/slim_venv.py` makes both)."""


def _unpack(packed: Path, target: Path) -> None:
    """Unpacks `packed` to `target` through a temporary file beside it, so a reader never sees half a table and two
    processes unpacking at once both end with a whole one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as out, gzip.open(packed, "rb") as source:
            shutil.copyfileobj(source, out, 1 << 20)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


PRIVATE_IPADIC_PREFIX = "lookout-ipadic-"
"""A process's private folder for the unpacked table, under the temporary folder:
`lookout-ipadic-<pid>-<host>-<random>`, so a later process on the same host can tell whose it is when the owner was
killed before removing it (a folder of another host, sharing the volume, is never judged)."""

_PRIVATE_IPADIC = re.compile(rf"{PRIVATE_IPADIC_PREFIX}(\d+)-(.+)-[a-z0-9_]+")


def remove_orphan_dictionaries(under: Path | None = None) -> list[Path]:
    """Remove the private dictionary folders under `under` (the temporary folder) whose process is gone (killed by
    SIGKILL, or the machine stopped: its exit hook never ran); never one whose process runs. Returns the folders
    removed. Called as the monitor stack starts and before a process makes its own folder."""
    under = under if under is not None else Path(tempfile.gettempdir())
    removed = []
    try:
        candidates = list(under.iterdir())
    except OSError:
        return []
    for folder in candidates:
        found = _PRIVATE_IPADIC.fullmatch(folder.name)
        if found is None or found.group(2) != THIS_HOST:
            continue
        pid = int(found.group(1))
        if pid == os.getpid() or process_runs(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    if removed:
        logger.info("removed %d dictionary folder(s) left by processes that were killed", len(removed))
    return removed


def _mecab_args() -> str:
    """MeCab's arguments for the IPA dictionary. Where its word table ships gzipped, unpacks it to where `sys.dic`
    links (the image's data folder), once for every later process too; where that place cannot be written, to a
    private folder under the temporary folder, for this process, removed when it exits (and, when it was killed
    before, by the next process that makes one: `remove_orphan_dictionaries`)."""
    import ipadic

    folder = Path(ipadic.DICDIR)
    table, packed = folder / "sys.dic", folder / PACKED_IPADIC_TABLE
    if table.exists() or not packed.exists():
        return str(ipadic.MECAB_ARGS)
    try:
        _unpack(packed, folder / os.readlink(table) if table.is_symlink() else table)
        return str(ipadic.MECAB_ARGS)
    except OSError as error:
        remove_orphan_dictionaries()
        private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_IPADIC_PREFIX}{os.getpid()}-{THIS_HOST}-"))
        atexit.register(shutil.rmtree, private, ignore_errors=True)  # 49 MB per process otherwise left behind
        logger.warning(
            "the Japanese dictionary could not be unpacked to %s (%s); unpacking to %s", table, error, private
        )
        for part in folder.iterdir():
            if part.name not in ("sys.dic", PACKED_IPADIC_TABLE):
                (private / part.name).symlink_to(part)
        _unpack(packed, private / "sys.dic")
        return f'-r "{folder / "mecabrc"}" -d "{private}"'


@cache
def _japanese_segmenter() -> Callable[[str], list[str]]:
    with _load_lock:
        import fugashi

        mecab_args = _mecab_args()

    # MeCab with the IPA dictionary: the tokenisation wordfreq's Japanese list was counted in, so a segmented
    # word is looked up as the list knows it. One tagger per thread: a MeCab tagger is not safe to share. Words
    # come back as one space-separated line ("-Owakati"): the same words as reading each node's surface, without
    # a Python object per word. A chunk has no spaces of its own (it is one run of kana and Han), so the split is
    # exact.
    local = threading.local()

    def segment(text: str) -> list[str]:
        tagger = getattr(local, "tagger", None)
        if tagger is None:
            tagger = local.tagger = fugashi.GenericTagger(mecab_args + " -Owakati")
        return tagger.parse(text).split()  # type: ignore[no-any-return]

    return segment


_WORD_TERMS: dict[tuple[str, str | None], tuple[str, float] | None] = {}
"""A space-separated word (with its language) -> its term and rarity, or None when it is no term. Words repeat
across items far more than they differ, so each is read once (bounded like the rarity cache)."""


SNOWBALL_LANGUAGES = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "es": "spanish", "eu": "basque", "fa": "persian", "fi": "finnish", "fr": "french",
    "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "lt": "lithuanian", "nb": "norwegian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
}  # fmt: skip
"""Languages with a Snowball stemmer (PyStemmer), by ISO 639-1 code; others keep the light plural strip."""


@cache
def _stemmer(language: str | None) -> Callable[[str], str] | None:
    name = SNOWBALL_LANGUAGES.get(language or "")
    if name is None:
        return None
    with _load_lock:
        import Stemmer

        # No cache of PyStemmer's own (maxCacheSize 0): `_WORD_TERMS` already reads each word once, so every word
        # the stemmer sees is new, and once its 10,000-word cache is full, each new word purged the whole cache
        # (~100 µs a word, in a process that has read enough text).
        stemmer: Any = Stemmer.Stemmer(name, 0)
    return stemmer.stemWord  # type: ignore[no-any-return]


def _story_stem(word: str, language: str | None) -> str:
    """The word's stem in its language ("fired", "fires" -> "fire"; "recalls" -> "recal"), so outlets that inflect
    a story's words differently still share them; figures and words with digits are kept whole."""
    stem = _stem(word)
    # The language the word is weighed in (a language without a frequency list is read as its script's commonest):
    # a headline misread as Nigerian Pidgin is still stemmed as the English its words are listed in.
    stemmer = _stemmer(_frequency_language(language))
    return stemmer(stem) if stemmer is not None and stem.isalpha() else stem


def _word_term(word: str, language: str | None) -> tuple[str, float] | None:
    key = (word, language)
    if key in _WORD_TERMS:
        return _WORD_TERMS[key]
    unit = _UNITS.get(word, word)
    # The unstemmed word's frequency: "recalls" is as telling as the list says it is.
    term = None if len(unit) < 2 and not unit.isdigit() else (_story_stem(unit, language), rarity(unit, language))
    if len(_WORD_TERMS) >= _RARITY_CACHE_SIZE:
        _WORD_TERMS.clear()
    _WORD_TERMS[key] = term
    return term


_UNREAD = ("", 0.0)
"""What `_WORD_TERMS` answers for a word not read yet (None is a word read and found no term)."""
_HAN_LANGUAGES = CHINESE_VARIANTS | {"ja"}
"""Languages a run of Han characters without kana is read in as they are; in any other it is read as Chinese."""


def story_terms(text: str, language: str | None, *, limit: int | None = None) -> StoryTerms:
    """The distinct terms of `text` read as `language` (the script decides where the language is unknown),
    at most `limit` of them, each with its rarity."""
    seen: dict[str, float] = {}
    normalised = _split_units(normalise(text))
    words = _WORD.findall(normalised)
    if _NO_SPACE.search(normalised) is None:
        # Most text has only space-separated words: then no word is split or tested for the segmenter, and each
        # is looked up where `_word_term` keeps it (the call only for a word not read before).
        for word in words:
            term = _WORD_TERMS.get((word, language), _UNREAD)
            if term is _UNREAD:
                term = _word_term(word, language)
            if term is not None and term[0] not in seen:
                seen[term[0]] = term[1]
                if limit is not None and len(seen) >= limit:
                    break
        return StoryTerms(terms=tuple(seen), rarity=seen)
    for match in words:
        # re.split with one group: the runs of a script written without spaces at odd positions, words between.
        for position, part in enumerate(_NO_SPACE.split(match)):
            if not part:
                continue
            if position % 2:
                _add_segmented(part, language, seen)
            else:
                if "," in part:  # beside CJK, Hangul or Thai a figure's comma groups thousands: "1,000人" = "1000人"
                    part = _THOUSANDS.sub("", part)
                term = _word_term(part, language)
                if term is not None and term[0] not in seen:
                    seen[term[0]] = term[1]
            if limit is not None and len(seen) >= limit:
                return StoryTerms(terms=tuple(seen), rarity=seen)
    return StoryTerms(terms=tuple(seen), rarity=seen)


def _add_segmented(run: str, language: str | None, seen: dict[str, float]) -> None:
    """Add the words of one run of Han, kana, Hangul or Thai to `seen`, each with its rarity.

    Chinese and Japanese words are read the way outlets' wordings meet: the katakana long-vowel mark is left out of
    the term (its rarity is the word's as written); a word the frequency list does not know counts as
    `CJK_UNKNOWN_FREQUENCY`; a word of hiragana alone is no rarer than `HIRAGANA_WORD_FREQUENCY`."""
    cached = _RARITY_CACHE
    if _HAN_OR_KANA.fullmatch(run) is None:  # Hangul or Thai: character bigrams (a lone letter is no term)
        for word in _bigrams(run):
            if word in seen or len(word) == 1:
                continue
            found = cached.get((word, language))
            seen[word] = found if found is not None else rarity(word, language)
        return
    if _KANA.search(run):  # kana is Japanese whatever the language was said to be
        run_language, words = "ja", _japanese_segmenter()(run)
    else:
        run_language = language if language in _HAN_LANGUAGES else "zh"
        segmenter = _japanese_segmenter() if run_language == "ja" else _chinese_segmenter()
        words = segmenter(run)
    for word in words:
        term = _LONG_VOWEL.sub("", word) if "\u30fc" in word else word
        if term in seen:
            continue
        found = cached.get((word, run_language))
        value = found if found is not None else rarity(word, run_language)
        if value >= _UNKNOWN_RARITY:
            value = _CJK_UNKNOWN_RARITY
        seen[term] = min(value, _HIRAGANA_RARITY) if _HIRAGANA_WORD.fullmatch(word) is not None else value


_UNKNOWN_RARITY = -math.log(RARE_FREQUENCY)
_CJK_UNKNOWN_RARITY = -math.log(CJK_UNKNOWN_FREQUENCY)
_HIRAGANA_RARITY = -math.log(HIRAGANA_WORD_FREQUENCY)


# ---- acronyms ----------------------------------------------------------------------------------------------

_CASED_WORD = re.compile(r"([^\W\d_]+)(?:['’]s\b)?")
"""A word of letters as written (case kept), without a possessive "'s"."""
_ACRONYM_LENGTH = (2, 5)
_NOT_ACRONYMS = frozenset({"am", "pm"})
"""Written in capitals but times of day, not names."""
_SPELLED_WORDS = 4
"""The longest run of capitalised words read as a name an acronym could stand for ("Bank of England",
"American Eagle Outfitters", "Time Warner Cable")."""


@dataclass(frozen=True)
class Acronyms:
    """The acronyms of a headline, case-folded letters: those written out in it, and those its capitalised names
    could be shortened to, so a written "BoE" and a spelled "Bank of England" meet (`acronym_term` makes either a
    term, only when they do: most spelled initials never meet one)."""

    written: frozenset[str]
    """Acronyms written in the text: "BoE", "AEO", "MPs" (2-5 letters, two or more capitals) -> "boe", "aeo", "mps"."""
    spelled: frozenset[str]
    """The initials of each run of 2-4 capitalised words, function words between them counted or not:
    "Bank of England" -> "be" and "boe"."""


def acronyms(text: str) -> Acronyms:
    """Acronyms written in `text` and those its runs of capitalised words spell. A headline set all in capitals
    has no written acronyms (every short word would look like one)."""
    if text == text.lower():  # no capitals at all (or a script without case): nothing to read
        return _NO_ACRONYMS
    words = _CASED_WORD.findall(text)
    long_words = [word for word in words if len(word) > 1]
    shouting = len(long_words) >= 3 and sum(word.isupper() for word in long_words) > 0.6 * len(long_words)
    written: set[str] = set()
    spelled_out: set[str] = set()
    low, high = _ACRONYM_LENGTH
    # A name word: capitalised, not an acronym, not a function word ("England", "McDonald"; not "UK" or "Of").
    name = [False] * len(words)
    for position, word in enumerate(words):
        if len(word) < 2 or not word[0].isupper():
            continue
        folded = word.casefold()
        if folded in _STOP_WORDS:
            continue
        if len(word) <= high and not word[1:].islower():  # two capitals or more: "BoE", "AEO", "MPs"
            if not shouting and len(word) >= low and folded not in _NOT_ACRONYMS:
                written.add(folded)
        elif not word.isupper():
            name[position] = True
    for start, word in enumerate(words):
        if not name[start]:
            continue
        initials = with_function_words = word[0]
        count = 1
        for position in range(start + 1, len(words)):
            if name[position]:
                initials += words[position][0]
                with_function_words += words[position][0]
                count += 1
                spelled_out.add(initials)
                spelled_out.add(with_function_words)
                if count == _SPELLED_WORDS:
                    break
            elif words[position].casefold() in _STOP_WORDS and position + 1 < len(words) and name[position + 1]:
                with_function_words += words[position][0]
            else:
                break
    return Acronyms(written=frozenset(written), spelled=frozenset(letters.casefold() for letters in spelled_out))


_NO_ACRONYMS = Acronyms(written=frozenset(), spelled=frozenset())


def acronym_term(acronym: str, language: str | None) -> tuple[str, float] | None:
    """The term and rarity `story_terms` gives an acronym's letters as a word of `language` (None if it is no term),
    so a spelled acronym weighs what the written one does."""
    return _word_term(acronym, language)
