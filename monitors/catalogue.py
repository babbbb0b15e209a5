"""The monitor catalogue: create, list, get, change, pause, resume and delete a chat's monitors, and the one
definition of which monitors a chat may see (`visible`) and change (`owned`).

Running monitors is `monitors.runs.MonitorRuns`; sharing, briefings, feeds and the rest are their own services,
gathered with both in `MonitorService`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Final

from monitors.notices import queue_notice
from monitors.runner import SourceResolver
from monitors.schedule import Schedule, parse_schedule
from monitors.service_base import MonitorStorage, ServiceStorage
from monitors.views import (
    MAX_TOPIC_CHARS,
    MonitorAccessError,
    MonitorNotFoundError,
    MonitorSettings,
    MonitorView,
    effective_timezone,
    monitor_name,
    monitor_view,
    schedule_of,
)
from sources import DEFAULT_SOURCES, refused_feeds
from storage import ChatRecord, Database, MonitorChanges, MonitorListing, MonitorRecord, SubscriptionRecord

logger = logging.getLogger(__name__)

MonitorListener = Callable[[int], Awaitable[None]]
"""Told the id of a monitor that was created, changed, paused, resumed or deleted (the scheduler listens)."""

MAX_LOOKBACK_HOURS: Final = 24 * 31
"""The longest look-back window a monitor or a search may ask for: a month."""
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


class MonitorCatalogue(MonitorStorage):
    """The monitors of each chat: every action is scoped to the asking chat (see `visible` and `owned`)."""

    def __init__(
        self, storage: ServiceStorage, *, resolve_sources: SourceResolver, settings: MonitorSettings | None = None
    ) -> None:
        super().__init__(storage)
        self.settings = settings or MonitorSettings()
        self._resolve = resolve_sources
        self._listeners: list[MonitorListener] = []

    @property
    def database(self) -> Database:
        """The database the catalogue, and every part built over it, reads and writes."""
        return self._database

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
            topic=self.clean_topic(topic),
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
        told = await self._tell_deleted(monitor, readers, by_chat_id=chat_id)
        logger.info("monitor %d deleted by chat %d; %d subscriber(s) told", monitor_id, chat_id, told)
        await self.notify(monitor_id)
        return view

    async def _tell_deleted(self, monitor: MonitorRecord, readers: Sequence[ChatRecord], *, by_chat_id: int) -> int:
        """Tell the chats that received a monitor which was just deleted; returns how many were told."""
        now = self._clock()
        told = 0
        for chat in readers:
            if chat.id == by_chat_id or not chat.active:
                continue
            text = (
                f"Monitor {monitor_name(monitor.id, monitor.topic)} was deleted by the chat that owned it, so no more "
                "digests will come from it. `/browse` lists the shared monitors; `/track` starts your own."
            )
            await queue_notice(self.database, chat_id=chat.id, text=text, monitor_id=monitor.id, now=now)
            told += 1
        self._queued(told)
        return told

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
            topic = self.clean_topic(topic)
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

    def clean_topic(self, topic: str) -> str:
        clean = " ".join(topic.split())
        if not clean:
            raise ValueError("Give the monitor a topic, like /track DeepSeek.")
        if len(clean) > MAX_TOPIC_CHARS:
            raise ValueError(f"That topic is too long; keep it under {MAX_TOPIC_CHARS} characters.")
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
        return check_lookback(hours)

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


def check_lookback(hours: int) -> int:
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
    "MAX_LOOKBACK_HOURS",
    "UNCHANGED",
    "MonitorCatalogue",
    "MonitorFields",
    "MonitorListener",
    "check_lookback",
    "split_source_specs",
]
