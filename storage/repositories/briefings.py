"""Briefings: claiming a chat's due briefing and queueing it, in one transaction."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update

from storage.models import Chat, Run
from storage.records import RunOutcome, RunStatus
from storage.repositories._common import Repository
from storage.repositories.deliveries import queue_rows


class BriefingRepository(Repository):
    async def claim(
        self, chat_id: int, *, due: datetime, next_at: datetime, now: datetime, outcome: RunOutcome | None
    ) -> int | None:
        """In ONE transaction: move the chat's next briefing from `due` to `next_at` and what the following one
        covers to runs finishing after `now`, store the briefing (`outcome`, None when there is nothing to send)
        as a finished run of the chat and queue its outbox row. Only the caller that finds the briefing still due at
        `due` does any of it (a briefing is made once however many workers look); returns the run's id, or None
        when another caller had it or there was nothing to send.
        """
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Chat)
                .where(Chat.id == chat_id, Chat.briefing_next_at == due)
                .values(briefing_next_at=next_at, briefing_since=now)
                .execution_options(synchronize_session=False)
            )
            if not result.rowcount or outcome is None:  # type: ignore[attr-defined]
                return None
            run = Run(
                monitor_id=None,
                chat_id=chat_id,
                query="briefing",
                scheduled_for=due,
                status=RunStatus.SUCCEEDED,
                started_at=outcome.finished_at,
                finished_at=outcome.finished_at,
                stats=dict(outcome.stats),
                digest=None,
                language_digests={},
                artifacts=dict(outcome.artifacts),
                input_tokens=0,
                output_tokens=0,
                cost=0.0,
            )
            session.add(run)
            await session.flush()
            await queue_rows(session, run.id, [chat_id], at=outcome.finished_at)
            return run.id
