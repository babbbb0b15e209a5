"""Readers' feedback: marks per (monitor, chat), and the view of each digest a chat was shown after its marks.

A chat's marks concern only that chat's view of that monitor; nothing here is shared between the chats that receive
one monitor. A mark on a story replaces that chat's earlier 👍/👎/fewer on the same story of the same digest.

A view is received once a part of the delivery that carried it was confirmed sent: the run's own delivery to the chat
for a digest, the briefing's (its run id stored in the view as `"briefing_run_id"`) for a briefing's section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kernel import utc_now
from storage.models import Delivery, FeedbackMark, ReaderViewRow, Run
from storage.repositories._common import Repository, record_of, upsert_insert, values_of

STORY_KINDS = ("more", "less", "fewer")
"""Marks on a story (one per story and chat: the latest press wins); `mute` marks an outlet."""

BRIEFING_RUN_KEY = "briefing_run_id"
"""The key of a briefing section's view naming the briefing run that delivered it (a digest's view has none)."""

_DELIVERED_BY = func.coalesce(ReaderViewRow.view[BRIEFING_RUN_KEY].as_integer(), ReaderViewRow.run_id)
"""The run whose delivery carried a view: its briefing's, else its own."""
_SAME_DELIVERY = (Delivery.run_id == _DELIVERED_BY) & (Delivery.chat_id == ReaderViewRow.chat_id)


async def store_view(
    session: AsyncSession, run_id: int, chat_id: int, view: Mapping[str, Any], *, now: datetime | None = None
) -> None:
    """Store (or replace) the view a chat is shown of a run, inside the caller's transaction (a briefing stores its
    sections' views in the transaction that queues it)."""
    values = dict(view)
    statement = upsert_insert(session, ReaderViewRow).values(
        run_id=run_id, chat_id=chat_id, view=values, created_at=now or utc_now()
    )
    await session.execute(statement.on_conflict_do_update(index_elements=["run_id", "chat_id"], set_={"view": values}))


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedbackMarkRecord:
    """One stored mark."""

    id: int = 0
    monitor_id: int
    chat_id: int
    kind: str
    run_id: int | None = None
    story: int | None = None
    title: str = ""
    outlets: tuple[str, ...] = ()
    terms: dict[str, float] = field(default_factory=dict)
    vector: dict[str, Any] | None = None
    """The story's embedding, as `research.StoryVector.to_json` stores it (None: none was made)."""
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredView:
    """The view of one run's digest a chat was shown."""

    run_id: int
    chat_id: int
    monitor_id: int | None
    view: dict[str, Any]


def _record(row: FeedbackMark) -> FeedbackMarkRecord:
    return record_of(
        FeedbackMarkRecord,
        row,
        outlets=tuple(str(o) for o in row.outlets or ()),
        terms={str(k): float(v) for k, v in (row.terms or {}).items()},
        vector=dict(row.vector) if isinstance(row.vector, dict) else None,
    )


class FeedbackRepository(Repository):
    async def add(self, mark: FeedbackMarkRecord, *, now: datetime | None = None) -> FeedbackMarkRecord:
        """Store a mark; a story mark replaces the chat's earlier story mark on the same story of the same digest,
        a mute the chat's earlier mute of the same outlets."""
        async with self._db.transaction() as session:
            reader = (FeedbackMark.monitor_id == mark.monitor_id) & (FeedbackMark.chat_id == mark.chat_id)
            if mark.kind in STORY_KINDS and mark.run_id is not None and mark.story is not None:
                await session.execute(
                    delete(FeedbackMark).where(
                        reader,
                        FeedbackMark.run_id == mark.run_id,
                        FeedbackMark.story == mark.story,
                        FeedbackMark.kind.in_(STORY_KINDS),
                    )
                )
            elif mark.kind == "mute":
                wanted = {o.casefold() for o in mark.outlets}
                mutes = await session.scalars(select(FeedbackMark).where(reader, FeedbackMark.kind == "mute"))
                for row in mutes.all():
                    if {str(o).casefold() for o in row.outlets or ()} <= wanted:
                        await session.delete(row)
            row = FeedbackMark(
                **values_of(
                    mark,
                    id=None,  # the database numbers the new row
                    outlets=list(mark.outlets),
                    terms=dict(mark.terms),
                    vector=dict(mark.vector) if mark.vector else None,
                    created_at=mark.created_at or now or utc_now(),
                )
            )
            session.add(row)
            await session.flush()
            return _record(row)

    async def undo_story(self, monitor_id: int, chat_id: int, run_id: int, story: int) -> list[FeedbackMarkRecord]:
        """Remove the chat's marks on story `story` of run `run_id` (any kind); returns what was removed."""
        async with self._db.transaction() as session:
            rows = (
                await session.scalars(
                    select(FeedbackMark).where(
                        FeedbackMark.monitor_id == monitor_id,
                        FeedbackMark.chat_id == chat_id,
                        FeedbackMark.run_id == run_id,
                        FeedbackMark.story == story,
                    )
                )
            ).all()
            removed = [_record(row) for row in rows]
            for row in rows:
                await session.delete(row)
            return removed

    async def unmute(self, chat_id: int, outlet: str, *, monitor_id: int | None = None) -> int:
        """Remove the chat's mutes of `outlet` (case-insensitive) on one monitor or all; returns how many."""
        wanted = outlet.casefold()
        async with self._db.transaction() as session:
            query = select(FeedbackMark).where(FeedbackMark.chat_id == chat_id, FeedbackMark.kind == "mute")
            if monitor_id is not None:
                query = query.where(FeedbackMark.monitor_id == monitor_id)
            removed = 0
            for row in (await session.scalars(query)).all():
                if wanted in {str(o).casefold() for o in row.outlets or ()}:
                    await session.delete(row)
                    removed += 1
            return removed

    async def marks(self, monitor_id: int, chat_id: int) -> list[FeedbackMarkRecord]:
        """One reader's marks on one monitor, oldest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(FeedbackMark)
                .where(FeedbackMark.monitor_id == monitor_id, FeedbackMark.chat_id == chat_id)
                .order_by(FeedbackMark.id)
            )
            return [_record(row) for row in rows]

    async def of_monitor(self, monitor_id: int) -> list[FeedbackMarkRecord]:
        """Every reader's marks on one monitor, oldest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(FeedbackMark).where(FeedbackMark.monitor_id == monitor_id).order_by(FeedbackMark.id)
            )
            return [_record(row) for row in rows]

    async def of_chats(self, chat_ids: Sequence[int]) -> dict[int, dict[int, list[FeedbackMarkRecord]]]:
        """The marks of these chats (a page of briefings), by chat then monitor, oldest first, in one query."""
        found: dict[int, dict[int, list[FeedbackMarkRecord]]] = {}
        if not chat_ids:
            return found
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(FeedbackMark).where(FeedbackMark.chat_id.in_(list(chat_ids))).order_by(FeedbackMark.id)
            )
            for row in rows:
                found.setdefault(row.chat_id, {}).setdefault(row.monitor_id, []).append(_record(row))
        return found

    async def save_view(self, run_id: int, chat_id: int, view: dict[str, Any], *, now: datetime | None = None) -> None:
        """Store (or replace, while nothing of the delivery went out) the view a chat is shown of a run."""
        async with self._db.transaction() as session:
            await store_view(session, run_id, chat_id, view, now=now)

    @staticmethod
    def _monitor_of_view() -> ColumnElement[int | None]:
        """The monitor a stored view is of: its run's, or for a `/digest` preview (a run of no monitor) the one its
        view names (`"monitor_id"`)."""
        return func.coalesce(Run.monitor_id, ReaderViewRow.view["monitor_id"].as_integer())

    async def view(self, run_id: int, chat_id: int) -> StoredView | None:
        """The view the chat was shown of a run it received (a part of the delivery confirmed sent: the run's own, or
        the briefing's that carried it); None otherwise: a press for a digest the chat never got changes nothing."""
        async with self._db.sessions() as session:
            row = (
                await session.execute(
                    select(ReaderViewRow.view, self._monitor_of_view().label("monitor_id"))
                    .join(Run, Run.id == ReaderViewRow.run_id)
                    .join(Delivery, _SAME_DELIVERY)
                    .where(ReaderViewRow.run_id == run_id, ReaderViewRow.chat_id == chat_id, Delivery.parts_sent > 0)
                )
            ).one_or_none()
            if row is None:
                return None
            return StoredView(run_id=run_id, chat_id=chat_id, monitor_id=row.monitor_id, view=dict(row.view or {}))

    async def pending_view(self, run_id: int, chat_id: int) -> dict[str, Any] | None:
        """The stored view of a delivery still going out (a resend keeps it), whether or not a part was sent."""
        async with self._db.sessions() as session:
            found = await session.scalar(
                select(ReaderViewRow.view).where(ReaderViewRow.run_id == run_id, ReaderViewRow.chat_id == chat_id)
            )
            return dict(found) if found is not None else None

    async def last_views(self, chat_id: int, *, monitor_id: int | None = None, limit: int = 1) -> list[StoredView]:
        """The latest digests and briefing sections the chat received (newest delivery first, a briefing's sections
        last to first; `/digest` previews included), of one monitor or any."""
        monitor = self._monitor_of_view()
        async with self._db.sessions() as session:
            query = (
                select(ReaderViewRow.run_id, ReaderViewRow.view, monitor.label("monitor_id"))
                .join(Run, Run.id == ReaderViewRow.run_id)
                .join(Delivery, _SAME_DELIVERY)
                .where(ReaderViewRow.chat_id == chat_id, Delivery.parts_sent > 0, monitor.is_not(None))
                .order_by(Delivery.id.desc(), ReaderViewRow.id.desc())
                .limit(limit)
            )
            if monitor_id is not None:
                query = query.where(monitor == monitor_id)
            return [
                StoredView(run_id=row.run_id, chat_id=chat_id, monitor_id=row.monitor_id, view=dict(row.view or {}))
                for row in await session.execute(query)
            ]

    async def set_vectors(self, vectors: Mapping[int, dict[str, Any]]) -> None:
        """Give marks (by id) their story's vector, as `research.StoryVector.to_json` stores it."""
        if not vectors:
            return
        async with self._db.transaction() as session:
            for row in (await session.scalars(select(FeedbackMark).where(FeedbackMark.id.in_(list(vectors))))).all():
                row.vector = dict(vectors[row.id])

    async def replace_marks(self, monitor_id: int, chat_id: int, marks: Sequence[FeedbackMarkRecord]) -> int:
        """An import: the reader's marks on the monitor become `marks` (their run and story numbers dropped: those
        runs are another database's; their vectors kept)."""
        async with self._db.transaction() as session:
            await session.execute(
                delete(FeedbackMark).where(FeedbackMark.monitor_id == monitor_id, FeedbackMark.chat_id == chat_id)
            )
            for mark in marks:
                session.add(
                    FeedbackMark(
                        monitor_id=monitor_id,
                        chat_id=chat_id,
                        kind=mark.kind,
                        run_id=None,
                        story=None,
                        title=mark.title,
                        outlets=list(mark.outlets),
                        terms=dict(mark.terms),
                        vector=dict(mark.vector) if mark.vector else None,
                        created_at=mark.created_at or utc_now(),
                    )
                )
            return len(marks)
