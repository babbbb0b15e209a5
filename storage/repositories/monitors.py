"""Monitors: standing searches with a schedule, their plan, next run and last result."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypedDict, Unpack, cast

from sqlalchemy import Row, Table, and_, bindparam, func, or_, select
from sqlalchemy.engine import Connection

from kernel import utc_now
from storage.models import Alert, Chat, Monitor, ReaderRule, Run, Subscription
from storage.records import DeliveryMode, JSONObject, MonitorListing, MonitorRecord, SubscriptionRecord
from storage.repositories._common import Repository, assign, record_of
from storage.repositories.alerts import AlertRepository
from storage.repositories.runs import NEWEST_RUN_FIRST
from storage.repositories.subscriptions import receiving

FAILED = "failed"
"""The `status` that `record_result` counts as a failure; any other status resets the count."""


class MonitorChanges(TypedDict, total=False):
    """Fields `MonitorRepository.update` may change; absent keys stay as they are."""

    topic: str
    extra_queries: Sequence[str]
    include_keywords: Sequence[str]
    exclude_keywords: Sequence[str]
    sources: Sequence[str]
    schedule: str
    timezone: str
    lookback_hours: int
    language: str | None
    quiet: bool
    paused: bool
    shared: bool
    owner_chat_id: int
    """Ownership handed over (`/transfer`, or the owner chat is gone)."""
    next_run_at: datetime | None
    failure_notified_at: datetime | None


_LIST_FIELDS = frozenset({"extra_queries", "include_keywords", "exclude_keywords", "sources"})


_monitors, _subscriptions = cast(Table, Monitor.__table__), cast(Table, Subscription.__table__)
_FOR_CHAT = (
    select(_monitors)
    .where(
        or_(
            _monitors.c.owner_chat_id == bindparam("chat"),
            _monitors.c.id.in_(
                select(_subscriptions.c.monitor_id).where(_subscriptions.c.chat_id == bindparam("chat"))
            ),
        )
    )
    .order_by(_monitors.c.id)
)
"""A chat's monitors, owned or subscribed to (built once)."""

_own = _subscriptions.alias("own")
_LISTING_ALL = (
    select(
        _monitors,
        _own.c.id.label("own_id"),
        _own.c.active.label("own_active"),
        _own.c.created_at.label("own_created_at"),
        _own.c.paused.label("own_paused"),
        _own.c.delivery.label("own_delivery"),
        select(func.count())
        .select_from(Subscription)
        .join(Chat, Chat.id == Subscription.chat_id)
        .where(Subscription.monitor_id == _monitors.c.id, receiving())
        .scalar_subquery()
        .label("receivers"),
        select(Run.stats)
        .where(Run.monitor_id == _monitors.c.id)
        .order_by(*NEWEST_RUN_FIRST)
        .limit(1)
        .scalar_subquery()
        .label("latest_run_stats"),
        select(ReaderRule.rules)
        .where(ReaderRule.monitor_id == _monitors.c.id, ReaderRule.chat_id == bindparam("chat"))
        .scalar_subquery()
        .label("reader_rules"),
        select(func.count())
        .select_from(Alert)
        .where(Alert.monitor_id == _monitors.c.id, Alert.chat_id == bindparam("chat"))
        .scalar_subquery()
        .label("alerts"),
    )
    .select_from(
        _monitors.outerjoin(_own, and_(_own.c.monitor_id == _monitors.c.id, _own.c.chat_id == bindparam("chat")))
    )
    .order_by(_monitors.c.id)
)
"""Every monitor with what a chat's listing shows of it, in one statement: the chat's own subscription, how many
chats receive it, its latest run's stats, the chat's own rules on it, how many alerts the chat has on it (built
once)."""
_LISTING_FOR_CHAT = _LISTING_ALL.where(or_(_monitors.c.owner_chat_id == bindparam("chat"), _own.c.id.is_not(None)))
"""The same for the chat's monitors, owned or subscribed to."""
_LISTING_ONE = _LISTING_ALL.where(_monitors.c.id == bindparam("monitor"))
"""The same for one monitor, whoever owns it."""


def _to_listing(row: Row[Any], chat_id: int) -> MonitorListing:
    subscription = None
    if row.own_id is not None:
        subscription = SubscriptionRecord(
            id=row.own_id,
            monitor_id=row.id,
            chat_id=chat_id,
            active=row.own_active,
            created_at=row.own_created_at,
            paused=row.own_paused,
            delivery=DeliveryMode(row.own_delivery),
        )
    return MonitorListing(
        monitor=to_monitor_record(row),
        subscription=subscription,
        receivers=row.receivers,
        latest_run_stats=row.latest_run_stats,
        reader_rules=row.reader_rules,
    )


def to_monitor_record(row: Monitor | Row[Any]) -> MonitorRecord:
    """The record of an ORM row, or of a Core row of the whole table (same names)."""
    return record_of(
        MonitorRecord,
        row,
        extra_queries=tuple(row.extra_queries),
        include_keywords=tuple(row.include_keywords),
        exclude_keywords=tuple(row.exclude_keywords),
        sources=tuple(row.sources),
    )


class MonitorRepository(Repository):
    async def create(
        self,
        *,
        owner_chat_id: int,
        topic: str,
        schedule: str,
        timezone: str = "UTC",
        sources: Sequence[str] = (),
        extra_queries: Sequence[str] = (),
        include_keywords: Sequence[str] = (),
        exclude_keywords: Sequence[str] = (),
        lookback_hours: int = 24,
        language: str | None = None,
        quiet: bool = True,
        paused: bool = False,
        shared: bool = False,
        next_run_at: datetime | None = None,
        now: datetime | None = None,
    ) -> MonitorRecord:
        """Create a monitor and subscribe its owner chat to it, in one transaction."""
        when = now or utc_now()
        async with self._db.transaction() as session:
            row = Monitor(
                owner_chat_id=owner_chat_id,
                topic=topic,
                schedule=schedule,
                timezone=timezone,
                sources=list(sources),
                extra_queries=list(extra_queries),
                include_keywords=list(include_keywords),
                exclude_keywords=list(exclude_keywords),
                lookback_hours=lookback_hours,
                language=language,
                quiet=quiet,
                paused=paused,
                shared=shared,
                next_run_at=next_run_at,
                consecutive_failures=0,
                created_at=when,
                updated_at=when,
            )
            session.add(row)
            await session.flush()
            session.add(Subscription(monitor_id=row.id, chat_id=owner_chat_id, active=True, created_at=when))
            await session.flush()
            return to_monitor_record(row)

    async def get(self, monitor_id: int) -> MonitorRecord | None:
        return await self._record_by_key(Monitor, monitor_id, to_monitor_record)

    async def list_for_chat(self, chat_id: int) -> list[MonitorRecord]:
        """Monitors the chat owns or is subscribed to, oldest first: one Core statement in one `Database.read`
        (`/monitors` asks; through an async ORM session it cost about four times the CPU on SQLite)."""

        def work(connection: Connection) -> list[MonitorRecord]:
            return [to_monitor_record(row) for row in connection.execute(_FOR_CHAT, {"chat": chat_id})]

        return await self._db.read(work)

    async def listing(self, chat_id: int, *, all_chats: bool = False) -> list[MonitorListing]:
        """What `/monitors` shows the chat, oldest first: its monitors (owned or subscribed to; every monitor with
        `all_chats`), each with the chat's own subscription, its receivers, its latest run's stats, its rules and
        its alerts. One statement (`Database.read_alone`), however many monitors there are, and a second one only
        when the chat has alerts on some of them."""
        statement = _LISTING_ALL if all_chats else _LISTING_FOR_CHAT
        rows = await self._db.read_alone(statement, {"chat": chat_id})
        return await self._with_alerts([_to_listing(row, chat_id) for row in rows], rows, chat_id)

    async def listing_of(self, monitor_id: int, chat_id: int) -> MonitorListing | None:
        """One monitor as `listing` shows it to the chat, whether or not the chat owns it or subscribes (None: no
        such monitor). The same statement as `listing`, narrowed to the monitor: one read (two when the chat has
        alerts on it)."""
        rows = await self._db.read_alone(_LISTING_ONE, {"chat": chat_id, "monitor": monitor_id})
        return (await self._with_alerts([_to_listing(rows[0], chat_id)], rows, chat_id))[0] if rows else None

    async def _with_alerts(
        self, listings: list[MonitorListing], rows: Sequence[Row[Any]], chat_id: int
    ) -> list[MonitorListing]:
        """The listings with the chat's alerts on them: a second read only when the chat has any there."""
        wanted = [row.id for row in rows if row.alerts]
        if not wanted:
            return listings
        alerts = await AlertRepository(self._db).for_monitors(wanted, chat_id=chat_id)
        return [replace(entry, alerts=tuple(alerts.get(entry.monitor.id, ()))) for entry in listings]

    async def list_owned(self, chat_id: int) -> list[MonitorRecord]:
        """Monitors the chat owns, oldest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(select(Monitor).where(Monitor.owner_chat_id == chat_id).order_by(Monitor.id))
            return [to_monitor_record(row) for row in rows]

    async def list_shared(self) -> list[MonitorRecord]:
        """Shared monitors of active owner chats, oldest first (what /browse lists)."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Monitor)
                .join(Chat, Chat.id == Monitor.owner_chat_id)
                .where(Monitor.shared.is_(True), Chat.active.is_(True))
                .order_by(Monitor.id)
            )
            return [to_monitor_record(row) for row in rows]

    async def list_all(self, *, include_paused: bool = True) -> list[MonitorRecord]:
        """Every monitor (the scheduler rebuilds its jobs from this at start)."""
        async with self._db.sessions() as session:
            query = select(Monitor).order_by(Monitor.id)
            if not include_paused:
                query = query.where(Monitor.paused.is_(False))
            return [to_monitor_record(row) for row in await session.scalars(query)]

    async def due(self, now: datetime, *, limit: int = 100) -> list[MonitorRecord]:
        """Unpaused monitors of active chats whose next run is at or before `now`, earliest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Monitor)
                .join(Chat, Chat.id == Monitor.owner_chat_id)
                .where(Monitor.paused.is_(False), Chat.active.is_(True), Monitor.next_run_at <= now)
                .order_by(Monitor.next_run_at, Monitor.id)
                .limit(limit)
            )
            return [to_monitor_record(row) for row in rows]

    async def next_due_after(self, now: datetime) -> datetime | None:
        """The earliest next run after `now` among the monitors `due` considers (None: none is scheduled)."""
        async with self._db.sessions() as session:
            earliest: datetime | None = await session.scalar(
                select(func.min(Monitor.next_run_at))
                .join(Chat, Chat.id == Monitor.owner_chat_id)
                .where(Monitor.paused.is_(False), Chat.active.is_(True), Monitor.next_run_at > now)
            )
            return earliest

    async def count_due(self, monitor_ids: Collection[int], *, until: datetime) -> int:
        """How many of the monitors are unpaused and due at or before `until` (their run has not started)."""
        if not monitor_ids:
            return 0
        return await self._count(
            Monitor, Monitor.id.in_(sorted(monitor_ids)), Monitor.paused.is_(False), Monitor.next_run_at <= until
        )

    async def update(self, monitor_id: int, **changes: Unpack[MonitorChanges]) -> MonitorRecord | None:
        """Apply `changes`; None when there is no such monitor."""
        values: dict[str, object] = {
            # JSON columns want a list, not any sequence
            name: list(value) if name in _LIST_FIELDS and isinstance(value, Sequence) else value
            for name, value in changes.items()
        }
        values["updated_at"] = utc_now()
        return await self._changed(Monitor, monitor_id, lambda row: assign(row, values), to_monitor_record)

    async def set_next_run(self, monitor_id: int, next_run_at: datetime | None) -> None:
        await self.update(monitor_id, next_run_at=next_run_at)

    async def set_plan(self, monitor_id: int, plan: JSONObject | None, *, now: datetime | None = None) -> None:
        """Store the query plan the model made for this monitor (None to force a new one)."""
        async with self._db.transaction() as session:
            row = await session.get(Monitor, monitor_id)
            if row is not None:
                row.plan = plan
                row.plan_updated_at = (now or utc_now()) if plan is not None else None

    async def record_result(
        self,
        monitor_id: int,
        *,
        status: str,
        finished_at: datetime,
        error: str | None = None,
        next_run_at: datetime | None = None,
    ) -> MonitorRecord | None:
        """Note how a run ended. `status="failed"` counts a consecutive failure; any other status
        (e.g. "ok", "empty") resets the count and the failure notice."""

        def note(row: Monitor) -> None:
            row.last_run_at = finished_at
            row.last_status = status
            row.last_error = error
            if status == FAILED:
                row.consecutive_failures += 1
            else:
                row.consecutive_failures = 0
                row.failure_notified_at = None
            if next_run_at is not None:
                row.next_run_at = next_run_at

        return await self._changed(Monitor, monitor_id, note, to_monitor_record)

    async def delete(self, monitor_id: int) -> bool:
        """Delete the monitor with its subscriptions, runs and their outbox rows (items stay)."""
        return bool(await self._delete(Monitor, Monitor.id == monitor_id))
