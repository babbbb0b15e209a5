"""Running monitors: a scheduled run when it is due (once per monitor and time, whoever fires it), `/digest`'s run
now, and `/search`'s one-off run; each opens its run and hands it to the `MonitorRunner`, which stores what it
found and queues the outbox rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Literal

from kernel import Clock
from monitors.budget import ChatBudget
from monitors.catalogue import MonitorCatalogue, check_lookback
from monitors.recorder import RunRecorder
from monitors.runner import MonitorRunner, SearchRequest
from monitors.schedule import Schedule, ScheduleError, latest_due_time
from monitors.views import RunSummary, schedule_of
from research import ProgressCallback
from storage import MonitorRecord, RunStatus
from storage.repositories import MonitorRepository, RunRepository, SubscriptionRepository, UsageRepository

__all__ = ["SEARCH_LOOKBACK_HOURS", "LeftRunning", "MonitorRuns"]

logger = logging.getLogger(__name__)

LeftRunning = Literal["skip", "take_over", "fail"]
"""What `run_monitor` does with a run for the same time that is still "running" (see there)."""

SEARCH_LOOKBACK_HOURS: Final = 24 * 7
"""How far back a one-off `/search` looks by default."""


class MonitorRuns:
    """Runs of the catalogue's monitors: scheduled, `/digest` and `/search` (see the module docstring)."""

    def __init__(
        self,
        catalogue: MonitorCatalogue,
        runner: MonitorRunner,
        recorder: RunRecorder,
        *,
        clock: Clock,
        chat_daily_tokens: int = 0,
    ) -> None:
        """`chat_daily_tokens` (CHAT_DAILY_TOKENS, 0: no limit): a scheduled run whose owner chat has spent it today
        runs without the language model, as that chat's `/digest` would."""
        self._catalogue = catalogue
        self._budget = ChatBudget(usage=UsageRepository(catalogue.database), daily_tokens=chat_daily_tokens)
        self._runner = runner
        self._clock = clock
        self._monitors = MonitorRepository(catalogue.database)
        self._recorder = recorder
        self._runs = RunRepository(catalogue.database)  # reads: an existing run for a time
        self._subscriptions = SubscriptionRepository(catalogue.database)

    async def run_due(self, monitor_id: int, *, left_running: LeftRunning = "skip") -> RunSummary | None:
        """Run the monitor if it is due now, for the latest scheduled time that has passed (a monitor that missed
        runs while nothing ran runs once, never a backlog); None when it is not due (or gone, or paused)."""
        monitor = await self._monitors.get(monitor_id)
        if monitor is None or monitor.paused:
            return None
        now = self._clock()
        try:
            schedule = schedule_of(monitor)
        except ScheduleError as error:
            logger.error("monitor %d has an unreadable schedule %r: %s", monitor_id, monitor.schedule, error)
            return None
        if monitor.next_run_at is None:
            await self._monitors.set_next_run(monitor_id, schedule.next_run(now))
            return None
        if monitor.next_run_at > now:
            logger.debug("monitor %d not due until %s", monitor_id, monitor.next_run_at.isoformat())
            return None
        scheduled_for = latest_due_time(schedule, monitor.next_run_at, now)
        return await self.run_monitor(monitor_id, scheduled_for, left_running=left_running)

    async def run_monitor(
        self, monitor_id: int, scheduled_for: datetime, *, left_running: LeftRunning = "skip"
    ) -> RunSummary | None:
        """Run the monitor for its scheduled time and queue the digest for every subscribed chat.

        None when there is nothing to do: no such monitor, paused, nobody subscribed, or this scheduled time
        already has a run (a second firing). Never raises for a failing run: it is logged and marked failed.
        `left_running` says what to do with a run for this time that is still "running": leave it to whoever runs
        it (`skip`, the embedded scheduler's second firing), run it again (`take_over`: a job queue's worker died
        during it and its job came back) or mark it failed and move on (`fail`: it killed its workers too often).
        """
        monitor = await self._monitors.get(monitor_id)
        if monitor is None or monitor.paused:
            return None
        try:
            schedule = schedule_of(monitor)
        except ScheduleError as error:
            logger.error("monitor %d has an unreadable schedule %r: %s", monitor_id, monitor.schedule, error)
            return None
        now = self._clock()
        if not await self._subscriptions.subscribers(monitor_id):
            logger.info("monitor %d has no active subscriber; skipping %s", monitor_id, scheduled_for.isoformat())
            await self._monitors.update(monitor_id, next_run_at=schedule.next_run(max(scheduled_for, now)))
            return None
        run = await self._recorder.open_scheduled(monitor_id, scheduled_for, now=now)
        if run is None and left_running == "take_over":
            run = await self._recorder.take_over(monitor_id, scheduled_for, now=now)
            if run is not None:
                logger.warning(
                    "monitor %d: running again the run for %s that a stopped worker left", monitor_id, run.id
                )
        if run is None and left_running == "fail":
            left = await self._recorder.take_over(monitor_id, scheduled_for, now=now)
            if left is not None:
                reason = "abandoned: the workers running it stopped during the run, several times"
                return await self._runner.fail(monitor, left, schedule, reason)
        if run is None:
            await self._skip_taken(monitor, schedule, scheduled_for)
            return None
        use_models = await self._budget.allows(monitor.owner_chat_id, now)
        if not use_models:
            logger.info("monitor %d: its owner chat spent today's model budget; running without the model", monitor_id)
        return await self._runner.execute(
            monitor, run, schedule=schedule, use_models=use_models, cancel_leaves_running=left_running != "skip"
        )

    async def run_now(
        self,
        monitor_id: int,
        chat_id: int,
        *,
        is_admin: bool = False,
        progress: ProgressCallback | None = None,
        use_models: bool = True,
    ) -> RunSummary:
        """Run the monitor now for `/digest` and queue the digest for this chat only (`progress` sees each stage;
        `use_models=False`: heuristic critique and extractive digest, for a chat whose token budget is spent).

        When this chat is the monitor's only subscriber the run counts as one of the monitor's runs (what it
        reports is not repeated next time); otherwise it is a preview that leaves the others' digests alone.
        """
        monitor = await self._catalogue.visible(monitor_id, chat_id, is_admin)
        chat = await self._catalogue.chat(chat_id)
        now = self._clock()
        subscribers = [subscriber.id for subscriber in await self._subscriptions.subscribers(monitor_id)]
        run = await self._recorder.open_scheduled(monitor_id, now, now=now) if subscribers == [chat.id] else None
        if run is None:
            run = await self._recorder.open_search(chat_id=chat.id, query=monitor.topic, now=now)
        return await self._runner.execute(
            monitor, run, schedule=None, asking_chat=chat, progress=progress, use_models=use_models
        )

    async def search_now(
        self,
        chat_id: int,
        query: str,
        *,
        sources: str | Sequence[str] | None = None,
        lookback_hours: int = SEARCH_LOOKBACK_HOURS,
        progress: ProgressCallback | None = None,
        use_models: bool = True,
    ) -> RunSummary:
        """A one-off `/search`: collect, critique and synthesize `query` now, from `sources` (default: the default
        mix), and queue the digest with its files for this chat only. No monitor is created or touched: the run is
        the chat's (the summary's `monitor_id` is None). Raises `ValueError` for an empty or too long query, a
        bad window or unknown sources; a failing run is reported in the summary (nothing is queued then)."""
        chat = await self._catalogue.chat(chat_id)
        topic = self._catalogue.clean_topic(query)
        specs = await self._catalogue.check_sources(sources)
        check_lookback(lookback_hours)
        now = self._clock()
        request = SearchRequest(
            topic=topic,
            sources=tuple(specs),
            lookback_hours=lookback_hours,
            timezone=self._catalogue.chat_timezone(chat),
            chat=chat,
        )
        run = await self._recorder.open_search(chat_id=chat.id, query=topic, now=now)
        logger.info("search run %d for chat %d: %r", run.id, chat.id, topic)
        return await self._runner.search(request, run, progress=progress, use_models=use_models)

    async def _skip_taken(self, monitor: MonitorRecord, schedule: Schedule, scheduled_for: datetime) -> None:
        """A run for this time exists. If it is finished (e.g. failed as abandoned after a crash) and the
        monitor still points at this time, move the monitor on, or it would stay due forever."""
        recent = await self._runs.list_for_monitor(monitor.id, limit=50)
        existing = next((run for run in recent if run.scheduled_for == scheduled_for), None)
        if existing is None or existing.status is RunStatus.RUNNING:
            logger.info("monitor %d: the run for %s is already under way", monitor.id, scheduled_for.isoformat())
            return
        if monitor.next_run_at is not None and monitor.next_run_at <= scheduled_for:
            next_run = schedule.next_run(max(scheduled_for, self._clock()))
            logger.info("monitor %d: %s already ran; next run %s", monitor.id, scheduled_for, next_run.isoformat())
            await self._monitors.update(monitor.id, next_run_at=next_run)
