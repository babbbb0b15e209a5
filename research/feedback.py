"""What one reader sees of a shared digest: the reader's marks (👍 more, 👎 less, fewer like this, a muted outlet)
applied to the stories of a run, with no model.

A story is described by what generalises without a model (`StoryFeatures`): its outlets and its terms weighted the
clustering's own way (`Deduper.term_weights`: rarity in the language at large, the monitor's topic words weightless),
so a mark stores the same description. The marks teach a small multinomial naive Bayes model (`MarkModel`): how much
likelier a story's terms (and, weakly, its outlets) are among the 👍 stories than among the 👎 / "fewer like this"
ones, so a later story of the same kind is recognised though it shares no headline with any marked one. A story
whose log-odds are clearly on the marked-down side is left out; the rest are ranked by them. `reader_view` is the
one seam: stories and marks in, the stories kept (re-ordered) and the ones dropped, each with the reason in words
(the closest marked story by cosine of term weights). It is pure and deterministic, and costs a fraction of a
millisecond per story with sixty marks.

With an embedding model, a story also carries its vector (`StoryVector`: the mean of its reports' stored item
vectors, title + lead), and so does a mark made on it. When the story and at least one 👍 and one 👎 / "fewer"
mark have vectors of the same model, the vectors decide instead of the words (`VectorModel`): the story's mean
cosine to its closest marked-up stories against its closest marked-down ones (a nearest-neighbour vote, which
learns "stories about phones and apps" from a few marks where words need the same words again), cut at a level
calibrated on the reader's own 👍 stories. A reader with many marks of one model (`FeedbackTuning.linear_min_side`
on each side, `linear_min_marks` in all) is decided by a line instead (`LinearRule`, an L2-regularised logistic
regression of 👍 against 👎 over the marks' vectors), cut the same way at a level from the reader's own 👍 stories,
where the line tells the reader's own marks apart better than the vote (each mark scored without itself,
`line_or_vote`): the vote of a few neighbours stops learning as marks accumulate, where a line through all of them
keeps learning, on some embeddings and kinds of story (`bench/feedback_real.py`). Otherwise the words decide, as
before. Each decision says which did (`StoryDecision.by`). The vectors' arithmetic uses numpy (imported on first
use).

Guarantees: a muted outlet drops a story only when every outlet of the story is muted; a story is dropped by
marks only when its words and outlets (or its vector) lean clearly towards what was marked down; a story with no
word or outlet in common with any mark scores 0 by words and is never left out by them; vectors of another
embedding model are never compared; with no marks the view is the digest as it was.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from research.dedupe import Deduper, fingerprint
from research.markup import escape_markdown
from research.reputation import outlet_of
from sources import Item

__all__ = [
    "DEFAULT_TUNING",
    "MARK_KINDS",
    "FeedbackTuning",
    "LinearRule",
    "Mark",
    "MarkKind",
    "MarkModel",
    "ReaderView",
    "StoryDecision",
    "StoryFeatures",
    "StoryVector",
    "VectorModel",
    "cosine",
    "fit_linear_rule",
    "line_or_vote",
    "reader_view",
    "story_features",
    "story_vector",
]

MarkKind = Literal["more", "less", "fewer", "mute"]
"""👍 more of this, 👎 less of this (its terms and its outlet), fewer like this (its terms only), mute an outlet."""

MARK_KINDS: Final[tuple[MarkKind, ...]] = ("more", "less", "fewer", "mute")

STORY_TERMS: Final = 80
"""Terms kept per story: a headline and lead have fewer; a story of many reports keeps its most telling ones, its
names and the everyday words that tell its kind (film, phone, shares) alike."""

STORY_ITEMS: Final = 20
"""Reports of a story read for its terms: the lead and others say what it is about; more outlets' wordings tell
its kind better (measured on real labelled news, `bench/feedback_real.py`), at a fraction of a millisecond each."""

LEANING_OUTLETS: Final = 3
"""Outlets of a story (its lead's first) whose 👍/👎 leaning counts: a story carried by a hundred outlets says little
about each of them."""


@dataclass(frozen=True, kw_only=True)
class FeedbackTuning:
    """How strongly marks act; the defaults were picked on the dev halves of real labelled news
    (`bench/feedback_real.py`) and reported on the held-out halves."""

    smoothing: float = 0.2
    """Weight every term is given in both the 👍 and the 👎 stories before counting (additive smoothing): a term
    seen once in one kind of story is evidence, not proof."""
    outlet_evidence: float = 0.5
    """Weight of the story's outlets' log-odds (how much more often they carried 👍 than 👎 stories) beside its
    terms': outlets keep to their beats, but many carry every kind of story."""
    drop_at: float = 0.25
    """A story is left out when its log-odds of being a 👎 kind of story are this far beyond even, and shown as
    "like a 👍 story" this far on the other side."""
    rank_shift: float = 3.0
    """Places a story moves per unit of log-odds: marked-up kinds of story come first."""
    neighbours: int = 3
    """Marked stories on each side whose cosine to a story is averaged when vectors decide: one close mark can be
    a look-alike of another kind; a few agree on the kind."""
    calibration_quantile: float = 0.1
    """Share of the reader's own 👍 stories (each judged by the other marks) whose margin may fall below the cut:
    the recall the cut aims at on what the reader marked."""
    vector_drop_at: float = 0.01
    """Cosine margin below that level (`VectorModel.threshold`) at which a story is left out: a little room for
    stories less typical than the marked ones."""
    vector_scale: float = 20.0
    """Log-odds units per unit of cosine margin, so one `rank_shift` orders stories decided by words and by vectors
    alike (an embedding model's cosines of one topic's stories lie within a few tenths)."""
    linear_min_side: int = 20
    """Marked stories with vectors needed on each side (👍, and 👎 / "fewer") before a line decides instead of the
    neighbours' vote: a line through a handful of 👍 stories is no better than the vote."""
    linear_min_marks: int = 200
    """Marked stories with vectors needed in all before a line decides: below it (three digests' worth) every
    rule orders later stories about equally and the vote stays."""
    linear_penalty: float = 1.0
    """L2 penalty of the line's weights (the classes weighted equally, their weights summing to the marks' count):
    unit vectors of a few hundred marks in hundreds of dimensions are separable, and an unpenalised line follows
    each mark."""
    linear_quantile: float = 0.05
    """Share of the reader's own 👍 stories (each scored by the line fitted without it) whose score may fall below
    the line's cut (`LinearRule.threshold`): the recall the cut aims at, on the scale of the reader's own scores
    (a line's log-odds shrink with its penalty and the embedding's spread of cosines, so no fixed number fits)."""


DEFAULT_TUNING: Final = FeedbackTuning()


@dataclass(frozen=True, kw_only=True)
class StoryVector:
    """A story's embedding: unit length, and the model (with its vector size) that made it, since vectors of two
    models are not comparable."""

    model: str
    values: tuple[float, ...]

    def to_json(self) -> dict[str, str]:
        """Half-precision, base64: a 768-dimension vector in 2 KB of JSON (cosine error under 0.001)."""
        packed = struct.pack(f"<{len(self.values)}e", *self.values)
        return {"model": self.model, "f16": base64.b64encode(packed).decode("ascii")}

    @classmethod
    def from_json(cls, data: object) -> StoryVector | None:
        """The vector stored by `to_json`, or None for anything else (a mark made before vectors, a damaged row)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("model"), str):
            return None
        try:
            packed = base64.b64decode(str(data.get("f16", "")), validate=True)
            values = struct.unpack(f"<{len(packed) // 2}e", packed[: len(packed) // 2 * 2])
        except (ValueError, struct.error):
            return None
        return cls(model=str(data["model"]), values=tuple(values)) if values else None


def story_vector(vectors: Sequence[Sequence[float]], *, model: str) -> StoryVector | None:
    """A story's vector from its reports' (the lead first; at most `STORY_ITEMS`): their mean, unit length; None
    without any, or when their sizes differ."""
    usable = [v for v in vectors[:STORY_ITEMS] if v]
    if not usable or len({len(v) for v in usable}) != 1:
        return None
    summed = [math.fsum(column) for column in zip(*usable, strict=True)]
    norm = math.sqrt(math.fsum(x * x for x in summed))
    return StoryVector(model=model, values=tuple(x / norm for x in summed)) if norm else None


@dataclass(frozen=True, kw_only=True)
class StoryFeatures:
    """What a story is, in what generalises without a model (and its vector, when an embedding model made one)."""

    title: str
    outlets: tuple[str, ...] = ()
    terms: Mapping[str, float] = field(default_factory=dict)
    """Term → weight, L2-normalised (so a dot product is the cosine)."""
    vector: StoryVector | None = None

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {"title": self.title, "outlets": list(self.outlets), "terms": dict(self.terms)}
        if self.vector is not None:
            data["vector"] = self.vector.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> StoryFeatures:
        outlets = data.get("outlets")
        terms = data.get("terms")
        return cls(
            title=str(data.get("title") or ""),
            outlets=tuple(str(o) for o in outlets) if isinstance(outlets, list) else (),
            terms={str(k): float(v) for k, v in terms.items() if isinstance(v, int | float)}
            if isinstance(terms, dict)
            else {},
            vector=StoryVector.from_json(data.get("vector")),
        )


@dataclass(frozen=True, kw_only=True)
class Mark:
    """One reader's mark on a story (or, for `mute`, on an outlet: `features.outlets`)."""

    id: int
    kind: MarkKind
    features: StoryFeatures


@dataclass(frozen=True, kw_only=True)
class StoryDecision:
    """What the view did with one story and why."""

    index: int
    """The story's place in the shared digest (0-based)."""
    kept: bool
    up: float = 0.0
    """Likeness to the closest marked-up story (0 when none)."""
    down: float = 0.0
    """Likeness to the closest marked-down story (0 when none)."""
    mark_id: int | None = None
    """The mark that decided (the closest one, or the mute)."""
    reason: str = ""
    """In words: why it was left out or moved, "" when the marks did not touch it."""
    by: str = ""
    """What decided: "vectors" (its embedding against the closest marked stories'), "linear" (its embedding by the
    line through many marks, `LinearRule`), "words" (`MarkModel`), "mute", or "" without any mark to weigh."""


@dataclass(frozen=True, kw_only=True)
class ReaderView:
    """The stories one reader gets: `kept` in the order to show them, `dropped` with their reasons."""

    kept: tuple[StoryDecision, ...]
    dropped: tuple[StoryDecision, ...]

    @property
    def changed(self) -> bool:
        return bool(self.dropped) or [d.index for d in self.kept] != sorted(d.index for d in self.kept)


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine of two L2-normalised term weightings."""
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def _normalised(weights: Mapping[str, float], limit: int) -> dict[str, float]:
    top = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    norm = math.sqrt(sum(w * w for _, w in top))
    return {t: round(w / norm, 4) for t, w in top} if norm else {}


def story_features(items: Sequence[Item], *, topic: str | None = None, title: str | None = None) -> StoryFeatures:
    """A story's features from its reports (the lead first): their outlets, and their terms weighted as the
    clustering weighs them, the monitor's `topic` words left out (every story of the monitor shares them)."""
    deduper = Deduper(topic=topic)
    summed: dict[str, float] = {}
    for item in items[:STORY_ITEMS]:
        weights = deduper.term_weights(fingerprint(item.title, item.text, language=item.language or ""))
        for term, weight in weights.items():
            summed[term] = summed.get(term, 0.0) + weight
    outlets = tuple(dict.fromkeys(outlet_of(item) for item in items))
    return StoryFeatures(
        title=title if title is not None else (items[0].title if items else ""),
        outlets=outlets,
        terms=_normalised(summed, STORY_TERMS),
    )


def _likeness(story: StoryFeatures, mark: Mark, tuning: FeedbackTuning) -> float:
    score = cosine(story.terms, mark.features.terms)
    if mark.kind in ("more", "less") and set(story.outlets) & set(mark.features.outlets):
        score += tuning.outlet_evidence
    return score


def _closest(story: StoryFeatures, marks: Iterable[Mark], tuning: FeedbackTuning) -> tuple[float, Mark | None]:
    best, which = 0.0, None
    for mark in marks:
        score = _likeness(story, mark, tuning)
        if score > best:
            best, which = score, mark
    return best, which


class MarkModel:
    """A multinomial naive Bayes model of the reader's 👍 stories against its 👎 / "fewer like this" ones: the terms
    of the marked stories, counted by their clustering weights, and their outlets. `log_odds` of a story is how much
    likelier its terms and outlets are among the 👍 stories than among the 👎 ones (0 without evidence either way);
    equal priors, so a reader who marks down more than up does not drop everything unseen."""

    def __init__(self, ups: Sequence[Mark], downs: Sequence[Mark], tuning: FeedbackTuning) -> None:
        self._tuning = tuning
        self._terms: tuple[dict[str, float], dict[str, float]] = ({}, {})
        self._outlets: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self._stories = (len(ups), len(downs))
        for side, marks in enumerate((ups, downs)):
            for mark in marks:
                for term, weight in mark.features.terms.items():
                    self._terms[side][term] = self._terms[side].get(term, 0.0) + weight
                if mark.kind in ("more", "less"):
                    for outlet in dict.fromkeys(o.casefold() for o in mark.features.outlets[:LEANING_OUTLETS]):
                        self._outlets[side][outlet] = self._outlets[side].get(outlet, 0) + 1
        vocabulary = len(self._terms[0].keys() | self._terms[1].keys()) + 1
        a = tuning.smoothing
        self._denominators = tuple(sum(side.values()) + a * vocabulary for side in self._terms)

    def log_odds(self, story: StoryFeatures) -> float:
        up_terms, down_terms = self._terms
        up_total, down_total = self._denominators
        a = self._tuning.smoothing
        score = 0.0
        for term, weight in story.terms.items():
            up, down = up_terms.get(term, 0.0), down_terms.get(term, 0.0)
            if up or down:
                score += weight * (math.log((up + a) / up_total) - math.log((down + a) / down_total))
        outlets = [o.casefold() for o in story.outlets[:LEANING_OUTLETS]]
        known = [o for o in outlets if o in self._outlets[0] or o in self._outlets[1]]
        if known:
            ups, downs = self._stories
            leaning = sum(
                math.log((self._outlets[0].get(o, 0) + 1) / (ups + 2))
                - math.log((self._outlets[1].get(o, 0) + 1) / (downs + 2))
                for o in known
            )
            score += self._tuning.outlet_evidence * leaning / len(known)
        return score


def _top_mean(scores: Any, k: int) -> Any:
    """Row-wise mean of the `k` highest of each row (NaN marks a left-out entry; a row of NaN gives NaN)."""
    import numpy as np

    if scores.shape[1] == 0:
        return np.full(scores.shape[0], np.nan)
    ordered = -np.sort(-np.nan_to_num(scores, nan=-np.inf), axis=1)[:, :k]
    ordered[np.isinf(ordered)] = np.nan
    with np.errstate(invalid="ignore"):
        return np.nanmean(ordered, axis=1) if np.isfinite(ordered).any() else np.full(scores.shape[0], np.nan)


class VectorModel:
    """The reader's marked stories by their vectors. A story's margin is its mean cosine to its `neighbours`
    closest 👍 stories minus that to its closest 👎 / "fewer like this" ones; it is left out below the reader's own
    level (`threshold`): the margin that all but `calibration_quantile` of the reader's 👍 stories reach against the
    other marks (each left out of its own vote), less `vector_drop_at`. So the cut follows the reader's marks and
    the embedding model's own scale of cosines, not one number for every set and model. Only marks whose vector
    comes from the story's embedding model count; `usable` says whether both sides have one. With many marks of a
    model (`linear`), a line decides its stories instead of the vote."""

    def __init__(self, ups: Sequence[Mark], downs: Sequence[Mark], tuning: FeedbackTuning) -> None:
        self._tuning = tuning
        self._sides: tuple[dict[str, list[Mark]], ...] = ({}, {})
        for side, marks in enumerate((ups, downs)):
            for mark in marks:
                if mark.features.vector is not None:
                    self._sides[side].setdefault(mark.features.vector.model, []).append(mark)
        self._matrices: dict[str, tuple[Any, Any]] = {}
        self._thresholds: dict[str, float] = {}
        self._lines: dict[str, LinearRule | None] = {}

    def usable(self, story: StoryFeatures) -> bool:
        vector = story.vector
        return vector is not None and all(vector.model in side for side in self._sides)

    def _matrix(self, model: str) -> tuple[Any, Any]:
        import numpy as np

        if model not in self._matrices:
            dims = {
                len(m.features.vector.values) for side in self._sides for m in side.get(model, ()) if m.features.vector
            }
            size = max(dims, default=0)

            def rows(marks: Sequence[Mark]) -> Any:
                kept = [
                    m.features.vector.values
                    for m in marks
                    if m.features.vector and len(m.features.vector.values) == size
                ]
                return np.asarray(kept, dtype=np.float64).reshape(len(kept), size)

            self._matrices[model] = (rows(self._sides[0].get(model, [])), rows(self._sides[1].get(model, [])))
        return self._matrices[model]

    def closest(self, story: StoryFeatures, side: int) -> tuple[float, float, Mark | None]:
        """On one side (0 👍, 1 👎): the mean cosine of the story's closest marked stories, the closest one's
        cosine, and its mark."""
        import numpy as np

        if story.vector is None:
            return 0.0, 0.0, None
        marks = self._sides[side].get(story.vector.model, [])
        matrix = self._matrix(story.vector.model)[side]
        if not marks or matrix.shape[0] != len(marks) or matrix.shape[1] != len(story.vector.values):
            return 0.0, 0.0, None
        scores = matrix @ np.asarray(story.vector.values, dtype=np.float64)
        best = int(np.argmax(scores))
        top = np.sort(scores)[::-1][: max(self._tuning.neighbours, 1)]
        return float(top.mean()), float(scores[best]), marks[best]

    def linear(self, model: str) -> LinearRule | None:
        """The line that decides stories of `model`'s vectors for this reader: with at least `linear_min_side`
        marked stories on each side and `linear_min_marks` in all, and where it tells the reader's own marks apart
        better than the vote (`line_or_vote`); else None (the vote decides)."""
        if model not in self._lines:
            ups, downs = self._matrix(model)
            enough = min(ups.shape[0], downs.shape[0]) >= max(self._tuning.linear_min_side, 1)
            if enough and ups.shape[0] + downs.shape[0] >= self._tuning.linear_min_marks:
                self._lines[model] = _linear_rule(*_newest(ups, downs, self._tuning), self._tuning)
            else:
                self._lines[model] = None
        return self._lines[model]

    def threshold(self, model: str) -> float:
        """The margin below which a story of `model`'s vectors is left out for this reader (see the class); with
        fewer than two 👍 stories, -`vector_drop_at`."""
        import numpy as np

        if model not in self._thresholds:
            ups, downs = self._matrix(model)
            level = 0.0
            if ups.shape[0] >= 2 and downs.shape[0] >= 1:
                among = ups @ ups.T
                np.fill_diagonal(among, np.nan)
                k = max(self._tuning.neighbours, 1)
                margins = _top_mean(among, k) - _top_mean(ups @ downs.T, k)
                level = float(np.nanquantile(margins, self._tuning.calibration_quantile))
            self._thresholds[model] = level - self._tuning.vector_drop_at
        return self._thresholds[model]


LINEAR_MAX_SIZE: Final = 400
"""With vectors longer than this, a line is fitted on at most this many marks (the newest, each side keeping its
share): a fit costs the cube of the smaller of the two, so a reader with a thousand marks on a 3,072-dimension
embedding would cost about a second per fit, and 400 keeps it near a tenth, under 5 ms per story of a digest."""


def _newest(ups: Any, downs: Any, tuning: FeedbackTuning) -> tuple[Any, Any]:
    """The marks a line is fitted on (rows oldest first): all of them, or the newest `LINEAR_MAX_SIZE` when both
    they and the vectors' dimensions are more, each side keeping at least `linear_min_side`."""
    total = ups.shape[0] + downs.shape[0]
    if total <= LINEAR_MAX_SIZE or ups.shape[1] <= LINEAR_MAX_SIZE:
        return ups, downs
    floor = max(tuning.linear_min_side, 1)
    keep_ups = min(ups.shape[0], max(floor, round(LINEAR_MAX_SIZE * ups.shape[0] / total)))
    keep_downs = min(downs.shape[0], max(floor, LINEAR_MAX_SIZE - keep_ups))
    return ups[-keep_ups:], downs[-keep_downs:]


LINEAR_FITS_KEPT: Final = 64
"""Lines kept per process (by the content of the marks they were fitted on): every delivery of a run to one reader
reads the same marks, so a fit is made once per reader and change of marks, not once per view."""

_linear_fits: dict[tuple[str, float, int], LinearRule | None] = {}
_linear_fits_lock = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class LinearRule:
    """An L2-regularised logistic regression of 👍 (1) against 👎 (0) stories by their vectors, the two classes
    weighted equally: `score` is a story's log-odds of being a 👍 kind; `ups_left_out` each 👍 mark's score by the
    line fitted without it (approximate leave-one-out: one Newton step from the full fit, exact for a quadratic
    loss), what `threshold` reads the reader's own level from; `downs_left_out` the same of each 👎 mark."""

    centre: Any
    weights: Any
    bias: float
    ups_left_out: Any
    downs_left_out: Any

    def score(self, vectors: Any) -> Any:
        """Log-odds of each row of `vectors` (or of one vector)."""
        import numpy as np

        return (np.asarray(vectors, dtype=np.float64) - self.centre) @ self.weights + self.bias

    def threshold(self, tuning: FeedbackTuning) -> float:
        """The score below which a story is left out: the level all but `linear_quantile` of the reader's own 👍
        stories reach (each scored by the line fitted without it)."""
        import numpy as np

        return float(np.quantile(self.ups_left_out, tuning.linear_quantile))

    def rank(self, score: float, tuning: FeedbackTuning) -> float:
        """A score on the reader's own scale, to rank by: 0 at the cut, 1 at the median of the reader's 👍 stories
        (so one `rank_shift` moves a typical liked story as far as a clear one by words)."""
        import numpy as np

        cut = self.threshold(tuning)
        return (score - cut) / max(float(np.median(self.ups_left_out)) - cut, 1e-9)


def fit_linear_rule(ups: Any, downs: Any, *, penalty: float) -> LinearRule:
    """The logistic regression of the rows of `ups` (👍 stories' vectors) against those of `downs` (Newton steps;
    with more dimensions than marks, fitted in the span of the centred marks, which an isotropic penalty leaves
    exact, so the cost follows the marks, not the embedding's size)."""
    import numpy as np

    x = np.concatenate([np.asarray(ups, dtype=np.float64), np.asarray(downs, dtype=np.float64)])
    y = np.r_[np.ones(len(ups)), np.zeros(len(downs))]
    weight = np.where(y == 1, 0.5 / max(len(ups), 1), 0.5 / max(len(downs), 1)) * len(y)
    centre = x.mean(axis=0)
    centred = x - centre
    basis = None
    if centred.shape[1] > centred.shape[0]:
        values, vectors = np.linalg.eigh(centred @ centred.T)
        keep = values > 1e-10 * max(float(values.max()), 1e-300)
        basis = centred.T @ (vectors[:, keep] / np.sqrt(values[keep]))
        centred = centred @ basis
    design = np.hstack([centred, np.ones((len(x), 1))])
    ridge = penalty * np.eye(design.shape[1])
    ridge[-1, -1] = 0.0
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (weight * (p - y)) + ridge @ beta
        hessian = (design * (weight * p * (1 - p))[:, None]).T @ design + ridge + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-6:
            break
    eta = design @ beta
    p = 1.0 / (1.0 + np.exp(-eta))
    first, second = weight * (p - y), weight * p * (1 - p)
    hessian = (design * second[:, None]).T @ design + ridge + 1e-9 * np.eye(len(beta))
    leverage = np.einsum("ij,ji->i", design, np.linalg.solve(hessian, design.T))
    left_out = eta + first * leverage / (1.0 - second * leverage)
    weights = beta[:-1] if basis is None else basis @ beta[:-1]
    return LinearRule(
        centre=x.mean(axis=0),
        weights=weights,
        bias=float(beta[-1]),
        ups_left_out=left_out[: len(ups)],
        downs_left_out=left_out[len(ups) :],
    )


def vote_left_out(ups: Any, downs: Any, *, neighbours: int) -> tuple[Any, Any]:
    """Each marked story's margin by `VectorModel`'s vote among the other marks (itself left out): the 👍 stories'
    and the 👎 ones'."""
    import numpy as np

    x = np.concatenate([ups, downs])
    among = x @ x.T
    np.fill_diagonal(among, -np.inf)

    def top_mean(scores: Any) -> Any:
        k = min(max(neighbours, 1), scores.shape[1] - 1)
        top = -np.partition(-scores, k - 1, axis=1)[:, :k]
        top[np.isinf(top)] = np.nan
        with np.errstate(invalid="ignore"):
            return np.nanmean(top, axis=1)

    margins = top_mean(among[:, : len(ups)]) - top_mean(among[:, len(ups) :])
    return margins[: len(ups)], margins[len(ups) :]


def separation(ups: Any, downs: Any) -> float:
    """The chance that a 👍 story scores above a 👎 one (the area under the ROC curve; ties count half)."""
    import numpy as np

    above = np.asarray(ups, dtype=np.float64)[:, None] - np.asarray(downs, dtype=np.float64)[None, :]
    return float((above > 0).mean() + 0.5 * (above == 0).mean()) if above.size else 0.5


def line_or_vote(ups: Any, downs: Any, tuning: FeedbackTuning) -> LinearRule | None:
    """The line through the marks, when on the reader's own marks (each scored without itself) it tells 👍 from 👎
    better than the vote does (`separation`); else None, the vote. Embeddings differ in which rule their many
    marks favour (`bench/feedback_real.py`), and the reader's own marks are the one measure at hand."""
    line = fit_linear_rule(ups, downs, penalty=tuning.linear_penalty)
    vote = vote_left_out(ups, downs, neighbours=tuning.neighbours)
    by_line = separation(line.ups_left_out, line.downs_left_out)
    return line if by_line > separation(*vote) else None


def _linear_rule(ups: Any, downs: Any, tuning: FeedbackTuning) -> LinearRule | None:
    """`line_or_vote`, kept per process by the marks' content (`LINEAR_FITS_KEPT`)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (ups, downs):
        digest.update(str(part.shape).encode())
        digest.update(part.tobytes())
    key = (digest.hexdigest(), tuning.linear_penalty, tuning.neighbours)
    with _linear_fits_lock:
        known = key in _linear_fits
        found = _linear_fits.get(key)
    if not known:
        found = line_or_vote(ups, downs, tuning)
        with _linear_fits_lock:
            while len(_linear_fits) >= LINEAR_FITS_KEPT:
                del _linear_fits[next(iter(_linear_fits))]
            _linear_fits[key] = found
    return found


def _quoted(title: str) -> str:
    """A marked story's headline inside a decision's reason, which `/why` shows as markdown."""
    return f"“{escape_markdown(title[:80])}”" if title else "a story"


def _down_word(mark: Mark) -> str:
    """How a reason names a marked-down story's mark: 👎, or “fewer like this”."""
    return "👎" if mark.kind == "less" else "“fewer like this”"


def _decision(
    index: int,
    by: str,
    closest_up: tuple[float, Mark | None],
    closest_down: tuple[float, Mark | None],
    *,
    drops: bool,
    raises: bool,
    lowers: bool,
    dropped: Callable[[Mark], str],
    raised: Callable[[Mark], str],
    lowered: Callable[[Mark], str],
) -> StoryDecision:
    """What a rule weighing a story against the closest marked stories decided, in the one order every rule keeps:
    left out when `drops` (the closest marked-down story named), else moved up when `raises` (the closest 👍 named),
    else moved down when `lowers`, else untouched; each reason said in words by the rule's own `dropped`, `raised`
    or `lowered` of the mark named."""
    (up, up_mark), (down, down_mark) = closest_up, closest_down
    if down_mark is not None and drops:
        return StoryDecision(
            index=index, kept=False, up=up, down=down, mark_id=down_mark.id, reason=dropped(down_mark), by=by
        )
    if up_mark is not None and raises:
        return StoryDecision(
            index=index, kept=True, up=up, down=down, mark_id=up_mark.id, reason=raised(up_mark), by=by
        )
    if down_mark is not None and lowers:
        return StoryDecision(
            index=index, kept=True, up=up, down=down, mark_id=down_mark.id, reason=lowered(down_mark), by=by
        )
    return StoryDecision(index=index, kept=True, up=up, down=down, by=by)


def _by_words(
    index: int,
    story: StoryFeatures,
    ups: Sequence[Mark],
    downs: Sequence[Mark],
    learner: MarkModel | None,
    tuning: FeedbackTuning,
) -> tuple[StoryDecision, float]:
    """The decision by the marks' words and outlets (`MarkModel`), and the log-odds it ranks by."""
    up, up_mark = _closest(story, ups, tuning)
    down, down_mark = _closest(story, downs, tuning)
    net = learner.log_odds(story) if learner is not None else 0.0
    decision = _decision(
        index,
        "words" if learner is not None else "",
        (up, up_mark),
        (down, down_mark),
        drops=net <= -tuning.drop_at,
        raises=net >= tuning.drop_at,
        lowers=net < 0,
        dropped=lambda mark: (
            f"its words and outlets are more like the stories you marked down than those you marked up "
            f"(log-odds {net:+.1f}); the closest: {_quoted(mark.features.title)}, marked {_down_word(mark)}"
        ),
        raised=lambda mark: f"like {_quoted(mark.features.title)}, which you marked 👍 (likeness {up:.2f})",
        lowered=lambda mark: f"moved down: like {_quoted(mark.features.title)} (likeness {down:.2f})",
    )
    return decision, net


def _by_vectors(
    index: int, story: StoryFeatures, vectors: VectorModel, tuning: FeedbackTuning
) -> tuple[StoryDecision, float]:
    """The decision by the story's vector against the marked stories' (`VectorModel`), and its rank log-odds."""
    up_mean, up, up_mark = vectors.closest(story, 0)
    down_mean, down, down_mark = vectors.closest(story, 1)
    assert story.vector is not None  # `usable`
    line = vectors.linear(story.vector.model)
    if line is not None:
        return _by_line(index, story, line, (up, up_mark), (down, down_mark), tuning)
    margin = up_mean - down_mean
    decision = _decision(
        index,
        "vectors",
        (up, up_mark),
        (down, down_mark),
        drops=margin < vectors.threshold(story.vector.model),
        raises=margin > 0,
        lowers=margin < 0,
        dropped=lambda mark: (
            f"close in meaning to stories you marked {_down_word(mark)}, and further from those you marked 👍 than "
            f"they are from one another; the closest: {_quoted(mark.features.title)} (similarity {down:.2f}, "
            f"against {up:.2f} to the closest 👍)"
        ),
        raised=lambda mark: (
            f"close in meaning to stories you marked 👍, like {_quoted(mark.features.title)} (similarity {up:.2f})"
        ),
        lowered=lambda mark: f"moved down: close in meaning to {_quoted(mark.features.title)} (similarity {down:.2f})",
    )
    return decision, tuning.vector_scale * margin


def _by_line(
    index: int,
    story: StoryFeatures,
    line: LinearRule,
    closest_up: tuple[float, Mark | None],
    closest_down: tuple[float, Mark | None],
    tuning: FeedbackTuning,
) -> tuple[StoryDecision, float]:
    """The decision by the line through the reader's many marks (`LinearRule`), and its log-odds to rank by; the
    closest marked story on each side named as the example."""
    assert story.vector is not None
    up, down = closest_up[0], closest_down[0]
    score = float(line.score(story.vector.values))
    net = line.rank(score, tuning)
    decision = _decision(
        index,
        "linear",
        closest_up,
        closest_down,
        drops=net < 0,
        raises=net >= 1,
        lowers=score < 0,
        dropped=lambda mark: (
            f"by its meaning, on the side of the stories you marked {_down_word(mark)} as all your marks draw the "
            f"line (below what nearly all the stories you marked 👍 reach); the closest: "
            f"{_quoted(mark.features.title)} (similarity {down:.2f})"
        ),
        raised=lambda mark: (
            f"by its meaning, on the side of the stories you marked 👍, like {_quoted(mark.features.title)} "
            f"(similarity {up:.2f})"
        ),
        lowered=lambda mark: f"moved down: by its meaning nearer your 👎 stories, like {_quoted(mark.features.title)}",
    )
    return decision, net


def reader_view(
    stories: Sequence[StoryFeatures], marks: Sequence[Mark], *, tuning: FeedbackTuning = DEFAULT_TUNING
) -> ReaderView:
    """The stories one reader gets of a shared digest, given the reader's marks (see the module)."""
    muted = {outlet.casefold() for m in marks if m.kind == "mute" for outlet in m.features.outlets}
    mute_of = {o.casefold(): m for m in marks if m.kind == "mute" for o in m.features.outlets}
    ups = [m for m in marks if m.kind == "more"]
    downs = [m for m in marks if m.kind in ("less", "fewer")]
    learner = MarkModel(ups, downs, tuning) if ups or downs else None
    vectors = VectorModel(ups, downs, tuning) if ups and downs else None
    kept: list[tuple[float, StoryDecision]] = []
    dropped: list[StoryDecision] = []
    for index, story in enumerate(stories):
        outlets = [o.casefold() for o in story.outlets]
        if outlets and all(o in muted for o in outlets):
            mute = mute_of[outlets[0]]
            reason = f"its outlet {story.outlets[0]} is muted" if len(outlets) == 1 else "all its outlets are muted"
            dropped.append(StoryDecision(index=index, kept=False, mark_id=mute.id, reason=reason, by="mute"))
            continue
        if vectors is not None and vectors.usable(story):
            decision, net = _by_vectors(index, story, vectors, tuning)
        else:
            decision, net = _by_words(index, story, ups, downs, learner, tuning)
        if decision.kept:
            kept.append((index - tuning.rank_shift * net, decision))
        else:
            dropped.append(decision)
    kept.sort(key=lambda pair: (pair[0], pair[1].index))
    return ReaderView(kept=tuple(d for _, d in kept), dropped=tuple(dropped))
