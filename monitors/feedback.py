"""Readers' feedback on a monitor's digests: marks per (monitor, chat), the view each chat gets of a shared run, and
"why this story".

A run collects, critiques and writes its digest once; what one reader sees of it (of a subscriber's `/digest`
preview too: `monitors.runner.digest_monitor_id`) is decided per chat when its delivery is built
(`MonitorFeedback.view_for`, through `decide`, the one place `research.reader_view` is called; a briefing's section
calls `decide` too), from that chat's marks on that monitor. The decision is stored with the delivery
(`reader_views`), so a resend shows the same stories, `/more 3` means story 3 as that chat saw it, and `/why`
explains what it was shown, its reports counted as that chat got them (its outlet rules' recount).

With an embedding model configured (`embedder`), a story's features also carry its vector: the mean of its
reports' vectors as the run stored them (`ItemEmbedder.stored_vectors`, never a new request at delivery), and a
mark keeps the vector of the story it was made on, so the view can decide by meaning (`research.VectorModel`);
reports without stored vectors leave the words to decide. A mark without a vector of that model (imported, or made
before the embedder) gets its title's embedding (`give_vectors`, its tokens counted as the chat's "embedding"
usage) at import, in the background after the chat marks again (`vectors_later`: a press is answered at once, even
while the embedding server is away), and at the start of each run of the monitor (`vectors_before_run`), so the
marks have vectors before that run's views are decided.

A briefing's section is marked like a digest: its view (`briefing_section_views`, stories numbered once over the
section's merged digests, as the reader saw them) is stored under the newest run the section read and linked to the
briefing that carried it (`storage.repositories.feedback.BRIEFING_RUN_KEY`); `/more 2 #3` names story 2 of monitor
#3's section, and a bare `/more 2` after a briefing of several sections asks which.

Guarantees: a mark acts only on the chat that made it, on the monitor of the digest it was made on; a mark names a
digest the chat received (a part of it confirmed sent), so a press forged, stale or from another chat changes
nothing; no model is needed anywhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any, Final

from kernel import MAX_BUTTONS, Button, Clock, utc_now
from monitors.reader_rules import run_entries
from monitors.runner import digest_monitor_id, item_of_record
from research import (
    CITATION,
    BriefingSection,
    Development,
    Digest,
    ItemEmbedder,
    Mark,
    MarkKind,
    ReaderView,
    Recount,
    Story,
    StoryDecision,
    StoryFeatures,
    StoryVector,
    digest_stories,
    escape_markdown,
    reader_view,
    record_usage,
    story_features,
    story_vector,
    told_in,
)
from sources import Item
from storage import Database, FeedbackMarkRecord, ItemWithScores, RunRecord, StoredView
from storage.repositories import BRIEFING_RUN_KEY, FeedbackRepository

__all__ = [
    "FEEDBACK_PLATFORMS",
    "DecidedDigest",
    "FeedbackError",
    "MarkResult",
    "MonitorFeedback",
    "acknowledgment",
    "briefing_buttons",
    "briefing_section_views",
    "digest_buttons",
    "dropped_line",
    "reader_digest",
    "story_buttons",
]

logger = logging.getLogger(__name__)

_FEATURE_CACHE_RUNS: Final = 32
"""Runs whose stories' features a process keeps: a run goes to all its chats within one delivery pass or two."""

KIND_WORDS: Final[dict[str, str]] = {
    "more": "👍 more like this",
    "less": "👎 less like this",
    "fewer": "fewer like this",
}


FEEDBACK_PLATFORMS: Final = frozenset({"telegram", "slack"})
"""Platforms whose digests carry a row of feedback buttons per story (the terminal types /more, /less…)."""

_STORY_ACTIONS: Final = (
    ("👍", "more"),
    ("👎", "less"),
    ("🔇 outlet", "mute"),
    ("fewer like this", "fewer"),
    ("why?", "why"),
)
"""A story's row of buttons: label and the command it sends (with the story's number and the run)."""

BRIEFING_BUTTON_STORIES: Final = MAX_BUTTONS // len(_STORY_ACTIONS)
"""Stories of a briefing that get a row of buttons (the first ones): a whole row each within one message's buttons."""


def story_buttons(story: int, run_id: int, *, label: str | None = None, row: int | None = None) -> tuple[Button, ...]:
    """The row of feedback buttons under story `story` of run `run_id`'s digest (`label` names the story as the reader
    saw it: "2." in a digest, "#3·2" in a briefing; `row` its row among the message's): each sends the command a
    person could type (`/less 3 run 41`), so a press goes through the same parser and checks."""
    shown = label or f"{story}."
    return tuple(
        Button(label=f"{shown} {text}" if index == 0 else text, callback_data=f"/{command} {story} run {run_id}",
               row=row or story)
        for index, (text, command) in enumerate(_STORY_ACTIONS)
    )  # fmt: skip


def acknowledgment(
    story: int, run_id: int, done: str, *, undo: str | None = None, label: str | None = None
) -> tuple[Button, ...]:
    """The row a press leaves under story `story` (`label`: as the reader saw it, "#3·2" in a briefing): what was
    recorded ("✓ 👎 recorded"; pressing it asks /why) and its undo (`undo`, a command; by default this chat's mark on
    the story is removed)."""
    undo_data = undo or f"/unmark {story} run {run_id}"
    return (
        Button(label=f"{label or f'{story}.'} ✓ {done}"[:64], callback_data=f"/why {story} run {run_id}", row=story),
        Button(label="undo", callback_data=undo_data[:64], row=story),
    )


def briefing_buttons(sections: object) -> tuple[tuple[Button, ...], str]:
    """A briefing's rows of feedback buttons, from its stored `feedback_sections` (each section's monitor, the run its
    view is stored under and its number of stories): one row per story, labelled "#3·2", for the first
    `BRIEFING_BUTTON_STORIES` stories; and the one line saying the others have none ("" when all have them)."""
    rows: list[Button] = []
    total = 0
    beyond: int | None = None
    for section in sections if isinstance(sections, list) else []:
        if not isinstance(section, dict):
            continue
        monitor_id, run_id, stories = section.get("monitor_id"), section.get("run_id"), section.get("stories")
        if not isinstance(monitor_id, int) or not isinstance(run_id, int) or not isinstance(stories, int):
            continue
        for story in range(1, stories + 1):
            total += 1
            if total <= BRIEFING_BUTTON_STORIES:
                rows += story_buttons(story, run_id, label=f"#{monitor_id}·{story}", row=total)
            elif beyond is None:
                beyond = monitor_id
    if beyond is None:
        return tuple(rows), ""
    note = (
        f"_Buttons for the first {BRIEFING_BUTTON_STORIES} of {total} stories; mark the others by typing, e.g. "
        f"/less 2 #{beyond}_"
    )
    return tuple(rows), note


DecidedDigest = tuple[int, ReaderView, dict[str, Any]] | None
"""One digest of a briefing's section as the reader's feedback decided it: its run id, view and record
(`MonitorFeedback.decide`); None where the view could not be decided."""


def briefing_section_views(
    sections: Sequence[BriefingSection], decided: Mapping[int, Sequence[DecidedDigest]]
) -> dict[int, dict[str, Any]]:
    """The view a reader was shown of each section of a briefing that can be marked, stored like a digest's under the
    newest run the section read (the keys, in the briefing's order); `decided` holds each monitor's digests, newest
    first, as `_section_view` reads them. Each view names every markable section (monitor and topic), so a bare
    `/more 2` can ask which."""
    markable: list[tuple[BriefingSection, int, dict[str, Any]]] = []
    for section in sections:
        mine = decided.get(section.monitor_id, [])
        anchor = next((one[0] for one in mine if one is not None), None)
        view = _section_view(section.monitor_id, mine, section.origins) if anchor is not None else None
        if anchor is not None and view is not None:
            markable.append((section, anchor, view))
    named = [[section.monitor_id, section.topic] for section, _, _ in markable]
    return {anchor: view | {"briefing_sections": named} for _, anchor, view in markable}


def _section_view(
    monitor_id: int, decided: Sequence[DecidedDigest], origins: Sequence[tuple[int, int]]
) -> dict[str, Any] | None:
    """The view a reader was shown of a briefing's section of monitor `monitor_id`: its stories numbered once over
    the section's merged digests, in the order shown (`origins`: for story n, the index of its digest among `decided`
    and of its development in that digest as the reader got it), each with the run and the story number of the
    shared digest it comes from; the stories the reader's feedback left out of any of those digests as `dropped`.
    None (no view, no buttons) where a digest it shows could not be decided."""
    if any(d >= len(decided) or decided[d] is None for d, _ in origins):
        return None
    stories: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []

    def add(run_id: int, decision: StoryDecision, record: dict[str, Any], into: list[dict[str, Any]]) -> None:
        found = record.get("stories", [])
        entry = found[decision.index] if decision.index < len(found) else {}
        stories.append({**entry, "shared": {"run_id": run_id, "story": decision.index + 1}})
        into.append({**_decision_json(decision), "index": len(stories) - 1})

    for digest_index, development in origins:
        one = decided[digest_index]
        assert one is not None
        run_id, view, record = one
        if development >= len(view.kept):
            return None
        add(run_id, view.kept[development], record, kept)
    runs: list[int] = []
    for one in decided:
        if one is not None:
            runs.append(one[0])
            for decision in one[1].dropped:
                add(one[0], decision, one[2], dropped)
    records = [one[2] for one in decided if one is not None]
    return {
        "monitor_id": monitor_id,
        "language": records[0].get("language", "") if records else "",
        "stories": stories,
        "marks": records[0].get("marks", 0) if records else 0,
        "kept": kept,
        "dropped": dropped,
        "runs": runs,
    }


def digest_buttons(run_id: int, stories: int) -> tuple[Button, ...]:
    """Every story's row of feedback buttons, for a digest showing `stories` stories."""
    return tuple(button for n in range(1, stories + 1) for button in story_buttons(n, run_id))[:MAX_BUTTONS]


class FeedbackError(Exception):
    """A mark or question that cannot be acted on; the message says why, in words for the chat."""


@dataclass(frozen=True, kw_only=True)
class MarkResult:
    """What a mark did: its sentence for the chat and the digest it was made on."""

    text: str
    run_id: int
    monitor_id: int
    story: int | None
    outlet: str | None = None
    """For a mute: the outlet muted."""
    label: str = ""
    """The story as the reader saw it ("2." in a digest, "#3·2" in a briefing), for the row acknowledging a press."""


def dropped_line(count: int) -> str:
    """The one line a digest carries when this reader's feedback left stories out."""
    return f"_{count} stor{'y' if count == 1 else 'ies'} left out by your feedback — /why dropped_"


def reader_digest(digest: Digest, view: ReaderView) -> Digest:
    """The shared digest as one reader gets it: the kept developments in the view's order, the disputed claims and
    sources they still cite, and a headline from the first story when the shared one led with another."""
    developments = [digest.developments[d.index] for d in view.kept if d.index < len(digest.developments)]
    if not view.changed:
        return digest
    cited_numbers = {n for d in developments for n in d.citations}
    disputed = [c for c in digest.disputed if not c.citations or cited_numbers & set(c.citations)]
    cited_numbers |= {n for c in disputed for n in c.citations}
    headline = digest.headline
    if not developments:
        headline = "Every story of this digest was left out by your feedback"
    elif view.kept[0].index != 0:
        headline = _plain(developments[0].text)
    return digest.model_copy(
        update={
            "headline": headline,
            "developments": developments,
            "disputed": disputed,
            "cited": [c for c in digest.cited if c.number in cited_numbers],
        }
    )


def _plain(text: str, limit: int = 200) -> str:
    """A development's text as a headline: its citations left out, cut at `limit`."""
    flat = " ".join(CITATION.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


UNWEIGHED: Final = (
    "could not be weighed against this digest (an error, logged), so it showed every story in the monitor's order"
)
"""What /why says of a story of a plain view (`whole_view`): the reader's feedback could not be applied."""


def whole_view(stories: int) -> ReaderView:
    """The plain view of a digest of `stories` stories: every one kept, in the monitor's order, none left out, each
    saying the feedback could not be weighed (`UNWEIGHED`)."""
    return ReaderView(
        kept=tuple(StoryDecision(index=n, kept=True, reason=UNWEIGHED) for n in range(stories)), dropped=()
    )


def _words_story(development: Development, topic: str | None) -> dict[str, Any]:
    """A development's entry described by its own words (its items are gone, or unreadable): no outlets, no
    scores."""
    text = _plain(development.text)
    features = story_features(
        [Item(id="development", source="digest", url="about:blank", title=text)], topic=topic, title=text
    )
    plain = StoryFeatures(title=features.title, outlets=(), terms=features.terms)
    return {"features": plain.to_json(), "scores": {}}


def _decision_json(decision: StoryDecision) -> dict[str, Any]:
    return {
        "index": decision.index,
        "up": round(decision.up, 3),
        "down": round(decision.down, 3),
        "mark_id": decision.mark_id,
        "reason": decision.reason,
        "by": decision.by,
    }


def _decision(data: dict[str, Any], *, kept: bool) -> StoryDecision:
    return StoryDecision(
        index=int(data.get("index", 0)),
        kept=kept,
        up=float(data.get("up", 0.0)),
        down=float(data.get("down", 0.0)),
        mark_id=data.get("mark_id"),
        reason=str(data.get("reason", "")),
        by=str(data.get("by", "")),
    )


def view_of(stored: dict[str, Any]) -> ReaderView:
    """The `ReaderView` stored with a delivery."""
    return ReaderView(
        kept=tuple(_decision(d, kept=True) for d in stored.get("kept", ())),
        dropped=tuple(_decision(d, kept=False) for d in stored.get("dropped", ())),
    )


def _mark(record: FeedbackMarkRecord) -> Mark:
    kind: MarkKind = record.kind if record.kind in ("more", "less", "fewer", "mute") else "less"  # type: ignore[assignment]
    return Mark(
        id=record.id,
        kind=kind,
        features=StoryFeatures(
            title=record.title, outlets=record.outlets, terms=record.terms, vector=StoryVector.from_json(record.vector)
        ),
    )


def _reports_line(scores: dict[str, Any], reader: dict[str, Any] | None, features: StoryFeatures) -> str:
    """What /why says of a story's reports: as this chat got them, and the run's count (which the shared digest and
    its web page show) when this chat's outlet rules thinned the story."""

    def counted(reports: int, outlets: Sequence[str]) -> str:
        named = ", ".join(outlets[:5]) + (f" and {len(outlets) - 5} more" if len(outlets) > 5 else "")
        return f"{reports} new report{'s' * (reports != 1)} of it, from {named or 'unknown outlets'}"

    shared = counted(int(scores.get("reports") or 0), scores.get("outlets") or features.outlets)
    if not reader:
        return f"It is a new story for this monitor: {shared}."
    mine = counted(int(reader.get("reports") or 0), reader.get("outlets") or ())
    return (
        f"It is a new story for this monitor: {mine} reach this chat. The run has {shared}, as the shared digest and "
        "its web page count them: this chat's outlet rules left the others out."
    )


def _scores(entries: Sequence[ItemWithScores]) -> dict[str, Any]:
    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(fmean(known), 3) if known else None

    ranks = [e.scores.rank for e in entries if e.scores.rank is not None]
    return {
        "reports": len(entries),
        "relevance": mean([e.scores.relevance for e in entries]),
        "credibility": mean([e.scores.credibility for e in entries]),
        "score": mean([e.scores.score for e in entries]),
        "best_rank": min(ranks) if ranks else None,
    }


def _told(development: Development, told: Sequence[Story]) -> dict[str, Any]:
    """How many reports, from which outlets, the run has of a development's story (its whole cluster, as the digest's
    "+N more reports" counts it for every reader)."""
    story = told_in(development, told)
    if story is None:
        return {}
    return {"reports": len(story.items), "outlets": sorted({item.outlet for item in story.items if item.outlet})}


def _recounted(stories: list[dict[str, Any]], digest: Digest, recounted: Sequence[Recount]) -> list[dict[str, Any]]:
    """The stories with this reader's own count of reports and outlets (`"reader"`) where its outlet rules thinned
    them (the shared entries, kept for other readers, are not changed)."""
    if not recounted:
        return stories
    shown = []
    for story, development in zip(stories, digest.developments, strict=True):
        recount = told_in(development, recounted)
        if recount is not None:
            story = story | {"reader": {"reports": recount.reports, "outlets": list(recount.outlets)}}
        shown.append(story)
    return shown


class MonitorFeedback:
    """Marks, each chat's view of a run, and the explanations; one per process (`MonitorService.feedback`)."""

    def __init__(
        self,
        database: Database,
        *,
        clock: Clock = utc_now,
        embedder: ItemEmbedder | None = None,
    ) -> None:
        self._marks = FeedbackRepository(database)
        self._clock = clock
        self._embedder = embedder
        """The configured embedding model, whose stored item vectors give each story its vector (None: words)."""
        self._features: OrderedDict[tuple[int, str, tuple[tuple[int, ...], ...]], list[dict[str, Any]]] = OrderedDict()
        self._database = database
        self._giving: dict[tuple[int, int], asyncio.Task[int]] = {}
        """Background `give_vectors` per (monitor, chat) under way (`vectors_later`): one at a time for a reader."""

    # ---- the view at delivery -------------------------------------------------------------------------------

    async def view_for(
        self,
        run: RunRecord,
        chat_id: int,
        digest: Digest,
        *,
        items: Sequence[ItemWithScores],
        topic: str | None,
        language: str,
        resend: bool,
        recounted: Sequence[Recount] = (),
    ) -> ReaderView:
        """What `chat_id` gets of the run's `digest`: the stored view when a part of it went out already (a resend
        shows the same stories), else a new one from the chat's marks now, stored before the first part is sent.
        `items` are the run's stored items (read once per run by the delivery worker, which the rules use too);
        `recounted` the stories this chat's outlet rules thinned, whose reports `/why` counts as this chat got them."""
        if resend:
            stored = await self._marks.pending_view(run.id, chat_id)
            if stored is not None:
                return view_of(stored)
        monitor_id = digest_monitor_id(run)  # a `/digest` preview is its reader's view of the monitor too
        marks = await self._marks.marks(monitor_id, chat_id) if monitor_id is not None else []
        view, record = await self.decide(
            run, digest, marks, items=items, topic=topic, language=language, recounted=recounted
        )
        await self._marks.save_view(run.id, chat_id, record, now=self._clock())
        return view

    async def decide(
        self,
        run: RunRecord,
        digest: Digest,
        marks: Sequence[FeedbackMarkRecord],
        *,
        items: Sequence[ItemWithScores],
        topic: str | None,
        language: str,
        recounted: Sequence[Recount] = (),
    ) -> tuple[ReaderView, dict[str, Any]]:
        """What a reader with these `marks` (its own, on the run's monitor) keeps of the run's `digest`, and the
        record of it (`view_for` stores it with the delivery; a briefing's section takes the view only). The one
        place `research.reader_view` is called.

        Where the marks cannot be weighed (a mark whose stored term weights break the arithmetic, e.g. imported
        with out-of-range numbers), the view is the plain one (`whole_view`: every story, the monitor's order,
        each saying why) over the same stories, logged: the reader gets the digest whole, with buttons, and a
        mark or /why names the story it saw. Where the stories' features cannot be read from the run's items,
        each development's own words describe it."""
        try:
            found = await self._stories(run, digest, items, topic=topic, language=language)
        except Exception:
            logger.exception("run %d: its stories' features could not be read; their words describe them", run.id)
            found = [_words_story(development, topic) for development in digest.developments]
        stories = _recounted(found, digest, recounted)
        try:
            view = reader_view([StoryFeatures.from_json(s["features"]) for s in stories], [_mark(m) for m in marks])
        except Exception:
            logger.exception("run %d: %d marks could not be weighed; the digest is shown whole", run.id, len(marks))
            view = whole_view(len(stories))
        record = {
            "monitor_id": digest_monitor_id(run),
            "language": language,
            "stories": stories,
            "marks": len(marks),
            "kept": [_decision_json(d) for d in view.kept],
            "dropped": [_decision_json(d) for d in view.dropped],
        }
        return view, record

    async def _stories(
        self, run: RunRecord, digest: Digest, stored: Sequence[ItemWithScores], *, topic: str | None, language: str
    ) -> list[dict[str, Any]]:
        """Each development's features and scores, from the run's stored items it cites (kept for a few runs)."""
        # one reader's rules may have taken developments out: the cache is per shown list, not per run
        key = (run.id, language, tuple(tuple(d.citations) for d in digest.developments))
        if key in self._features:
            self._features.move_to_end(key)
            return self._features[key]
        by_url = {entry.item.url: entry for entry in stored}
        told = digest_stories(digest, run_entries(stored))
        url_of = {cited.number: cited.url for cited in digest.cited}
        cited_of = [
            [by_url[url_of[n]] for n in development.citations if n in url_of and url_of[n] in by_url]
            for development in digest.developments
        ]
        items_of = [[item for e in cited if (item := item_of_record(e.item)) is not None] for cited in cited_of]
        vectors: dict[str, list[float]] = {}
        if self._embedder is not None:
            vectors = await self._embedder.stored_vectors([item for items in items_of for item in items])
        stories = []
        for development, cited, items in zip(digest.developments, cited_of, items_of, strict=True):
            title = cited[0].item.title if cited else _plain(development.text)
            features = story_features(items, topic=topic, title=title)
            if vectors and self._embedder is not None:
                found = [vectors[item.id] for item in items if item.id in vectors]
                features = replace(features, vector=story_vector(found, model=self._embedder.vector_model))
            if not cited:  # a development whose items are gone: its own words
                stories.append(_words_story(development, topic) | {"scores": _scores(cited) | _told(development, told)})
                continue
            stories.append({"features": features.to_json(), "scores": _scores(cited) | _told(development, told)})
        self._features[key] = stories
        while len(self._features) > _FEATURE_CACHE_RUNS:
            self._features.popitem(last=False)
        return stories

    # ---- marks --------------------------------------------------------------------------------------------

    def _missing_vectors(self, marks: Sequence[FeedbackMarkRecord]) -> list[FeedbackMarkRecord]:
        """The story marks among `marks` with no vector of the configured embedding model."""
        if self._embedder is None:
            return []
        model = self._embedder.vector_model
        return [
            mark
            for mark in marks
            if mark.kind in ("more", "less", "fewer")
            and mark.title.strip()
            and (mark.vector or {}).get("model") != model
        ]

    async def give_vectors(
        self, monitor_id: int, chat_id: int, *, marks: Sequence[FeedbackMarkRecord] | None = None
    ) -> int:
        """Give this reader's story marks on a monitor (`marks`, else read) that carry no vector of the configured
        embedding model one: the embedding of the marked story's title (the embedding cache first, then the model, in
        batches), its tokens added to the chat's "embedding" usage. Marks come without one from an import (a file
        holds no vectors: they belong to one model) or from before the embedder was configured; this runs at import,
        in the background after the reader marks again (`vectors_later`) and before each run of the monitor
        (`vectors_before_run`), never at delivery. Returns how many marks got a vector (0 without an embedder, or
        when the model cannot be reached: the words decide for those marks meanwhile)."""
        if self._embedder is None:
            return 0
        model = self._embedder.vector_model
        missing = self._missing_vectors(marks if marks is not None else await self._marks.marks(monitor_id, chat_id))
        if not missing:
            return 0
        try:
            embedded = await self._embedder.embed_items(
                [Item(id=f"mark:{mark.id}", source="feedback", url="about:blank", title=mark.title) for mark in missing]
            )
        except Exception:  # the import or the mark stands; the words decide for these marks meanwhile
            logger.exception("monitor %d, chat %d: marks could not be given vectors", monitor_id, chat_id)
            return 0
        await record_usage(self._database, chat_id=chat_id, now=self._clock(), usage=embedded.usage, kind="embedding")
        vectors = {}
        for mark in missing:
            found = embedded.vectors.get(f"mark:{mark.id}")
            vector = story_vector([found], model=model) if found else None
            if vector is not None:
                vectors[mark.id] = vector.to_json()
        await self._marks.set_vectors(vectors)
        return len(vectors)

    def vectors_later(self, monitor_id: int, chat_id: int) -> None:
        """`give_vectors` in the background (after a press: the press is answered without waiting for the embedding
        model); its failure is logged, never raised. One at a time per (monitor, chat): a press while one is under
        way adds nothing, and what it misses the next run's `vectors_before_run` gives."""
        key = (monitor_id, chat_id)
        if self._embedder is None or key in self._giving:
            return
        task = asyncio.create_task(self._give_logged(monitor_id, chat_id), name=f"mark-vectors-{monitor_id}-{chat_id}")
        self._giving[key] = task
        task.add_done_callback(lambda done: self._forget_giving(key, done))

    def _forget_giving(self, key: tuple[int, int], task: asyncio.Task[int]) -> None:
        if self._giving.get(key) is task:  # not a newer one for the same reader
            del self._giving[key]

    async def _give_logged(
        self, monitor_id: int, chat_id: int, marks: Sequence[FeedbackMarkRecord] | None = None
    ) -> int:
        try:
            return await self.give_vectors(monitor_id, chat_id, marks=marks)
        except Exception:  # a background task: what it could not do, the next run does
            logger.exception("monitor %d, chat %d: marks could not be given vectors", monitor_id, chat_id)
            return 0

    async def vectors_settled(self, within: float | None = None) -> list[tuple[int, int]]:
        """Wait for the background `give_vectors` under way (`vectors_later`), at most `within` seconds (None: until
        they end); those still running then are cancelled and logged. Returns the (monitor, chat) pairs left without
        their vectors: the next run of each monitor gives them (`vectors_before_run`)."""
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + max(0.0, within)
        while self._giving:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                break
            await asyncio.wait(list(self._giving.values()), timeout=left)
            for key, task in list(self._giving.items()):
                if task.done():
                    self._giving.pop(key, None)
        cut = list(self._giving.items())
        self._giving.clear()
        for _, task in cut:
            task.cancel()
        await asyncio.gather(*(task for _, task in cut), return_exceptions=True)
        left_over = [key for key, _ in cut]
        for monitor_id, chat_id in left_over:
            logger.warning(
                "stopping: monitor %d, chat %d: the marks' vectors were not given within %.1f s; the next run of the "
                "monitor gives them",
                monitor_id,
                chat_id,
                within or 0.0,
            )
        return left_over

    async def vectors_before_run(self, monitor_id: int) -> int:
        """Give every reader's marks on the monitor that lack a vector of the configured embedding model one, before a
        run of it (whose views those marks decide); the number given. Never raises: a failure leaves the words to
        decide for those marks."""
        if self._embedder is None:
            return 0
        try:
            by_chat: dict[int, list[FeedbackMarkRecord]] = {}
            for mark in self._missing_vectors(await self._marks.of_monitor(monitor_id)):
                by_chat.setdefault(mark.chat_id, []).append(mark)
        except Exception:
            logger.exception("monitor %d: its marks could not be read for their vectors", monitor_id)
            return 0
        given = 0
        for chat_id, marks in by_chat.items():
            given += await self._give_logged(monitor_id, chat_id, marks)
        return given

    async def _digest_of(
        self, chat_id: int, *, run_id: int | None, monitor_id: int | None, command: str = "more", story: str = "n"
    ) -> StoredView:
        """The view named (`run_id`), else the last one this chat received (of `monitor_id`): a digest's, or a
        briefing's section; after a briefing of several sections with no monitor named, which one is asked.
        `command` and `story` shape the example in that question; /why says "explain" where the others say "mark"."""
        verb = "explain" if command == "why" else "mark"
        if run_id is not None:
            stored = await self._marks.view(run_id, chat_id)
            if stored is None or stored.monitor_id is None:
                raise FeedbackError(
                    f"That digest or briefing never reached this chat, so there is nothing to {verb} in it."
                )
            return stored
        found = await self._marks.last_views(chat_id, monitor_id=monitor_id)
        if not found:
            where = f" of monitor #{monitor_id}" if monitor_id is not None else ""
            raise FeedbackError(
                f"No digest or briefing{where} has reached this chat yet, so there is no story to {verb}."
            )
        sections = found[0].view.get("briefing_sections") or []
        if monitor_id is None and len(sections) > 1:
            named = ", ".join(f"#{m} {escape_markdown(topic)}" for m, topic in sections)
            raise FeedbackError(
                f"Your last briefing had stories of {len(sections)} monitors ({named}): say which, e.g. "
                f"/{command} {story} #{sections[0][0]}."
            )
        return found[0]

    @staticmethod
    def _what(stored: StoredView) -> str:
        """What the view was, in words: "That digest", or "Monitor #3's section of that briefing"."""
        if BRIEFING_RUN_KEY in stored.view:
            return f"Monitor #{stored.monitor_id}'s section of that briefing"
        return "That digest"

    @staticmethod
    def _label(stored: StoredView, story: int) -> str:
        """Story `story` as the reader saw it: "2." in a digest, "#3·2" in a briefing."""
        return f"#{stored.monitor_id}·{story}" if BRIEFING_RUN_KEY in stored.view else f"{story}."

    def _story(self, stored: StoredView, story: int) -> tuple[StoryDecision, dict[str, Any]]:
        view = view_of(stored.view)
        if not 1 <= story <= len(view.kept):
            count = len(view.kept)
            what = self._what(stored)
            raise FeedbackError(
                f"{what} showed this chat {count} stor{'y' if count == 1 else 'ies'}; pick a number from 1 to {count}."
                if count
                else f"{what} showed this chat no story."
            )
        decision = view.kept[story - 1]
        stories = stored.view.get("stories", [])
        return decision, stories[decision.index] if decision.index < len(stories) else {}

    async def mark(
        self, chat_id: int, kind: MarkKind, story: int, *, run_id: int | None = None, monitor_id: int | None = None
    ) -> MarkResult:
        """Mark story `story` (as this chat saw it) of a digest it received: the last one (of `monitor_id`, if
        given) or run `run_id`'s. `mute` mutes the story's outlets."""
        stored = await self._digest_of(chat_id, run_id=run_id, monitor_id=monitor_id, command=kind, story=str(story))
        assert stored.monitor_id is not None  # last_views and view keep monitor digests only
        _, entry = self._story(stored, story)
        features = StoryFeatures.from_json(entry.get("features", {}))
        if kind == "mute":
            if not features.outlets:
                raise FeedbackError(f"Story {story} names no outlet to mute.")
            muted = await self.mute(chat_id, features.outlets[0], monitor_id=stored.monitor_id, run_id=stored.run_id)
            return replace(muted, story=story, label=self._label(stored, story))
        await self._marks.add(
            FeedbackMarkRecord(
                monitor_id=stored.monitor_id,
                chat_id=chat_id,
                kind=kind,
                run_id=stored.run_id,
                story=story,
                title=features.title,
                outlets=features.outlets,
                terms=dict(features.terms),
                vector=features.vector.to_json() if features.vector is not None else None,
            ),
            now=self._clock(),
        )
        self.vectors_later(stored.monitor_id, chat_id)  # earlier marks made without the embedder, or imported
        effect = {
            "more": "stories like it rank higher in this chat's next digests",
            "less": "stories like it, or from its outlet, rank lower or are left out of this chat's next digests",
            "fewer": "stories like it rank lower or are left out of this chat's next digests",
        }[kind]
        text = (
            f"Recorded {KIND_WORDS[kind]} on story {story} “{escape_markdown(features.title[:120])}” of monitor "
            f"#{stored.monitor_id}: "
            f"{effect}. Undo: /unmark {story} run {stored.run_id}"
        )
        return MarkResult(
            text=text,
            run_id=stored.run_id,
            monitor_id=stored.monitor_id,
            story=story,
            label=self._label(stored, story),
        )

    async def unmark(
        self, chat_id: int, story: int, *, run_id: int | None = None, monitor_id: int | None = None
    ) -> MarkResult:
        """Remove this chat's marks on story `story` of a digest (or briefing section) it received."""
        stored = await self._digest_of(
            chat_id, run_id=run_id, monitor_id=monitor_id, command="unmark", story=str(story)
        )
        assert stored.monitor_id is not None
        self._story(stored, story)
        removed = await self._marks.undo_story(stored.monitor_id, chat_id, stored.run_id, story)
        if not removed:
            text = f"Story {story} of that digest had no mark from this chat; nothing changed."
        else:
            text = (
                f"Removed this chat's mark on story {story} “{escape_markdown(removed[0].title[:120])}”; it no longer "
                "affects digests."
            )
        label = self._label(stored, story)
        return MarkResult(text=text, run_id=stored.run_id, monitor_id=stored.monitor_id, story=story, label=label)

    async def mute(
        self, chat_id: int, outlet: str, *, monitor_id: int | None = None, run_id: int | None = None
    ) -> MarkResult:
        """Leave `outlet`'s stories out of this chat's digests of a monitor (the last digest's, unless named)."""
        stored = await self._digest_of(chat_id, run_id=run_id, monitor_id=monitor_id, command="mute", story=outlet)
        assert stored.monitor_id is not None
        name = outlet.strip().casefold()
        if not name:
            raise FeedbackError("Name the outlet to mute, e.g. /mute example.com")
        await self._marks.add(
            FeedbackMarkRecord(
                monitor_id=stored.monitor_id, chat_id=chat_id, kind="mute", title=name, outlets=(name,), run_id=None
            ),
            now=self._clock(),
        )
        text = (
            f"Muted {escape_markdown(name)} on monitor #{stored.monitor_id}: stories only it reports are left out of "
            f"this chat's next digests (other subscribers still get them). Undo: /unmute {escape_markdown(name)}"
        )
        return MarkResult(text=text, run_id=stored.run_id, monitor_id=stored.monitor_id, story=None, outlet=name)

    async def unmute(self, chat_id: int, outlet: str, *, monitor_id: int | None = None) -> str:
        name = outlet.strip().casefold()
        removed = await self._marks.unmute(chat_id, name, monitor_id=monitor_id)
        if not removed:
            return f"{escape_markdown(name)} was not muted in this chat; nothing changed."
        return f"Unmuted {escape_markdown(name)}: its stories come back in this chat's next digests."

    # ---- why ------------------------------------------------------------------------------------------------

    async def why(
        self, chat_id: int, story: int | None, *, run_id: int | None = None, monitor_id: int | None = None
    ) -> str:
        """In plain words: what put story `story` in this chat's digest, or (None) what was left out and why."""
        which = "dropped" if story is None else str(story)
        stored = await self._digest_of(chat_id, run_id=run_id, monitor_id=monitor_id, command="why", story=which)
        stories = stored.view.get("stories", [])
        view = view_of(stored.view)
        head = f"Digest of monitor #{stored.monitor_id} (run {stored.run_id})"
        if BRIEFING_RUN_KEY in stored.view:
            runs = ", ".join(str(r) for r in stored.view.get("runs", [stored.run_id]))
            head = f"Briefing section of monitor #{stored.monitor_id} (run{'s' * (',' in runs)} {runs})"
        if story is None:
            if not view.dropped:
                marks = int(stored.view.get("marks", 0))
                why = (
                    "this chat had no mark on the monitor then"
                    if not marks
                    else f"none of its {marks} marks left one out"
                )
                return f"{head}: nothing was left out by this chat's feedback ({why})."
            lines = [f"{head}: {len(view.dropped)} left out by this chat's feedback:"]
            for d in view.dropped:
                title = StoryFeatures.from_json(stories[d.index]["features"]).title if d.index < len(stories) else "?"
                lines.append(f"- “{escape_markdown(title[:120])}”: {d.reason}")
            lines.append("Undo a mark with /unmark <n> on the digest you marked, or /unmute <outlet>.")
            return "\n".join(lines)
        decision, entry = self._story(stored, story)
        features = StoryFeatures.from_json(entry.get("features", {}))
        scores = entry.get("scores", {})
        parts = [f"{head}, story {story}: “{escape_markdown(features.title[:160])}”."]
        parts.append(_reports_line(scores, entry.get("reader"), features))
        numbers = []
        for key, words in (("relevance", "relevance"), ("credibility", "credibility"), ("score", "overall score")):
            value = scores.get(key)
            if isinstance(value, int | float):
                numbers.append(f"{words} {value:.2f}")
        if scores.get("best_rank") is not None:
            numbers.append(f"its best report ranked #{int(scores['best_rank']) + 1} of the run")
        if numbers:
            parts.append("Scores: " + ", ".join(numbers) + ".")
        shared = f"story {decision.index + 1} of the shared digest"
        if isinstance(origin := entry.get("shared"), dict):  # a briefing's story: the digest it comes from
            shared = f"story {origin.get('story')} of run {origin.get('run_id')}'s shared digest"
        if decision.reason:
            parts.append(f"Your feedback: {decision.reason} ({shared}).")
        elif int(stored.view.get("marks", 0)):
            parts.append(f"Your feedback did not touch it ({shared}).")
        else:
            parts.append("This chat had no feedback on the monitor then; the order is the monitor's own.")
        return " ".join(parts)
