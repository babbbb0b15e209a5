"""Each chat's briefing: one message at the chat's chosen time covering every monitor it reads that way.

Guarantees: a briefing is assembled from stored runs (nothing is collected for it); it is made once per chat and
time however many workers look (the chat's next briefing time moves in one conditional update first); after
downtime over several briefing times there is one catch-up briefing, never a backlog (like monitor runs); it goes
through the outbox like a digest (one row for the chat: sent once, retried, rate-limited). Chats whose briefings
cover the same runs in the same language and timezone share one assembly and one set of files.

Each section is the reader's view of its monitor (its rules, then its feedback through `MonitorFeedback.decide`), and
that view is stored in the claim's transaction for the chat (`briefing_section_views`: the section's stories numbered
once over its merged digests, exactly as shown), under the newest run the section read, so `/more 2 #3`, `/why` and
the briefing's buttons (`feedback_sections`, one row per story) mark what the reader actually received.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final
from zoneinfo import ZoneInfo

from monitors.delivery import valid_digest
from monitors.feedback import DecidedDigest, MonitorFeedback, briefing_section_views, reader_digest
from monitors.notices import BRIEFING_KIND
from monitors.reader_rules import rules_view, run_entries
from monitors.runner import item_of_record
from monitors.schedule import Schedule, ScheduleError, latest_due_time, parse_schedule
from monitors.service_base import MonitorStorage, ServiceStorage
from research import (
    Digest,
    ReaderRules,
    TopicDigests,
    assemble_briefing,
    filter_digest,
    render_briefing_markdown,
    volume_counts,
    write_stored_items_csv,
    write_volume_chart,
)
from sources import Item
from storage import (
    BriefingClaim,
    ChatRecord,
    FeedbackMarkRecord,
    ItemWithScores,
    MonitorRecord,
    RunOutcome,
    RunRecord,
    RunStatus,
)
from storage.repositories import (
    BriefingRepository,
    FeedbackRepository,
    ItemRepository,
    ReaderRuleRepository,
    RunRepository,
)

__all__ = ["BRIEFING_KIND", "BriefingService", "QueuedBriefing"]

logger = logging.getLogger(__name__)

WAIT_FOR_RUNS: Final = timedelta(minutes=10)
"""A briefing waits this long at most for its monitors' runs of the same time to finish."""
CHART_DAYS: Final = 7
"""The briefing's chart covers at most the last week."""
BRIEFING_PAGE: Final = 500
"""Chats looked at per database page; the delivery worker is woken after each page."""


@dataclass(frozen=True, kw_only=True)
class QueuedBriefing:
    """One briefing put in the outbox."""

    chat_id: int
    run_id: int
    topics: int
    with_news: int


@dataclass(frozen=True, kw_only=True)
class _BriefingFiles:
    artifacts: dict[str, str]
    chart_topics: dict[str, int]
    """Items the chart drew per topic (its bars' split), most first."""


@dataclass(frozen=True, kw_only=True)
class _Assembled:
    text: str
    artifacts: dict[str, str]
    chart_topics: dict[str, int]
    topics: int
    with_news: int
    run_ids: list[int]
    views: dict[int, dict[str, Any]]
    """The reader's view of each markable section, by the run it is stored under (`briefing_section_views`)."""
    feedback_sections: list[dict[str, int]]
    """Each markable section's monitor, view run and number of stories, in order: the briefing's buttons."""


@dataclass(frozen=True, kw_only=True)
class _Reader:
    """One chat's own rules and feedback marks on the monitors of its briefing."""

    rules: dict[int, ReaderRules]
    marks: dict[int, list[FeedbackMarkRecord]]

    def key(self) -> tuple[object, ...]:
        """What of the reader an assembly depends on: chats alike in it (and in runs, language, zone) share one."""
        marked = tuple((m, tuple(mark.id for mark in found)) for m, found in sorted(self.marks.items()))
        return tuple(sorted(self.rules.items())), marked


@dataclass(frozen=True, kw_only=True)
class _Readers:
    """A page of chats' stored rules and marks, by chat then monitor."""

    rules: dict[int, dict[int, dict[str, object]]]
    marks: dict[int, dict[int, list[FeedbackMarkRecord]]]

    def of(self, chat_id: int, monitor_ids: Sequence[int]) -> _Reader:
        mine = self.marks.get(chat_id, {})
        return _Reader(
            rules=_readable(self.rules.get(chat_id, {}), monitor_ids),
            marks={m: mine[m] for m in monitor_ids if mine.get(m)},
        )


class BriefingService(MonitorStorage):
    """Sets each chat's briefing time and sends the briefings that are due; built by `MonitorService`."""

    def __init__(
        self,
        storage: ServiceStorage,
        *,
        out_dir: Path,
        min_interval_seconds: int,
        feedback: MonitorFeedback | None = None,
    ) -> None:
        super().__init__(storage)
        database = storage.database
        self._feedback = feedback or MonitorFeedback(database, clock=storage.clock)
        """The process's one (`MonitorService.feedback`): each section is the reader's view, as its digest would be."""
        self._marks = FeedbackRepository(database)
        self._out_dir = out_dir / "briefings"
        self._min_interval = min_interval_seconds
        self._runs = RunRepository(database)
        self._items = ItemRepository(database)
        self._briefings = BriefingRepository(database)
        self._rules = ReaderRuleRepository(database)
        self._files_of_pass: dict[tuple[object, ...], _BriefingFiles] = {}
        """The CSV and chart written in this pass, by the runs they cover (chats reading the same runs share them)."""

    async def set_briefing(self, chat_id: int, schedule: Schedule | None) -> ChatRecord:
        """Give the chat a briefing at `schedule`'s times (None turns it off: digests come one by one again). The
        first briefing covers runs from now on; changing the time keeps what the next one covers."""
        chat = await self._chats.get(chat_id)
        if chat is None:
            raise LookupError(f"chat {chat_id} does not exist")
        if schedule is not None and schedule.min_gap_seconds() < self._min_interval:
            raise ScheduleError("A briefing cannot come that often; choose a daily or hourly time.")
        now = self._clock()
        updated = await self._chats.update(
            chat.id,
            briefing_schedule=schedule.to_text() if schedule else None,
            briefing_next_at=schedule.next_run(now) if schedule else None,
            briefing_since=(chat.briefing_since or now) if schedule else None,
        )
        if updated is None:
            raise LookupError(f"chat {chat_id} does not exist")
        logger.info("chat %d briefing: %s", chat.id, updated.briefing_schedule or "off")
        return updated

    @staticmethod
    def schedule_of(chat: ChatRecord) -> Schedule | None:
        """The chat's briefing schedule, or None (none set, or no longer readable)."""
        if not chat.briefing_schedule:
            return None
        try:
            return parse_schedule(chat.briefing_schedule, timezone=chat.timezone, min_interval_seconds=0)
        except ScheduleError:
            return None

    async def run_due(self) -> list[QueuedBriefing]:
        """Send every briefing due now (the scheduler calls this every minute); returns what was queued."""
        now = self._clock()
        queued: list[QueuedBriefing] = []
        shared: dict[tuple[object, ...], _Assembled | None] = {}
        self._files_of_pass = {}
        last_id = 0
        while page := await self._chats.briefings_due(now, after_id=last_id, limit=BRIEFING_PAGE):
            last_id = page[-1].id
            try:
                made = await self._brief_page(page, now, shared)
            except Exception:  # one page's failure must not stop the others'; its chats stay due for the next pass
                logger.exception("the briefings of chats %d to %d failed", page[0].id, page[-1].id)
                continue
            queued += made
            self._queued(len(made))  # the delivery worker starts on this page while the next is assembled
        return queued

    async def _brief_page(
        self, page: Sequence[ChatRecord], now: datetime, shared: dict[tuple[object, ...], _Assembled | None]
    ) -> list[QueuedBriefing]:
        """A page of due chats in a few queries, not a few per chat: their monitors in one query, pending and
        finished runs once per set of monitors, what was already sent on its own in one query, one assembly per
        set of runs, language and timezone, and every claim in one transaction."""
        monitor_sets = await self._subscriptions.in_briefings([chat.id for chat in page])
        pending: dict[tuple[tuple[int, ...], datetime], bool] = {}
        ready: list[tuple[ChatRecord, Schedule, datetime, tuple[int, ...], datetime]] = []
        for chat in page:
            schedule = self.schedule_of(chat)
            if schedule is None or chat.briefing_next_at is None:
                logger.error("chat %d has an unreadable briefing schedule %r", chat.id, chat.briefing_schedule)
                await self._chats.update(chat.id, briefing_next_at=None)
                continue
            due = latest_due_time(schedule, chat.briefing_next_at, now)
            monitor_ids = tuple(monitor_sets.get(chat.id, ()))
            if now - due < WAIT_FOR_RUNS:
                if (monitor_ids, due) not in pending:
                    pending[(monitor_ids, due)] = await self._runs_pending(monitor_ids, due)
                if pending[(monitor_ids, due)]:
                    continue  # the next pass looks again
            ready.append((chat, schedule, due, monitor_ids, chat.briefing_since or due - timedelta(days=1)))
        # Each set of monitors' finished runs read once, from the earliest start among its chats.
        earliest: dict[tuple[int, ...], datetime] = {}
        for _, _, _, monitor_ids, since in ready:
            earliest[monitor_ids] = min(since, earliest.get(monitor_ids, since))
        finished = {
            monitor_ids: await self._runs.finished_for_monitors(monitor_ids, after=after, until=now)
            for monitor_ids, after in earliest.items()
        }
        run_ids = {run.id for runs in finished.values() for run in runs}
        sent_alone = await self._runs.queued_for_chats(run_ids, [chat.id for chat, *_ in ready])
        readers = await self._readers([chat.id for chat, *_ in ready])
        claims: list[BriefingClaim] = []
        briefs: dict[int, _Assembled] = {}
        for chat, schedule, due, monitor_ids, since in ready:
            runs = [
                run
                for run in finished[monitor_ids]
                if run.finished_at is not None and run.finished_at > since and (run.id, chat.id) not in sent_alone
            ]
            assembled: _Assembled | None = None
            if runs:
                who = readers.of(chat.id, monitor_ids)
                key = (tuple(run.id for run in runs), chat.language, chat.timezone, due, who.key())
                if key not in shared:
                    try:
                        shared[key] = await self._assemble(chat, runs, due=due, files=self._files_of_pass, reader=who)
                    except Exception:  # one briefing's failure must not stop the others'; it is tried next pass
                        logger.exception("chat %d: the briefing failed", chat.id)
                        continue
                assembled = shared[key]
            else:
                logger.info("chat %d: no monitor ran since its last briefing; nothing sent", chat.id)
            if assembled is not None:
                briefs[chat.id] = assembled
            claims.append(
                BriefingClaim(
                    chat_id=chat.id,
                    due=chat.briefing_next_at or due,
                    next_at=schedule.next_run(max(due, now)),
                    outcome=_outcome(assembled, chat, due=due, now=now),
                    views=assembled.views if assembled is not None else {},
                )
            )
        made = await self._briefings.claim_many(claims, now=now)
        queued = []
        for claim in claims:
            run_id, assembled = made.get(claim.chat_id), briefs.get(claim.chat_id)
            if run_id is None or assembled is None:
                continue
            logger.info("chat %d: briefing for %s queued (%d topics)", claim.chat_id, claim.due.isoformat(),
                        assembled.topics)  # fmt: skip
            queued.append(
                QueuedBriefing(
                    chat_id=claim.chat_id, run_id=run_id, topics=assembled.topics, with_news=assembled.with_news
                )
            )
        return queued

    async def _readers(self, chat_ids: Sequence[int]) -> _Readers:
        """The rules and feedback marks of a page of chats, in two queries."""
        return _Readers(rules=await self._rules.of_chats(chat_ids), marks=await self._marks.of_chats(chat_ids))

    async def _runs_pending(self, monitor_ids: Sequence[int], due: datetime) -> bool:
        """Whether a monitor of the briefing is still running for a time up to `due`, or is due and not started."""
        if await self._runs.running_for_monitors(monitor_ids, scheduled_until=due):
            return True
        return await self._monitors.count_due(monitor_ids, until=due) > 0

    async def _assemble(
        self,
        chat: ChatRecord,
        runs: Sequence[RunRecord],
        *,
        due: datetime,
        files: dict[tuple[object, ...], _BriefingFiles],
        reader: _Reader | None = None,
    ) -> _Assembled | None:
        """The chat's briefing from these runs, each monitor's digests as the chat's own `rules` on it leave them,
        then as its feedback `marks` on it do (the view its digest would get: `MonitorFeedback.decide`)."""
        rules = reader.rules if reader is not None else {}
        marks = reader.marks if reader is not None else {}
        by_monitor: dict[int, list[RunRecord]] = defaultdict(list)
        for run in runs:
            if run.monitor_id is not None:
                by_monitor[run.monitor_id].append(run)
        succeeded = [run for run in runs if run.status is RunStatus.SUCCEEDED]
        stored = await self._items.of_runs([run.id for run in succeeded])
        topics: list[TopicDigests] = []
        left_out: dict[int, int] = {}
        """Stories the chat's rules left out, per monitor."""
        by_feedback: dict[int, int] = {}
        """Stories the chat's feedback left out, per monitor."""
        decided: dict[int, list[DecidedDigest]] = {}
        """Each monitor's digests as the reader's feedback decided them, in the order of its `TopicDigests.digests`."""
        rows: list[tuple[str, ItemWithScores]] = []
        monitors: dict[int, MonitorRecord] = {}
        for monitor_id, monitor_runs in sorted(by_monitor.items()):
            monitor = await self._monitors.get(monitor_id)
            if monitor is None:
                continue
            monitors[monitor_id] = monitor
            language = chat.language or monitor.language
            ok = [run for run in monitor_runs if run.status is RunStatus.SUCCEEDED]
            shown, dropped = _digests_for_reader(ok, language, stored, rules.get(monitor_id))
            if dropped:
                left_out[monitor_id] = dropped
            digests, decided[monitor_id] = await self._after_feedback(
                shown, marks.get(monitor_id, []), stored, topic=monitor.topic, language=language
            )
            if feedback_dropped := sum(len(one[1].dropped) for one in decided[monitor_id] if one is not None):
                by_feedback[monitor_id] = feedback_dropped
            mine, stories = _items_and_stories(ok, stored)
            rows += [(monitor.topic, scored) for scored in mine]
            topics.append(
                TopicDigests(
                    topic=monitor.topic,
                    monitor_id=monitor.id,
                    digests=digests,
                    stories=stories,
                    failed=not ok,
                )
            )
        if not topics:
            return None
        briefing = assemble_briefing(topics)
        zone = ZoneInfo(chat.timezone)
        text = render_briefing_markdown(briefing, title=f"Your briefing · {due.astimezone(zone):%Y-%m-%d %H:%M %Z}")
        text += _left_out_lines(left_out, by_feedback)
        views = briefing_section_views(briefing.sections, decided)
        written = _BriefingFiles(artifacts={}, chart_topics={})
        if briefing.has_news and rows:
            key = (tuple(run.id for run in runs), chat.timezone, due)
            if key not in files:  # the files do not depend on the reader's language: written once for all
                files[key] = await asyncio.to_thread(self._write_files, runs, rows, due=due, zone=zone)
            written = files[key]
        return _Assembled(
            text=text,
            artifacts=written.artifacts,
            chart_topics=written.chart_topics,
            topics=len(topics),
            with_news=len(briefing.sections),
            run_ids=[run.id for run in runs],
            views=views,
            feedback_sections=_button_sections(views),
        )

    async def _after_feedback(
        self,
        shown: Sequence[tuple[RunRecord, Digest]],
        marks: Sequence[FeedbackMarkRecord],
        stored: Mapping[int, Sequence[ItemWithScores]],
        *,
        topic: str,
        language: str | None,
    ) -> tuple[list[Digest], list[DecidedDigest]]:
        """The section's digests (newest run first, after the rules) as the reader's feedback leaves them (with no
        marks too: the view is what `/more 2 #3` names), and each one's decision. Marks that cannot be weighed give the
        plain view (`decide`: every story, with buttons); a digest that still cannot be judged is kept whole (logged)
        and undecided (its section then has no stored view), never holds a briefing."""
        kept: list[Digest] = []
        decided: list[DecidedDigest] = []
        for run, digest in shown:
            try:
                view, record = await self._feedback.decide(
                    run, digest, marks, items=stored.get(run.id, []), topic=topic, language=language or ""
                )
            except Exception:
                logger.exception("run %d: the reader's feedback could not be applied to its briefing section", run.id)
                kept.append(digest)
                decided.append(None)
                continue
            kept.append(reader_digest(digest, view))
            decided.append((run.id, view, record))
        return kept, decided

    def _write_files(
        self, runs: Sequence[RunRecord], rows: Sequence[tuple[str, ItemWithScores]], *, due: datetime, zone: ZoneInfo
    ) -> _BriefingFiles:
        """One CSV of every topic's items (a `topic` column) and one chart of all topics, named after the runs they
        cover, so chats sharing a briefing share the files."""
        digest = hashlib.sha256(",".join(str(run.id) for run in runs).encode()).hexdigest()[:10]
        stem = f"briefing-{due:%Y%m%d-%H%M}-{digest}"
        self._out_dir.mkdir(parents=True, exist_ok=True)
        csv_path, chart_path = self._out_dir / f"{stem}.csv", self._out_dir / f"{stem}.png"
        write_stored_items_csv(csv_path, [scored for _, scored in rows], topics=[topic for topic, _ in rows])
        # Each item is drawn once, under the first topic that has it (as a story in two topics is told once).
        topic_of: dict[str, str] = {}
        items: list[Item] = []
        for topic, scored in rows:
            if scored.item.id not in topic_of and (item := item_of_record(scored.item)) is not None:
                topic_of[item.id] = topic
                items.append(item)
        since = due - timedelta(days=CHART_DAYS)
        write_volume_chart(
            items,
            path=chart_path,
            title="Your briefing: items per topic",
            since=since,
            until=due,
            timezone=zone,
            series=topic_of,
            series_title="topic",
        )
        # What the chart drew, per topic (the same items, window and split), kept with the briefing's run.
        drawn = volume_counts(items, since=since, until=due, timezone=zone, series=topic_of)
        chart_topics = {topic: sum(counts) for topic, counts in drawn.per_source.items()}
        return _BriefingFiles(artifacts={"csv": str(csv_path), "chart": str(chart_path)}, chart_topics=chart_topics)


def _outcome(assembled: _Assembled | None, chat: ChatRecord, *, due: datetime, now: datetime) -> RunOutcome | None:
    """The briefing as the finished run stored for the chat (None: nothing to send)."""
    if assembled is None:
        return None
    return RunOutcome(
        finished_at=now,
        stats={
            "kind": BRIEFING_KIND,
            "text": assembled.text,
            "covers_runs": assembled.run_ids,
            "topics": assembled.topics,
            "with_news": assembled.with_news,
            "chart_topics": assembled.chart_topics,
            "feedback_sections": assembled.feedback_sections,
            "file_stem": f"briefing-{due.astimezone(ZoneInfo(chat.timezone)):%Y-%m-%d-%H%M}",
        },
        artifacts=assembled.artifacts,
    )


def _left_out_lines(by_rules: Mapping[int, int], by_feedback: Mapping[int, int]) -> str:
    """The briefing's lines saying how many stories the reader's rules and its feedback left out (per monitor given),
    each with the commands that show or change why."""
    text = ""
    if dropped := sum(by_rules.values()):
        commands = ", ".join(f"/filter {monitor_id}" for monitor_id, count in sorted(by_rules.items()) if count)
        text += f"\n_{dropped} stor{'y' if dropped == 1 else 'ies'} left out by your filter — {commands}_\n"
    if count := sum(by_feedback.values()):
        commands = ", ".join(f"/why dropped #{monitor_id}" for monitor_id in sorted(by_feedback))
        text += f"\n_{count} stor{'y' if count == 1 else 'ies'} left out by your feedback — {commands}_\n"
    return text


def _button_sections(views: Mapping[int, Mapping[str, Any]]) -> list[dict[str, int]]:
    """The briefing's button specs (`feedback_sections`) of its markable sections' views, in the briefing's order:
    each one's monitor, the run its view is stored under and its number of stories."""
    return [
        {"monitor_id": view["monitor_id"], "run_id": run_id, "stories": len(view["kept"])}
        for run_id, view in views.items()
    ]


def _readable(stored: dict[int, dict[str, object]], monitor_ids: Sequence[int]) -> dict[int, ReaderRules]:
    """The chat's rules on the briefing's monitors that apply (unreadable ones are skipped, never fatal)."""
    found = {}
    for monitor_id in monitor_ids:
        rules = ReaderRules.from_stored(stored.get(monitor_id))
        if rules is not None and not rules.empty:
            found[monitor_id] = rules
    return found


def _digest(run: RunRecord, language: str | None) -> Digest | None:
    if not run.stats.get("delivered", True):
        return None
    return valid_digest(run, language, instead="left out of the briefing")


def _digests_for_reader(
    ok: Sequence[RunRecord],
    language: str | None,
    stored: Mapping[int, Sequence[ItemWithScores]],
    rules: ReaderRules | None,
) -> tuple[list[tuple[RunRecord, Digest]], int]:
    """A monitor's digests of these runs (with their run), newest first, as the reader's own `rules` leave them, and
    how many stories the rules left out."""
    digests: list[tuple[RunRecord, Digest]] = []
    dropped = 0
    for run in reversed(ok):
        digest = _digest(run, language)
        if digest is None:
            continue
        entries = run_entries(stored.get(run.id, [])) if rules is not None else []
        decision = rules_view(digest, entries, rules)
        if decision is not None:
            digest = filter_digest(digest, decision.removed, decision.recounted)
            dropped += decision.stories_left_out
        digests.append((run, digest))
    return digests, dropped


def _items_and_stories(
    ok: Sequence[RunRecord], stored: Mapping[int, Sequence[ItemWithScores]]
) -> tuple[list[ItemWithScores], list[list[str]]]:
    """The runs' items, each once (newest run first), and each run's stories as lists of item URLs."""
    seen: set[str] = set()
    mine: list[ItemWithScores] = []
    for run in reversed(ok):
        for scored in stored.get(run.id, []):
            if scored.item.id not in seen:
                seen.add(scored.item.id)
                mine.append(scored)
    stories: dict[tuple[int, str], list[str]] = defaultdict(list)
    for run in ok:
        for scored in stored.get(run.id, []):
            stories[(run.id, scored.scores.cluster_id or scored.item.id)].append(scored.item.url)
    return mine, list(stories.values())
