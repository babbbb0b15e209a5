"""Drop exact duplicates (same id or URL) and cluster near-duplicates into stories (one story, many outlets).

Lexical path (no model): each item's title and lead become terms in its language (`research.terms`: jieba for
Chinese, MeCab (fugashi, IPA dictionary) for Japanese, words elsewhere), each weighted by how rare the word is in
the language at large (wordfreq) and a little less when most items seen share it (the topic's own name). Two items
are compared by the weighted cosine of their terms, lowered when both quote figures and share none, and when both
are dated and were published days apart (a later development or a look-alike event). A name a headline spells
out ("Bank of England") also counts as its acronym once another item writes it ("BoE"). Languages the sources left
out are told for a whole batch at once (`research.language.item_languages`). Semantic path: when item vectors are
given (`research.embeddings`), a pair of items that both have one counts as alike as the stronger of its two scores,
each taken as a share of its own threshold: the words' or the vectors' cosine (which also joins reports in different
languages). Vectors tell a subject, not a development, so they are no evidence between items published more than a
week apart (the words still are, lowered as above).

Items become stories by average-link agglomeration: pairs are merged best first, and two groups merge only while
their mean pairwise similarity reaches the threshold (one loose link cannot chain two look-alike stories). Two
groups of several items each are never merged when each has a rare name most of its items carry and none of the
other's do: one boxer's two title fights, one against Rahman and one against Thompson, are two stories however
alike the rest of their wording is. Two groups left apart still merge when their mean link comes near the threshold
and some pair between them shares most of its telling words: a broad story's sub-stories dilute each other's
mean. An item left alone then joins the group whose few nearest members are well
within the threshold of it (a broad story's mean is diluted by its other sub-stories). Ties are broken by item id,
never by input order, so a batch gives the same stories in any order. Stories from earlier `add` calls keep their
members and ids; new items may join them, but two earlier stories never merge.

A cluster's representative is its most engaged member; ties go to the earliest published, then to the one with
the most text (the most complete). A story's lead, what a digest shows for it (`story_lead`), is the report whose
title's telling words most outlets of the story use: never a discussion post (Ask/Show HN, comments, forum and
Reddit threads, a question) when the story has a report, and a social post only when it has nothing else.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from research.language import detect_language, item_languages, language_text
from research.reputation import SourceKind, outlet_of, source_kind
from research.terms import acronym_term, acronyms, story_terms
from sources import Item, canonical_url, host_of

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from scipy import sparse

__all__ = [
    "DEFAULT_EMBEDDING_THRESHOLD",
    "DEFAULT_THRESHOLD",
    "LEAD_CHARS",
    "Cluster",
    "DedupeResult",
    "Deduper",
    "Fingerprint",
    "PairScores",
    "StoryLead",
    "VectorLookup",
    "cluster_items",
    "fingerprint",
    "is_discussion",
    "pair_scores",
    "story_lead",
    "story_leads",
]

DEFAULT_THRESHOLD = 0.18
"""Mean weighted-cosine similarity at which items count as one story on the lexical path (chosen on the dev halves
of real labelled news, `bench/cluster_real.py --sweep`)."""

DEFAULT_EMBEDDING_THRESHOLD = 0.82
"""Cosine similarity of embedding vectors at which two items count as one story on the semantic path, for Gemini's
embedding model (the default; not measured on its real vectors). Each model has its own cosine scale, so another
`EMBEDDING_MODEL` wants its own (multilingual-e5-small's is 0.88)."""

EMBEDDING_SCALE_WIDTH = 0.1
"""How far under the embedding threshold a cosine still counts for something: a pair's embedding score rises from 0
at `threshold - width` to 1 at the threshold, on the scale of a lexical score's share of its threshold, because
unrelated texts of one model already share a large cosine, which is no evidence at all."""

EMBEDDING_CROSS_LANGUAGE_MARGIN = 0.03
"""How much an embedding cosine is raised for a pair of items in two different (known) languages, because a
multilingual model puts texts of one language closer together than a text and its translation (set for
multilingual-e5-small; another model may want another margin)."""

EMBEDDING_MAX_GAP_DAYS = 7.0
"""Items published further apart than this get no embedding score: vectors see an affair's subject, not its
development, so a bankruptcy petition and the bankruptcy decision weeks later look alike to them (the words, with
their names and figures, still count)."""

LEAD_TERMS = 40
"""How many terms of the text count as the lead; later text is about details, not the story's identity."""

LEAD_CHARS = 2000
"""Text past this is not read for the lead at all (a full article would cost its length to normalise and scan,
and the lead's terms are found well within it)."""

COMMON_WORD_RARITY = 6.0
"""Rarity (-ln frequency) below which a word carries no weight: "the", "says", "after" tell no story apart."""

CANDIDATE_FLOOR = 0.5
"""Pairs less similar than this share of the threshold are not linked at all (they only ever lower a mean)."""

DISTINCT_NAME_WEIGHT = 6.0
"""A term this far above a common word (rarity 12 and up: rarer than about six in a million words, such as a
person's or a place's name, or a figure) can tell two look-alike events apart."""

DISTINCT_NAME_SHARE = 0.7
"""Share of a group's items that must carry such a term for it to be the group's own name."""

DISTINCT_MIN_ITEMS = 4
"""Groups smaller than this are never held apart by their names: a name in two or three items is chance."""

SINGLE_ITEM_LINKS = 3
"""An item left alone is compared with a group's this many members nearest to it (see `SINGLE_ITEM_SHARE`)."""

SINGLE_ITEM_SHARE = 1.2
"""An item left alone joins a group of 2+ items when its `SINGLE_ITEM_LINKS` nearest members there are on average
this share of the threshold from it: a broad story's mean link to a newcomer is diluted by its other sub-stories,
its closest members are not (lower lets in look-alike events' single reports; `bench/cluster_real.py`)."""

GROUP_BRIDGE_MEAN = 0.8
"""Two groups of 2+ items whose mean link falls short of the threshold still merge when it reaches this share of it
and some pair between them is close (`GROUP_BRIDGE_LINK`): see `_bridge_groups` (lower merges different stories,
higher bridges less; `bench/cluster_real.py`)."""

GROUP_BRIDGE_LINK = 3.0
"""A pair this many times the threshold (a weighted cosine of 0.54 at 0.18: two headlines sharing most of their
telling words) bridges the sub-stories of one broad story, whose mean link is diluted by their other members
(lower lets in look-alike events' reports, higher bridges less; `bench/cluster_real.py`)."""

NUMBER_CONFLICT_FACTOR = 0.6
"""Similarity is multiplied by this when both items quote figures and share none of them: "recalls 239,000
cars" and "recalls 850,000 cars" are different stories even when the rest of the wording is alike."""

DATE_GAP_DAYS = 3.0
"""Items published further apart than this are rarely one story's coverage: a look-alike event (a second crash on
one mountain, the next game of one team) or a later development of one affair, which readers follow as news."""

DATE_GAP_FACTOR = 0.3
"""Similarity is multiplied by this for items published more than `DATE_GAP_DAYS` apart: only near-identical
wording still makes them one story (chosen on the dev half of the Japanese Wikinews set, a year of dated news)."""

_YEAR = re.compile(r"(19|20)\d\d")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Fingerprint:
    """What two items are compared on."""

    terms: dict[str, float]
    """Distinct terms of the title and lead, each with its rarity in the item's language."""
    figures: frozenset[str]
    """The terms that are figures (amounts, counts, model numbers), years excepted."""
    language: str | None
    written_acronyms: frozenset[str] = frozenset()
    """The acronyms the title writes out, case-folded ("BoE" -> "boe")."""
    spelled_acronyms: frozenset[str] = frozenset()
    """What the title's capitalised names could be shortened to ("Bank of England" -> "boe"): each counts as that
    acronym's term only once some item writes it out (see `Deduper.term_weights`)."""

    @property
    def tokens(self) -> frozenset[str]:
        return frozenset(self.terms)


def fingerprint(title: str, text: str = "", *, language: str | None = None) -> Fingerprint:
    """Build the fingerprint of a title and its text (the language is detected when not given; an empty string
    means it was looked for and could not be told)."""
    if language is None:
        language = detect_language(language_text(title, text))
    language = language or None
    title_terms = story_terms(title, language)
    lead_terms = story_terms(text[:LEAD_CHARS], language, limit=LEAD_TERMS) if text else None
    terms = dict(title_terms.rarity)
    if lead_terms is not None:
        for term, weight in lead_terms.rarity.items():
            terms.setdefault(term, weight)
    # Most texts quote no figure at all: one search over every term tells, before any term is looked at alone.
    has_digits = _DIGIT.search("\n".join(terms)) is not None
    figures = frozenset(t for t in terms if _DIGIT.search(t) and not _YEAR.fullmatch(t)) if has_digits else frozenset()
    title_acronyms = acronyms(title)
    return Fingerprint(
        terms=terms,
        figures=figures,
        language=language,
        written_acronyms=title_acronyms.written,
        spelled_acronyms=title_acronyms.spelled,
    )


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


_DISCUSSION_TITLE = re.compile(r"^\s*(?:ask|show|tell)\s+hn\b|^\s*re\s*:", re.IGNORECASE)
"""Titles of discussion threads, not reports: `Ask HN:`, `Show HN:`, `Tell HN:`, and a comment's `Re: <story>`."""

_QUESTION_END = re.compile(r"[?？]\s*$")
_DISCUSSION_HOSTS = frozenset({"news.ycombinator.com", "reddit.com", "old.reddit.com", "lobste.rs"})
"""Sites whose own pages are threads: an item linking there (an HN comment or text post, a Reddit post) is talk
about the news, not a report of it."""


def is_discussion(item: Item) -> bool:
    """Whether an item is talk about the news rather than a report of it: an Ask/Show/Tell HN post, a comment, a
    forum or Reddit thread, or a headline that asks a question."""
    if _DISCUSSION_TITLE.search(item.title) or _QUESTION_END.search(item.title):
        return True
    host = host_of(item.url, strip_www=True)
    return item.source == "reddit" or host in _DISCUSSION_HOSTS or host.endswith(".reddit.com")


def _lead_tier(item: Item) -> int:
    """0 for a report, 1 for a social post, 2 for a discussion post: a story is led from the lowest tier it has."""
    if is_discussion(item):
        return 2
    return 1 if source_kind(item) is SourceKind.SOCIAL else 0


def _lead_order(items: Sequence[Item]) -> list[Item]:
    """The items best lead first (see `story_lead`)."""
    if len(items) == 1:
        return list(items)
    outlet = [outlet_of(item) for item in items]
    weighted: list[dict[str, float]] = []
    for item in items:
        print_ = fingerprint(item.title, item.text, language=item.language)
        weighted.append(
            {term: rarity - COMMON_WORD_RARITY for term, rarity in print_.terms.items() if rarity > COMMON_WORD_RARITY}
        )
    outlets_of_term: defaultdict[str, set[str]] = defaultdict(set)
    for terms, who in zip(weighted, outlet, strict=True):
        for term in terms:
            outlets_of_term[term].add(who)

    def support(index: int) -> float:
        # The weighted mean, over the title's telling words, of how many other outlets use the word: a title made
        # of the story's shared words scores high, one with words of its own ("actually better at code?") low.
        item = items[index]
        title = fingerprint(item.title, "", language=item.language)
        words = {t: r - COMMON_WORD_RARITY for t, r in title.terms.items() if r > COMMON_WORD_RARITY}
        total = sum(words.values())
        if not total:
            return 0.0
        return sum(w * len(outlets_of_term[t] - {outlet[index]}) for t, w in words.items()) / total

    scores = [support(index) for index in range(len(items))]
    order = sorted(
        range(len(items)),
        key=lambda i: (_lead_tier(items[i]), -round(scores[i], 6), *_representative_order(items[i]), items[i].id),
    )
    return [items[i] for i in order]


def story_lead(items: Sequence[Item]) -> Item:
    """The item that stands for a story in a digest: the report whose title's telling words most other outlets of
    the story use (the version of the news most of them carry); a social post only when the story has no report,
    a discussion post only when it has nothing else. Ties go to the most engaged, then the earliest, then the one
    with the most text, then the smallest id: the same lead whatever the order of `items` (which must not be
    empty)."""
    if not items:
        raise ValueError("a story has at least one item")
    return _lead_order(items)[0]


@dataclass(frozen=True)
class StoryLead:
    """Which item leads a story and how many reports it has in all (the lead included)."""

    item_id: str
    reports: int


def story_leads(
    items: Sequence[Item], cluster_of: Mapping[str, str], *, eligible: Collection[str] | None = None
) -> dict[str, StoryLead]:
    """The lead of every story among `items`, by cluster id (`cluster_of`: cluster id by item id; an item with
    none is a story of its own, keyed by its item id). `eligible`: the ids that may lead (a run's new items, not
    what was delivered before), where a story has any; its report count is every item of it either way."""
    stories: dict[str, list[Item]] = {}
    for item in items:
        stories.setdefault(cluster_of.get(item.id) or item.id, []).append(item)
    leads = {}
    for key, members in stories.items():
        candidates = [item for item in members if eligible is None or item.id in eligible] or members
        leads[key] = StoryLead(item_id=story_lead(candidates).id, reports=len(members))
    return leads


class DedupeResult(BaseModel):
    """What one `Deduper.add` call made of a batch."""

    new: list[Item] = Field(default_factory=list)
    """Items not seen before (by id or URL), in order. Near-duplicates of earlier stories are new items."""
    duplicates: list[Item] = Field(default_factory=list)
    """Items whose id or URL was already seen, in this batch or an earlier one; dropped."""
    cluster_of: dict[str, str] = Field(default_factory=dict)
    """Cluster id of each new item, by item id."""
    new_clusters: NonNegativeInt = 0
    """How many stories this batch started."""


VectorLookup = Mapping[str, Sequence[float]]
"""Unit-length embedding vectors by item id (see `research.embeddings`)."""


class Deduper:
    """Remembers every item it has seen, across calls, and which story each belongs to."""

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        vectors: VectorLookup | None = None,
        embedding_threshold: float = DEFAULT_EMBEDDING_THRESHOLD,
        topic: str | None = None,
    ) -> None:
        """`threshold`: mean lexical similarity that makes items one story. `vectors`: embedding vectors by item
        id; pairs where both items have one are also compared by cosine against `embedding_threshold`, and the
        stronger of the two scores counts.
        `topic`: what the items were collected for (a monitor's topic); its words tell none of them apart, so they
        carry no weight."""
        self.threshold = threshold
        self.embedding_threshold = embedding_threshold
        self._vectors = vectors or {}
        self._topic = topic
        self._topic_terms: dict[str | None, frozenset[str]] = {}
        """The topic's terms as read in each item language seen (stems differ between languages)."""

        self._items: list[Item] = []
        self._fingerprints: list[Fingerprint] = []
        self._cluster_index: list[int] = []
        self._clusters: list[list[int]] = []
        self._index_of_id: dict[str, int] = {}
        self._urls: set[str] = set()
        self._written_acronyms: set[str] = set()
        """Every acronym some item so far wrote out: only these count when another item spells one out."""
        self._postings: defaultdict[str, list[int]] = defaultdict(list)
        """Items by their terms, so a later batch finds the earlier stories it shares a term with."""
        self._acronym_postings: defaultdict[str, list[int]] = defaultdict(list)
        """Items by the acronyms they write or spell, so an earlier story is found by either."""
        self._posted = 0
        """Items before this index are in the postings: they are filled when a later batch needs them
        (`_post_earlier`), so a batch is never posted when no batch follows it (most Dedupers get one)."""

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

    def fingerprint_of(self, item_id: str) -> Fingerprint:
        """The fingerprint made of a seen item when it was added (in the language told for its batch): what the
        Deduper compared it by. Raises KeyError for an item it never took."""
        return self._fingerprints[self._index_of_id[item_id]]

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
        start = len(self._items)
        batch_ids: set[str] = set()
        batch_urls: set[str] = set()
        unique: list[tuple[Item, str]] = []
        for item in items:
            key = canonical_url(item.url)
            if item.id in self._index_of_id or key in self._urls or item.id in batch_ids or key in batch_urls:
                result.duplicates.append(item)
                continue
            batch_ids.add(item.id)
            batch_urls.add(key)
            unique.append((item, key))
        # Languages the sources left out are told for the whole batch at once (one pass, not one per item).
        languages = item_languages([item for item, _ in unique])
        for (item, key), language in zip(unique, languages, strict=True):
            index = len(self._items)
            fingerprint_ = fingerprint(item.title, item.text, language=language or "")
            self._items.append(item)
            self._fingerprints.append(fingerprint_)
            self._cluster_index.append(-1)
            self._index_of_id[item.id] = index
            self._urls.add(key)
            self._written_acronyms.update(fingerprint_.written_acronyms)
        fresh = list(range(start, len(self._items)))
        before = len(self._clusters)
        self._agglomerate(fresh)
        for index in fresh:
            item = self._items[index]
            result.new.append(item)
            result.cluster_of[item.id] = f"c{self._cluster_index[index] + 1}"
        result.new_clusters = len(self._clusters) - before
        return result

    # ---- similarity ------------------------------------------------------------------------------------

    def term_weights(self, fingerprint_: Fingerprint) -> dict[str, float]:
        """Each term's weight: how much rarer than a common word it is in the language at large (nothing for common
        words and for the topic's own words). It does not depend on the batch: a big story's key words are as
        telling in a batch it fills as in one where it is alone (real news says damping shared words loses it)."""
        topic_terms = self._topic_terms_in(fingerprint_.language)
        weights = {
            term: rarity - COMMON_WORD_RARITY
            for term, rarity in fingerprint_.terms.items()
            if rarity > COMMON_WORD_RARITY and term not in topic_terms
        }
        # A name the title spells out counts as its acronym once some item writes that acronym ("Bank of England"
        # meets "BoE"): outlets shorten a story's names differently, and headlines are too short to lose one.
        for acronym in fingerprint_.spelled_acronyms & self._written_acronyms:
            found = acronym_term(acronym, fingerprint_.language)
            if found is not None:
                term, rarity = found
                if rarity > COMMON_WORD_RARITY and term not in fingerprint_.terms and term not in topic_terms:
                    weights[term] = rarity - COMMON_WORD_RARITY
        return weights

    def _names(self, fingerprint_: Fingerprint) -> list[str]:
        """The item's terms rare enough to tell look-alike events apart (`DISTINCT_NAME_WEIGHT`)."""
        floor = COMMON_WORD_RARITY + DISTINCT_NAME_WEIGHT
        topic_terms = self._topic_terms_in(fingerprint_.language)
        return [term for term, rarity in fingerprint_.terms.items() if rarity >= floor and term not in topic_terms]

    def _topic_terms_in(self, language: str | None) -> frozenset[str]:
        if not self._topic:
            return frozenset()
        found = self._topic_terms.get(language)
        if found is None:
            found = self._topic_terms[language] = frozenset(story_terms(self._topic, language).terms)
        return found

    def similarity(self, a: Fingerprint, b: Fingerprint) -> float:
        """Weighted cosine of two fingerprints' terms (with the weights of everything seen so far), lowered when
        both quote figures and share none."""
        wa, wb = self.term_weights(a), self.term_weights(b)
        na = math.sqrt(sum(w * w for w in wa.values()))
        nb = math.sqrt(sum(w * w for w in wb.values()))
        if not na or not nb:
            return 0.0
        score = sum(w * wb[t] for t, w in wa.items() if t in wb) / (na * nb)
        return score * self._conflict(a, b)

    @staticmethod
    def _conflict(a: Fingerprint, b: Fingerprint) -> float:
        if a.figures and b.figures and not a.figures & b.figures:
            return NUMBER_CONFLICT_FACTOR
        return 1.0

    def _scope(self, fresh: Sequence[int]) -> list[int]:
        """The fresh items and every earlier item sharing a weighted term with one of them, in index order."""
        scope = set(fresh)
        if fresh and fresh[0] > 0:  # only earlier items can widen the scope; each shared term is looked up once
            self._post_earlier(fresh[0])
            terms = {
                term
                for index in fresh
                for term, rarity in self._fingerprints[index].terms.items()
                if rarity > COMMON_WORD_RARITY
            }
            for term in terms:
                scope.update(self._postings.get(term, ()))
            # An earlier item may meet a fresh one only through an acronym one writes and the other spells.
            fresh_acronyms = set[str]().union(
                *(self._fingerprints[i].written_acronyms | self._fingerprints[i].spelled_acronyms for i in fresh)
            )
            for acronym in fresh_acronyms & self._written_acronyms:
                scope.update(self._acronym_postings.get(acronym, ()))
        if self._vectors and any(self._items[i].id in self._vectors for i in fresh):
            scope.update(i for i in range(len(self._items)) if self._items[i].id in self._vectors)
        return sorted(scope)

    def _post_earlier(self, end: int) -> None:
        """Put the items before `end` (the first item of the batch being added) in the postings: by their terms
        and by the acronyms they write or spell."""
        for index in range(self._posted, end):
            fingerprint_ = self._fingerprints[index]
            for term in fingerprint_.terms:
                self._postings[term].append(index)
            for acronym in fingerprint_.written_acronyms | fingerprint_.spelled_acronyms:
                self._acronym_postings[acronym].append(index)
        self._posted = max(self._posted, end)

    def _weight_rows(self, scope: Sequence[int]) -> sparse.csr_matrix:
        """One row per item of `scope`: its terms' weights, in columns shared by the whole scope."""
        import numpy as np
        from scipy import sparse

        columns: dict[str, int] = {}
        indices: list[int] = []
        weights: list[float] = []
        indptr = [0]
        for index in scope:
            row = self.term_weights(self._fingerprints[index])
            indices.extend([columns.setdefault(term, len(columns)) for term in row])
            weights.extend(row.values())
            indptr.append(len(indices))
        return sparse.csr_matrix(
            (np.asarray(weights, dtype=np.float64), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
            shape=(len(scope), len(columns)),
        )

    def _lexical_pairs(self, scope: Sequence[int]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """Every pair (a < b, rows of `scope`) sharing a weighted term, with its weighted cosine similarity,
        lowered for figure conflicts. Sparse: pairs sharing nothing cost nothing, so a batch of thousands costs
        about what its overlapping pairs do."""
        import numpy as np
        from scipy import sparse

        weights = self._weight_rows(scope)
        lengths = np.sqrt(np.asarray(weights.multiply(weights).sum(axis=1)).ravel())
        lengths[lengths == 0] = 1.0
        unit = sparse.csr_matrix(sparse.diags(1.0 / lengths) @ weights)
        similarity = sparse.triu(unit @ unit.T, k=1).tocsr()
        similarity.sort_indices()
        first = np.repeat(np.arange(len(scope)), np.diff(similarity.indptr))
        second = similarity.indices.astype(np.int64)
        values = similarity.data * self._conflicts(scope, first, second) * self._date_gaps(scope, first, second)
        return first.astype(np.int64), second, values

    def _date_gaps(
        self, scope: Sequence[int], first: NDArray[np.int64], second: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """1 for each pair, `DATE_GAP_FACTOR` where both items are dated and published more than `DATE_GAP_DAYS`
        apart (items without a date are never lowered)."""
        import numpy as np

        factors = np.ones(len(first))
        if not len(first):
            return factors
        days = self._published_days(scope)
        with np.errstate(invalid="ignore"):  # undated items give NaN gaps, which compare false
            apart = np.abs(days[first] - days[second]) > DATE_GAP_DAYS
        factors[apart] = DATE_GAP_FACTOR
        return factors

    def _published_days(self, scope: Sequence[int]) -> NDArray[np.float64]:
        """Each `scope` item's publication time in days since the epoch; NaN where it has none."""
        import numpy as np

        published = [self._items[index].published for index in scope]
        return np.asarray([moment.timestamp() / 86_400 if moment else np.nan for moment in published], dtype=np.float64)

    def _conflicts(
        self, scope: Sequence[int], first: NDArray[np.int64], second: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """1 for each pair, `NUMBER_CONFLICT_FACTOR` where both quote figures and share none."""
        import numpy as np
        from scipy import sparse

        factors = np.ones(len(first))
        quoting = np.asarray([bool(self._fingerprints[index].figures) for index in scope])
        # Only pairs where both quote figures can conflict: most pairs are out before any figure is compared.
        both = np.flatnonzero(quoting[first] & quoting[second])
        if not len(both):
            return factors
        column: dict[str, int] = {}
        indices: list[int] = []
        indptr = [0]
        for index in scope:
            indices.extend(column.setdefault(f, len(column)) for f in self._fingerprints[index].figures)
            indptr.append(len(indices))
        has = sparse.csr_matrix(
            (np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
            shape=(len(scope), len(column)),
        )
        common = sparse.triu(has @ has.T, k=1).tocoo()
        size = len(scope)
        sharing = np.isin(first[both] * size + second[both], common.row.astype(np.int64) * size + common.col)
        factors[both[~sharing]] = NUMBER_CONFLICT_FACTOR
        return factors

    def _embedding_pairs(
        self, scope: Sequence[int]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """The pairs (a < b, rows of `scope`) of items that both have a vector, published at most
        `EMBEDDING_MAX_GAP_DAYS` apart, whose embedding score reaches `CANDIDATE_FLOOR`: the score is 0 at a
        cosine of `embedding_threshold - EMBEDDING_SCALE_WIDTH` and 1 at the threshold, the cosine of items in two
        languages raised by `EMBEDDING_CROSS_LANGUAGE_MARGIN`. Cosines are taken a block
        of rows at a time and only the pairs near the threshold are kept, so a long look-back costs its near
        pairs, not the square of its items."""
        import numpy as np

        has = np.asarray([self._items[i].id in self._vectors for i in scope], dtype=bool)
        rows = np.flatnonzero(has)
        if len(rows) < 2:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        matrix = np.asarray([self._vectors[self._items[scope[int(row)]].id] for row in rows], dtype=np.float64)
        lengths = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(lengths > 0, lengths, 1.0)
        days = self._published_days(scope)[rows]
        languages = np.asarray([self._fingerprints[scope[int(row)]].language or "" for row in rows])
        margin = EMBEDDING_CROSS_LANGUAGE_MARGIN
        bottom = self.embedding_threshold - EMBEDDING_SCALE_WIDTH
        floor = bottom + CANDIDATE_FLOOR * EMBEDDING_SCALE_WIDTH - margin
        firsts, seconds, scores = [], [], []
        block = 512
        for start in range(0, len(rows) - 1, block):
            cosine = matrix[start : start + block] @ matrix[start:].T
            a, b = np.nonzero(np.triu(cosine >= floor, k=1))  # b counts from `start`: pairs a < b only
            gap = np.abs(days[start + a] - days[start + b])
            near = ~(gap > EMBEDDING_MAX_GAP_DAYS)  # an unknown date (NaN) is no reason to keep items apart
            a, b = a[near], b[near]
            first_language, second_language = languages[start + a], languages[start + b]
            across = (first_language != second_language) & (first_language != "") & (second_language != "")
            score = (cosine[a, b] + margin * across - bottom) / EMBEDDING_SCALE_WIDTH
            kept = score >= CANDIDATE_FLOOR
            firsts.append(start + a[kept])
            seconds.append(start + b[kept])
            scores.append(score[kept])
        # No figure-conflict penalty here: "1 million" and "100万" are one figure the words cannot match.
        first = rows[np.concatenate(firsts)].astype(np.int64)
        second = rows[np.concatenate(seconds)].astype(np.int64)
        return first, second, np.concatenate(scores)

    # ---- clustering ------------------------------------------------------------------------------------

    def _scored_pairs(self, scope: Sequence[int]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """Candidate pairs of `scope` rows with their similarity as a share of the threshold of its kind (1.0 is
        just enough to be one story); pairs under `CANDIDATE_FLOOR` are left out. Where both items have vectors,
        the stronger of the lexical and the embedding score counts: either is evidence of one story (words catch
        what one model misses, vectors what outlets word differently or in another language), and the look-alike
        names rule still holds look-alike events apart."""
        import numpy as np

        first, second, values = self._lexical_pairs(scope)
        values = values / self.threshold
        if self._vectors:
            e_first, e_second, e_values = self._embedding_pairs(scope)
            size = len(scope)
            # Both kinds of pair as one sparse set, keyed by (first, second): the maximum of the two per pair.
            keys = np.concatenate([first * size + second, e_first * size + e_second])
            scores = np.concatenate([values, e_values])
            order = np.lexsort((-scores, keys))
            keys, scores = keys[order], scores[order]
            best = np.ones(len(keys), dtype=bool)
            best[1:] = keys[1:] != keys[:-1]
            keys, values = keys[best], scores[best]
            first, second = keys // size, keys % size
        keep = values >= CANDIDATE_FLOOR
        return first[keep], second[keep], values[keep]

    def _agglomerate(self, fresh: Sequence[int]) -> None:
        """File the fresh items under stories: average-link groups of them and the earlier stories they reach."""
        import numpy as np

        if not fresh:
            return
        scope = self._scope(fresh)
        first, second, values = self._scored_pairs(scope)
        nodes = self._nodes(scope, fresh)
        sizes, members, frozen = nodes.sizes, nodes.members, nodes.frozen
        rows = np.asarray(nodes.node_of_row, dtype=np.int64)
        frozen_mask = np.asarray(frozen, dtype=bool)
        a, b = rows[first], rows[second]
        keep = (a != b) & ~(frozen_mask[a] & frozen_mask[b])
        links = _node_links(a[keep], b[keep], values[keep], count=len(sizes))
        keys = [min(self._items[i].id for i in group) for group in members]

        def count_names(nodes: list[int]) -> Counter[str]:
            return Counter(name for node in nodes for i in members[node] for name in self._names(self._fingerprints[i]))

        groups = _average_link(
            links, [float(size) for size in sizes], keys=keys, frozen=frozen, count_names=count_names
        )

        def distinct_groups(one: list[int], other: list[int]) -> bool:
            return _distinct_events(
                sum(sizes[node] for node in one),
                lambda: count_names(one),
                sum(sizes[node] for node in other),
                lambda: count_names(other),
            )

        graph = _Graph(nodes=nodes, keys=keys, pairs=(a, b, values))
        groups = _bridge_groups(groups, graph, distinct=distinct_groups)
        groups = _attach_single_items(groups, graph)
        self._file_groups(groups, members)

    def _nodes(self, scope: Sequence[int], fresh: Sequence[int]) -> _Nodes:
        """The nodes of an agglomeration: each fresh item, and each earlier story with a member in scope (frozen:
        earlier stories never merge with each other)."""
        fresh_set = set(fresh)
        node_of_story: dict[int, int] = {}
        nodes = _Nodes()
        for index in scope:
            if index in fresh_set:
                nodes.node_of_row.append(len(nodes.sizes))
                nodes.sizes.append(1)
                nodes.members.append([index])
                nodes.frozen.append(False)
                continue
            story = self._cluster_index[index]
            if story not in node_of_story:
                node_of_story[story] = len(nodes.sizes)
                nodes.sizes.append(len(self._clusters[story]))
                nodes.members.append(list(self._clusters[story]))
                nodes.frozen.append(True)
            nodes.node_of_row.append(node_of_story[story])
        return nodes

    def _file_groups(self, groups: list[list[int]], members: Sequence[Sequence[int]]) -> None:
        """File each group's fresh items under its earlier story, or a new one; new stories are numbered in the order
        their first member was given, so ids read in input order."""
        for group in sorted(groups, key=lambda nodes: min(min(members[n]) for n in nodes)):
            indices = [i for node in group for i in members[node]]
            fresh_members = sorted(i for i in indices if self._cluster_index[i] < 0)
            if not fresh_members:
                continue
            old = [i for i in indices if self._cluster_index[i] >= 0]
            if old:
                story = self._cluster_index[old[0]]
            else:
                story = len(self._clusters)
                self._clusters.append([])
            for index in fresh_members:
                self._cluster_index[index] = story
                self._clusters[story].append(index)


@dataclass
class _Nodes:
    """What an agglomeration merges: per node its item count, member item indices and whether it is an earlier
    story; per scope row the node it belongs to."""

    sizes: list[int] = field(default_factory=list)
    members: list[list[int]] = field(default_factory=list)
    frozen: list[bool] = field(default_factory=list)
    node_of_row: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Graph:
    """What the steps after average linkage read of one agglomeration: its nodes, each node's key (its smallest item
    id: ties go to the smallest key) and every candidate pair of items as (node, node, score as a share of the
    threshold)."""

    nodes: _Nodes
    keys: Sequence[str]
    pairs: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]


def _node_links(
    a: NDArray[np.int64], b: NDArray[np.int64], values: NDArray[np.float64], *, count: int
) -> list[dict[int, float]]:
    """Each node's links: the sums of pair scores between its members and each other node's (a mean link is
    sum / (size * size)), from pairs of nodes `a`, `b` scored `values`."""
    import numpy as np
    from scipy import sparse

    # Symmetric sums (duplicates, e.g. two members of one earlier story, add up), read out row by row.
    both = sparse.coo_matrix(
        (np.concatenate([values, values]), (np.concatenate([a, b]), np.concatenate([b, a]))),
        shape=(count, count),
    ).tocsr()
    both.sum_duplicates()
    neighbours, totals, bounds = both.indices.tolist(), both.data.tolist(), both.indptr.tolist()
    return [dict(zip(neighbours[start:end], totals[start:end], strict=True)) for start, end in pairwise(bounds)]


def _average_link(
    links: list[dict[int, float]],
    sizes: list[float],
    *,
    keys: Sequence[str],
    frozen: list[bool],
    count_names: Callable[[list[int]], Counter[str]],
) -> list[list[int]]:
    """Average-link agglomeration of nodes by a nearest-neighbour chain, merging while the mean link reaches 1.

    `links[a][b]` is the sum of pairwise scores between the members of nodes a and b (absent: 0); `sizes` their
    member counts; `count_names` how many members of the given nodes carry each rare name. Two frozen nodes never
    merge, nor two nodes that `_distinct_events` tells apart (their link is cut instead). Ties go to the node with
    the smallest key, so the result does not depend on the order the nodes were given in. The links are sparse (only
    pairs that share something), so the work grows with the pairs, not with the square of the batch.
    """
    return _AverageLink(links, sizes, keys=keys, frozen=frozen, count_names=count_names).groups_found()


class _AverageLink:
    """One `_average_link` agglomeration: the nodes' links, sizes, ranks and groups as merges change them.

    `links` is the caller's and is changed in place (links of finished or merged nodes are dropped)."""

    def __init__(
        self,
        links: list[dict[int, float]],
        sizes: list[float],
        *,
        keys: Sequence[str],
        frozen: list[bool],
        count_names: Callable[[list[int]], Counter[str]],
    ) -> None:
        count = len(sizes)
        self.links = links
        self.sizes = list(sizes)
        self.frozen = list(frozen)
        self.alive = [True] * count
        self.rank = [0] * count
        for position, node in enumerate(sorted(range(count), key=lambda n: keys[n])):
            self.rank[node] = position
        self.groups: list[list[int]] = [[n] for n in range(count)]
        self.done = [False] * count
        """Nodes whose best mean link is under 1: with average linkage it can only fall, so they are finished."""
        self.any_frozen = any(frozen)
        self.names: list[Counter[str] | None] = [None] * count
        """Rare names counted over each node's members, counted when first asked for (most nodes never are)."""
        self.count_names = count_names
        self.order = sorted(range(count), key=lambda n: self.rank[n])
        self.cursor = 0
        self.revisit: list[int] = []
        """Merged nodes: they may now reach nodes they did not before, so they are looked at again."""

    def groups_found(self) -> list[list[int]]:
        """Follow nearest-neighbour chains until every node is finished; the groups of the nodes left alive."""
        chain: list[int] = []
        while True:
            if not chain:
                start = self._next_start()
                if start < 0:
                    break
                chain = [start]
            top = chain[-1]
            previous = chain[-2] if len(chain) > 1 else -1
            neighbour = self._nearest(top, previous)
            if neighbour < 0:
                chain.pop()
                self._finish(top)
            elif neighbour == previous:
                chain.pop()
                chain.pop()
                if self._distinct(top, neighbour):
                    self._cut(top, neighbour)
                else:
                    self._merge(top, neighbour)
            else:
                chain.append(neighbour)
        return [group for node, group in enumerate(self.groups) if self.alive[node]]

    def _next_start(self) -> int:
        """The next chain's first node: a merged node to look at again, else the next unfinished node by rank, else
        -1."""
        alive, done, revisit = self.alive, self.done, self.revisit
        while revisit and (not alive[revisit[-1]] or done[revisit[-1]]):
            revisit.pop()
        if revisit:
            return revisit.pop()
        order, count = self.order, len(self.order)
        while self.cursor < count and (not alive[order[self.cursor]] or done[order[self.cursor]]):
            self.cursor += 1
        return order[self.cursor] if self.cursor < count else -1

    def _names_of(self, node: int) -> Counter[str]:
        """The rare names over the node's members, counted once."""
        found = self.names[node]
        if found is None:
            found = self.names[node] = self.count_names(self.groups[node])
        return found

    def _distinct(self, a: int, b: int) -> bool:
        """Whether two nodes are look-alike events (see `_distinct_events`)."""
        sizes = self.sizes
        return _distinct_events(sizes[a], lambda: self._names_of(a), sizes[b], lambda: self._names_of(b))

    def _nearest(self, node: int, previous: int) -> int:
        """The node with the highest mean link to `node` if it reaches 1 (ties: `previous`, else the lowest rank),
        else -1."""
        # A mean link total / (size * sizes[other]) reaches 1 when total / sizes[other] reaches size: one division
        # per link in this hot loop, and the frozen test only where frozen nodes exist at all.
        sizes, frozen, rank = self.sizes, self.frozen, self.rank
        size = sizes[node]
        best, best_node = size, -1
        skip_frozen = self.any_frozen and frozen[node]
        node_links = self.links[node]
        for other, total in node_links.items():
            if skip_frozen and frozen[other]:
                continue
            score = total / sizes[other]
            if score > best or (score == best and (best_node < 0 or rank[other] < rank[best_node])):
                best, best_node = score, other
        if (
            best_node >= 0
            and previous >= 0
            and not (skip_frozen and frozen[previous])
            and node_links.get(previous, 0.0) / sizes[previous] == best
        ):
            return previous  # keeps the chain from cycling between equally near nodes
        return best_node

    def _finish(self, node: int) -> None:
        """Its every mean link is under 1 and merges elsewhere only average such links: it never merges again, so its
        links are dropped (later scans and merges no longer walk them)."""
        links = self.links
        self.done[node] = True
        for other in links[node]:
            del links[other][node]
        links[node] = {}

    def _cut(self, a: int, b: int) -> None:
        """Look-alike events: cut their link and look at both again (they may still join other groups)."""
        del self.links[a][b]
        del self.links[b][a]
        self.revisit.extend((a, b))

    def _merge(self, a: int, b: int) -> None:
        """Merge two nodes into one, summing their links, sizes and names."""
        links, names = self.links, self.names
        # Which of the two ids lives on does not change the result (rank and frozen are merged alike): keep the one
        # with more links, so only the smaller adjacency is walked.
        keep, gone = (b, a) if len(links[b]) >= len(links[a]) else (a, b)
        kept_links = links[keep]
        for other, total in links[gone].items():
            if other == keep:
                continue
            kept_links[other] = kept_links.get(other, 0.0) + total
            other_links = links[other]
            other_links[keep] = other_links.get(keep, 0.0) + total
            del other_links[gone]
        kept_links.pop(gone, None)
        links[gone] = {}
        self.sizes[keep] += self.sizes[gone]
        self.frozen[keep] = self.frozen[keep] or self.frozen[gone]
        self.rank[keep] = min(self.rank[keep], self.rank[gone])
        self.alive[gone] = False
        if names[keep] is not None or names[gone] is not None:
            # Once a node's names are counted they stay counted: a big story is never counted twice.
            kept_names, gone_names = self._names_of(keep), self._names_of(gone)
            if len(kept_names) < len(gone_names):  # count into the bigger counter
                kept_names, gone_names = gone_names, kept_names
            kept_names.update(gone_names)
            names[keep] = kept_names
        names[gone] = None
        self.groups[keep].extend(self.groups[gone])
        self.groups[gone] = []
        self.revisit.append(keep)


def _group_numbers(groups: list[list[int]], node_sizes: Sequence[int]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each node's group number (-1: none) and each group's item count."""
    import numpy as np

    group_of = np.full(len(node_sizes), -1, dtype=np.int64)
    group_size = np.zeros(len(groups), dtype=np.int64)
    for number, nodes in enumerate(groups):
        group_of[nodes] = number
        group_size[number] = sum(node_sizes[node] for node in nodes)
    return group_of, group_size


def _bridge_groups(
    groups: list[list[int]], graph: _Graph, *, distinct: Callable[[list[int], list[int]], bool]
) -> list[list[int]]:
    """Groups after those of 2+ items are joined whose mean link reaches `GROUP_BRIDGE_MEAN` of the threshold while
    some pair between them reaches `GROUP_BRIDGE_LINK`: two headlines sharing most of their telling words are one
    story's coverage, and a broad story's sub-stories (a premier ousted, the oil tanker that set it off) are diluted
    by each other's members, so average linkage alone leaves them apart.

    Bridges are taken strongest mean first (ties to the smallest keys), so the result does not depend on input
    order; a bridge is skipped where both sides already hold an earlier story (they never merge) or `distinct` tells
    the two sides apart (look-alike events, `_distinct_events`)."""
    import numpy as np

    first, second, values = graph.pairs
    keys, frozen = graph.keys, graph.nodes.frozen
    if len(groups) < 2 or not len(values):
        return groups
    group_of, group_size = _group_numbers(groups, graph.nodes.sizes)
    one, other = group_of[first], group_of[second]
    wanted = (one != other) & (group_size[one] >= 2) & (group_size[other] >= 2)
    low, high = np.minimum(one, other)[wanted], np.maximum(one, other)[wanted]
    scores = values[wanted]
    if not len(scores):
        return groups
    span = len(groups)
    key, inverse = np.unique(low * span + high, return_inverse=True)
    total = np.bincount(inverse, weights=scores, minlength=len(key))
    strongest = np.zeros(len(key))
    np.maximum.at(strongest, inverse, scores)
    low, high = key // span, key % span
    mean = total / (group_size[low] * group_size[high])
    bridged = (mean >= GROUP_BRIDGE_MEAN) & (strongest >= GROUP_BRIDGE_LINK)
    if not bridged.any():
        return groups
    smallest = [min(keys[node] for node in nodes) for nodes in groups]
    bridges = sorted(
        zip((-mean[bridged]).tolist(), low[bridged].tolist(), high[bridged].tolist(), strict=True),
        key=lambda bridge: (
            bridge[0],
            min(smallest[bridge[1]], smallest[bridge[2]]),
            max(smallest[bridge[1]], smallest[bridge[2]]),
        ),
    )
    root = list(range(len(groups)))

    def find(number: int) -> int:
        while root[number] != number:
            root[number] = root[root[number]]
            number = root[number]
        return number

    joined = [list(nodes) for nodes in groups]
    holds_earlier = [any(frozen[node] for node in nodes) for nodes in groups]
    for _, left, right in bridges:
        left, right = find(left), find(right)
        if left == right or (holds_earlier[left] and holds_earlier[right]) or distinct(joined[left], joined[right]):
            continue
        keep, gone = min(left, right), max(left, right)
        root[gone] = keep
        joined[keep].extend(joined[gone])
        joined[gone] = []
        holds_earlier[keep] = holds_earlier[keep] or holds_earlier[gone]
    return [nodes for nodes in joined if nodes]


def _attach_single_items(groups: list[list[int]], graph: _Graph) -> list[list[int]]:
    """Groups after each item left alone joins the group of 2+ items whose `SINGLE_ITEM_LINKS` nearest members
    are on average at least `SINGLE_ITEM_SHARE` of the threshold from it (the best such group; ties to the smallest
    key). A broad story's mean link to a newcomer is diluted by its other sub-stories; its closest members are not.

    An item left alone is a fresh item (not an earlier story) in a group of its own. Items left alone never join each
    other here, and a group's members are those of the average-link result, so the outcome still does not depend on
    input order."""
    import numpy as np

    sizes, members, frozen, keys = graph.nodes.sizes, graph.nodes.members, graph.nodes.frozen, graph.keys
    group_of, group_size = _group_numbers(groups, sizes)
    alone = np.zeros(len(sizes), dtype=bool)
    for nodes in groups:
        node = nodes[0]
        if len(nodes) == 1 and len(members[node]) == 1 and not frozen[node]:
            alone[node] = True
    first, second, values = graph.pairs
    if not alone.any() or not len(values):
        return groups
    forward, backward = alone[first] & ~alone[second], alone[second] & ~alone[first]
    item = np.concatenate([first[forward], second[backward]])
    target = np.concatenate([group_of[second[forward]], group_of[first[backward]]])
    score = np.concatenate([values[forward], values[backward]])
    # A mean of the nearest links reaches the share only if the nearest does: items with no such link are left out
    # before sorting (on the embedding path nearly every pair is a candidate).
    wanted = (group_size[target] >= 2) & np.isin(item, item[score >= SINGLE_ITEM_SHARE])
    item, target, score = item[wanted], target[wanted], score[wanted]
    if not len(score):
        return groups
    # The nearest members first within each (item, group): keep the first SINGLE_ITEM_LINKS of each run.
    order = np.lexsort((-score, target, item))
    item, target, score = item[order], target[order], score[order]
    starts = np.flatnonzero(np.r_[True, (item[1:] != item[:-1]) | (target[1:] != target[:-1])])
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(score)]))
    nearest = (np.arange(len(score)) - starts[run]) < SINGLE_ITEM_LINKS
    mean = np.bincount(run[nearest], weights=score[nearest], minlength=len(starts)) / SINGLE_ITEM_LINKS
    # Each item's best group as (-mean, the group's smallest key, group number): the least is best.
    best: dict[int, tuple[float, str, int]] = {}
    for position in np.flatnonzero(mean >= SINGLE_ITEM_SHARE).tolist():
        node, number = int(item[starts[position]]), int(target[starts[position]])
        candidate = (-float(mean[position]), min(keys[member] for member in groups[number]), number)
        found = best.get(node)
        if found is None or candidate < found:
            best[node] = candidate
    if not best:
        return groups
    joined = [list(nodes) for nodes in groups]
    for node, (_, _, number) in best.items():
        joined[number].append(node)
        joined[int(group_of[node])] = []
    return [nodes for nodes in joined if nodes]


def _distinct_events(
    size_a: float, names_a: Callable[[], Counter[str]], size_b: float, names_b: Callable[[], Counter[str]]
) -> bool:
    """Whether two groups of several items each (`DISTINCT_MIN_ITEMS`) tell look-alike events apart: each has a
    rare name that most of its items carry and no item of the other does (one boxer, two opponents; one team, two
    coaches fired). Their names are counted (`names_a`, `names_b`) only when both groups are big enough for the rule:
    most pairs never need them."""
    if size_a < DISTINCT_MIN_ITEMS or size_b < DISTINCT_MIN_ITEMS:
        return False
    a, b = names_a(), names_b()
    return _own_name(a, size_a, b) and _own_name(b, size_b, a)


def _own_name(names: Counter[str], size: float, other: Counter[str]) -> bool:
    floor = DISTINCT_NAME_SHARE * size
    return any(count >= floor and name not in other for name, count in names.items())


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
    by_predicted = Counter(predicted)
    by_label = Counter(labels)
    joint = Counter(zip(predicted, labels, strict=True))
    predicted_pairs = sum(n * (n - 1) // 2 for n in by_predicted.values())
    true_pairs = sum(n * (n - 1) // 2 for n in by_label.values())
    correct = sum(n * (n - 1) // 2 for n in joint.values())
    return PairScores(
        precision=correct / predicted_pairs if predicted_pairs else 1.0,
        recall=correct / true_pairs if true_pairs else 1.0,
        true_pairs=true_pairs,
        predicted_pairs=predicted_pairs,
        correct_pairs=correct,
    )
