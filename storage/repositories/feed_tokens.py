"""Feed tokens: at most one per monitor and one per chat's briefing; the token alone finds what it is for, and a
new token revokes the old."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from kernel import utc_now
from storage.models import FeedToken
from storage.repositories._common import Repository, upsert_insert


@dataclass(frozen=True, slots=True, kw_only=True)
class FeedSubject:
    """What a feed lists: a monitor's digests, or a chat's briefings (exactly one is set)."""

    monitor_id: int | None = None
    chat_id: int | None = None


class FeedTokenRepository(Repository):
    async def issue(self, subject: FeedSubject, token: str, *, replace: bool, now: datetime | None = None) -> str:
        """The subject's token: `token` when it had none (or `replace`, which revokes the old one), else the one it
        has (two chats asking at once for a first token get the same one)."""
        if (subject.monitor_id is None) == (subject.chat_id is None):
            raise ValueError("a feed is a monitor's or a chat's briefing, exactly one of them")
        column = "monitor_id" if subject.monitor_id is not None else "chat_id"
        async with self._db.transaction() as session:
            statement = upsert_insert(session, FeedToken).values(
                monitor_id=subject.monitor_id, chat_id=subject.chat_id, token=token, created_at=now or utc_now()
            )
            if replace:
                statement = statement.on_conflict_do_update(
                    index_elements=[column], set_={"token": token, "created_at": now or utc_now()}
                )
            else:
                statement = statement.on_conflict_do_nothing(index_elements=[column])
            await session.execute(statement)
            current = await session.scalar(
                select(FeedToken.token).where(getattr(FeedToken, column) == getattr(subject, column))
            )
            assert current is not None  # written or kept just now, in this transaction
            return current

    async def subject_of(self, token: str) -> FeedSubject | None:
        """What the token's feed lists; None for a revoked or unknown token."""
        async with self._db.sessions() as session:
            row = (
                await session.execute(select(FeedToken.monitor_id, FeedToken.chat_id).where(FeedToken.token == token))
            ).one_or_none()
            return FeedSubject(monitor_id=row.monitor_id, chat_id=row.chat_id) if row is not None else None
