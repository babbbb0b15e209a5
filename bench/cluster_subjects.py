"""Story clustering on real labelled news batched by a shared subject word, the way a monitor's batch is all about
one subject: `research.dedupe.Deduper(topic=word)` on every item of a half that names the word.

A monitor on "Apple" never sees the whole news: it sees Apple's CarPlay launch, its iOS update and its patent trial
in one batch, each told with "Apple" in it, and has to keep them apart. Whole-set figures (bench/cluster_real.py)
hide that: there, most pairs of different stories share no word at all. Here every pair of a batch shares the
subject, so pair precision measures what a reader of one monitor sees.

Subjects are chosen from the labelled half itself, never by hand: a term (`research.terms.story_terms`, as the
Deduper reads it; no stop word, figure or hiragana ending, rarer than `MIN_RARITY`) that at least `SUBJECT_SHARE`
of the items of each of two or more stories carry (in title or text), with `MIN_SUBJECT_ITEMS` items or more in
all. The `MAX_SUBJECTS` terms that span the most stories are kept (ties: more items, then the term); a batch keeps
at most `MAX_BATCH` items, the earliest first (time order, then id). Stories are split in two halves by a hash of
their label as in cluster_real.py (ECB+: by topic); rules are chosen on the dev halves (`--half dev`), the held-out
halves are scored once (`--half test`).

With `--embedding e5small` the same batches go through the embedding path, with the vectors recorded from
multilingual-e5-small (bench/data/vectors; its threshold as chosen in cluster_real.py).

Run: uv run python bench/cluster_subjects.py [--half dev|test] [--sets uci,ecbplus,jawikinews] [--threshold T]
     [--embedding e5small] [--no-topic] [--worst N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai.embeddings import Embedder

from bench.cluster_real import Counts, LabelledSet, load_sets
from bench.recorded_vectors import CHOSEN_EMBEDDING_THRESHOLDS, RecordedEmbeddingModel, recordings
from research.dedupe import Deduper, VectorLookup
from research.embeddings import ItemEmbedder
from research.terms import is_stop_word, rarity, story_terms

SUBJECT_SHARE = 0.3
"""A word is a story's subject when at least this share of the story's items carry it."""
MIN_SUBJECT_ITEMS = 8
"""Fewer items than this is no monitor's batch."""
MAX_SUBJECTS = 40
MAX_BATCH = 200
"""A daily monitor's batch is tens to a few hundred items."""
_HIRAGANA = re.compile(r"[\u3040-\u309f]+")
BOOTSTRAP_ROUNDS = 1000
MIN_RARITY = 8.0
"""Words commoner than this (-ln frequency; "says", "new", "report") are nobody's subject."""


def subject_batches(labelled: LabelledSet, indices: Sequence[int]) -> list[tuple[str, list[int]]]:
    """(subject word, item indices) for the half's subjects, most stories first."""
    words_of = {
        i: set(story_terms(f"{labelled.items[i].title} {labelled.items[i].text}", labelled.items[i].language).terms)
        for i in indices
    }
    by_story: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        by_story[labelled.labels[i]].append(i)
    stories_of_word: Counter[str] = Counter()
    for members in by_story.values():
        counts = Counter(word for i in members for word in words_of[i])
        for word, count in counts.items():
            if count >= SUBJECT_SHARE * len(members) and len(members) >= 2:
                stories_of_word[word] += 1
    items_of_word: dict[str, list[int]] = defaultdict(list)
    for i in indices:
        for word in words_of[i]:
            if stories_of_word[word] >= 2:
                items_of_word[word].append(i)
    language = labelled.language
    candidates = [
        word
        for word, n in stories_of_word.items()
        if n >= 2
        and len(items_of_word[word]) >= MIN_SUBJECT_ITEMS
        and not is_stop_word(word)
        and not word.isdigit()
        and not _HIRAGANA.fullmatch(word)  # a Japanese ending or particle (よる, ると), never a subject
        and rarity(word, language) >= MIN_RARITY
    ]
    candidates.sort(key=lambda w: (-stories_of_word[w], -len(items_of_word[w]), w))
    out = []
    for word in candidates[:MAX_SUBJECTS]:
        members = sorted(items_of_word[word], key=lambda i: (labelled.items[i].published or datetime.min, i))
        out.append((word, members[:MAX_BATCH]))
    return out


def recorded_vectors(labelled: LabelledSet, model: str) -> VectorLookup:
    """Every item's vector from the set's recording of `model` (bench/data/vectors), as a monitor run with that
    embedding model would have them (`ItemEmbedder`: title + lead)."""
    found, notes = recordings(labelled.name, labelled.items)
    recording = next((r for r in found if r.model == model), None)
    if recording is None:
        raise SystemExit(f"no usable {model} recording for {labelled.name}: {'; '.join(notes) or 'none recorded'}")
    embedder = ItemEmbedder(
        embedder=Embedder(RecordedEmbeddingModel(recording)), model_name=f"recorded:{model}", dimensions=None
    )
    embedded = asyncio.run(embedder.embed_items(labelled.items))
    if embedded.fallback_reason:
        raise SystemExit(f"recorded embeddings failed: {embedded.fallback_reason}")
    return embedded.vectors


def run_batch(
    labelled: LabelledSet,
    members: Sequence[int],
    *,
    topic: str | None,
    threshold: float | None,
    vectors: VectorLookup | None = None,
    embedding_threshold: float | None = None,
) -> list[str]:
    options: dict[str, Any] = {"topic": topic, "vectors": vectors}
    if threshold is not None:
        options["threshold"] = threshold
    if embedding_threshold is not None:
        options["embedding_threshold"] = embedding_threshold
    deduper = Deduper(**options)
    items = [labelled.items[i] for i in members]
    deduper.add(items)
    return [deduper.cluster_id(item.id) or f"missing:{item.id}" for item in items]


def interval(per_subject: Sequence[Counts], *, rounds: int = BOOTSTRAP_ROUNDS) -> tuple[float, float]:
    """The 5th and 95th percentiles of pooled pair precision over subjects drawn again with replacement: how much
    the figure owes to which subjects happened to be chosen (a change smaller than this is noise)."""
    rng = random.Random(0)
    values = []
    for _ in range(rounds):
        drawn = [rng.choice(per_subject) for _ in per_subject]
        predicted = sum(c.predicted_pairs for c in drawn)
        values.append(sum(c.correct_pairs for c in drawn) / predicted if predicted else 1.0)
    values.sort()
    return values[int(0.05 * rounds)], values[int(0.95 * rounds) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="uci,ecbplus,jawikinews")
    parser.add_argument("--half", choices=("dev", "test"), default="dev")
    parser.add_argument("--threshold", type=float, default=None, help="Deduper threshold (default: its own)")
    parser.add_argument("--no-topic", action="store_true", help="do not tell the Deduper the subject word")
    parser.add_argument("--worst", type=int, default=0, help="print the N subjects with the most wrong pairs")
    parser.add_argument(
        "--embedding",
        default="",
        metavar="MODEL",
        help="score the embedding path with a recorded model's vectors (e.g. e5small, at its chosen threshold)",
    )
    parser.add_argument("--embedding-threshold", type=float, default=None, help="its cosine threshold instead")
    args = parser.parse_args()
    sets = load_sets(name.strip() for name in args.sets.split(",") if name.strip())
    path = f"embedding path, recorded {args.embedding}" if args.embedding else "lexical path"
    print(
        f"\n{args.half} halves; {path}; Deduper threshold {args.threshold or 'default'}; "
        f"topic told: {not args.no_topic}\n"
    )
    print(
        "| set | subjects | items in batches | stories per batch (median) | subject P (90 % interval) | subject P, "
        "mean per subject | subject R | subject F1 | subject B3 F1 | whole P | whole R | whole F1 "
        "| CPU ms / 1,000 items (subjects) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst: list[tuple[int, str, str]] = []
    everything: list[Counts] = []
    for labelled in sets:
        indices = labelled.dev if args.half == "dev" else labelled.test
        batches = subject_batches(labelled, indices)
        vectors = recorded_vectors(labelled, args.embedding) if args.embedding else None
        cosine = args.embedding_threshold or (
            CHOSEN_EMBEDDING_THRESHOLDS.get(args.embedding) if args.embedding else None
        )
        counts = Counts()
        per_subject: list[Counts] = []
        started = time.process_time()
        run_batch(labelled, (labelled.test if args.half == "dev" else labelled.dev)[:300], topic=None, threshold=None)
        warm = time.process_time() - started  # lazy loads (frequency lists, segmenters) are once per process
        for word, members in batches:
            predicted = run_batch(
                labelled,
                members,
                topic=None if args.no_topic else word,
                threshold=args.threshold,
                vectors=vectors,
                embedding_threshold=cosine,
            )
            labels = [labelled.labels[i] for i in members]
            counts.add(predicted, labels)
            one = Counts()
            one.add(predicted, labels)
            per_subject.append(one)
            worst.append((one.predicted_pairs - one.correct_pairs, labelled.name, word))
        elapsed = time.process_time() - started - warm
        everything.extend(per_subject)
        whole = Counts()
        labels = [labelled.labels[i] for i in indices]
        whole.add(
            run_batch(
                labelled, indices, topic=None, threshold=args.threshold, vectors=vectors, embedding_threshold=cosine
            ),
            labels,
        )
        sizes = sum(len(m) for _, m in batches)
        stories = statistics.median(len({labelled.labels[i] for i in m}) for _, m in batches) if batches else 0
        low, high = interval(per_subject)
        mean = statistics.mean(c.pair_precision for c in per_subject if c.predicted_pairs) if per_subject else 1.0
        print(
            f"| {labelled.name} | {len(batches)} | {sizes} | {stories:g} | {counts.pair_precision:.3f} "
            f"({low:.2f}-{high:.2f}) | {mean:.3f} | {counts.pair_recall:.3f} | {counts.pair_f1:.3f} "
            f"| {counts.b3_f1:.3f} | {whole.pair_precision:.3f} | {whole.pair_recall:.3f} | {whole.pair_f1:.3f} "
            f"| {elapsed * 1e6 / max(sizes, 1):.0f} |"
        )
    if len(sets) > 1 and everything:
        pooled = Counts()
        for one in everything:
            pooled.correct_pairs += one.correct_pairs
            pooled.predicted_pairs += one.predicted_pairs
            pooled.true_pairs += one.true_pairs
        low, high = interval(everything)
        mean = statistics.mean(c.pair_precision for c in everything if c.predicted_pairs)
        print(
            f"| all sets | {len(everything)} | | | {pooled.pair_precision:.3f} ({low:.2f}-{high:.2f}) | {mean:.3f} "
            f"| {pooled.pair_recall:.3f} | {pooled.pair_f1:.3f} | | | | | |"
        )
    if args.worst:
        print("\nsubjects with the most wrongly joined pairs:")
        for wrong, name, word in sorted(worst, reverse=True)[: args.worst]:
            print(f"- {name} {word!r}: {wrong}")


if __name__ == "__main__":
    main()
