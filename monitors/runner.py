"""One run of research: a monitor's (scheduled, `/digest`) or a one-off search's (`SearchRequest`, which is no
monitor): build the pipeline request, run it, store the run with its outbox rows; a monitor's own run also notes
the result on the monitor (its plan, failing sources, alerts, next run)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError
from pydantic_ai.models import Model

from kernel import Clock, error_reference, new_error_id
from monitors.alerts import alert_stories, check_alerts, check_may_use_models, pending_stories, stories_of_check
from monitors.notices import NOTICE_KIND, queue_notice
from monitors.recorder import RunRecorder
from monitors.schedule import Schedule, ScheduleError, parse_schedule
from monitors.service_base import MonitorStorage, ServiceStorage
from monitors.views import MonitorSettings, RunStatusText, RunSummary, monitor_name
from research import (
    MAX_FEEDBACK_EXAMPLES,
    AlertStory,
    Digest,
    FeedbackExample,
    LlmUsage,
    PipelineRequest,
    PipelineResult,
    ProgressCallback,
    UsageKind,
    chat_folder,
    escape_markdown,
    export_stem,
    failure_lines,
    load_plan,
    sum_usage,
)
from sources import Item, Source, source_spec, spec_label
from storage import (
    ChatRecord,
    Database,
    ItemRecord,
    ItemScore,
    MonitorRecord,
    PendingAlertCheckRecord,
    RunOutcome,
    RunRecord,
    RunStatus,
    SourceFailureRecord,
)
from storage.repositories import (
    AlertRepository,
    FeedbackRepository,
    ItemRepository,
    RunRepository,
    SourceFailureRepository,
)

logger = logging.getLogger(__name__)
_OLDEST = datetime.min.replace(tzinfo=UTC)


async def critique_examples(database: Database, monitor_id: int, reader: ChatRecord | None) -> list[FeedbackExample]:
    """The marks the model critique of a run sees as examples: the latest 👍 / 👎 / fewer of the chat whose profile
    it reads (the chat that asked for the run, else the owner). A run is critiqued once for every subscriber, so one
    reader's taste steers it, the one already steering it through the profile; each subscriber's own marks act on
    its own view at delivery. Marks on other monitors never count."""
    if reader is None:
        return []
    marks = [m for m in await FeedbackRepository(database).marks(monitor_id, reader.id) if m.kind != "mute"]
    return [
        FeedbackExample(wanted=m.kind == "more", title=m.title, outlet=m.outlets[0] if m.outlets else None)
        for m in marks[-MAX_FEEDBACK_EXAMPLES:]
    ]


"""Where an undated item sorts."""

SourceResolver = Callable[[Sequence[str]], list[Source]]
"""Turns source specs (`hn`, `rss:<url>`) into sources; raises ValueError for unknown or switched-off ones."""


PENDING_ALERTS_GRACE: Final = timedelta(minutes=10)
"""How long a run's alert check may stay pending before the recovery pass takes it: the runner checks right after
storing the run (a few bounded model questions), so a check older than this was left by a process that stopped."""
PENDING_ALERTS_KEPT: Final = timedelta(days=2)
"""A pending check older than this is dropped unchecked: an alert meant to come at once is noise days later."""


@dataclass(frozen=True, kw_only=True)
class SearchRequest:
    """A one-off `/search`: a topic researched now, from these sources over this window, for the chat that asked.
    It is no monitor: it has no plan, no history of delivered items and no schedule, and nothing is stored on a
    monitor; its run belongs to the chat."""

    topic: str
    sources: tuple[str, ...]
    lookback_hours: int
    timezone: str
    """The asking chat's timezone (the chart's days, the digest's header)."""
    chat: ChatRecord


Researched = MonitorRecord | SearchRequest
"""What a run researches: a monitor (scheduled, `/digest`) or a one-off search."""


def _counted_monitor(subject: Researched, run: RunRecord) -> MonitorRecord | None:
    """The monitor whose own run this is (a scheduled run, or `/digest` of its only subscriber), whose sources,
    alerts, plan and last result the run updates; None for a `/digest` preview and a search."""
    return subject if isinstance(subject, MonitorRecord) and run.monitor_id is not None else None


def digest_monitor_id(run: RunRecord) -> int | None:
    """The monitor a stored run's digest is of: the run's own monitor, or for a `/digest` preview (a run of no
    monitor, which leaves the monitor's own runs alone) the monitor it previews (`stats["monitor_id"]`); None for a
    search, a notice or a briefing. What a reader's rules and feedback apply to."""
    if run.stats.get("kind") != "digest":
        return None
    if run.monitor_id is not None:
        return run.monitor_id
    previewed = run.stats.get("monitor_id")
    return previewed if isinstance(previewed, int) else None


def _summary_monitor_id(subject: Researched) -> int | None:
    """The monitor a run's summary names; a search is no monitor."""
    return subject.id if isinstance(subject, MonitorRecord) else None


def _owner_chat_id(subject: Researched) -> int:
    """The chat a run's usage counts against when no chat asked for it: the monitor's owner (a search's chat)."""
    return subject.owner_chat_id if isinstance(subject, MonitorRecord) else subject.chat.id


def _run_label(subject: Researched, run: RunRecord) -> str:
    """How logs name a run: `monitor 3 run 7`, `search run 8`."""
    return f"monitor {subject.id} run {run.id}" if isinstance(subject, MonitorRecord) else f"search run {run.id}"


class PipelineFunction(Protocol):
    """The shape of `research.pipeline.run_pipeline` (tests may pass a scripted one)."""

    async def __call__(
        self,
        request: PipelineRequest,
        *,
        light_model: Model | None,
        heavy_model: Model | None,
        out_dir: Path,
        stem: str,
        progress: ProgressCallback | None = None,
        now: Clock | None = None,
    ) -> PipelineResult: ...


@dataclass(frozen=True, kw_only=True)
class _Failure:
    error: str
    error_id: str | None = None
    source_errors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class _StoredRun:
    """What a finished pipeline run is stored as: its outcome, and what `_store` needs of the decisions in it."""

    outcome: RunOutcome
    status: RunStatusText
    deliver: bool
    delivered: set[str]
    artifacts: dict[str, Path]
    source_errors: tuple[str, ...]


def _stored_run(
    subject: Researched,
    run: RunRecord,
    result: PipelineResult,
    *,
    asking_chat: ChatRecord | None,
    left_out: tuple[str, ...],
    now: datetime,
    alert_stories: Sequence[AlertStory] = (),
    use_models: bool = True,
) -> _StoredRun:
    monitor = subject if isinstance(subject, MonitorRecord) else None
    # Nothing new sends nothing, unless the monitor asks for a short note (`/quiet <id> off`); whoever asked
    # with /digest or /search reads "nothing new" in the command's own reply.
    note = monitor is not None and result.nothing_new and not monitor.quiet and asking_chat is None
    deliver = note or not result.nothing_new
    exports = result.exports
    files = (("csv", exports.csv), ("json", exports.json), ("chart", exports.chart)) if exports else ()
    artifacts = {name: path for name, path in files}
    source_errors = (*failure_lines(result.failed_sources), *left_out)
    stats: dict[str, object] = {
        "kind": "digest" if monitor is not None else "search",
        "monitor_id": monitor.id if monitor is not None else None,
        "topic": subject.topic,
        "items": len(result.items),
        "new_items": len(result.new_item_ids),
        "nothing_new": result.nothing_new,
        "delivered": deliver,
        "plan_refreshed": result.plan_refreshed,
        "source_errors": list(source_errors),
        "file_stem": run_file_stem(subject, run),
        "digest_language": result.digest_language or "",
    }
    if note and monitor is not None:
        collected = result.report.counts.unique if result.report is not None else len(result.items)
        stats.update(kind=NOTICE_KIND, text=nothing_new_note(monitor, items=collected, failed=source_errors))
        artifacts = {}
    outcome = RunOutcome(
        finished_at=now,
        stats=stats,
        digest=result.digest.model_dump(mode="json"),
        language_digests={
            language: written.model_dump(mode="json") for language, written in result.language_digests.items()
        },
        artifacts={name: str(path) for name, path in artifacts.items()},
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        cost=result.usage.cost_usd or 0.0,
        alert_stories=pending_stories(alert_stories, use_models=use_models),
    )
    return _StoredRun(
        outcome=outcome,
        status="empty" if result.nothing_new else "ok",
        deliver=deliver,
        delivered=set(result.new_item_ids) if deliver and run.monitor_id is not None else set(),
        artifacts=artifacts,
        source_errors=source_errors,
    )


class MonitorRunner(MonitorStorage):
    """Executes an opened run: a monitor's (`execute`: scheduled runs and `/digest`) or a search's (`search`)."""

    def __init__(
        self,
        storage: ServiceStorage,
        *,
        resolve_sources: SourceResolver,
        light_model: Model | None,
        heavy_model: Model | None,
        out_dir: Path,
        settings: MonitorSettings,
        pipeline: PipelineFunction,
        recorder: RunRecorder,
        before_run: Callable[[int], Awaitable[object]] | None = None,
    ) -> None:
        """`before_run(monitor_id)` is awaited as a monitor's run starts (its readers' marks given their vectors:
        `MonitorFeedback.vectors_before_run`, which never raises)."""
        super().__init__(storage)
        self._before_run = before_run
        database = storage.database
        self._resolve = resolve_sources
        self._light, self._heavy = light_model, heavy_model
        self._out_dir = out_dir
        self._settings = settings
        self._pipeline = pipeline
        self._items = ItemRepository(database)
        self._runs = RunRepository(database)  # reads: the previous run, its items
        self._recorder = recorder
        self._source_failures = SourceFailureRepository(database)
        self._alerts_repository = AlertRepository(database)

    async def execute(
        self,
        monitor: MonitorRecord,
        run: RunRecord,
        *,
        schedule: Schedule | None,
        asking_chat: ChatRecord | None = None,
        progress: ProgressCallback | None = None,
        use_models: bool = True,
        cancel_leaves_running: bool = False,
    ) -> RunSummary:
        """Run the pipeline for an opened run of a monitor and store everything. `schedule` is given for scheduled
        runs (the monitor's next run moves on); `asking_chat` for `/digest`; `use_models=False` runs the model-free
        path (a chat whose daily token budget is spent). Never raises except on cancellation, which marks the run
        failed unless `cancel_leaves_running` (a job queue hands the job to another worker, which takes the run
        over)."""
        return await self._execute(
            monitor,
            run,
            schedule=schedule,
            asking_chat=asking_chat,
            progress=progress,
            use_models=use_models,
            cancel_leaves_running=cancel_leaves_running,
        )

    async def search(
        self,
        request: SearchRequest,
        run: RunRecord,
        *,
        progress: ProgressCallback | None = None,
        use_models: bool = True,
    ) -> RunSummary:
        """Run the pipeline for a one-off search's opened run, store it and queue its digest for the asking chat
        only. Never raises except on cancellation (the run is marked failed then)."""
        return await self._execute(
            request, run, schedule=None, asking_chat=request.chat, progress=progress, use_models=use_models
        )

    async def _execute(
        self,
        subject: Researched,
        run: RunRecord,
        *,
        schedule: Schedule | None,
        asking_chat: ChatRecord | None,
        progress: ProgressCallback | None,
        use_models: bool,
        cancel_leaves_running: bool = False,
    ) -> RunSummary:
        counted = _counted_monitor(subject, run)
        try:
            if self._before_run is not None and isinstance(subject, MonitorRecord):
                await self._before_run(subject.id)
            sources = self._resolve(list(subject.sources))
            left_out: list[str] = []
            if counted is not None:
                sources, left_out = await self._without_backed_off(
                    counted, run, sources, scheduled=schedule is not None
                )
            result = await self._run_pipeline(
                subject, run, asking_chat, progress, sources=sources, use_models=use_models
            )
        except asyncio.CancelledError:
            if not cancel_leaves_running:
                await self._recorder.fail(run.id, error="cancelled: the process stopped during the run")
            raise
        except Exception as error:  # one monitor's failure must never take the process down
            error_id = new_error_id()
            logger.exception("%s failed [error id %s]", _run_label(subject, run), error_id)
            failure = _Failure(error=f"{type(error).__name__}: {error}", error_id=error_id)
            return await self._failed(subject, run, schedule, failure)
        if counted is not None:
            await self._note_sources(counted, run, sources, result)
        if result.all_sources_failed:
            off = result.report.skipped_sources if result.report else {}
            lines = (
                *failure_lines(result.failed_sources),
                *left_out,
                *(f"{name}: off ({why})" for name, why in off.items()),
            )
            failure = _Failure(error="every source failed: " + "; ".join(lines), source_errors=lines)
            return await self._failed(subject, run, schedule, failure)
        if left_out:
            digest = result.digest
            result = replace(
                result, digest=digest.model_copy(update={"failed_sources": [*digest.failed_sources, *left_out]})
            )
        stories = await self._alert_stories(counted, result) if counted is not None else []
        try:
            summary = await self._store(
                subject,
                run,
                result,
                schedule=schedule,
                asking_chat=asking_chat,
                left_out=tuple(left_out),
                alert_stories=stories,
                use_models=use_models,
            )
        except Exception as error:
            error_id = new_error_id()
            logger.exception("%s could not be stored [error id %s]", _run_label(subject, run), error_id)
            return await self._failed(
                subject, run, schedule, _Failure(error=f"{type(error).__name__}", error_id=error_id)
            )
        if stories and counted is not None:
            await self._alerts(counted, run.id, stories, use_models=use_models)
        return summary

    async def _check_left(self, monitor: MonitorRecord, pending: PendingAlertCheckRecord, *, now: datetime) -> int:
        """Check one pending check's stories (their items read back from storage), then delete it. The model is asked
        only when the run's own check could have asked it (the budget rule: `check_may_use_models`)."""
        ids = {item_id for entry in pending.stories for key in ("items", "earlier") for item_id in entry.get(key, ())}
        records = await self._items.get_many(sorted(ids))
        items = {item.id: item for item in map(item_of_record, records) if item is not None}
        stories = stories_of_check(pending.stories, items)
        model = self._light if check_may_use_models(pending.stories) else None
        queued = await check_alerts(self._database, monitor=monitor, stories=stories, model=model, now=now)
        await self._alerts_repository.checked(pending.run_id)
        return queued

    async def _alert_stories(self, monitor: MonitorRecord, result: PipelineResult) -> list[AlertStory]:
        """The run's stories its monitor's alerts will check (none when no chat has an alert on it, so no pending
        check is stored); never raises: the run is stored whatever happens here."""
        try:
            stories = alert_stories(result)
            return stories if stories and await self._alerts_repository.receiving_alerts(monitor.id) else []
        except Exception:
            logger.exception("monitor %d: the run's stories for alerts could not be read", monitor.id)
            return []

    async def _alerts(
        self, monitor: MonitorRecord, run_id: int, stories: Sequence[AlertStory], *, use_models: bool
    ) -> None:
        """The monitor's alerts on the stored run's stories (see `monitors.alerts`), then its pending check goes; a
        failure is logged and leaves the pending check for the recovery pass, the run stands."""
        try:
            queued = await check_alerts(
                self._database,
                monitor=monitor,
                stories=stories,
                model=self._light if use_models else None,
                now=self._clock(),
            )
            await self._alerts_repository.checked(run_id)
        except Exception:  # an alert's failure must not fail the run that was stored
            logger.exception("monitor %d: alerts could not be checked [error id %s]", monitor.id, new_error_id())
            return
        self._queued(queued)

    async def check_pending_alerts(self, *, grace: timedelta = PENDING_ALERTS_GRACE) -> int:
        """The recovery pass: check the alerts of every stored run whose check was left pending for over `grace` (its
        process stopped between storing the run and checking them), once each; the number of notices queued. A
        check older than `PENDING_ALERTS_KEPT` is dropped unchecked (an "at once" alert that late is noise)."""
        now = self._clock()
        queued = 0
        for pending in await self._alerts_repository.pending_checks(created_before=now - grace):
            monitor = await self._monitors.get(pending.monitor_id)
            if monitor is None or pending.created_at < now - PENDING_ALERTS_KEPT:
                logger.warning("run %d: its alerts' check is dropped (too old, or its monitor gone)", pending.run_id)
                await self._alerts_repository.checked(pending.run_id)
                continue
            logger.warning("run %d of monitor %d: checking its alerts, left pending", pending.run_id, monitor.id)
            try:
                queued += await self._check_left(monitor, pending, now=now)
            except Exception:  # one check that cannot be made holds no other back; it is tried again next pass
                logger.exception("run %d: its pending alerts could not be checked [error id %s]", pending.run_id,
                                 new_error_id())  # fmt: skip
        self._queued(queued)
        return queued

    async def _run_pipeline(
        self,
        subject: Researched,
        run: RunRecord,
        asking_chat: ChatRecord | None,
        progress: ProgressCallback | None,
        *,
        sources: Sequence[Source],
        use_models: bool,
    ) -> PipelineResult:
        if isinstance(subject, MonitorRecord):
            reader = asking_chat or await self._chats.get(subject.owner_chat_id)
            request = await self._monitor_request(subject, run, reader, asking_chat, sources, use_models=use_models)
        else:
            reader = subject.chat
            request = _search_request(subject, run, sources)
        return await self._pipeline(
            request,
            light_model=self._light if use_models else None,
            heavy_model=self._heavy if use_models else None,
            # The files go to the folder of the chat that asked (or the owner's), named by the one scheme.
            out_dir=self._out_dir / (chat_folder(reader.platform, reader.external_id) if reader else "monitors"),
            stem=run_file_stem(subject, run),
            progress=progress,
            now=self._clock,
        )

    async def _monitor_request(
        self,
        monitor: MonitorRecord,
        run: RunRecord,
        reader: ChatRecord | None,
        asking_chat: ChatRecord | None,
        sources: Sequence[Source],
        *,
        use_models: bool,
    ) -> PipelineRequest:
        """A monitor's pipeline request: its settings and plan, what it delivered before, its readers' languages
        (the chat that asked, else every subscriber) and the reader's profile and marks (that chat, else the owner)."""
        readers = [asking_chat] if asking_chat is not None else await self._subscriptions.subscribers(monitor.id)
        until = run.scheduled_for
        previous = await self._previous_run(monitor.id, exclude=run.id)
        delivered_ids: set[str] = set()
        if previous is not None:
            delivered_ids = {entry.item_id for entry in await self._runs.items_of_run(previous.id) if entry.delivered}
        story_memory = max(timedelta(days=self._settings.story_memory_days), timedelta(hours=monitor.lookback_hours))
        delivered_ids |= await self._items.delivered_ids(monitor.id, since=until - story_memory)
        records = await self._items.get_many(sorted(delivered_ids))
        delivered_items = sorted(
            (item for item in map(item_of_record, records) if item is not None),
            key=lambda item: (item.published or _OLDEST, item.id),
        )  # a stable order: the stories formed do not depend on the database's
        already = await self._items.delivered_ids(
            monitor.id, since=until - timedelta(days=self._settings.novelty_memory_days)
        )
        return PipelineRequest(
            topic=monitor.topic,
            sources=sources,
            since=until - timedelta(hours=monitor.lookback_hours),
            until=until,
            extra_queries=monitor.extra_queries,
            include_keywords=monitor.include_keywords,
            exclude_keywords=monitor.exclude_keywords,
            language=monitor.language or (reader.language if reader else None),
            profile=reader.profile if reader else None,
            feedback_examples=(
                await critique_examples(self._database, monitor.id, reader)
                if use_models and self._heavy is not None
                else ()
            ),
            plan=load_plan(monitor.plan),
            plan_updated_at=monitor.plan_updated_at,
            already_delivered=frozenset(already),
            previous_digest=_digest_of(previous),
            delivered_items=delivered_items,
            delivered_urls=frozenset(item.url for item in delivered_items),
            timezone=ZoneInfo(monitor.timezone),
            digest_languages=digest_languages(monitor, readers, first=reader),
        )

    async def _previous_run(self, monitor_id: int, *, exclude: int) -> RunRecord | None:
        """The last run whose digest went out: what the next digest compares itself with."""
        for candidate in await self._runs.list_for_monitor(monitor_id, limit=30):
            if (
                candidate.id != exclude
                and candidate.status is RunStatus.SUCCEEDED
                and candidate.digest is not None
                and candidate.stats.get("delivered", True)
                and not candidate.stats.get("nothing_new", False)
            ):
                return candidate
        return None

    async def _store(
        self,
        subject: Researched,
        run: RunRecord,
        result: PipelineResult,
        *,
        schedule: Schedule | None,
        asking_chat: ChatRecord | None,
        left_out: tuple[str, ...] = (),
        alert_stories: Sequence[AlertStory] = (),
        use_models: bool = True,
    ) -> RunSummary:
        now = self._clock()
        stored = _stored_run(
            subject, run, result, asking_chat=asking_chat, left_out=left_out, now=now, alert_stories=alert_stories,
            use_models=use_models,
        )  # fmt: skip
        rows = await self._recorder.complete(
            run.id,
            stored.outcome,
            items=[item_record(scored.item) for scored in result.items],
            scores=[
                ItemScore(
                    item_id=scored.item.id,
                    relevance=scored.relevance,
                    credibility=scored.credibility,
                    score=scored.score,
                    cluster_id=scored.cluster_id,
                    rank=scored.rank,
                    delivered=scored.item.id in stored.delivered,
                )
                for scored in result.items
            ],
            usage=usage_by_kind(result),
            usage_chat_id=asking_chat.id if asking_chat is not None else _owner_chat_id(subject),
            deliver=stored.deliver,
            # /digest answers the chat that asked even when it reads this monitor in its briefing
            extra_chat_ids=[asking_chat.id] if asking_chat is not None else (),
        )
        if result.plan_refreshed and isinstance(subject, MonitorRecord):
            await self._monitors.set_plan(subject.id, result.plan.model_dump(mode="json"), now=now)
        if (monitor := _counted_monitor(subject, run)) is not None:
            next_run = schedule.next_run(max(run.scheduled_for, now)) if schedule is not None else None
            await self._monitors.record_result(monitor.id, status=stored.status, finished_at=now, next_run_at=next_run)
        logger.info(
            "%s: %s, %d items, %d new, %d deliveries",
            _run_label(subject, run), stored.status, len(result.items), len(result.new_item_ids), len(rows),
        )  # fmt: skip
        return RunSummary(
            run_id=run.id,
            monitor_id=_summary_monitor_id(subject),
            scheduled_for=run.scheduled_for,
            status=stored.status,
            digest=result.digest,
            items=len(result.items),
            new_items=len(result.new_item_ids),
            deliveries=len(rows),
            artifacts=stored.artifacts,
            source_errors=stored.source_errors,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
        )

    async def fail(self, monitor: MonitorRecord, run: RunRecord, schedule: Schedule | None, error: str) -> RunSummary:
        """Mark an opened run failed without running it (counted like any failed run)."""
        return await self._failed(monitor, run, schedule, _Failure(error=error))

    async def _failed(
        self, subject: Researched, run: RunRecord, schedule: Schedule | None, failure: _Failure
    ) -> RunSummary:
        now = self._clock()
        shown = failure.error + error_reference(failure.error_id)
        await self._recorder.fail(run.id, error=shown[:MAX_ERROR_CHARS], finished_at=now)
        summary = RunSummary(
            run_id=run.id,
            monitor_id=_summary_monitor_id(subject),
            scheduled_for=run.scheduled_for,
            status="failed",
            error=failure.error,
            error_id=failure.error_id,
            source_errors=failure.source_errors,
        )
        monitor = _counted_monitor(subject, run)
        if monitor is None:  # a /digest preview does not count against the monitor; a search has none
            return summary
        failures = monitor.consecutive_failures + 1
        next_run = self._retry_time(schedule, run.scheduled_for, now, failures) if schedule is not None else None
        updated = await self._monitors.record_result(
            monitor.id, status="failed", finished_at=now, error=failure.error[:MAX_ERROR_CHARS], next_run_at=next_run
        )
        threshold = self._settings.failure_notice_after
        # Scheduled runs only: whoever ran it with /digest reads the failure in the command's reply.
        if (
            schedule is not None
            and updated is not None
            and updated.consecutive_failures >= threshold
            and updated.failure_notified_at is None
        ):
            await self._send_failure_notice(updated, failure, next_run)
        return summary

    def _retry_time(self, schedule: Schedule, scheduled_for: datetime, now: datetime, failures: int) -> datetime:
        """The next scheduled time; after `failure_backoff_after` failures in a row, later ones are skipped,
        doubling each time."""
        start = max(scheduled_for, now)
        over = failures - self._settings.failure_backoff_after
        if over >= 0:
            cap = self._settings.max_failure_backoff_hours * 3600
            start += timedelta(seconds=min(schedule.min_gap_seconds() * (2 ** min(over + 1, 20) - 1), cap))
        return schedule.next_run(start)

    async def _send_failure_notice(self, monitor: MonitorRecord, failure: _Failure, next_run: datetime | None) -> None:
        """Tell the monitor's chats once per failure streak (through the outbox) that its run failed, and why."""
        zone = _zone(monitor.timezone)
        reference = error_reference(failure.error_id)
        reasons = failure.source_errors or (failure.error + reference,)
        errors = "\n".join(f"- {escape_markdown(line)}" for line in reasons)
        runs = "" if monitor.consecutive_failures == 1 else f" {monitor.consecutive_failures} runs in a row"
        what = "every source failed" if failure.source_errors else "the run stopped with an error"
        backing_off = monitor.consecutive_failures >= self._settings.failure_backoff_after
        when = f"{next_run.astimezone(zone):%Y-%m-%d %H:%M %Z}" if next_run else "the next run"
        retry = f"I'll keep trying, less often; next try {when}." if backing_off else f"I'll try again at {when}."
        text = (
            f"⚠️ Monitor {monitor_name(monitor.id, monitor.topic)} failed{runs}: {what}.\n{errors}\n"
            f"{retry} Send /pause {monitor.id} to stop it."
        )
        chats = [monitor.owner_chat_id, *(chat.id for chat in await self._subscriptions.subscribers(monitor.id))]
        await self._queue_notice(monitor, text, chats)
        await self._monitors.update(monitor.id, failure_notified_at=self._clock())
        logger.warning("monitor %d failed %d run(s) in a row; its chats told", monitor.id, monitor.consecutive_failures)

    async def _queue_notice(self, monitor: MonitorRecord, text: str, chat_ids: Sequence[int]) -> None:
        """Queue one text notice for these chats (the first is the run's own chat) through the outbox."""
        recipients = list(dict.fromkeys(chat_ids))
        await queue_notice(
            self._database, chat_id=recipients[0], text=text, monitor_id=monitor.id, now=self._clock(),
            also=recipients[1:],
        )  # fmt: skip
        self._queued()

    # ---- sources that fail run after run ------------------------------------------------------------------

    async def _without_backed_off(
        self, monitor: MonitorRecord, run: RunRecord, sources: list[Source], *, scheduled: bool
    ) -> tuple[list[Source], list[str]]:
        """The sources to ask in a scheduled run, leaving out those backed off after failing run after run, and
        a line for each one left out. Every source is asked when all would be left out (or when a person asked)."""
        if not scheduled or run.monitor_id is None:
            return sources, []
        failing = {record.spec: record for record in await self._source_failures.for_monitor(monitor.id)}
        kept: list[Source] = []
        left_out: list[str] = []
        zone = _zone(monitor.timezone)
        for source in sources:
            record = failing.get(source_spec(source))
            if record is not None and record.retry_at is not None and record.retry_at > run.scheduled_for:
                left_out.append(
                    f"{spec_label(record.spec)}: left out this run after failing {record.failures} runs in a row "
                    f"({record.last_reason}); next try {record.retry_at.astimezone(zone):%Y-%m-%d %H:%M %Z}"
                )
            else:
                kept.append(source)
        if not kept:
            return sources, []
        return kept, left_out

    async def _note_sources(
        self, monitor: MonitorRecord, run: RunRecord, sources: Sequence[Source], result: PipelineResult
    ) -> None:
        """Count each source's failed runs in a row; back off one that keeps failing and tell the owner once.
        A source that answered starts afresh. Never raises: this bookkeeping must not fail the run."""
        try:
            await self._count_source_failures(monitor, run, sources, result)
        except Exception:
            logger.exception("monitor %d: could not note which sources failed", monitor.id)

    async def _count_source_failures(
        self, monitor: MonitorRecord, run: RunRecord, sources: Sequence[Source], result: PipelineResult
    ) -> None:
        now = self._clock()
        failed = {failure.spec: failure for failure in result.failed_sources}
        answered = [spec for source in sources if (spec := source_spec(source)) not in failed and _is_on(source)]
        if await self._source_failures.recovered(monitor.id, answered):
            logger.info("monitor %d: sources answering again: %s", monitor.id, ", ".join(answered))
        after = self._settings.source_backoff_after
        to_tell: list[tuple[SourceFailureRecord, datetime]] = []
        for spec, failure in failed.items():
            record = await self._source_failures.failed(monitor.id, spec, reason=failure.reason, now=now)
            if record.failures < after:
                continue
            retry_at = self._source_retry_at(monitor, max(run.scheduled_for, now), record.failures)
            await self._source_failures.back_off(monitor.id, spec, retry_at=retry_at)
            # When every source failed, the monitor's own failure notice already told the chats.
            if record.notified_at is None and not result.all_sources_failed:
                to_tell.append((record, retry_at))
        if to_tell:
            await self._queue_notice(monitor, _sources_notice(monitor, to_tell), [monitor.owner_chat_id])
            await self._source_failures.notified(monitor.id, [record.spec for record, _ in to_tell], now=now)
            logger.warning("monitor %d: %d source(s) keep failing; owner told", monitor.id, len(to_tell))

    def _source_retry_at(self, monitor: MonitorRecord, start: datetime, failures: int) -> datetime:
        """When a source failing `failures` runs in a row is asked again: it skips one run, then two, four…, up to
        `max_failure_backoff_hours` worth of runs (at least one run is always skipped)."""
        try:
            schedule: Schedule | None = parse_schedule(
                monitor.schedule, timezone=monitor.timezone, min_interval_seconds=60
            )
        except ScheduleError:
            schedule = None
        gap = max(float(schedule.min_gap_seconds()), 60.0) if schedule is not None else 86_400.0
        cap_runs = max(1, int(self._settings.max_failure_backoff_hours * 3600 // gap))
        skipped = min(2 ** min(failures - self._settings.source_backoff_after, 20), cap_runs)
        past_skipped = start + timedelta(seconds=gap * skipped)
        # The first scheduled run after the skipped ones asks the source again.
        return schedule.next_run(past_skipped) if schedule is not None else past_skipped


MAX_ERROR_CHARS: Final = 4000
"""A run's or monitor's stored error is cut here (it names every failed source, so it can be long)."""


def nothing_new_note(monitor: MonitorRecord, *, items: int, failed: Sequence[str] = ()) -> str:
    """The short note a monitor that is not quiet sends when a run found nothing new (no digest, no files)."""
    collected = f"{items:,} item{'' if items == 1 else 's'} collected, all seen before"
    topic = escape_markdown(monitor.topic)
    lines = [f"Nothing new about “{topic}” (monitor #{monitor.id}) since the last digest: {collected}."]
    if failed:
        lines.append("Sources that failed:\n" + "\n".join(f"- {escape_markdown(line)}" for line in failed))
    lines.append(f"`/quiet {monitor.id} on` stops these notes.")
    return "\n".join(lines)


def _sources_notice(monitor: MonitorRecord, backed_off: Sequence[tuple[SourceFailureRecord, datetime]]) -> str:
    zone = _zone(monitor.timezone)
    lines = [
        f"- {escape_markdown(spec_label(record.spec))}: {escape_markdown(record.last_reason)}; failed "
        f"{record.failures} runs in a row, next try "
        f"{retry_at.astimezone(zone):%Y-%m-%d %H:%M %Z}"
        for record, retry_at in backed_off
    ]
    which = "this source keeps" if len(lines) == 1 else "these sources keep"
    return (
        f"⚠️ Monitor {monitor_name(monitor.id, monitor.topic)}: {which} failing, so I'll ask less often "
        "(the other sources are searched as usual):\n"
        + "\n".join(lines)
        + "\nIf a source is gone for good, ask me to change the monitor's sources."
    )


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _is_on(source: Source) -> bool:
    try:
        return source.unavailable_reason() is None
    except Exception:  # a source bug: count it as off, not as answering
        return False


def digest_languages(
    monitor: MonitorRecord, readers: Sequence[ChatRecord], *, first: ChatRecord | None
) -> list[str | None]:
    """The languages the run's digest is written in: each reader's /language (else the monitor's own language, else
    none asked for), once each, the first reader's (the owner's or the asking chat's) first."""
    ordered = sorted(readers, key=lambda chat: first is None or chat.id != first.id)
    languages = [chat.language or monitor.language for chat in ordered]
    return list(dict.fromkeys(languages)) or [(first.language if first else None) or monitor.language]


def run_file_stem(subject: Researched, run: RunRecord) -> str:
    """The name of a run's files on disk and as sent: `deepseek-20261122-0830-m1-r7`, `…-search-r8` for /search."""
    owner = f"m{subject.id}" if isinstance(subject, MonitorRecord) else "search"
    return export_stem(subject.topic, run.scheduled_for, f"{owner}-r{run.id}")


def _digest_of(run: RunRecord | None) -> Digest | None:
    if run is None or run.digest is None:
        return None
    try:
        return Digest.model_validate(run.digest)
    except ValidationError:
        return None


def item_record(item: Item) -> ItemRecord:
    """A collected item as the database stores it: `ItemRecord` has `Item`'s fields, the engagement as a dict (the
    feed's language hint is never serialised, so it is not stored)."""
    return ItemRecord(**item.model_dump())


def item_of_record(record: ItemRecord) -> Item | None:
    """The stored item as a source item again (read by field name), or None if it no longer validates."""
    try:
        return Item.model_validate(record, from_attributes=True)
    except ValidationError:
        return None


def usage_by_kind(result: PipelineResult) -> list[tuple[UsageKind, LlmUsage]]:
    """A run's usage as `/usage` shows it: the embeddings of its items apart from its language-model steps."""
    steps = result.report.usage if result.report is not None else {}
    if "embeddings" not in steps:
        return [("monitor", result.usage)]
    language = sum_usage([usage for step, usage in steps.items() if step not in ("total", "embeddings")])
    return [("monitor", language), ("embedding", steps["embeddings"])]


def _search_request(search: SearchRequest, run: RunRecord, sources: Sequence[Source]) -> PipelineRequest:
    """A search's pipeline request: nothing delivered before and no stored plan, in the asking chat's language,
    profile and timezone."""
    chat = search.chat
    return PipelineRequest(
        topic=search.topic,
        sources=sources,
        since=run.scheduled_for - timedelta(hours=search.lookback_hours),
        until=run.scheduled_for,
        language=chat.language,
        profile=chat.profile,
        timezone=ZoneInfo(search.timezone),
        digest_languages=[chat.language],
    )
