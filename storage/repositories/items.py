"""Items: everything collected, shared by all monitors and searches, with search and novelty queries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, tzinfo
from typing import TypeVar

from sqlalchemy import ColumnElement, Select, func, or_, select

from kernel import utc_now
from storage.engine import Database
from storage.models import Item, Monitor, Run, RunItem, Subscription
from storage.records import ItemRecord, ItemWithScores
from storage.repositories._common import Repository, dialect_insert, like_pattern, record_of
from storage.repositories.runs import NEWEST_RUN_FIRST, to_run_item_record

_CHUNK = 500
"""Rows per statement: keeps bound parameters far below SQLite's limit."""


def to_item_record(row: Item) -> ItemRecord:
    return record_of(ItemRecord, row, published=row.published_at, engagement=dict(row.engagement))


T = TypeVar("T")
T_row = TypeVar("T_row")


def _chunks(values: Sequence[T]) -> Iterable[Sequence[T]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


_REFRESHED = ("url", "title", "text", "author", "published_at", "engagement", "language", "collected_at")
"""What a known item takes from a newer collection of it (`source`, `query` and `first_seen_at` stay the first)."""


async def store_items(database: Database, items: Sequence[ItemRecord]) -> int:
    """Insert new items and refresh known ones (title, text, engagement...) keeping `first_seen_at`;
    returns how many were new.

    Items are shared by every monitor, so two runs on a shared source write the same rows. On PostgreSQL each
    chunk is one statement in autocommit (`Database.write_alone`): its row locks last while the server runs it,
    never for the run's own transaction (a worker's transaction that held them while its event loop was busy made
    the other workers' runs queue behind it, seconds at a time). Rows are written in the order of their key, so
    two statements that share rows lock them in the same order: the later one queues, they never deadlock.
    Not atomic across chunks (over 500 items): a chunk stored before a failure is simply stored again next time.
    """
    unique = sorted({item.id: item for item in items}.values(), key=lambda item: item.id)
    now = utc_now()
    new = 0
    for chunk in _chunks(unique):
        statement = dialect_insert(database.dialect, Item).values(
            [
                {
                    "id": item.id,
                    "source": item.source,
                    "url": item.url,
                    "title": item.title,
                    "text": item.text,
                    "author": item.author,
                    "published_at": item.published,
                    "engagement": dict(item.engagement),
                    "language": item.language,
                    "query": item.query,
                    "collected_at": item.collected_at,
                    "first_seen_at": now,
                }
                for item in chunk
            ]
        )
        statement = statement.on_conflict_do_update(
            index_elements=["id"], set_={name: statement.excluded[name] for name in _REFRESHED}
        ).returning(Item.first_seen_at)
        # A known row keeps its `first_seen_at`, so the rows that come back with this call's are the new ones:
        # counted by the upsert itself, with no read of the known ids before it.
        new += sum(row[0] == now for row in await database.write_alone_rows(statement, {}))
    return new


def _dated() -> ColumnElement[datetime]:
    """An item's date: when it was published, else when it was collected."""
    return func.coalesce(Item.published_at, Item.collected_at)


def _collected_for(chat_id: int) -> ColumnElement[bool]:
    """The item is linked to a run the chat may see: a run of a monitor it owns or is actively subscribed
    to, or a one-off search it asked for. Items are shared by every run, so without this a chat would read
    what other chats' monitors collected. A correlated EXISTS (plain SQL on SQLite and PostgreSQL) rather
    than a join, so an item seen by several runs still comes back once."""
    owned = select(Monitor.id).where(Monitor.owner_chat_id == chat_id)
    followed = select(Subscription.monitor_id).where(Subscription.chat_id == chat_id, Subscription.active.is_(True))
    return (
        select(RunItem.run_id)
        .join(Run, Run.id == RunItem.run_id)
        .where(
            RunItem.item_id == Item.id,
            or_(Run.chat_id == chat_id, Run.monitor_id.in_(owned), Run.monitor_id.in_(followed)),
        )
        .exists()
    )


def _matching(
    query: Select[T_row],
    text: str,
    *,
    since: datetime | None,
    until: datetime | None,
    sources: Sequence[str],
    chat_id: int | None,
) -> Select[T_row]:
    for word in text.split():
        pattern = like_pattern(word)
        query = query.where(or_(Item.title.ilike(pattern, escape="\\"), Item.text.ilike(pattern, escape="\\")))
    if since is not None:
        query = query.where(_dated() >= since)
    if until is not None:
        query = query.where(_dated() < until)
    if sources:
        query = query.where(Item.source.in_(list(sources)))
    if chat_id is not None:
        query = query.where(_collected_for(chat_id))
    return query


class ItemRepository(Repository):
    async def upsert_many(self, items: Sequence[ItemRecord]) -> int:
        """Store items (new ones inserted, known ones refreshed); returns how many were new (see `store_items`)."""
        return await store_items(self._db, items)

    async def get(self, item_id: str) -> ItemRecord | None:
        return await self._record_by_key(Item, item_id, to_item_record)

    async def get_many(self, item_ids: Sequence[str]) -> list[ItemRecord]:
        """The items that exist among `item_ids`, in the order asked."""
        found: dict[str, ItemRecord] = {}
        async with self._db.sessions() as session:
            for chunk in _chunks(list(dict.fromkeys(item_ids))):
                for row in await session.scalars(select(Item).where(Item.id.in_(chunk))):
                    found[row.id] = to_item_record(row)
        return [found[item_id] for item_id in item_ids if item_id in found]

    async def search(
        self,
        text: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        sources: Sequence[str] = (),
        limit: int = 50,
        chat_id: int | None = None,
    ) -> list[ItemRecord]:
        """Items whose title or text contains every word of `text` (case-insensitive), dated (published,
        else collected) within [since, until), newest first. With `chat_id`, only items collected for that
        chat (its monitors, its active subscriptions, its one-off searches); None searches every item."""
        query = _matching(select(Item), text, since=since, until=until, sources=sources, chat_id=chat_id)
        query = query.order_by(_dated().desc(), Item.id).limit(limit)
        async with self._db.sessions() as session:
            return [to_item_record(row) for row in await session.scalars(query)]

    async def count_by_day(
        self,
        text: str,
        *,
        since: datetime,
        until: datetime,
        sources: Sequence[str] = (),
        tz: tzinfo = UTC,
        chat_id: int | None = None,
    ) -> dict[date, int]:
        """How many matching items (as `search` matches them, `chat_id` included) fall on each day of
        [since, until) in `tz`; days without items are absent. For timelines and charts."""
        query = _matching(select(_dated()), text, since=since, until=until, sources=sources, chat_id=chat_id)
        counts: Counter[date] = Counter()
        async with self._db.sessions() as session:
            for when in await session.scalars(query):
                counts[when.astimezone(tz).date()] += 1
        return dict(sorted(counts.items()))

    async def for_monitor(
        self, monitor_id: int, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[ItemWithScores]:
        """Every item the monitor's runs collected, dated within [since, until), with the scores of
        the latest run that saw it, and `delivered` if any of its runs put it in a digest (a later run that finds
        it again skips it as told); newest first (for exports)."""
        when = _dated()
        query = (
            select(Item, RunItem)
            .join(RunItem, RunItem.item_id == Item.id)
            .join(Run, Run.id == RunItem.run_id)
            .where(Run.monitor_id == monitor_id)
            .order_by(*NEWEST_RUN_FIRST)
        )
        if since is not None:
            query = query.where(when >= since)
        if until is not None:
            query = query.where(when < until)
        latest: dict[str, ItemWithScores] = {}
        delivered: set[str] = set()
        async with self._db.sessions() as session:
            for item, run_item in await session.execute(query):
                if run_item.delivered:
                    delivered.add(item.id)
                if item.id not in latest:
                    latest[item.id] = ItemWithScores(item=to_item_record(item), scores=to_run_item_record(run_item))
        found = [
            replace(entry, scores=replace(entry.scores, delivered=True))
            if entry.item.id in delivered and not entry.scores.delivered
            else entry
            for entry in latest.values()
        ]
        return sorted(found, key=lambda s: (s.item.published or s.item.collected_at, s.item.id), reverse=True)

    async def of_runs(self, run_ids: Sequence[int]) -> dict[int, list[ItemWithScores]]:
        """Each run's items with that run's scores, best rank first (what a briefing puts in its CSV)."""
        found: dict[int, list[ItemWithScores]] = {run_id: [] for run_id in run_ids}
        async with self._db.sessions() as session:
            for chunk in _chunks(list(dict.fromkeys(run_ids))):
                query = (
                    select(Item, RunItem)
                    .join(RunItem, RunItem.item_id == Item.id)
                    .where(RunItem.run_id.in_(chunk))
                    .order_by(RunItem.run_id, RunItem.rank.is_(None), RunItem.rank, Item.id)
                )
                for item, run_item in await session.execute(query):
                    scored = ItemWithScores(item=to_item_record(item), scores=to_run_item_record(run_item))
                    found[run_item.run_id].append(scored)
        return found

    async def delivered_ids(self, monitor_id: int, *, since: datetime | None = None) -> set[str]:
        """Ids of items this monitor already put in a digest (optionally only runs since `since`)."""
        query = (
            select(RunItem.item_id)
            .join(Run, Run.id == RunItem.run_id)
            .where(Run.monitor_id == monitor_id, RunItem.delivered.is_(True))
            .distinct()
        )
        if since is not None:
            query = query.where(Run.scheduled_for >= since)
        async with self._db.sessions() as session:
            return set(await session.scalars(query))

    async def delete_collected_before(self, cutoff: datetime) -> int:
        """Retention: drop items last collected before `cutoff` (and their run links); returns how many."""
        return await self._delete(Item, Item.collected_at < cutoff)
