"""Query variants without a model: the request's topic and key terms, other languages, wider time ranges."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, Field

from research.terms import is_stop_word

OTHER_LANGUAGES = ("zh", "es", "de", "fr", "ja", "ru", "pt", "ko")


class QuerySpec(BaseModel):
    """One query the planner wants run."""

    text: str = Field(min_length=1, max_length=200)
    """Search words: 2-4 keywords work best (some sources require every word)."""
    language: str | None = Field(default=None, pattern=r"^[a-z]{2}$")
    """ISO 639-1 code, e.g. `zh`; omit for the default."""
    since: AwareDatetime | None = None
    """Only items published after this (ISO 8601 with timezone)."""
    until: AwareDatetime | None = None
    """Only items published before this."""


_REQUEST_PREFIX = re.compile(
    r"^\s*(?:please\s+)?(?:collect|find|gather|get|fetch|search(?:\s+for)?|track|monitor|pull)\s+(?:me\s+)?"
    r"(?:(?:the\s+)?(?:top|latest|last|recent)?\s*\d[\d,_ ]*\s*)?"
    r"(?:posts?|items?|articles?|stories|news|mentions|tweets|papers|results|links)?\s*"
    r"(?:about|on|regarding|for|mentioning|of|related\s+to)?\s+",
    re.IGNORECASE,
)
_PHRASE_SUFFIXES = ("news", "release", "analysis", "review", "discussion")


def topic_of(request: str) -> str:
    """The subject of a request: "collect 2000 posts about DeepSeek R2" -> "DeepSeek R2"."""
    topic = _REQUEST_PREFIX.sub("", request, count=1).strip().strip("\"'“”«»").strip(" .!?")
    return topic or request.strip()


def key_terms(topic: str) -> list[str]:
    """Up to four content words of the topic, in order, original case kept."""
    words = re.findall(r"[^\s,;:!?\"'()]+", topic)
    return [w for w in dict.fromkeys(words) if not is_stop_word(w)][:4]


def planned_attempts(request: str, *, now: datetime) -> Iterator[list[QuerySpec]]:
    """Query sets to try in order: the request, its key terms, other languages, wider time ranges, phrasings.

    Every attempt goes to every source given, so "other sources" are covered from the first attempt.
    """
    topic = topic_of(request)
    terms = key_terms(topic)
    month, year = now - timedelta(days=30), now - timedelta(days=365)
    singles = terms if len(terms) > 1 else []
    joined = " ".join(terms)
    yield [QuerySpec(text=topic, since=month)]
    if singles or (joined and joined != topic):
        yield [QuerySpec(text=t, since=month) for t in dict.fromkeys([joined, *singles]) if t and t != topic]
    yield [QuerySpec(text=topic, language=lang, since=month) for lang in OTHER_LANGUAGES[:4]]
    yield [QuerySpec(text=topic, since=year), *(QuerySpec(text=t, since=year) for t in singles)]
    yield [QuerySpec(text=topic, language=lang, since=year) for lang in OTHER_LANGUAGES[4:]]
    yield [QuerySpec(text=topic), *(QuerySpec(text=t) for t in singles)]
    yield [QuerySpec(text=f"{topic} {suffix}") for suffix in _PHRASE_SUFFIXES]
    yield [QuerySpec(text=topic, language=lang) for lang in OTHER_LANGUAGES]
