"""Alerts: does a run's new story meet a reader's condition ("DeepSeek releases a new model", "3 or more outlets
report a recall")?

A condition is read once into its content words (stemmed) and, when it says so, a least number of distinct outlets.
A run's new stories are checked (novelty's `new`: a story none of whose items the monitor delivered before, so a
later report of a fired story is never new again); a condition that counts outlets also checks a story delivered
before that gained reports in this run, counting its earlier reports too ("3 or more outlets" fires when the third
outlet reports, whichever run brought the first two). A cheap prefilter keeps the stories that carry enough of the
words and outlets (and every word of the alert's own topic that its monitor's topic lacks: `/alert 1 Mistral when …`
on a DeepSeek monitor looks at stories that say "Mistral"); with a model, each kept story (at most `MAX_QUESTIONS`
per run, the best first) is one yes/no request with its items, answered as a constrained `AlertVerdict` with a
bounded output; without a model — or for the candidates past the cap — the words and the count alone decide. A model
that fails or answers garbage fires nothing.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from pydantic import BaseModel, Field
from pydantic_ai import Agent, PromptedOutput, RunUsage, UsageLimits
from pydantic_ai.exceptions import AgentRunError, FallbackExceptionGroup
from pydantic_ai.framing import wrap
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from research.critique import SNIPPET_CHARS, TITLE_CHARS, UNTRUSTED_NOTE, UNTRUSTED_TAG
from research.digest import link_target, link_text
from research.llm import (
    REASON_CHARS,
    describe_failure,
    limits_of,
    one_line,
    output_spec,
    stage_settings,
    unusable_answer,
)
from research.markup import escape_markdown
from research.pipeline_models import ScoredItem
from research.reputation import outlet_of
from research.terms import tokens
from research.usage import LlmUsage
from sources import Item

__all__ = [
    "MAX_QUESTIONS",
    "AlertCheck",
    "AlertCondition",
    "AlertStory",
    "AlertVerdict",
    "alert_message",
    "ask_alert_model",
    "new_stories",
    "parse_condition",
    "words_check",
]

logger = logging.getLogger(__name__)

MAX_QUESTIONS: Final = 4
"""Model questions per run, over all of a monitor's alerts: an alert is a few requests at most, never a second
critique; candidates past it are decided by their words."""
CANDIDATE_SHARE: Final = 0.5
"""The share of a condition's content words a story must carry to be asked about (the model judges paraphrase)."""
WORDS_ALONE_SHARE: Final = 1.0
"""The share of a condition's content words a story must carry to fire without a model: every one (stemmed), so a
word match alone fires only on stories that say what was asked."""
STORY_ITEMS: Final = 6
"""Items of one story shown to the model and kept as evidence: enough to see who reports it."""
ALERT_MAX_TOKENS: Final = 200
"""Output limit of a verdict (a flag, a sentence, a few numbers); the critique stage's own limit when lower."""
ALERT_LIMITS: Final = UsageLimits(request_limit=1)
"""One request per candidate: an unusable answer is not asked again, it just does not fire."""

_FILLER_WORDS = (
    "when whenever if once there any some someone something it its they them their he she his her new news report "
    "reports reported reporting say says said mention mentions mentioned about happen happens happened get gets got "
    "is are was were be been being do does did will would announce"
)
_FILLER: Final = frozenset(_FILLER_WORDS.split())
"""Words of a condition that every story about anything could carry (its frame, not its content)."""

_NUMBERS: Final = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                   "nine": 9, "ten": 10}  # fmt: skip
_COUNT = re.compile(
    r"\b(?:at\s+least\s+)?(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s*(\+|or\s+more\s+)?\s*"
    r"(?:different\s+|distinct\s+|independent\s+|news\s+)?"
    r"(outlets?|sources?|sites?|publications?|papers?|media|newspapers?)\b",
    re.IGNORECASE,
)
"""`3 or more outlets`, `at least two sources`, `5+ sites`: a least number of distinct outlets."""


@functools.cache
def _stemmer() -> Callable[[str], str]:
    import Stemmer

    stem: Callable[[str], str] = Stemmer.Stemmer("english").stemWord
    return stem


def _stems(text: str) -> set[str]:
    stem = _stemmer()
    return {stem(token) if token.isascii() and token.isalpha() else token for token in tokens(text)}


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertCondition:
    """A condition as the prefilter reads it."""

    text: str
    words: tuple[str, ...]
    """Its content words, stemmed, in order (no count phrase, no filler)."""
    min_outlets: int = 1
    """Distinct outlets the story must have (`3 or more outlets`: 3)."""
    topic_words: tuple[str, ...] = ()
    """The alert's own topic's content words, stemmed, that its monitor's topic does not carry: every one must be in
    the story (an alert's topic narrower than, or other than, its monitor's)."""


def _content_words(text: str) -> list[str]:
    """A text's content words, stemmed, in order, once each (its filler left out): how a condition and a topic are
    both read, so a story carries them by the same match (`AlertStory`'s stems)."""
    stem = _stemmer()
    words: list[str] = []
    for token in tokens(text):
        if token in _FILLER:
            continue
        stemmed = stem(token) if token.isascii() and token.isalpha() else token
        if stemmed not in words and stemmed not in _FILLER:
            words.append(stemmed)
    return words


def parse_condition(condition: str, *, topic: str = "", monitor_topic: str = "") -> AlertCondition:
    """The condition's content words and its least number of outlets; with the alert's `topic` and its monitor's
    `monitor_topic`, the topic's words the monitor's topic does not already carry (`/alert 1 Mistral when …` on a
    DeepSeek monitor: "mistral"), which a story must carry to be asked about or to fire by its words."""
    clean = " ".join(condition.split())
    least = 1
    found = _COUNT.search(clean)
    rest = clean
    if found is not None:
        number = found.group(1).lower()
        least = max(1, int(number) if number.isdigit() else _NUMBERS[number])
        rest = clean[: found.start()] + " " + clean[found.end() :]
    topic_words = own_topic_words(topic, monitor_topic)
    return AlertCondition(text=clean, words=tuple(_content_words(rest)), min_outlets=least, topic_words=topic_words)


def own_topic_words(topic: str, monitor_topic: str) -> tuple[str, ...]:
    """The words of an alert's `topic` its monitor's topic does not carry: what a story must carry for the alert
    (empty when the alert is about the monitor's own topic)."""
    monitor_words = set(_content_words(monitor_topic))
    return tuple(word for word in _content_words(topic) if word not in monitor_words)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertStory:
    """A story of a run as alerts see it: a new story, or (for a condition that counts outlets) a story delivered
    before that gained reports in this run, counted with its earlier reports."""

    key: str
    """The id of its best-ranked report of this run: what a firing is stored under."""
    items: tuple[Item, ...]
    """Its reports gained in this run, best-ranked first."""
    earlier: tuple[Item, ...] = ()
    """Its reports delivered before this run (a grown story's)."""
    grown: bool = False
    """A story delivered before (an update or a repeat in this run): only a count condition looks at it."""
    _stems: set[str] = field(default_factory=set, compare=False, repr=False)

    @property
    def reports(self) -> tuple[Item, ...]:
        """Every report it has: this run's first, then the earlier ones."""
        return (*self.items, *self.earlier)

    @property
    def outlets(self) -> int:
        """Distinct outlets among all its reports (a story keeps growing across runs: earlier outlets count)."""
        return len({outlet_of(item) for item in self.reports})

    def _carried(self) -> set[str]:
        if not self._stems:
            self._stems.update(_stems(" ".join(f"{item.title} {item.text}" for item in self.reports)))
        return self._stems

    def share_of(self, condition: AlertCondition) -> float:
        """The share of the condition's content words the story's titles and texts carry (1 when it has none)."""
        if not condition.words:
            return 1.0
        carried = self._carried()
        return sum(word in carried for word in condition.words) / len(condition.words)

    def about_topic(self, condition: AlertCondition) -> bool:
        """Whether the story carries every word of the alert's own topic its monitor's topic does not (true when
        there are none), matched as the condition's words are."""
        return not condition.topic_words or all(word in self._carried() for word in condition.topic_words)

    def looked_at(self, condition: AlertCondition) -> bool:
        """Whether the condition looks at this story at all: every new story; a grown one only for a count of
        outlets, which its new reports may have reached."""
        return not self.grown or condition.min_outlets > 1

    def candidate(self, condition: AlertCondition) -> bool:
        """Worth asking the model about: enough outlets, the alert's own topic words and at least `CANDIDATE_SHARE`
        of the condition's words."""
        return (
            self.looked_at(condition)
            and self.outlets >= condition.min_outlets
            and self.about_topic(condition)
            and self.share_of(condition) >= CANDIDATE_SHARE
        )

    def fires_by_words(self, condition: AlertCondition) -> bool:
        """What the words and the count alone decide (no model): the alert's own topic words too."""
        return (
            self.looked_at(condition)
            and self.outlets >= condition.min_outlets
            and self.about_topic(condition)
            and self.share_of(condition) >= WORDS_ALONE_SHARE
        )

    def stored(self) -> dict[str, object]:
        """The story as a pending check keeps it (item ids; the items themselves are stored with the run)."""
        return {
            "key": self.key,
            "items": [item.id for item in self.items],
            "earlier": [item.id for item in self.earlier],
            "grown": self.grown,
        }


def new_stories(
    items: Sequence[ScoredItem], told_before: Mapping[str, Sequence[Item]] | None = None
) -> list[AlertStory]:
    """The run's stories alerts check, best-ranked first: each story with a `new` item and no report delivered
    before, and each story delivered before that gained reports in this run (an `update` or a `repeat`), with its
    earlier reports (`told_before`, by cluster id, and any of them collected again in this run)."""
    by_story: dict[str, list[ScoredItem]] = {}
    for scored in sorted(items, key=lambda entry: entry.rank):
        by_story.setdefault(scored.cluster_id or scored.item.id, []).append(scored)
    stories = []
    for key, members in by_story.items():
        fresh = [entry for entry in members if entry.status in ("new", "update", "repeat")]
        if not fresh:
            continue
        before = {entry.item.id: entry.item for entry in members if entry.status == "delivered"}
        for item in (told_before or {}).get(key, ()):
            before.setdefault(item.id, item)
        grown = bool(before) or any(entry.status != "new" for entry in fresh)
        stories.append(
            AlertStory(
                key=fresh[0].item.id,
                items=tuple(entry.item for entry in fresh),
                earlier=tuple(before.values()),
                grown=grown,
            )
        )
    return stories


class AlertVerdict(BaseModel):
    """The model's answer: does this story meet the condition, why, and which of its items show it (a long reason is
    cut and unknown numbers are dropped in code, so a verbose model is not refused for what it adds)."""

    fires: bool = Field(description="True only if the items show the condition happened.")
    reason: str = Field(description="One short sentence.")
    citations: list[int] = Field(default_factory=list, description="Item numbers.")


ALERT_INSTRUCTIONS: Final = (
    "You decide whether a news story meets a reader's alert condition. You get the condition and the story's "
    "items, numbered. Answer fires=true only when the items themselves show that the condition happened (not a "
    "rumour of it, not a different event), with a one-sentence reason and the numbers of the items that show it; "
    "otherwise fires=false. " + UNTRUSTED_NOTE
)
ANSWER_SHAPE: Final = (
    'Answer with one JSON object and nothing else: {"fires": true or false, "reason": "<one sentence>", '
    '"citations": [<item numbers>]}'
)
"""The answer's shape in words, for the prompted output mode: said inside the one instruction (pydantic-ai's own
schema template would be a second system message, which a chat template such as Gemma's refuses)."""


@functools.cache
def _alert_agent(prompted: bool) -> Agent[None, AlertVerdict]:
    """The alert agent (no model bound): one instruction, the answer's shape inside it when output is prompted."""
    instructions = f"{ALERT_INSTRUCTIONS}\n\n{ANSWER_SHAPE}" if prompted else ALERT_INSTRUCTIONS
    return Agent(None, output_type=AlertVerdict, instructions=instructions, retries={"output": 0}, name="alert")


def story_block(story: AlertStory) -> str:
    """The story's items in compact form, numbered from 1, framed as untrusted data."""
    lines = []
    for number, item in enumerate(story.reports[:STORY_ITEMS], start=1):
        date = item.published.strftime("%Y-%m-%d %H:%M UTC") if item.published else "unknown"
        lines.append(f"[{number}] {one_line(item.title, TITLE_CHARS)}")
        lines.append(f"    outlet: {outlet_of(item)} · date: {date}")
        if item.text.strip():
            lines.append(f"    snippet: {one_line(item.text, SNIPPET_CHARS)}")
    return wrap(UNTRUSTED_TAG, "\n" + "\n".join(lines) + "\n")


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertCheck:
    """What one check of one story decided."""

    fires: bool
    reason: str
    """The model's sentence, or how the words decided."""
    evidence: tuple[Item, ...]
    """The items that show it (the model's valid citations; the story's best items when it cited none)."""
    path: str
    """`model`, `words`, or `model failed: …` (which never fires)."""
    usage: LlmUsage = field(default_factory=LlmUsage)


def words_check(condition: AlertCondition, story: AlertStory) -> AlertCheck:
    """The no-model decision: every content word and enough outlets."""
    fires = story.fires_by_words(condition)
    reason = (
        f"{story.outlets} outlet{'s' * (story.outlets != 1)} report it, with the words of the condition"
        if fires
        else "not every word of the condition"
        if story.about_topic(condition)
        else "not about the alert's topic"
    )
    return AlertCheck(fires=fires, reason=reason, evidence=story.reports[:3], path="words")


async def ask_alert_model(
    model: Model, *, topic: str, condition: AlertCondition, story: AlertStory, now: datetime
) -> AlertCheck:
    """One yes/no request about one story; any failure or unusable answer does not fire."""
    limits = limits_of(model)
    settings = ModelSettings(max_tokens=min(ALERT_MAX_TOKENS, limits.max_tokens("critique")))
    shown = story.reports[:STORY_ITEMS]
    prompt = (
        f"Alert topic: {one_line(topic, TITLE_CHARS)}\nCondition: {one_line(condition.text, REASON_CHARS)}\n"
        f"Today: {now:%Y-%m-%d}\n\nThe story's {len(shown)} items:\n{story_block(story)}"
    )
    run_usage = RunUsage()
    try:
        prompted = limits.output_mode == "prompted"
        result = await _alert_agent(prompted).run(
            prompt,
            model=model,
            output_type=PromptedOutput(AlertVerdict, template=False) if prompted else output_spec(model, AlertVerdict),
            usage_limits=ALERT_LIMITS,
            usage=run_usage,
            model_settings=stage_settings(model, "critique", settings),
            timeout=limits.run_seconds,
        )
    except (AgentRunError, FallbackExceptionGroup) as error:
        reason = describe_failure(error)
        logger.warning("alert check: the model failed (%s); not fired", reason)
        usage = LlmUsage.from_run(run_usage, model=model)
        return AlertCheck(fires=False, reason=reason, evidence=(), path=f"model failed: {reason}", usage=usage)
    usage = LlmUsage.from_run(result.usage, model=model, messages=result.all_messages())
    verdict = result.output
    unusable = unusable_answer(verdict.reason, instructions=[ALERT_INSTRUCTIONS])
    if unusable is None and verdict.reason.strip(" <>.").casefold() == "one sentence":
        unusable = "the answer's shape copied, not filled in"  # a small base model echoes the example
    if unusable is not None:  # a looping or reciting answer is never shown, and decides nothing
        logger.warning("alert check: the model's answer is unusable (%s); not fired", unusable)
        return AlertCheck(fires=False, reason=unusable, evidence=(), path=f"model failed: {unusable}", usage=usage)
    cited = [shown[number - 1] for number in dict.fromkeys(verdict.citations) if 1 <= number <= len(shown)]
    return AlertCheck(
        fires=verdict.fires,
        reason=one_line(verdict.reason, REASON_CHARS),
        evidence=tuple(cited) or shown[:3],
        path="model",
        usage=usage,
    )


def alert_message(*, alert_id: int, monitor_id: int, topic: str, condition: str, check: AlertCheck) -> str:
    """The alert as a chat reads it (markdown): what it watches for, why it fired, and the items that show it."""
    lines = [
        f"🔔 **Alert #{alert_id}** — {escape_markdown(topic)}: when {escape_markdown(condition)} "
        f"(monitor #{monitor_id})",
        escape_markdown(check.reason),
        *(f"- [{link_text(item.title)}]({link_target(item.url)}) — {escape_markdown(outlet_of(item))}"
          for item in check.evidence),
        f"`/alert off {alert_id}` stops this alert.",
    ]  # fmt: skip
    return "\n".join(lines)
