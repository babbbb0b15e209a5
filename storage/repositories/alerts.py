"""Alerts: a chat's standing conditions on a monitor it receives, and the stories each fired for.

A firing and the notice that carries it are written in one transaction, and a (alert, story key) pair is unique, so
an alert tells a chat about a story once, however many runs or workers see the story. A run's pending check is
written with the run (`DeliveryRepository.complete_run`) and deleted once checked (`checked`), so a check a stopped
process did not make is found again (`pending_checks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select

from kernel import utc_now
from storage.models import Alert, AlertFiring, Chat, Monitor, PendingAlertCheck, Subscription
from storage.records import AlertRecord, PendingAlertCheckRecord, RunOutcome
from storage.repositories._common import Repository, record_of, upsert_insert
from storage.repositories.deliveries import store_finished_run
from storage.repositories.subscriptions import receiving


def _record(alert: Alert, monitor_topic: str, fired: int = 0) -> AlertRecord:
    return record_of(AlertRecord, alert, monitor_topic=monitor_topic, fired=fired)


class AlertRepository(Repository):
    async def create(
        self, *, chat_id: int, monitor_id: int, topic: str, condition: str, now: datetime | None = None
    ) -> AlertRecord:
        """Store a new alert of the chat on the monitor (the caller checked that the chat receives it)."""
        async with self._db.transaction() as session:
            alert = Alert(
                chat_id=chat_id, monitor_id=monitor_id, topic=topic, condition=condition, created_at=now or utc_now()
            )
            session.add(alert)
            await session.flush()
            monitor_topic = await session.scalar(select(Monitor.topic).where(Monitor.id == monitor_id))
            return _record(alert, monitor_topic or "")

    async def count_for_chat(self, chat_id: int) -> int:
        return await self._count(Alert, Alert.chat_id == chat_id)

    async def list_for_chat(self, chat_id: int) -> list[AlertRecord]:
        """The chat's alerts, oldest first, each with its monitor's topic and how many stories it fired for."""
        fired = select(AlertFiring.alert_id, func.count().label("fired")).group_by(AlertFiring.alert_id).subquery()
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Alert, Monitor.topic, func.coalesce(fired.c.fired, 0))
                .join(Monitor, Monitor.id == Alert.monitor_id)
                .outerjoin(fired, fired.c.alert_id == Alert.id)
                .where(Alert.chat_id == chat_id)
                .order_by(Alert.id)
            )
            return [_record(alert, topic, int(count)) for alert, topic, count in rows.all()]

    async def remove(self, alert_id: int, *, chat_id: int) -> bool:
        """Delete the chat's alert (another chat's is left alone); whether there was one."""
        async with self._db.transaction() as session:
            result = await session.execute(
                delete(Alert).where(Alert.id == alert_id, Alert.chat_id == chat_id).returning(Alert.id)
            )
            return result.first() is not None

    async def receiving_alerts(self, monitor_id: int) -> list[AlertRecord]:
        """The monitor's alerts whose chats still receive it (subscribed, not paused, the chat there), by id."""
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(Alert, Monitor.topic)
                .join(Monitor, Monitor.id == Alert.monitor_id)
                .join(Chat, Chat.id == Alert.chat_id)
                .join(
                    Subscription,
                    (Subscription.chat_id == Alert.chat_id) & (Subscription.monitor_id == Alert.monitor_id),
                )
                .where(Alert.monitor_id == monitor_id, receiving())
                .order_by(Alert.id)
            )
            return [_record(alert, topic) for alert, topic in rows.all()]

    async def fired_items(self, alert_ids: Sequence[int]) -> dict[int, set[str]]:
        """Per alert, the ids of every item of every story it fired for."""
        if not alert_ids:
            return {}
        found: dict[int, set[str]] = {alert_id: set() for alert_id in alert_ids}
        async with self._db.sessions() as session:
            rows = await session.execute(
                select(AlertFiring.alert_id, AlertFiring.item_ids).where(AlertFiring.alert_id.in_(list(alert_ids)))
            )
            for alert_id, item_ids in rows.all():
                found[alert_id].update(item_ids or ())
        return found

    async def fire(
        self,
        alert: AlertRecord,
        *,
        story_key: str,
        item_ids: Sequence[str],
        text: str,
        stats: dict[str, object],
        now: datetime,
    ) -> int | None:
        """In ONE transaction: record that the alert fired for the story and queue `text` for its chat as a notice
        run with one outbox row. None (and nothing written) when it fired for this story key before; else the
        notice run's id."""
        async with self._db.transaction() as session:
            inserted = await session.execute(
                upsert_insert(session, AlertFiring)
                .values(alert_id=alert.id, story_key=story_key[:255], item_ids=list(item_ids), fired_at=now)
                .on_conflict_do_nothing(index_elements=["alert_id", "story_key"])
                .returning(AlertFiring.id)
            )
            firing_id = inserted.scalar_one_or_none()
            if firing_id is None:
                return None
            run_id = await store_finished_run(
                session,
                chat_id=alert.chat_id,
                query=f"alert #{alert.id}: monitor #{alert.monitor_id}",
                scheduled_for=now,
                outcome=RunOutcome(finished_at=now, stats={**stats, "text": text}),
                recipients=[alert.chat_id],
            )
            firing = await session.get(AlertFiring, firing_id)
            assert firing is not None  # inserted just now, in this transaction
            firing.run_id = run_id
            return run_id

    async def for_monitors(self, monitor_ids: Sequence[int], *, chat_id: int) -> dict[int, list[AlertRecord]]:
        """The chat's alerts on each of these monitors, oldest first, each with how many stories it fired for."""
        found: dict[int, list[AlertRecord]] = {}
        if not monitor_ids:
            return found
        for alert in await self.list_for_chat(chat_id):
            if alert.monitor_id in monitor_ids:
                found.setdefault(alert.monitor_id, []).append(alert)
        return found

    async def pending_checks(self, *, created_before: datetime, limit: int = 50) -> list[PendingAlertCheckRecord]:
        """Runs stored before `created_before` whose alerts were not checked yet, oldest first."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(PendingAlertCheck)
                .where(PendingAlertCheck.created_at <= created_before)
                .order_by(PendingAlertCheck.created_at, PendingAlertCheck.run_id)
                .limit(limit)
            )
            return [
                PendingAlertCheckRecord(
                    run_id=row.run_id, monitor_id=row.monitor_id, stories=list(row.stories), created_at=row.created_at
                )
                for row in rows
            ]

    async def checked(self, run_id: int) -> None:
        """The run's alerts were checked: its pending check goes."""
        async with self._db.transaction() as session:
            await session.execute(delete(PendingAlertCheck).where(PendingAlertCheck.run_id == run_id))
