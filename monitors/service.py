"""The monitor service: create, list, change and delete monitors for a chat, and run them (scheduled or now)."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Final, Literal

from pydantic_ai.models import Model

from monitors.alerts import AlertService
from monitors.briefings import BriefingService
from monitors.destination_send import DestinationSenders
from monitors.destinations import DestinationService
from monitors.feedback import MonitorFeedback
from monitors.feeds import MonitorFeeds
from monitors.reader_rules import ReaderRuleService
from monitors.runner import MonitorRunner, PipelineFunction, SourceResolver, transient_monitor
from monitors.schedule import Schedule, ScheduleError, latest_due_time, parse_schedule
from monitors.sharing import MonitorSharing
from monitors.views import (
    MonitorAccessError,
    MonitorNotFoundError,
    MonitorSettings,
    MonitorView,
    RunSummary,
    effective_timezone,
    monitor_view,
    schedule_of,
)
from research import ProgressCallback, run_pipeline
from sources import DEFAULT_SOURCES, HttpClient, refused_feeds
from storage import ChatRecord, Database, MonitorChanges, MonitorListing, MonitorRecord, RunStatus, SubscriptionRecord
from storage.repositories import ChatRepository, MonitorRepository, RunRepository, SubscriptionRepository

logger = logging.getLogger(__name__)

LeftRunning = Literal["skip", "take_over", "fail"]
"""What `run_monitor` does with a run for the same time that is still "running" (see there)."""

MonitorListener = Callable[[int], Awaitable[None]]
"""Told the id of a monitor that was created, changed, paused, resumed or deleted (the scheduler listens)."""

MAX_LOOKBACK_HOURS: Final = 24 * 31
SEARCH_LOOKBACK_HOURS: Final = 24 * 7
"""How far back a one-off `/search` looks by default."""
MAX_LIST_ENTRIES: Final = 20
"""Extra queries, include and exclude keywords: at most this many each."""


class _Unchanged(Enum):
    UNCHANGED = "unchanged"


UNCHANGED: Final = _Unchanged.UNCHANGED
"""Default of `update_monitor`'s nullable options: leave the value as it is."""


def split_source_specs(sources: str | Sequence[str] | None) -> list[str]:
    """Source specs as a list: `"hn, news"` → `["hn", "news"]`; empty → the default mix. A string is split at
    commas; pass a sequence to keep a feed URL that contains commas whole."""
    raw = (sources or "").split(",") if isinstance(sources, str) or sources is None else list(sources)
    specs = list(dict.fromkeys(spec.strip() for spec in raw if spec.strip()))
    return specs or list(DEFAULT_SOURCES)


@dataclass(frozen=True, kw_only=True)
class MonitorFields:
    """A new monitor's fields, checked and cleaned (see `MonitorService.check_fields`)."""

    topic: str
    schedule: Schedule
    sources: list[str]
    extra_queries: list[str]
    include_keywords: list[str]
    exclude_keywords: list[str]
    lookback_hours: int


class MonitorService:
    """Everything chats (commands, agent tools) do with monitors; every action is scoped to the asking chat."""

    def __init__(
        self,
        database: Database,
        *,
        resolve_sources: SourceResolver,
        light_model: Model | None,
        heavy_model: Model | None,
        out_dir: Path,
        settings: MonitorSettings | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        pipeline: PipelineFunction = run_pipeline,
        on_deliveries_queued: Callable[[], None] | None = None,
        destinations: DestinationSenders | None = None,
        http: HttpClient | None = None,
    ) -> None:
        self.settings = settings or MonitorSettings()
        self.database = database
        self._clock = clock
        self._resolve = resolve_sources
        self._chats = ChatRepository(database)
        self._monitors = MonitorRepository(database)
        self._runs = RunRepository(database)
        self._subscriptions = SubscriptionRepository(database)
        self._runner = MonitorRunner(
            database,
            resolve_sources=resolve_sources,
            light_model=light_model,
            heavy_model=heavy_model,
            out_dir=out_dir,
            settings=self.settings,
            clock=clock,
            pipeline=pipeline,
            on_deliveries_queued=on_deliveries_queued,
        )
        self._listeners: list[MonitorListener] = []
        self.sharing = MonitorSharing(self, database, clock=clock, on_queued=on_deliveries_queued)
        """Sharing and subscriptions: share, browse, subscribe, a subscriber's own pause and delivery, handovers."""
        self.briefings = BriefingService(
            database,
            out_dir=out_dir,
            clock=clock,
            min_interval_seconds=self.settings.min_interval_seconds,
            on_queued=on_deliveries_queued,
        )
        """Each chat's briefing: its time, and the briefings that are due."""
        self.feeds = MonitorFeeds(database, clock=clock)
        """Each monitor's Atom and JSON feed: its token, and the documents built from its stored runs."""
        self.destinations = (
            DestinationService(database, http=http, senders=destinations, sharing=self.sharing, clock=clock)
            if destinations is not None and http is not None
            else None
        )
        """Email, Discord, ntfy, webhooks… receiving monitors and briefings (None: this process has no senders)."""

        self.feedback = MonitorFeedback(database, clock=clock)
        """Readers' marks on digests (per monitor and chat), each chat's view of a run, and "why this story"."""

        self.rules = ReaderRuleService(self, database)
        """Each chat's own rules on the monitors it receives (/filter)."""
        self.alerts = AlertService(database, clock=clock)
        """Each chat's alerts on the monitors it receives (checked by the runner on every run)."""

    def add_listener(self, listener: MonitorListener) -> None:
        """Call `listener(monitor_id)` after every change to a monitor's existence or schedule."""
        self._listeners.append(listener)

    # ---- managing monitors ------------------------------------------------------------------------------

    async def create_monitor(
        self,
        chat_id: int,
        topic: str,
        *,
        schedule_text: str = "",
        sources: str | Sequence[str] | None = None,
        timezone: str | None = None,
        extra_queries: Sequence[str] = (),
        include_keywords: Sequence[str] = (),
        exclude_keywords: Sequence[str] = (),
        lookback_hours: int | None = None,
        language: str | None = None,
        quiet: bool = True,
        paused: bool = False,
        shared: bool = False,
    ) -> MonitorView:
        """Create a monitor owned by (and delivering to) the chat. Raises `ScheduleError` or `ValueError` with a
        message for the person when the topic, schedule, sources or window are not acceptable."""
        chat = await self.chat(chat_id)
        fields = await self.check_fields(
            topic,
            schedule_text=schedule_text,
            timezone=timezone or self.chat_timezone(chat),
            sources=sources,
            extra_queries=extra_queries,
            include_keywords=include_keywords,
            exclude_keywords=exclude_keywords,
            lookback_hours=lookback_hours,
        )
        now = self._clock()
        record = await self._monitors.create(
            owner_chat_id=chat.id,
            topic=fields.topic,
            schedule=fields.schedule.to_text(),
            timezone=fields.schedule.timezone,
            sources=fields.sources,
            extra_queries=fields.extra_queries,
            include_keywords=fields.include_keywords,
            exclude_keywords=fields.exclude_keywords,
            lookback_hours=fields.lookback_hours,
            language=language,
            quiet=quiet,
            paused=paused,
            shared=shared,
            next_run_at=None if paused else fields.schedule.next_run(now),
            now=now,
        )
        logger.info("monitor %d created for chat %d: %r %s", record.id, chat.id, fields.topic, record.schedule)
        await self.notify(record.id)
        return await self.view_of(record, chat)

    async def check_fields(
        self,
        topic: str,
        *,
        schedule_text: str,
        timezone: str,
        sources: str | Sequence[str] | None = None,
        extra_queries: Sequence[str] = (),
        include_keywords: Sequence[str] = (),
        exclude_keywords: Sequence[str] = (),
        lookback_hours: int | None = None,
    ) -> MonitorFields:
        """A new monitor's fields checked and cleaned as `create_monitor` stores them; raises `ScheduleError` or
        `ValueError` with a sentence for the person (what an import lists next to a refused entry)."""
        schedule = self._parse(schedule_text, timezone)
        return MonitorFields(
            topic=self._clean_topic(topic),
            schedule=schedule,
            sources=await self.check_sources(sources),
            extra_queries=_clean_list(extra_queries, "extra queries"),
            include_keywords=_clean_list(include_keywords, "include keywords"),
            exclude_keywords=_clean_list(exclude_keywords, "exclude keywords"),
            lookback_hours=self._lookback(lookback_hours, schedule),
        )

    async def list_monitors(
        self, chat_id: int, *, all_chats: bool = False, chat: ChatRecord | None = None
    ) -> list[MonitorView]:
        """The chat's monitors (owned or subscribed), or every monitor for an admin with `all_chats`. `chat` is the
        chat's record when the caller has it already (a command's turn): it is not read again."""
        if chat is None or chat.id != chat_id:
            chat = await self.chat(chat_id)
        listing = await self._monitors.listing(chat.id, all_chats=all_chats)
        return [self._view(entry, chat) for entry in listing]  # one statement, whatever the number of monitors

    async def get_monitor(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        record = await self.visible(monitor_id, chat_id, is_admin)
        return await self.view_of(record, await self.chat(chat_id))

    async def pause(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        await self.owned(monitor_id, chat_id, is_admin)
        record = await self._monitors.update(monitor_id, paused=True, next_run_at=None)
        await self.notify(monitor_id)
        return await self.view_of(self._exists(record, monitor_id), await self.chat(chat_id))

    async def resume(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        """Unpause; the next run is the schedule's next time from now (missed runs are not made up)."""
        monitor = await self.owned(monitor_id, chat_id, is_admin)
        next_run = schedule_of(monitor).next_run(self._clock())
        record = await self._monitors.update(monitor_id, paused=False, next_run_at=next_run)
        await self.notify(monitor_id)
        return await self.view_of(self._exists(record, monitor_id), await self.chat(chat_id))

    async def delete(self, monitor_id: int, *, chat_id: int, is_admin: bool = False) -> MonitorView:
        """Delete the monitor with its runs and subscriptions; returns what it was. The other chats that received
        it are told (through the outbox)."""
        monitor = await self.owned(monitor_id, chat_id, is_admin)
        view = await self.view_of(monitor, await self.chat(chat_id))
        readers = await self._subscriptions.subscribers(monitor_id)
        await self._monitors.delete(monitor_id)
        told = await self.sharing.tell_deleted(monitor, readers, by_chat_id=chat_id)
        logger.info("monitor %d deleted by chat %d; %d subscriber(s) told", monitor_id, chat_id, told)
        await self.notify(monitor_id)
        return view

    async def update_monitor(
        self,
        monitor_id: int,
        *,
        chat_id: int,
        is_admin: bool = False,
        topic: str | None = None,
        schedule_text: str | None = None,
        timezone: str | None = None,
        sources: str | Sequence[str] | None = None,
        extra_queries: Sequence[str] | None = None,
        include_keywords: Sequence[str] | None = None,
        exclude_keywords: Sequence[str] | None = None,
        lookback_hours: int | None = None,
        language: str | _Unchanged | None = UNCHANGED,
        quiet: bool | None = None,
    ) -> MonitorView:
        """Change what is given (None leaves a field as it is). A new topic drops the stored query plan; a new
        schedule or timezone moves the next run."""
        monitor = await self.owned(monitor_id, chat_id, is_admin)
        await self._apply_update(
            monitor,
            topic=topic,
            schedule_text=schedule_text,
            timezone=timezone,
            sources=sources,
            extra_queries=extra_queries,
            include_keywords=include_keywords,
            exclude_keywords=exclude_keywords,
            lookback_hours=lookback_hours,
            language=language,
            quiet=quiet,
        )
        await self.notify(monitor_id)
        return await self.view_of(
            self._exists(await self._monitors.get(monitor_id), monitor_id), await self.chat(chat_id)
        )

    async def _apply_update(
        self,
        monitor: MonitorRecord,
        *,
        topic: str | None,
        schedule_text: str | None,
        timezone: str | None,
        sources: str | Sequence[str] | None,
        extra_queries: Sequence[str] | None,
        include_keywords: Sequence[str] | None,
        exclude_keywords: Sequence[str] | None,
        lookback_hours: int | None,
        language: str | _Unchanged | None,
        quiet: bool | None,
    ) -> None:
        current = schedule_of(monitor)
        schedule = current
        if schedule_text is not None or timezone is not None:
            # The stored text ends in "in <zone>", which would override a new timezone: parse its body alone.
            body = schedule_text if schedule_text is not None else current.body_text()
            schedule = self._parse(body, timezone or current.timezone)
        if topic is not None:
            topic = self._clean_topic(topic)
        if topic is not None and topic != monitor.topic:
            await self._monitors.set_plan(monitor.id, None)  # the plan was made for the old topic
        changes: MonitorChanges = {}
        if topic is not None:
            changes["topic"] = topic
        if sources is not None:
            changes["sources"] = await self.check_sources(sources)
        if extra_queries is not None:
            changes["extra_queries"] = _clean_list(extra_queries, "extra queries")
        if include_keywords is not None:
            changes["include_keywords"] = _clean_list(include_keywords, "include keywords")
        if exclude_keywords is not None:
            changes["exclude_keywords"] = _clean_list(exclude_keywords, "exclude keywords")
        if lookback_hours is not None:
            changes["lookback_hours"] = self._lookback(lookback_hours, schedule)
        if quiet is not None:
            changes["quiet"] = quiet
        if not isinstance(language, _Unchanged):
            changes["language"] = language
        if schedule != current:
            changes["schedule"] = schedule.to_text()
            changes["timezone"] = schedule.timezone
            changes["next_run_at"] = None if monitor.paused else schedule.next_run(self._clock())
        if changes:
            await self._monitors.update(monitor.id, **changes)

    async def subscribe(self, chat_id: int, monitor_id: int) -> SubscriptionRecord:
        """Have the chat receive the monitor's digests too (the caller decides who may do this)."""
        await self.chat(chat_id)
        if await self._monitors.get(monitor_id) is None:
            raise MonitorNotFoundError(_not_found(monitor_id))
        return await self._subscriptions.subscribe(monitor_id, chat_id)

    async def unsubscribe(self, chat_id: int, monitor_id: int) -> bool:
        return await self._subscriptions.unsubscribe(monitor_id, chat_id)

    # ---- running ----------------------------------------------------------------------------------------

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
        run = await self._runs.open_run(monitor_id, scheduled_for, now=now)
        if run is None and left_running == "take_over":
            run = await self._runs.take_over(monitor_id, scheduled_for, now=now)
            if run is not None:
                logger.warning(
                    "monitor %d: running again the run for %s that a stopped worker left", monitor_id, run.id
                )
        if run is None and left_running == "fail":
            left = await self._runs.take_over(monitor_id, scheduled_for, now=now)
            if left is not None:
                reason = "abandoned: the workers running it stopped during the run, several times"
                return await self._runner.fail(monitor, left, schedule, reason)
        if run is None:
            await self._skip_taken(monitor, schedule, scheduled_for)
            return None
        return await self._runner.execute(monitor, run, schedule=schedule, cancel_leaves_running=left_running != "skip")

    async def check_pending_alerts(self) -> int:
        """The alerts' recovery pass (`MonitorRunner.check_pending_alerts`): stored runs whose alerts a stopped
        process left unchecked are checked now; the number of notices queued."""
        return await self._runner.check_pending_alerts()

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
        monitor = await self.visible(monitor_id, chat_id, is_admin)
        chat = await self.chat(chat_id)
        now = self._clock()
        subscribers = [subscriber.id for subscriber in await self._subscriptions.subscribers(monitor_id)]
        run = await self._runs.open_run(monitor_id, now, now=now) if subscribers == [chat.id] else None
        if run is None:
            run = await self._runs.open_search_run(chat_id=chat.id, query=monitor.topic, now=now)
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
        mix), and queue the digest with its files for this chat only. No monitor is created or touched; the
        summary's `monitor_id` is `TRANSIENT_MONITOR_ID`. Raises `ValueError` for an empty or too long query, a
        bad window or unknown sources; a failing run is reported in the summary (nothing is queued then)."""
        chat = await self.chat(chat_id)
        topic = self._clean_topic(query)
        specs = await self.check_sources(sources)
        _check_lookback(lookback_hours)
        now = self._clock()
        monitor = transient_monitor(
            owner_chat_id=chat.id,
            topic=topic,
            sources=specs,
            timezone=self.chat_timezone(chat),
            lookback_hours=lookback_hours,
            now=now,
        )
        run = await self._runs.open_search_run(chat_id=chat.id, query=topic, now=now)
        logger.info("search run %d for chat %d: %r", run.id, chat.id, topic)
        return await self._runner.execute(
            monitor, run, schedule=None, asking_chat=chat, progress=progress, use_models=use_models
        )

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

    # ---- helpers ----------------------------------------------------------------------------------------

    async def notify(self, monitor_id: int) -> None:
        for listener in self._listeners:
            try:
                await listener(monitor_id)
            except Exception:  # a listener's bug must not undo or fail the change the person asked for
                logger.exception("monitor listener failed for monitor %d", monitor_id)

    async def chat(self, chat_id: int) -> ChatRecord:
        chat = await self._chats.get(chat_id)
        if chat is None:
            raise LookupError(f"chat {chat_id} does not exist")
        return chat

    async def visible(self, monitor_id: int, chat_id: int, is_admin: bool) -> MonitorRecord:
        """The monitor if the chat owns it or is subscribed to it (or the caller is an admin)."""
        monitor = await self._monitors.get(monitor_id)
        if monitor is None:
            raise MonitorNotFoundError(_not_found(monitor_id))
        if is_admin or monitor.owner_chat_id == chat_id:
            return monitor
        if any(s.monitor_id == monitor_id and s.active for s in await self._subscriptions.for_chat(chat_id)):
            return monitor
        raise MonitorAccessError(_not_found(monitor_id))

    async def owned(self, monitor_id: int, chat_id: int, is_admin: bool) -> MonitorRecord:
        """The monitor if the chat owns it (or the caller is an admin); subscribers may not change it."""
        monitor = await self._monitors.get(monitor_id)
        if monitor is None:
            raise MonitorNotFoundError(_not_found(monitor_id))
        if not is_admin and monitor.owner_chat_id != chat_id:
            raise MonitorAccessError(_not_found(monitor_id))
        return monitor

    @staticmethod
    def _exists(record: MonitorRecord | None, monitor_id: int) -> MonitorRecord:
        if record is None:
            raise MonitorNotFoundError(_not_found(monitor_id))
        return record

    def chat_timezone(self, chat: ChatRecord) -> str:
        return effective_timezone(chat, self.settings.default_timezone)

    def _parse(self, schedule_text: str, timezone: str) -> Schedule:
        return parse_schedule(schedule_text, timezone=timezone, min_interval_seconds=self.settings.min_interval_seconds)

    def _clean_topic(self, topic: str) -> str:
        clean = " ".join(topic.split())
        if not clean:
            raise ValueError("Give the monitor a topic, like /track DeepSeek.")
        if len(clean) > self.settings.max_topic_chars:
            raise ValueError(f"That topic is too long; keep it under {self.settings.max_topic_chars} characters.")
        return clean

    async def check_sources(self, sources: str | Sequence[str] | None) -> list[str]:
        """The source specs (the default mix when none), checked now: a `ValueError` for the person names unknown
        or switched-off sources, and feeds the fetcher would refuse (private or loopback addresses, with the
        setting that allows them), so a monitor is never created only to fail at its first run."""
        specs = split_source_specs(sources)
        resolved = self._resolve(specs)  # raises ValueError naming unknown or switched-off sources
        refused = await refused_feeds(resolved)
        if refused:
            raise ValueError("Lookout will not fetch " + "; ".join(refused) + ".")
        return specs

    def _view(self, listing: MonitorListing, chat: ChatRecord) -> MonitorView:
        """`view_of` from what was read already (a listing reads every monitor's in one statement)."""
        return monitor_view(listing, chat, default_timezone=self.settings.default_timezone)

    def _lookback(self, hours: int | None, schedule: Schedule) -> int:
        if hours is None:
            # A day at least (sources index late), at most a week, else the time between runs.
            return min(max(math.ceil(schedule.min_gap_seconds() / 3600), 24), 24 * 7)
        return _check_lookback(hours)

    async def view_of(self, monitor: MonitorRecord, chat: ChatRecord) -> MonitorView:
        """The monitor as `chat` sees it: times in its timezone, its own subscription's state. Its subscription,
        receivers and latest run are read in one statement (`/monitors`'s listing, for one monitor); the record
        itself is the one given (a caller may show what a monitor was just before deleting it)."""
        read = await self._monitors.listing_of(monitor.id, chat.id)
        if read is None:  # gone since (a view of a monitor just deleted): nobody receives it, it has no runs
            listing = MonitorListing(monitor=monitor, subscription=None, receivers=0, latest_run_stats=None)
        else:
            listing = replace(read, monitor=monitor)
        return self._view(listing, chat)


def _check_lookback(hours: int) -> int:
    if not 1 <= hours <= MAX_LOOKBACK_HOURS:
        raise ValueError(f"The look-back window must be between 1 hour and {MAX_LOOKBACK_HOURS // 24} days.")
    return hours


def _not_found(monitor_id: int) -> str:
    return f"There is no monitor #{monitor_id} in this chat; /monitors lists yours."


def _clean_list(values: Sequence[str], what: str) -> list[str]:
    cleaned = list(dict.fromkeys(" ".join(value.split()) for value in values if value.strip()))
    if len(cleaned) > MAX_LIST_ENTRIES:
        raise ValueError(f"Too many {what}: at most {MAX_LIST_ENTRIES}.")
    return cleaned


__all__ = [
    "SEARCH_LOOKBACK_HOURS",
    "UNCHANGED",
    "MonitorFields",
    "MonitorListener",
    "MonitorService",
    "RunSummary",
    "effective_timezone",
    "schedule_of",
    "split_source_specs",
]
