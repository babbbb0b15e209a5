"""Print pairwise precision/recall of the near-duplicate clustering on the labelled headlines, per threshold.

Run: uv run python bench/cluster_quality.py
"""

from __future__ import annotations

import random

from research.dedupe import DEFAULT_THRESHOLD, Deduper, PairScores, pair_scores
from sources.base import Item
from tests.research.labelled_headlines import labelled_items

SHUFFLES = 10


def score(items: list[Item], labels: list[str], order: list[int], threshold: float) -> PairScores:
    deduper = Deduper(threshold=threshold)
    deduper.add(items[i] for i in order)
    return pair_scores([deduper.cluster_id(item.id) or "" for item in items], labels)


def main() -> None:
    items, labels = labelled_items()
    print(
        f"{len(items)} headlines, {len(set(labels))} stories, languages: "
        f"{', '.join(sorted({i.language or '?' for i in items}))}"
    )
    print(f"pairwise scores; shuffled = mean (min) over {SHUFFLES} random input orders\n")
    print(f"{'threshold':>9} | {'file P':>6} {'file R':>6} | {'shuffled P':>14} {'shuffled R':>14}")
    print("-" * 60)
    for threshold in sorted({0.12, 0.14, 0.16, 0.18, 0.20, 0.22, 0.26, DEFAULT_THRESHOLD}):
        file_order = score(items, labels, list(range(len(items))), threshold)
        runs = []
        for seed in range(SHUFFLES):
            order = list(range(len(items)))
            random.Random(seed).shuffle(order)
            runs.append(score(items, labels, order, threshold))
        mean_p = sum(r.precision for r in runs) / len(runs)
        mean_r = sum(r.recall for r in runs) / len(runs)
        min_p = min(r.precision for r in runs)
        min_r = min(r.recall for r in runs)
        mark = "  <- default" if abs(threshold - DEFAULT_THRESHOLD) < 1e-9 else ""
        print(
            f"{threshold:>9.2f} | {file_order.precision:>6.3f} {file_order.recall:>6.3f} | "
            f"{mean_p:>6.3f} ({min_p:.3f}) {mean_r:>6.3f} ({min_r:.3f}){mark}"
        )


if __name__ == "__main__":
    main()
