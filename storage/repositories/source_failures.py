"""Sources of a monitor that failed run after run: how many runs in a row, until when they are left out, and
whether the owner was told. A row exists only while its source keeps failing; the policy lives in monitors."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete, select, update

from storage.models import SourceFailure
from storage.records import SourceFailureRecord
from storage.repositories._common import Repository, record_of


def spec_key(spec: str) -> str:
    return hashlib.sha256(spec.encode()).hexdigest()


def _record(row: SourceFailure) -> SourceFailureRecord:
    return record_of(SourceFailureRecord, row)


class SourceFailureRepository(Repository):
    async def for_monitor(self, monitor_id: int) -> list[SourceFailureRecord]:
        """The monitor's failing sources, longest streak first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(SourceFailure)
                .where(SourceFailure.monitor_id == monitor_id)
                .order_by(SourceFailure.failures.desc(), SourceFailure.spec)
            )
            return [_record(row) for row in rows]

    async def failed(self, monitor_id: int, spec: str, *, reason: str, now: datetime) -> SourceFailureRecord:
        """Count one more run in a row in which the source failed; returns the streak as it now stands."""
        async with self._db.transaction() as session:
            row = await session.scalar(
                select(SourceFailure)
                .where(SourceFailure.monitor_id == monitor_id, SourceFailure.spec_key == spec_key(spec))
                .with_for_update()
            )
            if row is None:
                row = SourceFailure(
                    monitor_id=monitor_id,
                    spec_key=spec_key(spec),
                    spec=spec,
                    failures=0,
                    first_failed_at=now,
                )
                session.add(row)
            row.failures += 1
            row.last_reason = reason
            row.last_failed_at = now
            await session.flush()
            return _record(row)

    async def back_off(self, monitor_id: int, spec: str, *, retry_at: datetime | None) -> None:
        """Leave the source out of the monitor's runs before `retry_at` (None: ask it again every run)."""
        async with self._db.transaction() as session:
            await session.execute(
                update(SourceFailure)
                .where(SourceFailure.monitor_id == monitor_id, SourceFailure.spec_key == spec_key(spec))
                .values(retry_at=retry_at)
            )

    async def notified(self, monitor_id: int, specs: Iterable[str], *, now: datetime) -> None:
        """Note that the owner was told about these sources (not again until they recover and fail anew)."""
        keys = [spec_key(spec) for spec in specs]
        if not keys:
            return
        async with self._db.transaction() as session:
            await session.execute(
                update(SourceFailure)
                .where(SourceFailure.monitor_id == monitor_id, SourceFailure.spec_key.in_(keys))
                .values(notified_at=now)
            )

    async def recovered(self, monitor_id: int, specs: Iterable[str]) -> int:
        """Forget the streaks of sources that answered again; returns how many there were."""
        keys = [spec_key(spec) for spec in specs]
        if not keys:
            return 0
        async with self._db.transaction() as session:
            result = await session.execute(
                delete(SourceFailure).where(SourceFailure.monitor_id == monitor_id, SourceFailure.spec_key.in_(keys))
            )
            return int(result.rowcount or 0)  # type: ignore[attr-defined]
