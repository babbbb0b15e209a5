"""Rules per reader: what one chat keeps of a monitor's digest (words, RE2 patterns, outlets, a cap, a minimum
relevance), decided by one pure function over the digest's stories.

`ReaderRules` is a chat's rules on one monitor, checked when they are set (a pattern RE2 refuses, or one over
`MAX_PATTERN_CHARS`, is refused with one sentence). `digest_stories` groups a stored digest's cited items into stories
(by the run's clusters); `apply_rules` decides which stories stay and, for each one dropped, which rule dropped it
(`RulesDecision`, stored on the chat's delivery row); `filter_digest` takes the dropped stories' citations out of
the digest and the developments left citing nothing.

Guarantees: matching is case-insensitive over each story's titles and descriptions (NFKC, case-folded); a word rule
matches a whole word in spaced scripts and a substring in CJK and Thai (`word_pattern`, the one definition the
monitor's own keyword filter uses too); patterns run on RE2, linear in the text, within `REGEX_MAX_MEM`, over at most
`MAX_MATCH_CHARS` of a story, so no pattern can stall a delivery. Nothing here reads storage or the clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from research.reputation import outlet_of
from research.terms import normalise
from sources import Item

if TYPE_CHECKING:  # the digest's module loads the model library: imported where a digest is filtered
    from research.digest import Development, Digest

__all__ = [
    "MAX_MATCH_CHARS",
    "MAX_PATTERN_CHARS",
    "RULE_KINDS",
    "LeftOut",
    "ReaderRules",
    "Recount",
    "RuleError",
    "RuleKind",
    "RulesDecision",
    "RunEntry",
    "Story",
    "StoryItem",
    "apply_rules",
    "compile_pattern",
    "digest_stories",
    "filter_digest",
    "outlet_name",
    "recount_text",
    "told_in",
    "word_pattern",
]

MAX_PATTERN_CHARS: Final = 300
"""A longest regular expression: a reader's pattern names a few words; a longer one is more likely a huge
alternation that costs RE2 memory on every story than a rule anyone reads."""
REGEX_MAX_MEM: Final = 1 << 20
"""RE2's memory for one compiled pattern (1 MiB): a pattern whose program needs more is refused when set, not at run."""
MAX_RULES_PER_KIND: Final = 30
"""Words, patterns or outlets of one kind: enough for any reader's list, and it bounds the cost per story."""
MAX_WORD_CHARS: Final = 100
"""A word or phrase rule is a few words."""
MAX_STORIES: Final = 50
"""The highest cap `max` takes: far above the 7 developments a digest has."""
MAX_MATCH_CHARS: Final = 20_000
"""Text of one story the rules read (its items' titles and descriptions, in order): bounds the time per story."""

_PATTERN_CACHE: Final = 4096
"""Compiled words and patterns a process keeps (every chat's rules are matched again at each delivery; compiling
costs more than matching a story)."""

RuleKind = Literal["include", "exclude", "regex", "exclude-regex", "allow", "block", "max", "min-relevance"]
RULE_KINDS: Final[tuple[RuleKind, ...]] = (
    "include",
    "exclude",
    "regex",
    "exclude-regex",
    "allow",
    "block",
    "max",
    "min-relevance",
)
"""The kinds as `/filter` names them, in the order they are shown."""


class RuleError(ValueError):
    """A rule that cannot be set; the message is one sentence for the person."""


# ---- matching ----------------------------------------------------------------------------------------------


@lru_cache(maxsize=_PATTERN_CACHE)
def word_pattern(keyword: str) -> re.Pattern[str]:
    """A word or phrase as a pattern over `normalise`d text: whole words for alphabetic scripts ("AI" must not match
    "said"), plain containment for CJK and Thai, whose words are not separated by spaces."""
    text = re.escape(normalise(keyword))
    return re.compile(rf"(?<!\w){text}(?!\w)" if keyword.isascii() else text)


@lru_cache(maxsize=_PATTERN_CACHE)
def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2 (case-insensitive, UTF-8, within `REGEX_MAX_MEM`); `RuleError` with the reason when
    it is too long or RE2 refuses it (back-references and look-arounds do not exist in RE2: that is what keeps it
    linear)."""
    if not pattern.strip():
        raise RuleError("An empty pattern matches everything; give one that names something.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RuleError(f"That pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are allowed.")
    import re2  # loaded by the first pattern, not by every process that lists monitors

    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = REGEX_MAX_MEM
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        detail = error.args[0].decode(errors="replace") if error.args and isinstance(error.args[0], bytes) else error
        raise RuleError(
            f"RE2 refuses the pattern {pattern[:80]!r}: {detail} (it has no back-references or look-arounds, and "
            "refuses patterns that need too much memory)."
        ) from None


def outlet_name(text: str) -> str:
    """An outlet as a rule names it: a site (`example.com` from `https://www.example.com/a`) or a source (`hn`)."""
    raw = text.strip().lower()
    host = urlsplit(raw if "//" in raw else f"//{raw}").hostname or ""
    for prefix in ("www.", "m.", "amp.", "mobile."):
        host = host.removeprefix(prefix)
    return host.rstrip(".")


def _outlet_matches(names: frozenset[str], rule: str) -> bool:
    return any(name == rule or name.endswith(f".{rule}") for name in names)


# ---- the rules ---------------------------------------------------------------------------------------------


def _clean_words(values: Iterable[str], what: str) -> tuple[str, ...]:
    words = tuple(dict.fromkeys(" ".join(value.split()) for value in values if value.strip()))
    for word in words:
        if len(word) > MAX_WORD_CHARS:
            raise RuleError(f"The {what} {word[:40]!r}… is over {MAX_WORD_CHARS} characters; a rule is a few words.")
    if len(words) > MAX_RULES_PER_KIND:
        raise RuleError(f"At most {MAX_RULES_PER_KIND} {what}s of one kind; /filter <id> clear {what} starts again.")
    return words


class ReaderRules(BaseModel):
    """One chat's rules on one monitor. Stories must mention an include word or pattern (when any is given) and no
    exclude word or pattern; only cited items from allowed outlets (when any) and none from blocked ones count; a
    story the run scored under `min_relevance` is dropped (one it did not score is kept); at most `max_stories`
    stories stay."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    """Include patterns (RE2)."""
    exclude_regex: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    """Outlets: sites (`example.com`, its subdomains too) or sources (`hn`)."""
    block: tuple[str, ...] = ()
    max_stories: int | None = Field(default=None, ge=1, le=MAX_STORIES)
    min_relevance: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("include", "exclude")
    @classmethod
    def _words(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return _clean_words(values, "word")

    @field_validator("regex", "exclude_regex")
    @classmethod
    def _patterns(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        patterns = tuple(dict.fromkeys(values))
        if len(patterns) > MAX_RULES_PER_KIND:
            raise RuleError(f"At most {MAX_RULES_PER_KIND} patterns of one kind.")
        for pattern in patterns:
            compile_pattern(pattern)
        return patterns

    @field_validator("allow", "block")
    @classmethod
    def _outlets(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        outlets = []
        for value in values:
            name = outlet_name(value)
            if not name:
                raise RuleError(
                    f"{value.strip()[:60]!r} is no outlet: name a site like example.com or a source like hn."
                )
            outlets.append(name)
        return _clean_words(outlets, "outlet")

    @classmethod
    def from_stored(cls, stored: dict[str, Any] | None) -> ReaderRules | None:
        """Rules as stored; None for none, or for rules this version can no longer read (they are skipped, never
        fatal: a delivery goes out unfiltered rather than not at all)."""
        if not stored:
            return None
        try:
            return cls.model_validate(stored)
        except ValueError:
            return None

    def stored(self) -> dict[str, Any]:
        """What storage keeps: only the rules set."""
        return self.model_dump(mode="json", exclude_defaults=True)

    @property
    def empty(self) -> bool:
        return self == ReaderRules()

    def values_of(self, kind: RuleKind) -> tuple[str, ...]:
        """The values of one kind as text (`max` and `min-relevance` as one value, or none)."""
        if kind == "max":
            return (str(self.max_stories),) if self.max_stories is not None else ()
        if kind == "min-relevance":
            return (f"{self.min_relevance:g}",) if self.min_relevance is not None else ()
        values: tuple[str, ...] = getattr(self, _FIELD[kind])
        return values

    def added(self, kind: RuleKind, values: Sequence[str]) -> ReaderRules:
        """These rules with `values` added to `kind` (`max` and `min-relevance` are set: "off" removes them).
        `RuleError` when a value cannot be a rule."""
        if kind in ("max", "min-relevance"):
            return self._set_number(kind, values)
        current: tuple[str, ...] = getattr(self, _FIELD[kind])
        return self._with(**{_FIELD[kind]: (*current, *values)})

    def removed(self, kind: RuleKind, values: Sequence[str] = ()) -> ReaderRules:
        """These rules without `values` of `kind` (without every one of that kind when `values` is empty)."""
        if kind in ("max", "min-relevance") or not values:
            return self._with(**{_FIELD[kind]: None if kind in ("max", "min-relevance") else ()})
        current: tuple[str, ...] = getattr(self, _FIELD[kind])
        if kind in ("allow", "block"):
            gone = {outlet_name(value) for value in values}
        elif kind in ("include", "exclude"):
            gone = {normalise(value) for value in values}
            current_keys = {normalise(value): value for value in current}
            gone = {current_keys[key] for key in gone if key in current_keys}
        else:
            gone = set(values)
        return self._with(**{_FIELD[kind]: tuple(value for value in current if value not in gone)})

    def _set_number(self, kind: RuleKind, values: Sequence[str]) -> ReaderRules:
        text = " ".join(values).strip().lower()
        if text in ("off", "none"):
            return self._with(**{_FIELD[kind]: None})
        try:
            number = int(text) if kind == "max" else float(text)
        except ValueError:
            expected = f"a whole number from 1 to {MAX_STORIES}" if kind == "max" else "a number from 0 to 1"
            raise RuleError(f"{kind} takes {expected} (or off), not {text[:40]!r}.") from None
        if kind == "max" and not 1 <= int(number) <= MAX_STORIES:
            raise RuleError(f"max takes a whole number from 1 to {MAX_STORIES} (or off).")
        if kind == "min-relevance" and not 0.0 <= number <= 1.0:
            raise RuleError("min-relevance takes a number from 0 to 1 (or off), like 0.4.")
        return self._with(**{_FIELD[kind]: number})

    def _with(self, **changes: object) -> ReaderRules:
        try:
            return ReaderRules.model_validate(self.model_dump() | changes)
        except RuleError:
            raise
        except ValueError as error:  # pydantic wraps a validator's RuleError; its first message is the sentence
            errors = getattr(error, "errors", None)
            first = errors()[0] if callable(errors) else None
            message = str(first["ctx"]["error"]) if first and "error" in first.get("ctx", {}) else str(error)
            raise RuleError(message) from None

    def parts(self) -> list[str]:
        """Each kind set, as `/filter` writes it: `include ai, chips`, `regex /\\bGPT-?5\\b/`, `max 5`."""
        found = []
        for kind in RULE_KINDS:
            values = self.values_of(kind)
            if not values:
                continue
            shown = (
                ", ".join(f"/{value}/" for value in values) if kind in ("regex", "exclude-regex") else ", ".join(values)
            )
            found.append(f"{kind} {shown}")
        return found

    def summary(self, limit: int = 160) -> str:
        """One short line (`/monitors`): `include ai, chips · block example.com · max 5`, cut at `limit`."""
        line = " · ".join(self.parts())
        return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


_FIELD: Final[dict[RuleKind, str]] = {
    "include": "include",
    "exclude": "exclude",
    "regex": "regex",
    "exclude-regex": "exclude_regex",
    "allow": "allow",
    "block": "block",
    "max": "max_stories",
    "min-relevance": "min_relevance",
}


# ---- stories of a digest -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEntry:
    """One item of a stored run as the rules see it: the item, its story (cluster) and the run's relevance."""

    item: Item
    cluster_id: str | None = None
    relevance: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoryItem:
    """One report of a story."""

    number: int | None
    """Its number among the digest's sources; None when the digest does not cite it."""
    title: str
    text: str = ""
    outlets: frozenset[str] = frozenset()
    """The names it goes by for outlet rules: its site, its host, its source (`hn`), its outlet."""
    relevance: float | None = None
    outlet: str = ""
    """Its outlet as a digest counts outlets (`outlet_of`)."""


@dataclass(frozen=True, kw_only=True)
class Story:
    """A story of the digest: the run's items of one cluster, some of them cited."""

    key: str
    title: str
    items: tuple[StoryItem, ...]

    @property
    def numbers(self) -> tuple[int, ...]:
        return tuple(sorted(item.number for item in self.items if item.number is not None))

    @property
    def relevance(self) -> float | None:
        """The best relevance the run gave one of its reports (None when none was scored)."""
        scores = [item.relevance for item in self.items if item.relevance is not None]
        return max(scores) if scores else None

    @cached_property
    def text(self) -> str:
        """Its reports' titles and descriptions, normalised, at most `MAX_MATCH_CHARS` (computed once, when a word or
        pattern rule asks)."""
        joined = " \n ".join(f"{item.title} \n {item.text}" for item in self.items)
        return normalise(joined[: MAX_MATCH_CHARS * 2])[:MAX_MATCH_CHARS]


def _names(item: Item) -> frozenset[str]:
    host = outlet_name(item.url) if item.url else ""
    return frozenset(name for name in (outlet_of(item), host, item.source.lower()) if name)


def digest_stories(digest: Digest, entries: Sequence[RunEntry]) -> list[Story]:
    """The digest's stories in the order it tells them (developments first, then disputed claims, then any other
    source): each cited item is found among the run's `entries` by its link (else its title), and its story is every
    entry of its cluster. A cited item the run no longer has is a story of its own, judged by its title and site."""
    by_url: dict[str, RunEntry] = {}
    by_title: dict[str, RunEntry] = {}
    clusters: dict[str, list[RunEntry]] = {}
    for run_entry in entries:
        by_url.setdefault(run_entry.item.url, run_entry)
        by_title.setdefault(normalise(run_entry.item.title), run_entry)
        clusters.setdefault(_key(run_entry), []).append(run_entry)
    order: list[int] = []
    for development in digest.developments:
        order += development.citations
    for claim in digest.disputed:
        order += claim.citations
    order += [cited.number for cited in digest.cited]
    cited = {cited.number: cited for cited in digest.cited}
    numbers_of: dict[str, dict[str, int]] = {}
    """Per story key, the cited number of each of its entries (by item id)."""
    stories: dict[str, Story] = {}
    for number in dict.fromkeys(order):
        source = cited.get(number)
        if source is None:
            continue
        entry: RunEntry | None = by_url.get(source.url) or by_title.get(normalise(source.title))
        if entry is None:
            item = Item(
                id=f"cited:{number}", source=source.source or "unknown", url=source.url or "-", title=source.title
            )
            stories[item.id] = Story(
                key=item.id,
                title=source.title,
                items=(StoryItem(number=number, title=source.title, outlets=_names(item)),),
            )
            continue
        key = _key(entry)
        numbers_of.setdefault(key, {}).setdefault(entry.item.id, number)
        stories.setdefault(key, Story(key=key, title=source.title, items=()))
    built = []
    for key, story in stories.items():
        if key not in numbers_of:
            built.append(story)
            continue
        numbers = numbers_of[key]
        items = tuple(
            StoryItem(
                number=numbers.get(entry.item.id),
                title=entry.item.title,
                text=entry.item.text,
                outlets=_names(entry.item),
                relevance=entry.relevance,
                outlet=outlet_of(entry.item),
            )
            for entry in clusters[key]
        )
        built.append(Story(key=key, title=story.title, items=items))
    return built


def _key(entry: RunEntry) -> str:
    return entry.cluster_id or entry.item.id


# ---- the decision ------------------------------------------------------------------------------------------


class LeftOut(BaseModel):
    """One story the rules took out, with the rule that did (what `/why dropped` shows)."""

    model_config = ConfigDict(frozen=True)

    title: str
    numbers: list[int]
    """Its cited numbers in the run's digest."""
    rule: str
    """The rule in words: `exclude "celebrity"`, `block example.com`, `max 5`."""


class Recount(BaseModel):
    """A kept story counted again for one reader, after its outlet rules took some of its reports out: what the
    digest's "reported by N outlets; +M more reports" says to that reader."""

    model_config = ConfigDict(frozen=True)

    numbers: list[int]
    """Its cited numbers in the run's digest (the development telling it cites them)."""
    reports: int
    """Its reports the reader still receives."""
    outlets: list[str]
    """Their distinct outlets, sorted."""

    def where(self) -> str:
        """The digest's parenthesis for the story, as the extractive digest writes it (`research.digest`)."""
        from research.digest import more_reports

        where = f"reported by {len(self.outlets)} outlets" if len(self.outlets) > 1 else "".join(self.outlets[:1])
        return f"{where}; {more_reports(self.reports - 1)}" if self.reports > 1 else where


class RulesDecision(BaseModel):
    """What one chat's rules did to one digest: the stories left out (each with its rule), and every cited number
    taken out (theirs, and a kept story's reports from blocked or not allowed outlets). Stored on the delivery row,
    so a resend shows the same digest and /why can say what was left out."""

    model_config = ConfigDict(frozen=True)

    dropped: list[LeftOut] = Field(default_factory=list)
    removed: list[int] = Field(default_factory=list)
    recounted: list[Recount] = Field(default_factory=list)
    """Kept stories some of whose reports the reader's outlet rules took out, counted again."""

    @property
    def stories_left_out(self) -> int:
        return len(self.dropped)


def _first_match(text: str, words: Sequence[str], patterns: Sequence[str]) -> str | None:
    for word in words:
        # a plain substring test first: most words are absent, and `in` costs a fraction of the boundary pattern
        if normalise(word) in text and word_pattern(word).search(text):
            return f'"{word}"'
    if len(patterns) > 1 and (together := pattern_set(tuple(patterns))) is not None:
        hits = together.Match(text)  # one pass over the text for every pattern
        return f"/{patterns[min(hits)]}/" if hits else None
    for pattern in patterns:
        if compile_pattern(pattern).search(text):
            return f"/{pattern}/"
    return None


@lru_cache(maxsize=_PATTERN_CACHE)
def pattern_set(patterns: tuple[str, ...]) -> Any:
    """Several checked patterns as one RE2 set, matched in one pass (None when RE2 cannot build it within
    `REGEX_MAX_MEM` per pattern: they are then matched one by one)."""
    import re2

    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = REGEX_MAX_MEM * len(patterns)
    options.log_errors = False
    together = re2.Set.SearchSet(options)
    try:
        for pattern in patterns:
            together.Add(pattern)
        together.Compile()
    except re2.error:
        return None
    return together


def _outlet_reason(item: StoryItem, rules: ReaderRules) -> str | None:
    """Why a cited report does not count for this reader (its outlet), or None when it does."""
    for blocked in rules.block:
        if _outlet_matches(item.outlets, blocked):
            return f"block {blocked}"
    if rules.allow and not any(_outlet_matches(item.outlets, allowed) for allowed in rules.allow):
        return f"allow {', '.join(rules.allow)}"
    return None


def apply_rules(stories: Sequence[Story], rules: ReaderRules) -> RulesDecision:
    """Which stories stay for this reader, in order, and which rule took out each of the others: outlets first (a
    story whose every cited report is from a blocked or not allowed outlet is left out; otherwise only those reports
    are), then the minimum relevance, exclude words and patterns, include words and patterns, and last the cap."""
    dropped: list[LeftOut] = []
    removed: list[int] = []
    recounted: list[Recount] = []
    kept = 0
    for story in stories:
        cited = [item for item in story.items if item.number is not None]
        outlet_reasons = {item.number: _outlet_reason(item, rules) for item in cited}
        rule: str | None = None
        if cited and all(outlet_reasons.values()):
            rule = next(reason for reason in outlet_reasons.values() if reason)
        elif (
            rules.min_relevance is not None
            and (scored := story.relevance) is not None
            and (scored < rules.min_relevance)
        ):
            rule = f"min-relevance {rules.min_relevance:g} (it scored {scored:.2f})"
        elif (hit := _first_match(story.text, rules.exclude, rules.exclude_regex)) is not None:
            rule = f"exclude {hit}" if hit.startswith('"') else f"exclude-regex {hit}"
        elif (rules.include or rules.regex) and _first_match(story.text, rules.include, rules.regex) is None:
            rule = "include " + ", ".join([*rules.include, *(f"/{p}/" for p in rules.regex)])
        elif rules.max_stories is not None and kept >= rules.max_stories:
            rule = f"max {rules.max_stories}"
        if rule is not None:
            dropped.append(LeftOut(title=story.title, numbers=list(story.numbers), rule=rule))
            removed += story.numbers
            continue
        kept += 1
        removed += [number for number, reason in outlet_reasons.items() if reason and number is not None]
        if rules.block or rules.allow:
            remaining = [item for item in story.items if _outlet_reason(item, rules) is None]
            if len(remaining) < len(story.items):
                outlets = sorted({item.outlet for item in remaining if item.outlet})
                numbers = [number for number in story.numbers if not outlet_reasons.get(number)]
                recounted.append(Recount(numbers=numbers, reports=len(remaining), outlets=outlets))
    return RulesDecision(dropped=dropped, removed=sorted(set(removed)), recounted=recounted)


# ---- the digest a reader gets ------------------------------------------------------------------------------

_WHERE = re.compile(r"\((reported by \d+ outlets|[^()]+?)(; \+\d+ more reports?)?\)$")
"""The extractive digest's count at the end of a development: `(reported by 3 outlets; +4 more reports)`,
`(reuters.com; +1 more report)`."""


class _Numbered(Protocol):
    @property
    def numbers(self) -> Sequence[int]: ...


_NumberedT = TypeVar("_NumberedT", bound=_Numbered)


def told_in(development: Development, found: Sequence[_NumberedT]) -> _NumberedT | None:
    """Which of `found` (the digest's stories, or a reader's recounts of them) the development tells: the first it
    cites one of the numbers of."""
    cited = set(development.citations)
    return next((entry for entry in found if cited.intersection(entry.numbers)), None)


def recount_text(development: Development, recounted: Sequence[Recount]) -> Development:
    """The development with the reader's own count of its story's outlets and reports, when it is a recounted story
    told with the extractive digest's count; any other development as it was (a model's words are not counts)."""
    recount = told_in(development, recounted)
    found = _WHERE.search(development.text) if recount is not None else None
    if recount is None or found is None or not (found.group(1).startswith("reported by ") or found.group(2)):
        return development
    return development.model_copy(update={"text": f"{development.text[: found.start()]}({recount.where()})"})


_MORE_STORIES = re.compile(r" — and (\d+) more stor(?:y|ies)$")
"""The extractive headline's tail ("… — and 4 more stories"), counted again after a filter."""


def filter_digest(digest: Digest, removed: Iterable[int], recounted: Sequence[Recount] = ()) -> Digest:
    """The digest without the `removed` citations: developments and claims left citing nothing go, inline `[n]`
    markers of removed items go, the sources list keeps what is still cited, and "what changed" goes once a
    development went (it would count or name it). When the first development went, the headline becomes the first
    one kept (in one line, without markers). A development of a `recounted` story says the reader's own count of
    its outlets and reports (`recount_text`)."""
    from research.digest import CITATION, HEADLINE_CHARS, citations_in
    from research.llm import one_line

    gone = set(removed)
    if recounted:
        digest = digest.model_copy(
            update={"developments": [recount_text(development, recounted) for development in digest.developments]}
        )
    if not gone:
        return digest

    def strip(text: str, everything: bool = False) -> str:
        def keep(match: re.Match[str]) -> str:
            numbers = [n for n in match.group(1).split(",") if not everything and int(n) not in gone]
            return f"[{', '.join(n.strip() for n in numbers)}]" if numbers else ""

        return re.sub(r"\s+(?=[.,;:!?]|$)", "", CITATION.sub(keep, text)).strip()

    developments = []
    first_gone = False
    for index, development in enumerate(digest.developments):
        cited = [n for n in development.citations if n not in gone]
        if development.citations and not cited:
            first_gone = first_gone or index == 0
            continue
        developments.append(development.model_copy(update={"text": strip(development.text), "citations": cited}))
    disputed = []
    for claim in digest.disputed:
        cited = [n for n in claim.citations if n not in gone]
        if claim.citations and not cited:
            continue
        disputed.append(claim.model_copy(update={"claim": strip(claim.claim), "citations": cited}))
    headline = digest.headline
    if first_gone or (citations_in(headline) and not set(citations_in(headline)) - gone):
        lead = developments[0].text if developments else ""
        headline = one_line(strip(lead, everything=True), HEADLINE_CHARS) or "Nothing in this digest passed your filter"
    elif (more := _MORE_STORIES.search(headline)) is not None:
        others = len(developments) - 1
        tail = f" — and {others} more stor{'y' if others == 1 else 'ies'}" if others > 0 else ""
        headline = headline[: more.start()] + tail
    else:
        headline = strip(headline)
    # "what changed" speaks of every story the run told (and counts them): once a story is left out it would tell
    # the reader about it, or count it, so it goes too
    changes = digest.changes_since_last if len(developments) == len(digest.developments) else None
    still = {n for d in developments for n in d.citations} | {n for c in disputed for n in c.citations}
    still |= {n for text in (headline, changes or "") for n in citations_in(text)}
    cited_items = [cited for cited in digest.cited if cited.number in still and cited.number not in gone]
    return digest.model_copy(
        update={
            "headline": headline,
            "developments": developments,
            "disputed": disputed,
            "cited": cited_items,
            "changes_since_last": changes,
        }
    )
