"""Drop exact duplicates (same id or URL) and cluster near-duplicates (the same story told by many outlets).

Near-duplicates are found by an IDF-weighted Jaccard similarity of the normalised title + lead. Latin,
Cyrillic and other space-separated scripts give word tokens (stop words dropped, a light plural strip);
Chinese, Japanese, Korean and Thai give character bigrams, since words there are not separated by spaces
and Korean glues particles to nouns. Token weights are IDF over
everything the `Deduper` has seen, with reporting boilerplate ("billion", "quarter", "said") counted less,
and a penalty when both items quote figures and share none. An item joins the story whose members are on
average most similar to it, when that mean reaches `threshold` (average link: one loose link cannot chain two
look-alike stories); candidates come from an inverted index over rarer tokens, so adding an item costs far
less than comparing it with everything seen.

A cluster's representative is its most engaged member; ties go to the earliest published, then to the
one with the most text (the most complete).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from sources import Item, canonical_url

DEFAULT_THRESHOLD = 0.09
"""Similarity at which two items count as the same story (tuned on tests/research/payloads/headlines.json)."""

LEAD_TOKENS = 25
"""How many tokens of the text count as the lead; later text is about details, not the story's identity."""

_WORD = re.compile(r"[^\W_]+(?:[.,'][^\W_]+)*", re.UNICODE)
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


# Reporting and finance boilerplate: shared by unrelated stories, so it counts less. Kept to words about how
# news is reported, not what it is about, so look-alike stories (same event type) are not pushed apart by hand.
_BOILERPLATE = _word_set(
    "billion million trillion bn percent year quarter first second third fourth revenue sale profit "
    "earning forecast estimate expectation beat report reported company firm market share stock investor "
    "analyst week month day monday tuesday wednesday thursday friday saturday sunday today latest chief "
    "executive ceo official government people according source told statement announced announce "
    "launch launched release released unveil unveiled",
)
BOILERPLATE_WEIGHT = 0.4

_AMOUNT_UNIT = re.compile(r"(\d)(bn|billion|m|mn|million|k|tn|trillion)\b")
"""`$57bn` and `57 billion` should meet: split the unit off the number."""


def is_stop_word(word: str) -> bool:
    """Whether a word is a function word ("the", "der", "и", ...) in one of the languages we know."""
    return normalise(word) in _STOP_WORDS


def normalise(text: str) -> str:
    """NFKC, case-folded, with accents kept (they carry meaning in many languages) and spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_UNITS = {"bn": "billion", "mn": "million", "m": "million", "tn": "trillion", "k": "thousand"}


def _word_token(word: str) -> str | None:
    word = _UNITS.get(word, word)
    if word in _STOP_WORDS or (len(word) < 2 and not word.isdigit()):
        return None
    word = word.replace(",", ".") if any(c.isdigit() for c in word) else word
    if word.endswith("'s"):
        word = word[:-2]
    # A light plural strip so "chips"/"chip" and "recalls"/"recall" meet; never on short words or numbers.
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss") and word.isalpha():
        word = word[:-1]
    return word


def tokens(text: str, *, limit: int | None = None) -> list[str]:
    """Tokens of `text`: words for space-separated scripts, character bigrams for CJK and Thai."""
    out: list[str] = []
    for match in _WORD.finditer(_AMOUNT_UNIT.sub(r"\1 \2", normalise(text))):
        run = match.group()
        position = 0
        for chunk in _NO_SPACE_SCRIPTS.finditer(run):
            if chunk.start() > position:
                token = _word_token(run[position : chunk.start()])
                if token:
                    out.append(token)
            piece = chunk.group()
            out.extend(piece[i : i + 2] for i in range(max(len(piece) - 1, 1)))
            position = chunk.end()
        if position < len(run):
            token = _word_token(run[position:])
            if token:
                out.append(token)
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


_YEAR = re.compile(r"(19|20)\d\d")
_LATIN_OR_CYRILLIC_WORD = re.compile(r"[a-z\u00c0-\u024f\u0400-\u04ff][\w.-]{2,}")

NUMBER_CONFLICT_FACTOR = 0.6
"""Similarity is multiplied by this when both items quote figures and share none of them: "recalls 239,000
cars" and "recalls 850,000 cars" are different stories even when the rest of the wording is alike."""

SUBJECT_CONFLICT_FACTOR = 0.5
"""Similarity is multiplied by this when neither headline mentions the other's first word: headlines lead
with their subject ("Tesla recalls ...", "Ford recalls ..."), while outlets telling the same story name the
same subject somewhere ("EU fines Apple" / "Apple hit with EU fine")."""


@dataclass(frozen=True)
class Fingerprint:
    """What two items are compared on."""

    tokens: frozenset[str]
    """Tokens of the whole title plus the lead of the text."""
    figures: frozenset[str]
    """The tokens that are figures (amounts, counts, model numbers), years excepted."""
    subject: str | None
    """The headline's first word when it is a content word in a space-separated script."""


def fingerprint(title: str, text: str = "") -> Fingerprint:
    """Build the fingerprint of a title and its text."""
    title_tokens = tokens(title)
    all_tokens = frozenset(title_tokens) | frozenset(tokens(text, limit=LEAD_TOKENS))
    figures = frozenset(t for t in all_tokens if any(c.isdigit() for c in t) and not _YEAR.fullmatch(t))
    first = title_tokens[0] if title_tokens else None
    subject = first if first and _LATIN_OR_CYRILLIC_WORD.fullmatch(first) else None
    return Fingerprint(tokens=all_tokens, figures=figures, subject=subject)


_OLDEST = datetime.min.replace(tzinfo=UTC)


def _representative_order(item: Item) -> tuple[int, float, int]:
    published = item.published or datetime.max.replace(tzinfo=UTC)
    # Most engaged first, then earliest, then the most complete.
    return (-item.engagement.total(), (published - _OLDEST).total_seconds(), -len(item.text))


class Cluster(BaseModel):
    """One story: every item that told it (all their URLs) and the one chosen to stand for it."""

    model_config = ConfigDict(frozen=True)

    id: str
    """`c1`, `c2`, ... in the order stories were first seen by the `Deduper`."""
    members: list[Item] = Field(min_length=1)
    """Every item of the story, in the order they were seen."""

    @property
    def representative(self) -> Item:
        """The most engaged member; ties go to the earliest published, then to the longest text."""
        return min(self.members, key=_representative_order)

    @property
    def urls(self) -> list[str]:
        """Every member's URL, in order, without repeats."""
        return list(dict.fromkeys(item.url for item in self.members))

    @property
    def sources(self) -> list[str]:
        """The sources that carried the story."""
        return list(dict.fromkeys(item.source for item in self.members))


class DedupeResult(BaseModel):
    """What one `Deduper.add` call made of a batch."""

    new: list[Item] = Field(default_factory=list)
    """Items not seen before (by id or URL), in order. Near-duplicates of earlier stories are new items."""
    duplicates: list[Item] = Field(default_factory=list)
    """Items whose id or URL was already seen, in this batch or an earlier one; dropped."""
    cluster_of: dict[str, str] = Field(default_factory=dict)
    """Cluster id of each new item, by item id."""
    new_clusters: NonNegativeInt = 0
    """How many of the new items started a story of their own."""


class Deduper:
    """Remembers every item it has seen, across calls, and which story each belongs to."""

    def __init__(self, *, threshold: float = DEFAULT_THRESHOLD, common_share: float = 0.2) -> None:
        """`threshold`: similarity that makes two items one story. `common_share`: tokens found in more than
        this share of items (e.g. the topic's own name) are not used to find candidates, only to score."""
        self.threshold = threshold
        self.common_share = common_share
        self._items: list[Item] = []
        self._fingerprints: list[Fingerprint] = []
        self._cluster_index: list[int] = []
        self._clusters: list[list[int]] = []
        self._index_of_id: dict[str, int] = {}
        self._urls: set[str] = set()
        self._postings: defaultdict[str, list[int]] = defaultdict(list)
        self._df: Counter[str] = Counter()
        self._documents = 0

    @property
    def items(self) -> list[Item]:
        """Every unique item, in the order first seen."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def seen(self, item: Item) -> bool:
        """Whether an item with the same id or URL was already added."""
        return item.id in self._index_of_id or canonical_url(item.url) in self._urls

    def cluster_id(self, item_id: str) -> str | None:
        """The cluster of a seen item, by its id."""
        index = self._index_of_id.get(item_id)
        return None if index is None else f"c{self._cluster_index[index] + 1}"

    @property
    def clusters(self) -> list[Cluster]:
        """Every story so far, in the order first seen."""
        return [
            Cluster(id=f"c{number + 1}", members=[self._items[i] for i in members])
            for number, members in enumerate(self._clusters)
        ]

    def add(self, items: Iterable[Item]) -> DedupeResult:
        """Take a batch: drop what was seen, file the rest under a story (an old one or a new one)."""
        result = DedupeResult()
        fresh: list[tuple[Item, Fingerprint]] = []
        batch_ids: set[str] = set()
        batch_urls: set[str] = set()
        for item in items:
            key = canonical_url(item.url)
            if self.seen(item) or item.id in batch_ids or key in batch_urls:
                result.duplicates.append(item)
                continue
            batch_ids.add(item.id)
            batch_urls.add(key)
            fresh.append((item, fingerprint(item.title, item.text)))
        # Count the whole batch before comparing, so token weights reflect everything known, not the order.
        for _, fingerprint_ in fresh:
            self._df.update(fingerprint_.tokens)
        self._documents += len(fresh)
        for item, fingerprint_ in fresh:
            before = len(self._clusters)
            cluster = self._file(item, fingerprint_)
            result.new.append(item)
            result.cluster_of[item.id] = f"c{cluster + 1}"
            result.new_clusters += len(self._clusters) > before
        return result

    def similarity(self, a: Fingerprint, b: Fingerprint) -> float:
        """IDF-weighted Jaccard similarity of two fingerprints (with the document counts seen so far),
        lowered when their figures or their headline subjects conflict."""
        if not a.tokens or not b.tokens:
            return 0.0
        total = self._documents
        shared = sum(self._weight(t, total) for t in a.tokens & b.tokens)
        if not shared:
            return 0.0
        union = sum(self._weight(t, total) for t in a.tokens | b.tokens)
        score = shared / union
        if a.figures and b.figures and not a.figures & b.figures:
            score *= NUMBER_CONFLICT_FACTOR
        if a.subject and b.subject and a.subject not in b.tokens and b.subject not in a.tokens:
            score *= SUBJECT_CONFLICT_FACTOR
        return score

    def _weight(self, token: str, total: int) -> float:
        idf = math.log((total + 1) / (self._df[token] + 1)) + 1.0
        return idf * BOILERPLATE_WEIGHT if token in _BOILERPLATE else idf

    def _file(self, item: Item, fingerprint_: Fingerprint) -> int:
        index = len(self._items)
        # Average link: join the story whose members are, on average, similar enough. A single loose link
        # (best-link) chains look-alike stories together; the mean over all members does not.
        sums: defaultdict[int, float] = defaultdict(float)
        for candidate in self._candidates(fingerprint_):
            sums[self._cluster_index[candidate]] += self.similarity(fingerprint_, self._fingerprints[candidate])
        best, best_score = -1, 0.0
        for cluster_number, total in sums.items():
            mean = total / len(self._clusters[cluster_number])
            if mean >= self.threshold and mean > best_score:
                best, best_score = cluster_number, mean
        if best >= 0:
            cluster = best
            self._clusters[cluster].append(index)
        else:
            cluster = len(self._clusters)
            self._clusters.append([index])
        self._items.append(item)
        self._fingerprints.append(fingerprint_)
        self._cluster_index.append(cluster)
        self._index_of_id[item.id] = index
        self._urls.add(canonical_url(item.url))
        for token in fingerprint_.tokens:
            self._postings[token].append(index)
        return cluster

    def _candidates(self, fingerprint_: Fingerprint) -> set[int]:
        limit = max(20, int(self.common_share * (len(self._items) + 1)))
        found: set[int] = set()
        for token in fingerprint_.tokens:
            posting = self._postings.get(token)
            if posting and len(posting) <= limit:
                found.update(posting)
        return found


def cluster_items(items: Sequence[Item], *, threshold: float = DEFAULT_THRESHOLD) -> list[Cluster]:
    """One-shot: de-duplicate and cluster a list of items."""
    deduper = Deduper(threshold=threshold)
    deduper.add(items)
    return deduper.clusters


class PairScores(BaseModel):
    """Pairwise quality of a clustering against labels: of the pairs put together, how many belong
    together (precision), and of the pairs that belong together, how many were put together (recall)."""

    precision: float
    recall: float
    true_pairs: NonNegativeInt
    """Pairs that share a label."""
    predicted_pairs: NonNegativeInt
    """Pairs that share a predicted cluster."""
    correct_pairs: NonNegativeInt

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


def pair_scores(predicted: Sequence[str], labels: Sequence[str]) -> PairScores:
    """Score predicted cluster ids against true labels, position by position."""
    if len(predicted) != len(labels):
        raise ValueError("predicted and labels must have the same length")
    predicted_pairs = true_pairs = correct = 0
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            same_predicted = predicted[i] == predicted[j]
            same_label = labels[i] == labels[j]
            predicted_pairs += same_predicted
            true_pairs += same_label
            correct += same_predicted and same_label
    return PairScores(
        precision=correct / predicted_pairs if predicted_pairs else 1.0,
        recall=correct / true_pairs if true_pairs else 1.0,
        true_pairs=true_pairs,
        predicted_pairs=predicted_pairs,
        correct_pairs=correct,
    )
