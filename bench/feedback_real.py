"""Feedback on real labelled news: two readers of one shared broad monitor, each pressing 👍/👎 on the first three
digests, and what the next seven digests give each of them with and without their marks.

Two sets of real news written by others, each item filed under a kind by others (built into bench/data, see its
README): the UCI News Aggregator rows (headlines only, 10–12 March 2014, topics b business, t science and technology,
e entertainment, m health, grouped into stories by the aggregator) and MasakhaNEWS English (BBC headlines and leads,
filed by BBC's editors under business, entertainment, health, politics, sports, technology; each article its own
story; cut into 7 monitors of 200 articles). Each set is read in time order (UCI by its timestamps, MasakhaNEWS by
BBC's article ids, handed out in publishing order; the set has no dates), taken within each kind (`interleaved`):
both were gathered one kind at a time.

Each monitor (collected and clustered once, shared by both readers): ten runs over ten equal slices, one
`research.Deduper` kept across runs (the monitor's story memory), no story delivered twice, and a digest of the 20
stories with the most reports (the issue's "digest of twenty stories about a broad topic"). A story's kind is its
reports' majority label.

The readers: A wants technology stories and none of the others; B, on the same monitor, wants entertainment and
none of the others. On digests 1–3 each presses 👍 on every story it wants and 👎 on every other one. Digests 4–10
are then shown to each through `research.reader_view` (exactly what `monitors.feedback` calls at delivery) with the
features `research.story_features` makes (the clustering's term weights and the outlets).

Reported per reader and set, digests 4–10: precision (share of shown stories the reader wants) and recall (share of
the wanted stories of the shared digest that were shown), without and with feedback. The stories are split in two
halves by a hash of their label (the aggregator's story id, the BBC article id); the tuning (`FeedbackTuning`) is
picked on the dev halves of both sets together (the lowest precision of the four reader/set pairs, every recall
≥ 0.90) and reported on the test halves; the defaults in `research/feedback.py` are reported beside. The oracle
rows bound what these features and this learner can do: each measured digest is seen by a reader who marked every
story of the nine other digests of its monitor (and, in the second row, of every other monitor of the set: the
labels themselves), and the threshold is the best one at recall ≥ 0.90 on the measured stories themselves. Cost:
CPU time of `reader_view` per story and of `story_features` per story (made once per run, shared by every reader).

With an embedding model. Where a set has recorded e5-small vectors (bench/data/vectors: `uci`, `masakhanews_eng`),
every item is embedded through the app's own path (`bench.recorded_vectors.RecordedEmbeddingModel` behind
`research.ItemEmbedder`, title + lead, as a monitor run stores them), each story gets `research.story_vector` of its
reports (what `monitors.feedback` makes at delivery) and the "vectors" rows repeat the measurement with them: the
same shared digests (clustered by words, so both rows judge the same stories), the reader's marks now carrying
vectors, `reader_view` deciding by `VectorModel`. Its tuning (`neighbours`, `calibration_quantile`,
`vector_drop_at`) is picked on the dev halves the same way; the vector oracle gives the nearest-neighbour vote
every other label of the set (threshold chosen on the measured stories: a bound). `--vectors minilm` uses the
recorded all-MiniLM-L6-v2 vectors instead (`build_vectors.py --models minilm`).

Decision rules (`--rules`): on the same vectors, the kNN vote of `VectorModel` against two linear rules, a centroid
(Rocchio: cosine to the mean 👍 story minus to the mean 👎 one) and the app's L2-regularised logistic regression
(`research.feedback.fit_linear_rule`), each fed either the reader's three digests of marks or every other label of the
set, each cut at its best threshold for recall ≥ 0.90 on the measured stories (so the table compares orderings,
not thresholds): whether the bound is the vectors or the rule that reads them.

A long-time reader (the last table, on the vectors): each monitor's reader marks its digests 1-3 and also every
digest of 1, 2 or 6 other monitors of the set (as a reader who has pressed for weeks on a monitor would have; UCI,
one monitor in the rows above, is cut by time into 3 monitors for this), and digests 4-10 are measured under the
kNN vote alone and under `reader_view`'s switch (a line, `research.feedback.LinearRule`, once the reader's marks
reach `linear_min_side` a side and `linear_min_marks` in all). The line's settings (penalty, the quantile of the
reader's own 👍 scores it cuts at) and then the switch point are picked on the dev halves (mean precision, no recall
below 0.90 where the vote reaches it), reported on both halves; the line's fit is timed per reader.

Run: uv run python bench/feedback_real.py [--digest-size 20] [--slices 10] [--vectors e5small|minilm] [--rules]
[--no-long]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import itertools
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic_ai.embeddings import Embedder

from bench.recorded_vectors import RecordedEmbeddingModel, recordings
from research import ItemEmbedder, Mark, StoryFeatures, reader_view, story_features, story_vector
from research.dedupe import Deduper, story_lead
from research.feedback import (
    DEFAULT_TUNING,
    FeedbackTuning,
    MarkModel,
    VectorModel,
    fit_linear_rule,
    line_or_vote,
)
from sources import Item

DATA = Path(__file__).parent / "data"
MARKED_DIGESTS = 3
"""Digests the readers press on; the rest are measured."""
TOPIC = "news"
TARGET_RECALL = 0.90
MONITOR_ITEMS = 200
"""Articles per monitor of a set of single-article stories: ten runs of twenty, every article in a digest."""


@dataclass(frozen=True)
class Dataset:
    """One labelled set: its items in time order, each item's kind and story label, and the two readers' kinds."""

    name: str
    items: list[Item]
    kinds: dict[str, str]
    labels: dict[str, str]
    readers: dict[str, str]
    monitors: int = 1
    """Independent monitors the set is cut into (consecutive windows of its time order), each with its ten runs:
    a set of single-article stories fills many monitors' digests, where one would leave most of it unread."""
    recorded_as: str = ""
    """The set's name in bench/data/vectors (its recorded embedding vectors), "" for none."""


@dataclass(frozen=True)
class Story:
    """One story of one digest."""

    digest: int
    features: StoryFeatures
    kind: str
    label: str
    """The set's story id (the majority of its reports'), for the dev/test split."""


def _read(name: str, build: str) -> list[dict[str, str]] | None:
    path = DATA / name
    if not path.exists():
        print(
            f"{path} is not built: the labelled sets are not in the repository. Clone their public repositories "
            f"(bench/data/README.md names them) and run: uv run python bench/data/{build} <folder of the clones>",
            file=sys.stderr,
        )
        return None
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def interleaved(items: Sequence[Item], kinds: dict[str, str]) -> list[Item]:
    """The items in order of their place within their own kind's time order: both sets were gathered one kind at a
    time (the aggregator crawled one topic after another; MasakhaNEWS's BBC articles of each category come from
    different years), so their raw order is a collection artefact, where a monitor reads every kind side by side."""
    by_kind: dict[str, list[Item]] = {}
    for item in items:
        by_kind.setdefault(kinds[item.id], []).append(item)
    place = {item.id: rank / len(group) for group in by_kind.values() for rank, item in enumerate(group)}
    return sorted(items, key=lambda item: (place[item.id], item.id))


def load_uci() -> Dataset | None:
    rows = _read("uci_news_aggregator.csv", "build_sets.py")
    categories_rows = _read("uci_news_categories.csv", "build_sets.py")
    if rows is None or categories_rows is None:
        return None
    categories = {row["id"]: row["category"] for row in categories_rows}
    items = [
        Item(
            id=row["id"],
            source="news",
            url=row["url"],
            title=row["title"],
            author=row["outlet"] or None,
            published=datetime.fromisoformat(row["published"]),
            language="en",
        )
        for row in rows
    ]
    items = interleaved(sorted(items, key=lambda item: (item.published, item.id)), categories)
    labels = {row["id"]: row["story"] for row in rows}
    readers = {"A (wants technology)": "t", "B (wants entertainment)": "e"}
    return Dataset("UCI News Aggregator", items, categories, labels, readers, recorded_as="uci")


def load_masakhanews() -> Dataset | None:
    rows = _read("masakhanews_eng_categories.csv", "build_feedback_sets.py")
    if rows is None:
        return None
    items = [
        Item(id=row["id"], source="news", url=row["url"], title=row["title"], text=row["text"], author="BBC News",
             language="en")
        for row in rows
    ]  # fmt: skip
    kinds = {row["id"]: row["category"] for row in rows}
    items = interleaved(items, kinds)
    readers = {"A (wants technology)": "technology", "B (wants entertainment)": "entertainment"}
    stories = {row["id"]: row["id"] for row in rows}
    return Dataset(
        "MasakhaNEWS English (BBC)",
        items,
        kinds,
        stories,
        readers,
        monitors=len(items) // MONITOR_ITEMS,
        recorded_as="masakhanews_eng",
    )


Embed = Callable[[Sequence[Item]], dict[str, list[float]]]
"""Items -> their vectors by item id (a run's batch through `ItemEmbedder`)."""


def recorded_embedder(data: Dataset, model: str = "e5small") -> tuple[Embed, str] | None:
    """The set's recorded vectors of `model` behind the app's own `ItemEmbedder`, and the model's name; None when
    the set has no (current) recording of it."""
    if not data.recorded_as:
        return None
    found, notes = recordings(data.recorded_as, data.items)
    for note in notes:
        print(f"recorded vectors: {note}", file=sys.stderr)
    found = [recording for recording in found if recording.model == model]
    if not found:
        return None
    recording = found[0]
    name = f"recorded:{recording.model}"
    embedder = ItemEmbedder(embedder=Embedder(RecordedEmbeddingModel(recording)), model_name=name, dimensions=None)

    def embed(items: Sequence[Item]) -> dict[str, list[float]]:
        embedded = asyncio.run(embedder.embed_items(items))
        if embedded.fallback_reason:
            raise RuntimeError(f"recorded embeddings failed: {embedded.fallback_reason}")
        return embedded.vectors

    return embed, name


def monitors(
    data: Dataset, *, slices: int, size: int, embedding: tuple[Embed, str] | None = None
) -> tuple[list[list[list[Story]]], float]:
    """Each monitor's digests (one window of the set each), and the CPU seconds per story of making features."""
    window = len(data.items) // data.monitors
    out, costs = [], []
    for number in range(data.monitors):
        part = replace(data, items=data.items[number * window : (number + 1) * window])
        shared, cost = digests(part, slices=slices, size=size, embedding=embedding)
        out.append(shared)
        costs.append(cost)
    return out, statistics.fmean(costs)


def digests(
    data: Dataset, *, slices: int, size: int, embedding: tuple[Embed, str] | None = None
) -> tuple[list[list[Story]], float]:
    """The shared monitor's digests (collected and clustered once), and the CPU seconds per story of making the
    stories' features; with `embedding`, each story's features carry its vector (the mean of its reports')."""
    deduper = Deduper(topic=TOPIC)
    delivered: set[str] = set()
    out: list[list[Story]] = []
    feature_seconds, feature_count = 0.0, 0
    items = data.items
    per_slice = len(items) // slices
    for number in range(slices):
        chunk = items[number * per_slice : (number + 1) * per_slice if number < slices - 1 else len(items)]
        result = deduper.add(chunk)
        vectors = embedding[0](chunk) if embedding is not None else {}
        by_story: dict[str, list[Item]] = {}
        for item in result.new:
            by_story.setdefault(result.cluster_of[item.id], []).append(item)
        fresh = [(cluster, members) for cluster, members in by_story.items() if cluster not in delivered]
        fresh.sort(key=lambda pair: (-len({m.author for m in pair[1]}), -len(pair[1]), pair[0]))
        stories = []
        for cluster, members in fresh[:size]:
            delivered.add(cluster)
            lead = story_lead(members)
            ordered = [lead, *(m for m in members if m.id != lead.id)]
            started = time.process_time()
            features = story_features(ordered, topic=TOPIC)
            if embedding is not None:
                vector = story_vector([vectors[m.id] for m in ordered if m.id in vectors], model=embedding[1])
                features = replace(features, vector=vector)
            feature_seconds += time.process_time() - started
            feature_count += 1
            kind = Counter(data.kinds[m.id] for m in members).most_common(1)[0][0]
            label = Counter(data.labels[m.id] for m in members).most_common(1)[0][0]
            stories.append(Story(digest=number + 1, features=features, kind=kind, label=label))
        out.append(stories)
    return out, feature_seconds / max(feature_count, 1)


def marks_of(reader_kind: str, shown: Sequence[Sequence[Story]], digests_marked: int = MARKED_DIGESTS) -> list[Mark]:
    """The reader's presses on the first digests: 👍 what it wants, 👎 the rest."""
    marks = []
    for number, story in enumerate((s for digest in shown[:digests_marked] for s in digest), start=1):
        marks.append(Mark(id=number, kind="more" if story.kind == reader_kind else "less", features=story.features))
    return marks


def in_half(story: Story, half: str) -> bool:
    even = int(hashlib.sha1(story.label.encode()).hexdigest(), 16) % 2 == 0
    return even == (half == "dev")


@dataclass
class Scores:
    shown: int = 0
    wanted_shown: int = 0
    wanted: int = 0
    measured: int = 0
    seconds: float = 0.0
    stories: int = 0

    def __iadd__(self, other: Scores) -> Scores:
        self.shown += other.shown
        self.wanted_shown += other.wanted_shown
        self.wanted += other.wanted
        self.measured += other.measured
        self.seconds += other.seconds
        self.stories += other.stories
        return self

    @property
    def precision(self) -> float:
        return self.wanted_shown / self.shown if self.shown else 0.0

    @property
    def recall(self) -> float:
        return self.wanted_shown / self.wanted if self.wanted else 0.0


Monitors = Sequence[Sequence[Sequence[Story]]]
"""A set's monitors, each its digests in order."""


def evaluate(
    every: Monitors,
    reader_kind: str,
    tuning: FeedbackTuning | None,
    half: str | None,
) -> Scores:
    """Digests 4.. of every monitor of a set for one reader (see `evaluate_one`)."""
    total = Scores()
    for shared in every:
        total += evaluate_one(shared, reader_kind, tuning, half)
    return total


def evaluate_one(
    shared: Sequence[Sequence[Story]],
    reader_kind: str,
    tuning: FeedbackTuning | None,
    half: str | None,
    *,
    marks: Sequence[Mark] | None = None,
) -> Scores:
    """Digests 4.. for one reader: with its marks under `tuning`, or (None) without feedback."""
    if tuning is None:
        marks = []
    elif marks is None:
        marks = marks_of(reader_kind, shared)
    scores = Scores()
    for digest in shared[MARKED_DIGESTS:]:
        started = time.process_time()
        view = reader_view([s.features for s in digest], marks, tuning=tuning or DEFAULT_TUNING)
        scores.seconds += time.process_time() - started
        scores.stories += len(digest)
        kept = {decision.index for decision in view.kept}
        for index, story in enumerate(digest):
            if half is not None and not in_half(story, half):
                continue
            wanted = story.kind == reader_kind
            scores.measured += 1
            scores.wanted += wanted
            if index in kept:
                scores.shown += 1
                scores.wanted_shown += wanted
    return scores


GRID = {
    "smoothing": (0.01, 0.05, 0.2),
    "outlet_evidence": (0.0, 0.5, 1.0),
    "drop_at": (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
}
"""The tunings tried on the dev halves."""


def _objective(results: Sequence[Scores]) -> tuple[float, float]:
    recall = min(r.recall for r in results)
    return (min(r.precision for r in results) if recall >= TARGET_RECALL else recall - 1.0, recall)


def tune(sets: Sequence[tuple[Dataset, Monitors]]) -> FeedbackTuning:
    """The tuning with the best lowest dev-half precision over every reader of every set, all recalls ≥ 0.90."""
    best, best_score = DEFAULT_TUNING, (-9.0, 0.0)
    for smoothing, outlet, drop_at in itertools.product(*GRID.values()):
        tuning = replace(DEFAULT_TUNING, smoothing=smoothing, outlet_evidence=outlet, drop_at=drop_at)
        results = [evaluate(every, kind, tuning, "dev") for data, every in sets for kind in data.readers.values()]
        score = _objective(results)
        if score > best_score:
            best, best_score = tuning, score
    return best


VECTOR_GRID = {
    "neighbours": (1, 3, 5, 8),
    "calibration_quantile": (0.0, 0.05, 0.1, 0.2),
    "vector_drop_at": (0.0, 0.005, 0.01, 0.015, 0.02, 0.03),
}
"""The vector tunings tried on the dev halves (cosine margins: e5-small's stories of one set lie within ~0.2)."""


def without_vectors(every: Monitors) -> Monitors:
    """The same digests with the words alone (what a deployment without an embedding model gets)."""
    return [
        [[replace(s, features=replace(s.features, vector=None)) for s in digest] for digest in shared]
        for shared in every
    ]


def tune_vectors(sets: Sequence[tuple[Dataset, Monitors]]) -> FeedbackTuning:
    """As `tune`, over the vector settings, on the sets with vectors."""
    best, best_score = DEFAULT_TUNING, (-9.0, 0.0)
    for neighbours, quantile, drop_at in itertools.product(*VECTOR_GRID.values()):
        tuning = replace(DEFAULT_TUNING, neighbours=neighbours, calibration_quantile=quantile, vector_drop_at=drop_at)
        results = [evaluate(every, kind, tuning, "dev") for data, every in sets for kind in data.readers.values()]
        score = _objective(results)
        if score > best_score:
            best, best_score = tuning, score
    return best


def vector_oracle(every: Monitors, reader_kind: str, half: str, tuning: FeedbackTuning) -> Scores:
    """The nearest-neighbour vote of `VectorModel` given every other label of the set (every story of every other
    digest of every monitor marked), threshold the best at recall ≥ 0.90 on the measured stories: a bound."""
    scored: list[tuple[float, bool]] = []
    for shared in every:
        for number in range(MARKED_DIGESTS, len(shared)):
            others = [
                [digest for n, digest in enumerate(monitor) if (monitor is not shared or n != number)]
                for monitor in every
            ]
            marks = [m for monitor in others for m in marks_of(reader_kind, monitor, digests_marked=len(monitor))]
            model = VectorModel([m for m in marks if m.kind == "more"], [m for m in marks if m.kind == "less"], tuning)
            for story in shared[number]:
                if in_half(story, half):
                    up, _, _ = model.closest(story.features, 0)
                    down, _, _ = model.closest(story.features, 1)
                    scored.append((up - down, story.kind == reader_kind))
    return _best_at_recall(scored)


def _best_at_recall(scored: Sequence[tuple[float, bool]]) -> Scores:
    best = Scores()
    wanted = sum(w for _, w in scored)
    for threshold in sorted({score for score, _ in scored}, reverse=True):
        kept = [w for score, w in scored if score >= threshold]
        if sum(kept) >= TARGET_RECALL * wanted:
            return Scores(shown=len(kept), wanted_shown=sum(kept), wanted=wanted, measured=len(scored))
    return best


def oracle(every: Monitors, reader_kind: str, half: str, *, other_monitors: bool) -> Scores:
    """What the learner reaches when the reader has marked every story of every other digest of its monitor (and,
    with `other_monitors`, of every other monitor of the set too: the labels themselves, several times the marks),
    and the threshold is the best at recall ≥ 0.90 on the measured stories themselves: an optimistic bound on these
    features and this learner, not a result."""
    scored: list[tuple[float, bool]] = []
    for shared in every:
        for number in range(MARKED_DIGESTS, len(shared)):
            pool = every if other_monitors else [shared]
            others = [
                [digest for n, digest in enumerate(monitor) if (monitor is not shared or n != number)]
                for monitor in pool
            ]
            marks = [m for monitor in others for m in marks_of(reader_kind, monitor, digests_marked=len(monitor))]
            model = MarkModel(
                [m for m in marks if m.kind == "more"], [m for m in marks if m.kind == "less"], DEFAULT_TUNING
            )
            scored.extend(
                (model.log_odds(story.features), story.kind == reader_kind)
                for story in shared[number]
                if in_half(story, half)
            )
    return _best_at_recall(scored)


Rule = Callable[[Any, Any], Callable[[Any], Any]]
"""Marked-up and marked-down stories' vectors (rows) -> a scorer of other stories' vectors (higher: wanted)."""


def knn_rule(ups: Any, downs: Any, k: int = DEFAULT_TUNING.neighbours) -> Callable[[Any], Any]:
    """`VectorModel`'s vote: mean cosine to the k closest 👍 stories minus to the k closest 👎 ones."""
    import numpy as np

    def score(stories: Any) -> Any:
        up = -np.sort(-(stories @ ups.T), axis=1)[:, :k].mean(axis=1)
        down = -np.sort(-(stories @ downs.T), axis=1)[:, :k].mean(axis=1)
        return up - down

    return score


def centroid_rule(ups: Any, downs: Any) -> Callable[[Any], Any]:
    """Rocchio: cosine to the mean 👍 story minus cosine to the mean 👎 story (one direction, linear)."""
    import numpy as np

    up, down = ups.mean(axis=0), downs.mean(axis=0)
    direction = up / np.linalg.norm(up) - down / np.linalg.norm(down)
    return lambda stories: stories @ direction


def logistic_rule(ups: Any, downs: Any, penalty: float = DEFAULT_TUNING.linear_penalty) -> Callable[[Any], Any]:
    """The app's line (`research.feedback.fit_linear_rule`: L2-regularised logistic regression, classes weighted
    equally)."""
    return fit_linear_rule(ups, downs, penalty=penalty).score


RULES: dict[str, Rule] = {"kNN vote (VectorModel)": knn_rule, "centroid": centroid_rule, "logistic": logistic_rule}


def rule_precision(
    every: Monitors, reader_kind: str, rule: Rule, *, every_label: bool, others: int = 0, half: str = "test"
) -> float:
    """Precision at recall ≥ 0.90 (best cut on the measured stories) of digests 4.. under `rule`, fed the reader's
    marks on digests 1-3 of each monitor (and on every digest of the `others` next monitors of the set: more marks,
    none on the measured monitor's later digests), or (`every_label`) every story of every other digest of the
    set."""
    import numpy as np

    def rows(stories: Sequence[Story]) -> Any:
        return np.asarray([s.features.vector.values for s in stories if s.features.vector], dtype=np.float64)

    scored: list[tuple[float, bool]] = []
    for shared in every:
        for number in range(MARKED_DIGESTS, len(shared)) if every_label else [None]:
            if number is None:
                place = next(n for n, monitor in enumerate(every) if monitor is shared)
                more = [every[(place + step) % len(every)] for step in range(1, others + 1)]
                train = [s for digest in shared[:MARKED_DIGESTS] for s in digest]
                train += [s for monitor in more for digest in monitor for s in digest]
                measured = [s for digest in shared[MARKED_DIGESTS:] for s in digest if in_half(s, half)]
            else:
                train = [
                    s
                    for monitor in every
                    for n, digest in enumerate(monitor)
                    if monitor is not shared or n != number
                    for s in digest
                ]
                measured = [s for s in shared[number] if in_half(s, half)]
            ups = rows([s for s in train if s.kind == reader_kind])
            downs = rows([s for s in train if s.kind != reader_kind])
            if not measured or not len(ups) or not len(downs):
                continue
            scores = rule(ups, downs)(rows(measured))
            scored += [(float(score), s.kind == reader_kind) for score, s in zip(scores, measured, strict=True)]
    return _best_at_recall(scored).precision


def rule_table(vector_sets: Sequence[tuple[Dataset, Monitors]]) -> None:
    """The decision rules side by side on the same vectors (see the module); with three digests of marks, the dev
    half's precision in brackets (what a choice of rule would be made on)."""
    print()
    print("| set | reader | marks | " + " | ".join(RULES) + " |")
    print("|---|---|---|" + "---:|" * len(RULES))
    for data, every in vector_sets:
        for name, kind in data.readers.items():
            levels = [(f"digests 1-{MARKED_DIGESTS}", False, 0)]
            if data.monitors > 2:
                levels.append((f"digests 1-{MARKED_DIGESTS} + every digest of 2 other monitors", False, 2))
            levels.append(("every other label", True, 0))
            for marks, every_label, others in levels:
                cells = []
                for rule in RULES.values():
                    test = rule_precision(every, kind, rule, every_label=every_label, others=others)
                    if every_label or others:
                        cells.append(f"{test:.2f}")
                    else:
                        dev = rule_precision(every, kind, rule, every_label=False, half="dev")
                        cells.append(f"{test:.2f} ({dev:.2f})")
                print(f"| {data.name} | {name} | {marks} | " + " | ".join(cells) + " |")


LONG_LEVELS = (1, 2, 6)
"""Other monitors whose every digest a long-time reader has also marked (~200, ~400, ~1,100 marks on MasakhaNEWS)."""
UCI_MONITORS = 3
"""UCI's one monitor cut by time into this many for the long-time reader (each ten runs of ~210 headlines)."""
KNN_ONLY = replace(DEFAULT_TUNING, linear_min_marks=10**9)
"""The vote whatever the marks (what `VectorModel` did before the switch)."""
SWITCH_GRID = {"linear_min_side": (10, 20, 30, 40), "linear_min_marks": (100, 150, 200, 300, 400)}
"""The switch points tried on the dev halves (above three digests' 60 marks, so those readers stay on the vote)."""
LINE_GRID = {"linear_penalty": (1.0, 3.0, 10.0, 30.0), "linear_quantile": (0.01, 0.02, 0.05, 0.1, 0.15)}
"""The line's settings tried on the dev halves, with the line deciding every long-time reader."""


def long_marks(every: Monitors, place: int, reader_kind: str, others: int) -> list[Mark]:
    """A long-time reader of monitor `place`: its presses on digests 1-3 and on every digest of the `others` next
    monitors of the set (none on the measured monitor's later digests)."""
    marks = marks_of(reader_kind, every[place])
    for step in range(1, others + 1):
        monitor = every[(place + step) % len(every)]
        marks += marks_of(reader_kind, monitor, digests_marked=len(monitor))
    return [replace(mark, id=number) for number, mark in enumerate(marks, start=1)]


@dataclass
class LongReader:
    """One long-time reader of one monitor: its marks with vectors per side, and digests 4.. under the vote and
    under the line, per half."""

    ups: int
    downs: int
    knn: dict[str, Scores]
    line: dict[str, Scores]
    fit_seconds: float
    on_line: bool
    """Whether the defaults decide this reader by the line (the switch point met and the line the better on its
    own marks)."""


def long_readers(every: Monitors, reader_kind: str, others: int, line: FeedbackTuning) -> list[LongReader]:
    """Each monitor's long-time reader (see `long_marks`) under the vote and under the line (`line`'s settings,
    the switch forced)."""
    import numpy as np

    forced = replace(line, linear_min_side=1, linear_min_marks=0)
    out = []
    for place, shared in enumerate(every):
        marks = long_marks(every, place, reader_kind, min(others, len(every) - 1))
        ups = np.asarray([m.features.vector.values for m in marks if m.kind == "more" and m.features.vector])
        downs = np.asarray([m.features.vector.values for m in marks if m.kind == "less" and m.features.vector])
        started = time.process_time()
        line_or_vote(ups, downs, line)
        fit_seconds = time.process_time() - started
        out.append(
            LongReader(
                ups=len(ups),
                downs=len(downs),
                knn={h: evaluate_one(shared, reader_kind, KNN_ONLY, h, marks=marks) for h in ("dev", "test")},
                line={h: evaluate_one(shared, reader_kind, forced, h, marks=marks) for h in ("dev", "test")},
                fit_seconds=fit_seconds,
                on_line=_on_line(marks),
            )
        )
    return out


def _on_line(marks: Sequence[Mark]) -> bool:
    model = VectorModel([m for m in marks if m.kind == "more"], [m for m in marks if m.kind == "less"], DEFAULT_TUNING)
    vector = next(m.features.vector for m in marks if m.features.vector)
    return model.linear(vector.model) is not None


def switched(readers: Sequence[LongReader], half: str, side: int, total: int) -> Scores:
    """Digests 4.. of every monitor under the switch at (`side`, `total`): the line where the reader's marks reach
    it, the vote elsewhere."""
    scores = Scores()
    for reader in readers:
        use_line = min(reader.ups, reader.downs) >= side and reader.ups + reader.downs >= total
        scores += reader.line[half] if use_line else reader.knn[half]
    return scores


LongSets = Sequence[tuple[str, Monitors, str, str]]
"""Long-time readers' sets: the set's name, its monitors, the reader's name and the kind it wants."""


def tune_line(long_sets: LongSets) -> FeedbackTuning:
    """The line's settings with the best mean dev-half precision over every long-time reader (each level of marks
    above three digests), the line deciding all of them, no recall below 0.90 where the vote reaches it (nor below
    the vote's where it does not); none qualifying, the defaults."""
    rows = [(every, kind, others) for _, every, _, kind in long_sets for others in LONG_LEVELS if others < len(every)]
    floors = [
        min(TARGET_RECALL, evaluate_long(every, kind, KNN_ONLY, "dev", others).recall) for every, kind, others in rows
    ]
    best, best_score = DEFAULT_TUNING, -9.0
    for penalty, quantile in itertools.product(*LINE_GRID.values()):
        tuning = replace(DEFAULT_TUNING, linear_penalty=penalty, linear_quantile=quantile, linear_min_side=1,
                         linear_min_marks=0)  # fmt: skip
        results = [evaluate_long(every, kind, tuning, "dev", others) for every, kind, others in rows]
        if any(r.recall < floor for r, floor in zip(results, floors, strict=True)):
            continue
        score = statistics.fmean(r.precision for r in results)
        if score > best_score:
            best, best_score = tuning, score
    return best


def evaluate_long(every: Monitors, reader_kind: str, tuning: FeedbackTuning, half: str, others: int) -> Scores:
    """Digests 4.. of every monitor for its long-time reader (marks of `others` other monitors) under `tuning`."""
    total = Scores()
    for place, shared in enumerate(every):
        marks = long_marks(every, place, reader_kind, min(others, len(every) - 1))
        total += evaluate_one(shared, reader_kind, tuning, half, marks=marks)
    return total


def pick_switch(measured: dict[tuple[str, str, int], list[LongReader]]) -> tuple[int, int]:
    """The switch point (marks on each side, marks in all) with the best mean dev-half precision over every
    reader and level of marks (three digests included), no recall below 0.90 where the vote alone reaches it (nor
    below the vote's where it does not); ties go to the higher point."""
    best, best_score = (10**9, 10**9), -9.0
    floors = [min(TARGET_RECALL, switched(readers, "dev", 10**9, 10**9).recall) for readers in measured.values()]
    grid = sorted(itertools.product(*SWITCH_GRID.values()), key=lambda pair: (-pair[1], -pair[0]))
    for side, total in grid:
        results = [switched(readers, "dev", side, total) for readers in measured.values()]
        if any(r.recall < floor for r, floor in zip(results, floors, strict=True)):
            continue
        score = statistics.fmean(r.precision for r in results)
        if score > best_score:
            best, best_score = (side, total), score
    return best


def long_table(long_sets: LongSets) -> None:
    """A long-time reader (see the module): the vote against the switched rule, per level of marks and half."""
    line = tune_line(long_sets)
    print()
    print(
        f"line settings picked on the dev halves: penalty {line.linear_penalty}, quantile {line.linear_quantile}; "
        f"defaults: penalty {DEFAULT_TUNING.linear_penalty}, quantile {DEFAULT_TUNING.linear_quantile}"
    )
    measured = {
        (name, reader, others): long_readers(every, kind, others, line)
        for name, every, reader, kind in long_sets
        for others in (0, *LONG_LEVELS)
        if others < len(every)
    }
    side, total = pick_switch(measured)
    print(
        f"switch picked on the dev halves: ≥ {side} marks each side, ≥ {total} in all; defaults: "
        f"≥ {DEFAULT_TUNING.linear_min_side}, ≥ {DEFAULT_TUNING.linear_min_marks}"
    )
    print()
    print("| set | reader | marks | 👍/👎 per reader | half | kNN vote precision | recall | switched, dev-picked "
          "precision | recall | switched (defaults) precision | recall | readers on the line |")  # fmt: skip
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    fits = []
    for (name, reader, others), readers in measured.items():
        every, kind = next((e, k) for n, e, r, k in long_sets if n == name and r == reader)
        ups = statistics.fmean(r.ups for r in readers)
        downs = statistics.fmean(r.downs for r in readers)
        on_line = sum(r.on_line for r in readers)
        if others:
            fits += [(r.fit_seconds, r.ups + r.downs) for r in readers]
        marks = f"digests 1-{MARKED_DIGESTS}" + (f" + {others} other monitors" if others else "")
        for half in ("test", "dev"):
            knn = Scores()
            for r in readers:
                knn += r.knn[half]
            picked = switched(readers, half, side, total)
            now = evaluate_long(every, kind, DEFAULT_TUNING, half, others)
            print(
                f"| {name} | {reader} | {marks} | {ups:.0f}/{downs:.0f} | {half} | {knn.precision:.2f} | "
                f"{knn.recall:.2f} | {picked.precision:.2f} | {picked.recall:.2f} | {now.precision:.2f} | "
                f"{now.recall:.2f} | {on_line}/{len(readers)} |"
            )
    if fits:
        slowest, marks_at = max(fits)
        mean = statistics.fmean(f for f, _ in fits) * 1000
        print()
        print(
            f"line fit and check against the vote (once per reader and change of marks, then kept): mean {mean:.1f} "
            f"ms, slowest "
            f"{slowest * 1000:.1f} ms ({marks_at} marks); "
            f"per story of a 20-story digest with a fit every view: {slowest * 1000 / 20:.2f} ms + the view"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digest-size", type=int, default=20)
    parser.add_argument("--slices", type=int, default=10)
    parser.add_argument("--vectors", default="e5small", help="which recording: e5small (default) or minilm")
    parser.add_argument("--rules", action="store_true", help="also compare decision rules on the vectors")
    parser.add_argument("--no-long", action="store_true", help="skip the long-time readers' table")
    options = parser.parse_args()
    sets: list[tuple[Dataset, Monitors]] = []
    vector_sets: list[tuple[Dataset, Monitors]] = []
    long_sets: list[tuple[str, Monitors, str, str]] = []
    every: Monitors
    feature_costs = []
    for data in (load_uci(), load_masakhanews()):
        if data is None:
            continue
        started = time.perf_counter()
        embedding = recorded_embedder(data, options.vectors)
        every, feature_cost = monitors(data, slices=options.slices, size=options.digest_size, embedding=embedding)
        feature_costs.append(feature_cost)
        built = time.perf_counter() - started
        sizes = [len(d) for d in every[0]]
        kinds = Counter(s.kind for shared in every for d in shared[MARKED_DIGESTS:] for s in d)
        marked = Counter(s.kind for shared in every for d in shared[:MARKED_DIGESTS] for s in d)
        with_vectors = f"with recorded {options.vectors} vectors" if embedding is not None else "no recorded vectors"
        print(
            f"{data.name}: {len(data.items)} reports, {data.monitors} monitor(s) of {options.slices} runs, "
            f"clustered once in {built:.1f} s, {with_vectors}"
        )
        print(f"  digest sizes {sizes}; kinds marked (digests 1-{MARKED_DIGESTS}) {dict(sorted(marked.items()))}")
        print(f"  kinds measured (digests {MARKED_DIGESTS + 1}-{options.slices}) {dict(sorted(kinds.items()))}")
        sets.append((data, without_vectors(every)))
        if embedding is not None:
            vector_sets.append((data, every))
            if options.no_long:
                continue
            if data.monitors > 2:
                long_sets += [(data.name, every, name, kind) for name, kind in data.readers.items()]
            else:
                cut = replace(data, monitors=UCI_MONITORS)
                by_time, _ = monitors(cut, slices=options.slices, size=options.digest_size, embedding=embedding)
                long_sets += [
                    (f"{data.name}, {UCI_MONITORS} monitors by time", by_time, name, kind)
                    for name, kind in data.readers.items()
                ]
    if not sets:
        raise SystemExit("no labelled set is built (see above)")
    tuned = tune(sets)
    print(
        f"tuning picked on the dev halves: smoothing {tuned.smoothing}, outlet_evidence {tuned.outlet_evidence}, "
        f"drop_at {tuned.drop_at}; defaults: smoothing {DEFAULT_TUNING.smoothing}, outlet_evidence "
        f"{DEFAULT_TUNING.outlet_evidence}, drop_at {DEFAULT_TUNING.drop_at}"
    )
    vector_tuned = tune_vectors(vector_sets) if vector_sets else DEFAULT_TUNING
    if vector_sets:
        print(
            f"vector tuning picked on the dev halves: neighbours {vector_tuned.neighbours}, calibration_quantile "
            f"{vector_tuned.calibration_quantile}, vector_drop_at {vector_tuned.vector_drop_at}; defaults: neighbours "
            f"{DEFAULT_TUNING.neighbours}, calibration_quantile {DEFAULT_TUNING.calibration_quantile}, "
            f"vector_drop_at {DEFAULT_TUNING.vector_drop_at}"
        )
    print()
    print("| set | reader | half | features, tuning | stories | precision without | precision with | × |"
          " recall with | shown/digest |")  # fmt: skip
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    costs: dict[str, list[float]] = {"words": [], "vectors": []}
    vectors_of = {data.name: every for data, every in vector_sets}
    for data, every in sets:
        for name, kind in data.readers.items():
            for half in ("test", "dev"):
                without = evaluate(every, kind, None, half)
                rows: list[tuple[str, Scores]] = [
                    ("words, tuned on dev", evaluate(every, kind, tuned, half)),
                    ("words, defaults", evaluate(every, kind, DEFAULT_TUNING, half)),
                ]
                if data.name in vectors_of:
                    rows += [
                        ("vectors, tuned on dev", evaluate(vectors_of[data.name], kind, vector_tuned, half)),
                        ("vectors, defaults", evaluate(vectors_of[data.name], kind, DEFAULT_TUNING, half)),
                    ]
                if half == "test":
                    rows.append(("oracle: all other digests marked", oracle(every, kind, half, other_monitors=False)))
                    if data.monitors > 1:
                        rows.append(("oracle: all other labels", oracle(every, kind, half, other_monitors=True)))
                    if data.name in vectors_of:
                        rows.append(
                            ("vector oracle: all other labels",
                             vector_oracle(vectors_of[data.name], kind, half, vector_tuned))
                        )  # fmt: skip
                for label, with_ in rows:
                    if not label.startswith(("oracle", "vector oracle")):
                        costs[label.split(",")[0]].append(with_.seconds / max(with_.stories, 1))
                    ratio = with_.precision / without.precision if without.precision else float("inf")
                    print(
                        f"| {data.name} | {name} | {half} | {label} | {without.measured} | {without.precision:.2f} | "
                        f"{with_.precision:.2f} | {ratio:.1f} | {with_.recall:.2f} | "
                        f"{with_.shown / (data.monitors * (options.slices - MARKED_DIGESTS)):.1f} |"
                    )
    print()
    marks = len(marks_of("t", sets[0][1][0]))
    vector_cost = f", by vectors {statistics.fmean(costs['vectors']) * 1000:.3f} ms" if costs["vectors"] else ""
    print(
        f"cost: reader_view by words {statistics.fmean(costs['words']) * 1000:.3f} ms per story{vector_cost} "
        f"(with {marks} marks); story_features (+ story_vector) {statistics.fmean(feature_costs) * 1000:.2f} ms per "
        f"story, once per run for every reader"
    )
    if options.rules and vector_sets:
        rule_table(vector_sets)
    if long_sets:
        long_table(long_sets)


if __name__ == "__main__":
    sys.exit(main())
