"""Briefings: claiming chats' due briefings and queueing them, a page of chats in one transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import Chat, Destination
from storage.records import RunOutcome
from storage.repositories._common import Repository
from storage.repositories.deliveries import store_finished_run
from storage.repositories.feedback import BRIEFING_RUN_KEY, store_view
from storage.repositories.runs import BRIEFING_QUERY


@dataclass(frozen=True, kw_only=True)
class BriefingClaim:
    """One chat's due briefing to claim: move its next briefing from `due` to `next_at`; store and queue `outcome`
    (None when there is nothing to send) with the chat's `views` of its sections."""

    chat_id: int
    due: datetime
    next_at: datetime
    outcome: RunOutcome | None
    views: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    """The chat's view of each section (by the monitor run it is stored under), stored with the briefing's run id,
    so feedback on the briefing finds it once the briefing went out."""


class BriefingRepository(Repository):
    async def claim_many(self, claims: Sequence[BriefingClaim], *, now: datetime) -> dict[int, int | None]:
        """In ONE transaction, for each claim: move the chat's next briefing from `due` to `next_at` and what the
        following one covers to runs finishing after `now`, store the briefing (`outcome`) as a finished run of the
        chat, queue its outbox row and store the chat's views of its sections. Only a caller that finds a chat's
        briefing still due at `due` does any of it for that chat (a briefing is made once however many workers look).
        Returns, per chat, the briefing run's id, or None when another caller had it or there was nothing to send.
        One commit for a page of chats instead of one per chat: the commit is most of a claim's cost.
        """
        made: dict[int, int | None] = {}
        async with self._db.transaction() as session:
            for claim in claims:
                made[claim.chat_id] = await self._claim(session, claim, now=now)
        return made

    @staticmethod
    async def _claim(session: AsyncSession, claim: BriefingClaim, *, now: datetime) -> int | None:
        chat_id, due, next_at, outcome = claim.chat_id, claim.due, claim.next_at, claim.outcome
        result = await session.execute(
            update(Chat)
            .where(Chat.id == chat_id, Chat.briefing_next_at == due)
            .values(briefing_next_at=next_at, briefing_since=now)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount or outcome is None:  # type: ignore[attr-defined]
            return None
        copies = await session.scalars(  # destinations that also receive this chat's briefing
            select(Destination.chat_id)
            .join(Chat, Chat.id == Destination.chat_id)
            .where(Destination.briefing_of_chat_id == chat_id, Chat.active.is_(True))
            .order_by(Destination.id)
        )
        run_id = await store_finished_run(
            session,
            chat_id=chat_id,
            query=BRIEFING_QUERY,
            scheduled_for=due,
            outcome=outcome,
            recipients=[chat_id, *copies],
        )
        for section_run, view in claim.views.items():
            await store_view(session, section_run, chat_id, {**view, BRIEFING_RUN_KEY: run_id}, now=now)
        return run_id
