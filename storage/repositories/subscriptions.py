"""Subscriptions: which chats receive a monitor's digests."""

from __future__ import annotations

from sqlalchemy import delete, select, update

from storage.models import Chat, Subscription
from storage.records import ChatRecord, SubscriptionRecord
from storage.repositories._common import Repository, upsert_insert
from storage.repositories.chats import to_chat_record
from storage.types import utc_now


def to_subscription_record(row: Subscription) -> SubscriptionRecord:
    return SubscriptionRecord(
        id=row.id, monitor_id=row.monitor_id, chat_id=row.chat_id, active=row.active, created_at=row.created_at
    )


class SubscriptionRepository(Repository):
    async def subscribe(self, monitor_id: int, chat_id: int) -> SubscriptionRecord:
        """Subscribe the chat (re-activating a paused subscription)."""
        async with self._db.transaction() as session:
            statement = upsert_insert(session, Subscription).values(
                monitor_id=monitor_id, chat_id=chat_id, active=True, created_at=utc_now()
            )
            await session.execute(
                statement.on_conflict_do_update(index_elements=["monitor_id", "chat_id"], set_={"active": True})
            )
            row = await session.scalar(
                select(Subscription)
                .where(Subscription.monitor_id == monitor_id, Subscription.chat_id == chat_id)
                .execution_options(populate_existing=True)
            )
            if row is None:  # pragma: no cover - the upsert above guarantees it
                raise LookupError(f"subscription {monitor_id}/{chat_id} vanished")
            return to_subscription_record(row)

    async def unsubscribe(self, monitor_id: int, chat_id: int) -> bool:
        async with self._db.transaction() as session:
            result = await session.execute(
                delete(Subscription).where(Subscription.monitor_id == monitor_id, Subscription.chat_id == chat_id)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def subscribers(self, monitor_id: int) -> list[ChatRecord]:
        """Chats that should receive the monitor's next digest: active subscription, active chat."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Chat)
                .join(Subscription, Subscription.chat_id == Chat.id)
                .where(Subscription.monitor_id == monitor_id, Subscription.active.is_(True), Chat.active.is_(True))
                .order_by(Chat.id)
            )
            return [to_chat_record(row) for row in rows]

    async def for_chat(self, chat_id: int) -> list[SubscriptionRecord]:
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Subscription).where(Subscription.chat_id == chat_id).order_by(Subscription.id)
            )
            return [to_subscription_record(row) for row in rows]

    async def set_active_for_chat(self, chat_id: int, *, active: bool) -> int:
        """Pause (or resume) every subscription of a chat, e.g. when the bot was blocked there;
        returns how many changed."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Subscription)
                .where(Subscription.chat_id == chat_id, Subscription.active.is_not(active))
                .values(active=active)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]
