"""Subscriptions: which chats receive a monitor's digests, and how (one message per run or in their briefing)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypedDict, Unpack

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kernel import utc_now
from storage.models import Chat, Subscription
from storage.records import ChatRecord, DeliveryMode, SubscriptionRecord
from storage.repositories._common import Repository, record_of, upsert_insert
from storage.repositories.chats import to_chat_record


class SubscriptionChanges(TypedDict, total=False):
    """What a subscriber may change about its own subscription."""

    paused: bool
    delivery: DeliveryMode


def to_subscription_record(row: Subscription) -> SubscriptionRecord:
    return record_of(SubscriptionRecord, row, delivery=DeliveryMode(row.delivery))


def receiving() -> ColumnElement[bool]:
    """The subscription gets the monitor's digests at all: the chat is there and did not pause its delivery."""
    return and_(Subscription.active.is_(True), Subscription.paused.is_(False), Chat.active.is_(True))


def _in_briefing() -> ColumnElement[bool]:
    """The digests go into the chat's briefing rather than one message per run."""
    return or_(
        Subscription.delivery == DeliveryMode.BRIEFING.value,
        and_(Subscription.delivery == DeliveryMode.AUTO.value, Chat.briefing_schedule.is_not(None)),
    )


async def immediate_recipients(session: AsyncSession, monitor_id: int) -> list[int]:
    """Chats that get the monitor's next digest as a message of its own (not in a briefing), in id order; what the
    outbox queues a row for when a run completes."""
    rows = await session.scalars(
        select(Chat.id)
        .join(Subscription, Subscription.chat_id == Chat.id)
        .where(Subscription.monitor_id == monitor_id, receiving(), ~_in_briefing())
        .order_by(Chat.id)
    )
    return list(rows)


class SubscriptionRepository(Repository):
    async def subscribe(self, monitor_id: int, chat_id: int) -> SubscriptionRecord:
        """Subscribe the chat (re-activating and un-pausing an existing subscription; its delivery mode stays)."""
        async with self._db.transaction() as session:
            statement = upsert_insert(session, Subscription).values(
                monitor_id=monitor_id,
                chat_id=chat_id,
                active=True,
                paused=False,
                delivery=DeliveryMode.AUTO.value,
                created_at=utc_now(),
            )
            await session.execute(
                statement.on_conflict_do_update(
                    index_elements=["monitor_id", "chat_id"], set_={"active": True, "paused": False}
                )
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

    async def get(self, monitor_id: int, chat_id: int) -> SubscriptionRecord | None:
        statement = select(Subscription).where(Subscription.monitor_id == monitor_id, Subscription.chat_id == chat_id)
        return await self._record_where(statement, to_subscription_record)

    async def update(
        self, monitor_id: int, chat_id: int, **changes: Unpack[SubscriptionChanges]
    ) -> SubscriptionRecord | None:
        """Change the chat's own subscription; None when it has none."""
        async with self._db.transaction() as session:
            row = await session.scalar(
                select(Subscription).where(Subscription.monitor_id == monitor_id, Subscription.chat_id == chat_id)
            )
            if row is None:
                return None
            values: dict[str, Any] = dict(changes)
            if "delivery" in values:
                values["delivery"] = DeliveryMode(values["delivery"]).value
            for name, value in values.items():
                setattr(row, name, value)
            await session.flush()
            return to_subscription_record(row)

    async def subscribers(self, monitor_id: int) -> list[ChatRecord]:
        """Chats that receive the monitor's next digest in any way (a message of its own or in their briefing):
        active subscription, not paused by the chat, active chat."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Chat)
                .join(Subscription, Subscription.chat_id == Chat.id)
                .where(Subscription.monitor_id == monitor_id, receiving())
                .order_by(Chat.id)
            )
            return [to_chat_record(row) for row in rows]

    async def with_chats(self, monitor_id: int) -> list[tuple[SubscriptionRecord, ChatRecord]]:
        """Every subscription of the monitor with its chat, oldest subscription first."""
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Subscription, Chat)
                .join(Chat, Chat.id == Subscription.chat_id)
                .where(Subscription.monitor_id == monitor_id)
                .order_by(Subscription.created_at, Subscription.id)
            )
            return [(to_subscription_record(sub), to_chat_record(chat)) for sub, chat in rows]

    async def counts(self, monitor_ids: Collection[int]) -> dict[int, int]:
        """How many chats receive each monitor (active, not paused), by monitor id; monitors without any are absent."""
        if not monitor_ids:
            return {}
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Subscription.monitor_id, func.count())
                .join(Chat, Chat.id == Subscription.chat_id)
                .where(Subscription.monitor_id.in_(sorted(monitor_ids)), receiving())
                .group_by(Subscription.monitor_id)
            )
            return {int(monitor_id): int(count) for monitor_id, count in rows}

    async def in_briefings(self, chat_ids: Collection[int]) -> dict[int, list[int]]:
        """The monitors whose digests go into each chat's briefing (the chat has a briefing or asked for one), in
        one query: chat id → monitor ids in id order (chats without any are left out)."""
        if not chat_ids:
            return {}
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Subscription.chat_id, Subscription.monitor_id)
                .join(Chat, Chat.id == Subscription.chat_id)
                .where(
                    Subscription.chat_id.in_(sorted(chat_ids)),
                    receiving(),
                    _in_briefing(),
                    Chat.briefing_schedule.is_not(None),
                )
                .order_by(Subscription.chat_id, Subscription.monitor_id)
            )
            monitors: dict[int, list[int]] = {}
            for chat_id, monitor_id in rows:
                monitors.setdefault(int(chat_id), []).append(int(monitor_id))
            return monitors

    async def for_chat(self, chat_id: int) -> list[SubscriptionRecord]:
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Subscription).where(Subscription.chat_id == chat_id).order_by(Subscription.id)
            )
            return [to_subscription_record(row) for row in rows]

    async def set_active_for_chat(self, chat_id: int, *, active: bool) -> int:
        """Deactivate (or reactivate) every subscription of a chat, e.g. when the bot was blocked there;
        returns how many changed. A subscriber's own pause is a separate flag and stays as it is."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Subscription)
                .where(Subscription.chat_id == chat_id, Subscription.active.is_not(active))
                .values(active=active)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]
