"""One monitor run: build the pipeline request, run it, store the run with its outbox rows, note the result."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Protocol
from zoneinfo import ZoneInfo

from pydantic import ValidationError
from pydantic_ai.models import Model

from monitors.delivery import NOTICE_KIND
from monitors.error_ids import new_error_id
from monitors.schedule import Schedule
from monitors.views import MonitorSettings, RunStatusText, RunSummary
from research import (
    Digest,
    LlmUsage,
    PipelineRequest,
    PipelineResult,
    ProgressCallback,
    UsageKind,
    chat_folder,
    escape_markdown,
    export_stem,
    load_plan,
    record_usage,
    sum_usage,
)
from sources import Engagement, Item, Source
from storage import (
    ChatRecord,
    ChatRepository,
    Database,
    DeliveryRepository,
    ItemRecord,
    ItemRepository,
    ItemScore,
    MonitorRecord,
    MonitorRepository,
    RunOutcome,
    RunRecord,
    RunRepository,
    RunStatus,
)

logger = logging.getLogger(__name__)

SourceResolver = Callable[[Sequence[str]], list[Source]]
"""Turns source specs (`hn`, `rss:<url>`) into sources; raises ValueError for unknown or switched-off ones."""


TRANSIENT_MONITOR_ID: Final = 0
"""The id of the stand-in monitor a one-off `/search` runs as (real monitors start at 1): nothing about it is
stored on a monitor, and its digest names no monitor."""


def transient_monitor(
    *, owner_chat_id: int, topic: str, sources: Sequence[str], timezone: str, lookback_hours: int, now: datetime
) -> MonitorRecord:
    """A monitor that exists only for one search run: the runner treats it like any monitor that has never
    run (no plan, nothing delivered before), and stores nothing on it."""
    return MonitorRecord(
        id=TRANSIENT_MONITOR_ID,
        owner_chat_id=owner_chat_id,
        topic=topic,
        extra_queries=(),
        include_keywords=(),
        exclude_keywords=(),
        sources=tuple(sources),
        schedule="",
        timezone=timezone,
        lookback_hours=lookback_hours,
        language=None,
        quiet=False,
        paused=False,
        plan=None,
        plan_updated_at=None,
        next_run_at=None,
        last_run_at=None,
        last_status=None,
        last_error=None,
        consecutive_failures=0,
        failure_notified_at=None,
        created_at=now,
        updated_at=now,
    )


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
        now: Callable[[], datetime] | None = None,
    ) -> PipelineResult: ...


@dataclass(frozen=True, kw_only=True)
class _Failure:
    error: str
    error_id: str | None = None
    source_errors: tuple[str, ...] = ()


class MonitorRunner:
    """Executes an opened run of a monitor; used by `MonitorService` for scheduled runs and `/digest`."""

    def __init__(
        self,
        database: Database,
        *,
        resolve_sources: SourceResolver,
        light_model: Model | None,
        heavy_model: Model | None,
        out_dir: Path,
        settings: MonitorSettings,
        clock: Callable[[], datetime],
        pipeline: PipelineFunction,
        on_deliveries_queued: Callable[[], None] | None,
    ) -> None:
        self._database = database
        self._resolve = resolve_sources
        self._light, self._heavy = light_model, heavy_model
        self._out_dir = out_dir
        self._settings = settings
        self._clock = clock
        self._pipeline = pipeline
        self._on_queued = on_deliveries_queued
        self._chats = ChatRepository(database)
        self._monitors = MonitorRepository(database)
        self._runs = RunRepository(database)
        self._items = ItemRepository(database)
        self._deliveries = DeliveryRepository(database)

    async def execute(
        self,
        monitor: MonitorRecord,
        run: RunRecord,
        *,
        schedule: Schedule | None,
        asking_chat: ChatRecord | None = None,
        progress: ProgressCallback | None = None,
        use_models: bool = True,
    ) -> RunSummary:
        """Run the pipeline for an opened run and store everything. `schedule` is given for scheduled runs (the
        monitor's next run moves on); `asking_chat` for `/digest`; `use_models=False` runs the model-free path (a
        chat whose daily token budget is spent). Never raises except on cancellation."""
        try:
            result = await self._run_pipeline(monitor, run, asking_chat, progress, use_models=use_models)
        except asyncio.CancelledError:
            await self._runs.fail_run(run.id, error="cancelled: the process stopped during the run")
            raise
        except Exception as error:  # one monitor's failure must never take the process down
            error_id = new_error_id()
            logger.exception("monitor %d run %d failed [error id %s]", monitor.id, run.id, error_id)
            failure = _Failure(error=f"{type(error).__name__}: {error}", error_id=error_id)
            return await self._failed(monitor, run, schedule, failure)
        if result.all_sources_failed:
            errors = tuple(dict.fromkeys(f"{o.source}: {o.message or o.error_kind}" for o in result.source_errors))
            failure = _Failure(error="all sources failed (" + "; ".join(errors[:5]) + ")", source_errors=errors)
            return await self._failed(monitor, run, schedule, failure)
        try:
            return await self._store(monitor, run, result, schedule=schedule, asking_chat=asking_chat)
        except Exception as error:
            error_id = new_error_id()
            logger.exception("monitor %d run %d could not be stored [error id %s]", monitor.id, run.id, error_id)
            return await self._failed(
                monitor, run, schedule, _Failure(error=f"{type(error).__name__}", error_id=error_id)
            )

    async def _run_pipeline(
        self,
        monitor: MonitorRecord,
        run: RunRecord,
        asking_chat: ChatRecord | None,
        progress: ProgressCallback | None,
        *,
        use_models: bool,
    ) -> PipelineResult:
        reader = asking_chat or await self._chats.get(monitor.owner_chat_id)
        until = run.scheduled_for
        previous = await self._previous_run(monitor.id, exclude=run.id)
        delivered_items: list[Item] = []
        if previous is not None:
            delivered_ids = [entry.item_id for entry in await self._runs.items_of_run(previous.id) if entry.delivered]
            records = await self._items.get_many(delivered_ids)
            delivered_items = [item for item in map(_to_item, records) if item is not None]
        already = await self._items.delivered_ids(
            monitor.id, since=until - timedelta(days=self._settings.novelty_memory_days)
        )
        request = PipelineRequest(
            topic=monitor.topic,
            sources=self._resolve(list(monitor.sources)),
            since=until - timedelta(hours=monitor.lookback_hours),
            until=until,
            extra_queries=monitor.extra_queries,
            include_keywords=monitor.include_keywords,
            exclude_keywords=monitor.exclude_keywords,
            language=monitor.language or (reader.language if reader else None),
            profile=reader.profile if reader else None,
            plan=load_plan(monitor.plan),
            plan_updated_at=monitor.plan_updated_at,
            already_delivered=frozenset(already),
            previous_digest=_digest_of(previous),
            delivered_items=delivered_items,
            delivered_urls=frozenset(item.url for item in delivered_items),
            timezone=ZoneInfo(monitor.timezone),
        )
        return await self._pipeline(
            request,
            light_model=self._light if use_models else None,
            heavy_model=self._heavy if use_models else None,
            # The files go to the folder of the chat that asked (or the owner's), named by the one scheme.
            out_dir=self._out_dir / (chat_folder(reader.platform, reader.external_id) if reader else "monitors"),
            stem=run_file_stem(monitor, run),
            progress=progress,
            now=self._clock,
        )

    async def _previous_run(self, monitor_id: int, *, exclude: int) -> RunRecord | None:
        """The last run whose digest went out: what the next digest compares itself with."""
        for candidate in await self._runs.list_for_monitor(monitor_id, limit=30):
            if (
                candidate.id != exclude
                and candidate.status is RunStatus.SUCCEEDED
                and candidate.digest is not None
                and candidate.stats.get("delivered", True)
            ):
                return candidate
        return None

    async def _store(
        self,
        monitor: MonitorRecord,
        run: RunRecord,
        result: PipelineResult,
        *,
        schedule: Schedule | None,
        asking_chat: ChatRecord | None,
    ) -> RunSummary:
        now = self._clock()
        linked = run.monitor_id is not None
        transient = monitor.id == TRANSIENT_MONITOR_ID
        # A quiet monitor says nothing on an empty day; someone who asked with /digest always gets an answer.
        deliver = asking_chat is not None or not (monitor.quiet and result.nothing_new)
        delivered = set(result.new_item_ids) if deliver and linked else set()
        status: RunStatusText = "empty" if result.nothing_new else "ok"
        exports = result.exports
        files = (("csv", exports.csv), ("json", exports.json), ("chart", exports.chart)) if exports else ()
        artifacts = {name: path for name, path in files}
        source_errors = tuple(dict.fromkeys(f"{o.source}: {o.message or o.error_kind}" for o in result.source_errors))
        outcome = RunOutcome(
            finished_at=now,
            stats={
                "kind": "search" if transient else "digest",
                "monitor_id": None if transient else monitor.id,
                "topic": monitor.topic,
                "items": len(result.items),
                "new_items": len(result.new_item_ids),
                "nothing_new": result.nothing_new,
                "delivered": deliver,
                "plan_refreshed": result.plan_refreshed,
                "source_errors": list(source_errors),
                "file_stem": run_file_stem(monitor, run),
            },
            digest=result.digest.model_dump(mode="json"),
            artifacts={name: str(path) for name, path in artifacts.items()},
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            cost=result.usage.cost_usd or 0.0,
        )
        rows = await self._deliveries.complete_run(
            run.id,
            outcome=outcome,
            items=[item_record(scored.item) for scored in result.items],
            scores=[
                ItemScore(
                    item_id=scored.item.id,
                    relevance=scored.relevance,
                    credibility=scored.credibility,
                    score=scored.score,
                    cluster_id=scored.cluster_id,
                    rank=scored.rank,
                    delivered=scored.item.id in delivered,
                )
                for scored in result.items
            ],
            deliver=deliver,
        )
        if result.plan_refreshed and not transient:
            await self._monitors.set_plan(monitor.id, result.plan.model_dump(mode="json"), now=now)
        if linked:
            next_run = schedule.next_run(max(run.scheduled_for, now)) if schedule is not None else None
            await self._monitors.record_result(monitor.id, status=status, finished_at=now, next_run_at=next_run)
        for kind, usage in usage_by_kind(result):
            await record_usage(
                self._database,
                chat_id=asking_chat.id if asking_chat else monitor.owner_chat_id,
                now=now,
                usage=usage,
                kind=kind,
            )
        if rows and self._on_queued is not None:
            self._on_queued()
        logger.info(
            "monitor %d run %d: %s, %d items, %d new, %d deliveries",
            monitor.id, run.id, status, len(result.items), len(result.new_item_ids), len(rows),
        )  # fmt: skip
        return RunSummary(
            run_id=run.id,
            monitor_id=monitor.id,
            scheduled_for=run.scheduled_for,
            status=status,
            digest=result.digest,
            items=len(result.items),
            new_items=len(result.new_item_ids),
            deliveries=len(rows),
            artifacts=artifacts,
            source_errors=source_errors,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
        )

    async def _failed(
        self, monitor: MonitorRecord, run: RunRecord, schedule: Schedule | None, failure: _Failure
    ) -> RunSummary:
        now = self._clock()
        shown = failure.error + (f" (error id {failure.error_id})" if failure.error_id else "")
        await self._runs.fail_run(run.id, error=shown[:2000], finished_at=now)
        summary = RunSummary(
            run_id=run.id,
            monitor_id=monitor.id,
            scheduled_for=run.scheduled_for,
            status="failed",
            error=failure.error,
            error_id=failure.error_id,
            source_errors=failure.source_errors,
        )
        if run.monitor_id is None:  # a /digest preview does not count against the monitor
            return summary
        failures = monitor.consecutive_failures + 1
        next_run = self._retry_time(schedule, run.scheduled_for, now, failures) if schedule is not None else None
        updated = await self._monitors.record_result(
            monitor.id, status="failed", finished_at=now, error=failure.error[:1000], next_run_at=next_run
        )
        threshold = self._settings.failure_notice_after
        if updated is not None and updated.consecutive_failures >= threshold and updated.failure_notified_at is None:
            await self._send_failure_notice(updated, failure, next_run)
        return summary

    def _retry_time(self, schedule: Schedule, scheduled_for: datetime, now: datetime, failures: int) -> datetime:
        """The next scheduled time; once the failure notice is due, later ones are skipped, doubling each time."""
        start = max(scheduled_for, now)
        over = failures - self._settings.failure_notice_after
        if over >= 0:
            cap = self._settings.max_failure_backoff_hours * 3600
            start += timedelta(seconds=min(schedule.min_gap_seconds() * (2 ** min(over + 1, 20) - 1), cap))
        return schedule.next_run(start)

    async def _send_failure_notice(self, monitor: MonitorRecord, failure: _Failure, next_run: datetime | None) -> None:
        """Tell the owner chat once (through the outbox) that the monitor keeps failing, with the errors."""
        now = self._clock()
        chat = await self._chats.get(monitor.owner_chat_id)
        zone = ZoneInfo(chat.timezone if chat else "UTC")
        errors = "\n".join(f"- {escape_markdown(error)}" for error in failure.source_errors[:8])
        errors = errors or f"- {escape_markdown(failure.error)}"
        when = f"; next try {next_run.astimezone(zone):%Y-%m-%d %H:%M %Z}" if next_run else ""
        text = (
            f"⚠️ Monitor #{monitor.id} “{escape_markdown(monitor.topic)}” failed "
            f"{monitor.consecutive_failures} runs in a row:\n"
            f"{errors}\nI'll keep trying, less often{when}. Send /pause {monitor.id} to stop it."
        )
        notice = await self._runs.open_search_run(chat_id=monitor.owner_chat_id, query=f"notice: monitor #{monitor.id}")
        await self._deliveries.complete_run(
            notice.id,
            outcome=RunOutcome(finished_at=now, stats={"kind": NOTICE_KIND, "monitor_id": monitor.id, "text": text}),
        )
        await self._monitors.update(monitor.id, failure_notified_at=now)
        logger.warning("monitor %d failed %d runs in a row; owner told", monitor.id, monitor.consecutive_failures)
        if self._on_queued is not None:
            self._on_queued()


def run_file_stem(monitor: MonitorRecord, run: RunRecord) -> str:
    """The name of a run's files on disk and as sent: `deepseek-20261122-0830-m1-r7`, `…-search-r8` for /search."""
    owner = "search" if monitor.id == TRANSIENT_MONITOR_ID else f"m{monitor.id}"
    return export_stem(monitor.topic, run.scheduled_for, f"{owner}-r{run.id}")


def _digest_of(run: RunRecord | None) -> Digest | None:
    if run is None or run.digest is None:
        return None
    try:
        return Digest.model_validate(run.digest)
    except ValidationError:
        return None


def item_record(item: Item) -> ItemRecord:
    """A collected item as the database stores it."""
    return ItemRecord(
        id=item.id,
        source=item.source,
        url=item.url,
        title=item.title,
        text=item.text,
        author=item.author,
        published=item.published,
        engagement=item.engagement.model_dump(),
        language=item.language,
        query=item.query,
        collected_at=item.collected_at,
    )


def _to_item(record: ItemRecord) -> Item | None:
    """The stored item as a source item again, or None if it no longer validates."""
    try:
        return _item_of(record)
    except ValidationError:
        return None


def _item_of(record: ItemRecord) -> Item:
    return Item(
        id=record.id,
        source=record.source,
        url=record.url,
        title=record.title,
        text=record.text,
        author=record.author,
        published=record.published,
        engagement=Engagement.model_validate(record.engagement),
        language=record.language,
        query=record.query,
        collected_at=record.collected_at,
    )


def usage_by_kind(result: PipelineResult) -> list[tuple[UsageKind, LlmUsage]]:
    """A run's usage as `/usage` shows it: the embeddings of its items apart from its language-model steps."""
    steps = result.report.usage if result.report is not None else {}
    if "embeddings" not in steps:
        return [("monitor", result.usage)]
    language = sum_usage([usage for step, usage in steps.items() if step not in ("total", "embeddings")])
    return [("monitor", language), ("embedding", steps["embeddings"])]
