"""Digest page tokens: one per run, made on first use and kept for the run's life; the token alone finds the run."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kernel import utc_now
from storage.models import DigestPage, Run
from storage.records import RunRecord
from storage.repositories._common import Repository, upsert_insert
from storage.repositories.runs import to_run_record


class DigestPageRepository(Repository):
    async def issue(
        self, run_ids: Collection[int], new_token: Callable[[], str], *, now: datetime | None = None
    ) -> dict[int, str]:
        """The page token of each run, made with `new_token()` for a run that has none (two processes asking at once
        for a first token get the same one); a run that does not exist is left out."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return {}
        async with self._db.transaction() as session:
            known = await _tokens(session, wanted)
            missing = [run_id for run_id in wanted if run_id not in known]
            if missing:
                runs = set(await session.scalars(select(Run.id).where(Run.id.in_(missing))))
                new = [run_id for run_id in missing if run_id in runs]
                if new:
                    rows = [{"run_id": run_id, "token": new_token(), "created_at": now or utc_now()} for run_id in new]
                    insert = upsert_insert(session, DigestPage).values(rows)
                    await session.execute(insert.on_conflict_do_nothing(index_elements=["run_id"]))
                    known.update(await _tokens(session, new))
            return known

    async def run_of(self, token: str) -> RunRecord | None:
        """The run whose page has this token; None for an unknown token."""
        async with self._db.sessions() as session:
            row = await session.scalar(
                select(Run).join(DigestPage, DigestPage.run_id == Run.id).where(DigestPage.token == token)
            )
            return to_run_record(row) if row is not None else None


async def _tokens(session: AsyncSession, run_ids: list[int]) -> dict[int, str]:
    rows = await session.execute(select(DigestPage.run_id, DigestPage.token).where(DigestPage.run_id.in_(run_ids)))
    return {int(run_id): str(token) for run_id, token in rows}
