"""Feed tokens: at most one per monitor; the token alone finds its monitor, and a new token revokes the old."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from storage.models import FeedToken
from storage.repositories._common import Repository, upsert_insert
from storage.types import utc_now


class FeedTokenRepository(Repository):
    async def token_of(self, monitor_id: int) -> str | None:
        """The monitor's current token, None when it has none yet."""
        async with self._db.sessions() as session:
            return await session.scalar(select(FeedToken.token).where(FeedToken.monitor_id == monitor_id))

    async def issue(self, monitor_id: int, token: str, *, replace: bool, now: datetime | None = None) -> str:
        """The monitor's token: `token` when it had none (or `replace`, which revokes the old one), else the one it
        has (two chats asking at once for a first token get the same one)."""
        async with self._db.transaction() as session:
            statement = upsert_insert(session, FeedToken).values(
                monitor_id=monitor_id, token=token, created_at=now or utc_now()
            )
            if replace:
                statement = statement.on_conflict_do_update(
                    index_elements=["monitor_id"], set_={"token": token, "created_at": now or utc_now()}
                )
            else:
                statement = statement.on_conflict_do_nothing(index_elements=["monitor_id"])
            await session.execute(statement)
            current = await session.scalar(select(FeedToken.token).where(FeedToken.monitor_id == monitor_id))
            assert current is not None  # written or kept just now, in this transaction
            return current

    async def monitor_of(self, token: str) -> int | None:
        """The monitor whose current token this is; None for a revoked or unknown token."""
        async with self._db.sessions() as session:
            return await session.scalar(select(FeedToken.monitor_id).where(FeedToken.token == token))

    async def revoke(self, monitor_id: int) -> bool:
        """Drop the monitor's token (its feed URLs answer 404 until a new one is issued)."""
        async with self._db.transaction() as session:
            result = await session.execute(delete(FeedToken).where(FeedToken.monitor_id == monitor_id))
            return bool(getattr(result, "rowcount", 0))
