"""Runs: one execution of a monitor (unique per scheduled time) or of a one-off search."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select, update

from kernel import utc_now
from storage.models import Delivery, Run, RunItem
from storage.records import RunItemRecord, RunRecord, RunStatus
from storage.repositories._common import Repository, record_of, upsert_insert

BRIEFING_QUERY = "briefing"
"""The `query` of the run that stores a chat's briefing (monitor NULL, the chat's id): how briefings are found."""
NEWEST_RUN_FIRST = (Run.scheduled_for.desc(), Run.id.desc())
"""What "a monitor's latest run" means everywhere: the run scheduled last (the later-opened of two for one slot)."""


def to_run_record(row: Run) -> RunRecord:
    return record_of(RunRecord, row, status=RunStatus(row.status), language_digests=row.language_digests or {})


def to_run_item_record(row: RunItem) -> RunItemRecord:
    return record_of(RunItemRecord, row)


def chat_run(*, chat_id: int, query: str, scheduled_for: datetime, started_at: datetime) -> Run:
    """A new run of no monitor, asked for by (or made for) the chat: a search, a collection, a briefing, a notice."""
    return Run(monitor_id=None, chat_id=chat_id, query=query, scheduled_for=scheduled_for, started_at=started_at)


class RunRepository(Repository):
    async def open_run(
        self, monitor_id: int, scheduled_for: datetime, *, now: datetime | None = None
    ) -> RunRecord | None:
        """Start the monitor's run for `scheduled_for`, or None if that run already exists.

        The database's unique (monitor_id, scheduled_for) decides, so two schedulers (or one firing
        twice) racing here get exactly one run between them.
        """
        async with self._db.transaction() as session:
            statement = (
                upsert_insert(session, Run)
                .values(
                    monitor_id=monitor_id,
                    scheduled_for=scheduled_for,
                    status=RunStatus.RUNNING,
                    started_at=now or utc_now(),
                )
                .on_conflict_do_nothing(index_elements=["monitor_id", "scheduled_for"])
                .returning(Run.id)
            )
            run_id = (await session.execute(statement)).scalar_one_or_none()
            if run_id is None:
                return None
            row = await session.get(Run, run_id)
            return to_run_record(row) if row else None

    async def take_over(
        self, monitor_id: int, scheduled_for: datetime, *, now: datetime | None = None
    ) -> RunRecord | None:
        """Restart the monitor's run for `scheduled_for` if it is still "running" (its worker died during it and
        the job came back to another worker); None when there is no such run or it has finished."""
        async with self._db.transaction() as session:
            row = await session.scalar(
                select(Run)
                .where(
                    Run.monitor_id == monitor_id, Run.scheduled_for == scheduled_for, Run.status == RunStatus.RUNNING
                )
                .with_for_update()
            )
            if row is None:
                return None
            row.started_at = now or utc_now()
            await session.flush()
            return to_run_record(row)

    async def open_search_run(self, *, chat_id: int, query: str, now: datetime | None = None) -> RunRecord:
        """Start a one-off search run (no monitor) asked for by `chat_id`."""
        when = now or utc_now()
        async with self._db.transaction() as session:
            row = chat_run(chat_id=chat_id, query=query, scheduled_for=when, started_at=when)
            session.add(row)
            await session.flush()
            return to_run_record(row)

    async def get(self, run_id: int) -> RunRecord | None:
        return await self._record_by_key(Run, run_id, to_run_record)

    async def list_for_monitor(self, monitor_id: int, *, limit: int = 20) -> list[RunRecord]:
        """The monitor's most recent runs, newest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Run).where(Run.monitor_id == monitor_id).order_by(*NEWEST_RUN_FIRST).limit(limit)
            )
            return [to_run_record(row) for row in rows]

    async def digests_of_monitor(self, monitor_id: int, *, limit: int) -> list[RunRecord]:
        """The monitor's succeeded runs that stored a digest, newest finished first (what its feed lists)."""
        query = (
            select(Run)
            .where(Run.monitor_id == monitor_id, Run.status == RunStatus.SUCCEEDED, Run.digest.is_not(None))
            .order_by(Run.finished_at.desc(), Run.id.desc())
            .limit(limit)
        )
        async with self._db.sessions() as session:
            return [to_run_record(row) for row in await session.scalars(query)]

    async def briefings_of_chat(self, chat_id: int, *, limit: int) -> list[RunRecord]:
        """The chat's stored briefings (see `BriefingRepository`), newest first (what its briefing feed lists)."""
        query = (
            select(Run)
            .where(
                Run.monitor_id.is_(None),
                Run.chat_id == chat_id,
                Run.query == BRIEFING_QUERY,
                Run.status == RunStatus.SUCCEEDED,
            )
            .order_by(Run.finished_at.desc(), Run.id.desc())
            .limit(limit)
        )
        async with self._db.sessions() as session:
            return [to_run_record(row) for row in await session.scalars(query)]

    async def finished_for_monitors(
        self, monitor_ids: Collection[int], *, after: datetime, until: datetime
    ) -> list[RunRecord]:
        """The monitors' finished runs (succeeded or failed) that ended in (`after`, `until`], oldest first: what a
        briefing covers (less what `queued_for_chats` finds already sent to each chat)."""
        if not monitor_ids:
            return []
        query = (
            select(Run)
            .where(
                Run.monitor_id.in_(sorted(monitor_ids)),
                Run.status.in_([RunStatus.SUCCEEDED, RunStatus.FAILED]),
                Run.finished_at > after,
                Run.finished_at <= until,
            )
            .order_by(Run.finished_at, Run.id)
        )
        async with self._db.sessions() as session:
            return [to_run_record(row) for row in await session.scalars(query)]

    async def queued_for_chats(self, run_ids: Collection[int], chat_ids: Collection[int]) -> set[tuple[int, int]]:
        """The (run id, chat id) pairs among these runs and chats that have an outbox row: runs already sent to
        the chat on their own (its /digest), which its briefing leaves out."""
        if not run_ids or not chat_ids:
            return set()
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Delivery.run_id, Delivery.chat_id).where(
                    Delivery.run_id.in_(sorted(run_ids)), Delivery.chat_id.in_(sorted(chat_ids))
                )
            )
            return {(int(run_id), int(chat_id)) for run_id, chat_id in rows}

    async def running_for_monitors(self, monitor_ids: Collection[int], *, scheduled_until: datetime) -> int:
        """How many of the monitors' runs for times up to `scheduled_until` are still running."""
        if not monitor_ids:
            return 0
        return await self._count(
            Run,
            Run.monitor_id.in_(sorted(monitor_ids)),
            Run.status == RunStatus.RUNNING,
            Run.scheduled_for <= scheduled_until,
        )

    async def items_of_run(self, run_id: int) -> list[RunItemRecord]:
        """The run's items with their scores, best rank first (unranked last)."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(RunItem)
                .where(RunItem.run_id == run_id)
                .order_by(RunItem.rank.is_(None), RunItem.rank, RunItem.item_id)
            )
            return [to_run_item_record(row) for row in rows]

    async def fail_run(self, run_id: int, *, error: str, finished_at: datetime | None = None) -> bool:
        """Mark a running run failed; False when it is not running (already finished or absent)."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Run)
                .where(Run.id == run_id, Run.status == RunStatus.RUNNING)
                .values(status=RunStatus.FAILED, error=error, finished_at=finished_at or utc_now())
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def fail_abandoned(self, *, started_before: datetime, error: str = "abandoned") -> int:
        """Fail runs still "running" that started before `started_before` (the process died mid-run);
        returns how many."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Run)
                .where(Run.status == RunStatus.RUNNING, Run.started_at < started_before)
                .values(status=RunStatus.FAILED, error=error, finished_at=utc_now())
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def delete(self, run_id: int) -> bool:
        """Delete the run with its item links and outbox rows (the items stay)."""
        return bool(await self._delete(Run, Run.id == run_id))
