"""Feedback on real labelled news: two readers of one shared broad monitor, each pressing 👍/👎 on the first three
digests, and what the next seven digests give each of them with and without their marks.

The news: the UCI News Aggregator rows in bench/data (real headlines by real outlets, 10–12 March 2014), each
labelled by the aggregator with a topic (b business, t science and technology, e entertainment, m health; built by
bench/data/build_sets.py into `uci_news_categories.csv`). The copy spans two and a half days, so the monitor's ten
"daily" runs are ten equal slices of it in time order (about 640 reports each).

The monitor (collected and clustered once, shared by both readers): each run clusters its slice with one
`research.Deduper` kept across runs (the monitor's story memory), leaves out stories an earlier digest carried
(the pipeline's novelty, simplified to "no story twice"), and its digest is the 20 stories with the most reports
(the issue's "digest of twenty stories about a broad topic"). A story's kind is its reports' majority label.

The readers: A wants technology stories and none of the others; B, on the same monitor, wants entertainment and
none of the others. On digests 1–3 each presses 👍 on every story it wants and 👎 on every other one. Digests 4–10
are then shown to each through `research.reader_view` (exactly what `monitors.feedback` calls at delivery) with the
story features `research.story_features` makes (the clustering's term weights and the outlets).

Reported per reader, digests 4–10: precision (share of shown stories the reader wants) and recall (share of the
wanted stories of the shared digest that were shown), without and with feedback. The tuning (`FeedbackTuning`) is
picked on the stories of one half (a hash of the aggregator's story id) and reported on the other; the defaults in
`research/feedback.py` are reported beside. Cost: CPU time of `reader_view` per story and of `story_features` per
story (made once per run, shared by every reader).

Run: uv run python bench/feedback_real.py [--digest-size 20] [--slices 10]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from research import (
    Deduper,
    FeedbackTuning,
    Mark,
    StoryFeatures,
    reader_view,
    story_features,
)
from research.dedupe import story_lead
from sources import Item

DATA = Path(__file__).parent / "data"
MARKED_DIGESTS = 3
"""Digests the readers press on; the rest are measured."""
READERS = {"A (wants technology)": "t", "B (wants entertainment)": "e"}
TOPIC = "news"


@dataclass(frozen=True)
class Story:
    """One story of one digest."""

    digest: int
    features: StoryFeatures
    kind: str
    label: str
    """The aggregator's story id (the majority of its reports'), for the dev/test split."""


def _read(name: str) -> list[dict[str, str]]:
    path = DATA / name
    if not path.exists():
        raise SystemExit(
            f"{path} is not built: the labelled sets are not in the repository. Clone their public repositories "
            "(bench/data/README.md names them) and run: uv run python bench/data/build_sets.py <folder of the clones>"
        )
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def load() -> tuple[list[Item], dict[str, str], dict[str, str]]:
    rows = _read("uci_news_aggregator.csv")
    categories = {row["id"]: row["category"] for row in _read("uci_news_categories.csv")}
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
    items.sort(key=lambda item: (item.published, item.id))
    return items, categories, {row["id"]: row["story"] for row in rows}


def digests(
    items: Sequence[Item], categories: dict[str, str], labels: dict[str, str], *, slices: int, size: int
) -> tuple[list[list[Story]], float]:
    """The shared monitor's digests (collected and clustered once), and the CPU seconds per story of making the
    stories' features."""
    deduper = Deduper(topic=TOPIC)
    delivered: set[str] = set()
    out: list[list[Story]] = []
    feature_seconds, feature_count = 0.0, 0
    per_slice = len(items) // slices
    for number in range(slices):
        chunk = items[number * per_slice : (number + 1) * per_slice if number < slices - 1 else len(items)]
        result = deduper.add(chunk)
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
            feature_seconds += time.process_time() - started
            feature_count += 1
            kind = Counter(categories[m.id] for m in members).most_common(1)[0][0]
            label = Counter(labels[m.id] for m in members).most_common(1)[0][0]
            stories.append(Story(digest=number + 1, features=features, kind=kind, label=label))
        out.append(stories)
    return out, feature_seconds / max(feature_count, 1)


def marks_of(reader_kind: str, shown: Sequence[Sequence[Story]]) -> list[Mark]:
    """The reader's presses on the first digests: 👍 what it wants, 👎 the rest."""
    marks = []
    for number, story in enumerate((s for digest in shown[:MARKED_DIGESTS] for s in digest), start=1):
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
    seconds: float = 0.0
    stories: int = 0

    @property
    def precision(self) -> float:
        return self.wanted_shown / self.shown if self.shown else 0.0

    @property
    def recall(self) -> float:
        return self.wanted_shown / self.wanted if self.wanted else 0.0


def evaluate(
    shared: Sequence[Sequence[Story]], reader_kind: str, tuning: FeedbackTuning | None, half: str | None
) -> Scores:
    """Digests 4.. for one reader: with its marks under `tuning`, or (None) without feedback."""
    marks = marks_of(reader_kind, shared) if tuning is not None else []
    scores = Scores()
    for digest in shared[MARKED_DIGESTS:]:
        started = time.process_time()
        view = reader_view([s.features for s in digest], marks, tuning=tuning or FeedbackTuning())
        scores.seconds += time.process_time() - started
        scores.stories += len(digest)
        kept = {decision.index for decision in view.kept}
        for index, story in enumerate(digest):
            if half is not None and not in_half(story, half):
                continue
            wanted = story.kind == reader_kind
            scores.wanted += wanted
            if index in kept:
                scores.shown += 1
                scores.wanted_shown += wanted
    return scores


def objective(shared: Sequence[Sequence[Story]], tuning: FeedbackTuning) -> tuple[float, float]:
    """On the dev half, both readers: the lower precision, as long as both recalls reach 0.90."""
    results = [evaluate(shared, kind, tuning, "dev") for kind in READERS.values()]
    recall = min(r.recall for r in results)
    return (min(r.precision for r in results) if recall >= 0.90 else recall - 1.0, recall)


def tune(shared: Sequence[Sequence[Story]]) -> FeedbackTuning:
    best, best_score = FeedbackTuning(), (-9.0, 0.0)
    for drop_at, outlet in itertools.product(
        (-0.05, 0.0, 0.02, 0.05, 0.08, 0.1, 0.15, 0.2, 0.25, 0.3), (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
    ):
        tuning = replace(FeedbackTuning(), drop_at=drop_at, outlet_evidence=outlet)
        score = objective(shared, tuning)
        if score > best_score:
            best, best_score = tuning, score
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digest-size", type=int, default=20)
    parser.add_argument("--slices", type=int, default=10)
    options = parser.parse_args()
    items, categories, labels = load()
    started = time.perf_counter()
    shared, feature_cost = digests(items, categories, labels, slices=options.slices, size=options.digest_size)
    built = time.perf_counter() - started
    sizes = [len(d) for d in shared]
    kinds = Counter(s.kind for d in shared[MARKED_DIGESTS:] for s in d)
    print(f"{len(items)} reports, {options.slices} runs collected and clustered once for both readers in {built:.1f} s")
    measured = f"{MARKED_DIGESTS + 1}-{options.slices}"
    print(f"digest sizes: {sizes}; kinds in digests {measured}: {dict(sorted(kinds.items()))}")
    tuned = tune(shared)
    print(
        f"tuning picked on the dev half: drop_at {tuned.drop_at}, outlet_evidence {tuned.outlet_evidence}; "
        f"defaults: drop_at {FeedbackTuning().drop_at}, outlet_evidence {FeedbackTuning().outlet_evidence}"
    )
    print()
    print("| reader | half | tuning | precision without | precision with | × | recall with | shown/digest |")
    print("|---|---|---|---|---|---|---|---|")
    costs = []
    for name, kind in READERS.items():
        for half in ("test", "dev"):
            without = evaluate(shared, kind, None, half)
            for label, tuning in (("tuned on dev", tuned), ("defaults", FeedbackTuning())):
                with_ = evaluate(shared, kind, tuning, half)
                costs.append(with_.seconds / max(with_.stories, 1))
                ratio = with_.precision / without.precision if without.precision else float("inf")
                per_digest = with_.shown / (options.slices - MARKED_DIGESTS)
                print(
                    f"| {name} | {half} | {label} | {without.precision:.2f} | {with_.precision:.2f} | {ratio:.1f} | "
                    f"{with_.recall:.2f} | {per_digest:.1f} |"
                )
    print()
    marks = len(marks_of("t", shared))
    print(
        f"cost: reader_view {statistics.fmean(costs) * 1000:.3f} ms per story (with {marks} marks); "
        f"story_features {feature_cost * 1000:.2f} ms per story, once per run for every reader"
    )


if __name__ == "__main__":
    sys.exit(main())
