"""The delivery outbox: a finished run, its items and one row per recipient chat, written together,
then claimed, sent and retried by the delivery worker."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kernel import utc_now
from storage.models import Chat, Delivery, PendingAlertCheck, Run, RunItem
from storage.records import (
    DeliveryRecord,
    DeliveryStatus,
    ItemRecord,
    ItemScore,
    JSONObject,
    RunOutcome,
    RunStatus,
)
from storage.repositories._common import Repository, record_of, upsert_insert, values_of
from storage.repositories.items import store_items
from storage.repositories.runs import chat_run
from storage.repositories.subscriptions import immediate_recipients

_OPEN = (DeliveryStatus.PENDING, DeliveryStatus.FAILED)


def to_delivery_record(row: Delivery) -> DeliveryRecord:
    return record_of(DeliveryRecord, row, status=DeliveryStatus(row.status))


async def queue_rows(session: AsyncSession, run_id: int, chat_ids: Sequence[int], *, at: datetime) -> None:
    """One pending outbox row per chat for the run, due at `at` (a row that exists already is left alone), in the
    caller's transaction."""
    statement = (
        upsert_insert(session, Delivery)
        .values(
            [
                {
                    "run_id": run_id,
                    "chat_id": chat_id,
                    "status": DeliveryStatus.PENDING,
                    "attempts": 0,
                    "next_attempt_at": at,
                    "created_at": at,
                }
                for chat_id in chat_ids
            ]
        )
        .on_conflict_do_nothing(index_elements=["run_id", "chat_id"])
    )
    await session.execute(statement)


def succeeded(run: Run, outcome: RunOutcome) -> None:
    """Mark the run's row succeeded with what it found (`outcome`), in the caller's transaction."""
    run.status = RunStatus.SUCCEEDED
    run.finished_at = outcome.finished_at
    run.stats = dict(outcome.stats)
    run.digest = dict(outcome.digest) if outcome.digest is not None else None
    run.language_digests = dict(outcome.language_digests)
    run.artifacts = dict(outcome.artifacts)
    run.input_tokens = outcome.input_tokens
    run.output_tokens = outcome.output_tokens
    run.cost = outcome.cost


async def store_finished_run(
    session: AsyncSession,
    *,
    chat_id: int,
    query: str,
    scheduled_for: datetime,
    outcome: RunOutcome,
    recipients: Sequence[int],
) -> int:
    """Store a run of the chat (no monitor) that is finished as it is made (a briefing, an alert's notice) and queue
    one outbox row per recipient, in the caller's transaction; the run's id."""
    run = chat_run(chat_id=chat_id, query=query, scheduled_for=scheduled_for, started_at=outcome.finished_at)
    succeeded(run, outcome)
    session.add(run)
    await session.flush()
    await queue_rows(session, run.id, recipients, at=outcome.finished_at)
    return run.id


class RunNotOpenError(Exception):
    """`complete_run` was given a run that does not exist or is no longer running."""


class DeliveryRepository(Repository):
    async def complete_run(
        self,
        run_id: int,
        *,
        outcome: RunOutcome,
        items: Sequence[ItemRecord] = (),
        scores: Sequence[ItemScore] = (),
        deliver: bool = True,
        extra_chat_ids: Sequence[int] = (),
    ) -> list[DeliveryRecord]:
        """In ONE transaction: mark the run succeeded with its outcome, store its items' scores, and queue one
        outbox row per recipient (and, when `outcome.alert_stories`, the run's pending alert check). Any failure
        leaves none of it written.

        The items themselves are stored just before, outside that transaction (`store_items`): they are shared by
        every monitor, and holding their rows for the run's transaction made other workers' runs on the same
        sources wait. An item stored for a run whose transaction then fails is harmless: items are a cache of what
        the sources said, linked to a run only by the scores written here.

        Recipients (when `deliver`): the chats that get the run's monitor as messages of their own (see
        `immediate_recipients`; chats that take it in their briefing read the stored run later), the
        chat that asked for a one-off search, and `extra_chat_ids` (e.g. the chat that said /digest).
        Pass `deliver=False` for a quiet monitor with nothing new. Returns the queued rows.
        """
        await store_items(self._db, items)
        async with self._db.transaction() as session:
            run = await session.get(Run, run_id, with_for_update=True)
            if run is None or run.status != RunStatus.RUNNING:
                raise RunNotOpenError(f"run {run_id} is not running")
            succeeded(run, outcome)

            session.add_all(RunItem(run_id=run_id, **values_of(score)) for score in scores)
            if outcome.alert_stories and run.monitor_id is not None:
                session.add(
                    PendingAlertCheck(
                        run_id=run_id,
                        monitor_id=run.monitor_id,
                        stories=list(outcome.alert_stories),
                        created_at=outcome.finished_at,
                    )
                )
            await session.flush()
            if not deliver:
                return []

            recipients: list[int] = []
            if run.monitor_id is not None:
                recipients.extend(await immediate_recipients(session, run.monitor_id))
            if run.chat_id is not None:
                recipients.append(run.chat_id)
            recipients.extend(extra_chat_ids)
            recipients = list(dict.fromkeys(recipients))
            if not recipients:
                return []
            await queue_rows(session, run_id, recipients, at=outcome.finished_at)
            rows = await session.scalars(select(Delivery).where(Delivery.run_id == run_id).order_by(Delivery.chat_id))
            return [to_delivery_record(row) for row in rows]

    async def claim_due(
        self,
        now: datetime,
        *,
        worker: str = "",
        limit: int = 20,
        lease: timedelta = timedelta(seconds=30),
        platforms: Collection[str] | None = None,
        chat_id: int | None = None,
    ) -> list[DeliveryRecord]:
        """Claim up to `limit` pending or failed rows due at `now`, oldest due first, for `worker`.

        Claiming counts an attempt, records `worker` as the claimer and pushes `next_attempt_at` to
        `now + lease`, so no other worker takes the row meanwhile; the claimer renews the lease while it sends
        (`renew`, `record_parts_sent`). If the claimer dies, the row comes due again when the lease ends, or at
        once when another worker knows the claimer is dead (`release_claims`). With `platforms`, only rows for
        chats on those platforms are claimed, so rows no sender can take keep their attempts; with `chat_id`, only
        that chat's rows (a delivery job delivers one chat's rows, in order).
        """
        async with self._db.transaction() as session:
            due = (
                select(Delivery.id)
                .where(Delivery.status.in_(_OPEN), Delivery.next_attempt_at <= now)
                .order_by(Delivery.next_attempt_at, Delivery.id)
                .limit(limit)
            )
            if platforms is not None:
                due = due.join(Chat, Chat.id == Delivery.chat_id).where(Chat.platform.in_(sorted(platforms)))
            if chat_id is not None:
                due = due.where(Delivery.chat_id == chat_id)
            if session.get_bind().dialect.name == "postgresql":
                due = due.with_for_update(skip_locked=True)
            # The conditions are repeated so a row another worker claimed first is left alone.
            statement = (
                update(Delivery)
                .where(Delivery.id.in_(due), Delivery.status.in_(_OPEN), Delivery.next_attempt_at <= now)
                .values(next_attempt_at=now + lease, attempts=Delivery.attempts + 1, claimed_by=worker or None)
                .returning(Delivery)
                .execution_options(synchronize_session=False)
            )
            rows = (await session.scalars(statement)).all()
            return sorted((to_delivery_record(row) for row in rows), key=lambda r: r.id)

    async def chats_due(
        self, now: datetime, *, platforms: Collection[str] | None = None, limit: int = 1000
    ) -> list[int]:
        """The chats that have outbox rows due at `now` (those a delivery job should be started for)."""
        async with self._db.sessions() as session:
            query = (
                select(Delivery.chat_id)
                .where(Delivery.status.in_(_OPEN), Delivery.next_attempt_at <= now)
                .group_by(Delivery.chat_id)
                .order_by(func.min(Delivery.next_attempt_at))
                .limit(limit)
            )
            if platforms is not None:
                query = query.join(Chat, Chat.id == Delivery.chat_id).where(Chat.platform.in_(sorted(platforms)))
            return list(await session.scalars(query))

    async def renew(self, delivery_ids: Collection[int], *, worker: str, until: datetime) -> int:
        """Extend `worker`'s claims on these open rows to `until`; returns how many it still holds."""
        if not delivery_ids:
            return 0
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Delivery)
                .where(Delivery.id.in_(sorted(delivery_ids)), Delivery.status.in_(_OPEN), Delivery.claimed_by == worker)
                .values(next_attempt_at=until)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def record_parts_sent(
        self,
        delivery_id: int,
        parts_sent: int,
        *,
        worker: str,
        until: datetime,
        language: str,
        timezone: str,
    ) -> bool:
        """Store that the first `parts_sent` parts were confirmed sent, renewing `worker`'s claim to `until`, and
        the `language` ("" for the monitor's own) and `timezone` they were rendered in. False when the worker no
        longer holds the claim (its lease ran out and another worker took the row)."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Delivery)
                .where(Delivery.id == delivery_id, Delivery.status.in_(_OPEN), Delivery.claimed_by == worker)
                .values(
                    parts_sent=parts_sent,
                    next_attempt_at=until,
                    rendered_language=language,
                    rendered_timezone=timezone,
                )
            )
            return int(result.rowcount) == 1  # type: ignore[attr-defined]

    async def record_left_out(self, delivery_id: int, left_out: JSONObject | None) -> None:
        """Store what the chat's own rules took out of this delivery's digest (read again by a resend and by /why)."""
        async with self._db.transaction() as session:
            await session.execute(update(Delivery).where(Delivery.id == delivery_id).values(left_out=left_out))

    async def claimants(self, now: datetime) -> set[str]:
        """The workers holding a claim in force on an open row at `now`."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Delivery.claimed_by)
                .where(Delivery.status.in_(_OPEN), Delivery.next_attempt_at > now, Delivery.claimed_by.is_not(None))
                .distinct()
            )
            return {claimer for claimer in rows if claimer}

    async def release_claims(self, workers: Collection[str], *, now: datetime) -> int:
        """Make the open rows these (dead) workers had claimed due at `now`; returns how many."""
        if not workers:
            return 0
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Delivery)
                .where(Delivery.status.in_(_OPEN), Delivery.claimed_by.in_(sorted(workers)))
                .values(next_attempt_at=now, claimed_by=None)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def mark_sent(
        self, delivery_id: int, *, now: datetime | None = None, parts_sent: int | None = None
    ) -> DeliveryRecord | None:

        def sent(row: Delivery) -> None:
            row.status = DeliveryStatus.SENT
            row.sent_at = now or utc_now()
            row.last_error = None
            row.claimed_by = None
            if parts_sent is not None:
                row.parts_sent = parts_sent

        return await self._changed(Delivery, delivery_id, sent, to_delivery_record)

    async def mark_failed(
        self, delivery_id: int, *, error: str, retry_at: datetime | None = None
    ) -> DeliveryRecord | None:
        """Record a failed attempt: the row is tried again at `retry_at`, or is dead when None (a permanent error,
        or the caller's retry rule gave up). When to retry is the caller's policy, not storage's."""

        def failed(row: Delivery) -> None:
            row.last_error = error
            row.claimed_by = None
            if retry_at is None:
                row.status = DeliveryStatus.DEAD
            else:
                row.status = DeliveryStatus.FAILED
                row.next_attempt_at = retry_at

        return await self._changed(Delivery, delivery_id, failed, to_delivery_record)

    async def list_for_run(self, run_id: int) -> list[DeliveryRecord]:
        async with self._db.sessions() as session:
            rows = await session.scalars(select(Delivery).where(Delivery.run_id == run_id).order_by(Delivery.chat_id))
            return [to_delivery_record(row) for row in rows]

    async def give_up_for_chat(self, chat_id: int, *, error: str) -> int:
        """Make every unsent row of a chat dead (the bot was blocked or removed); returns how many."""
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Delivery)
                .where(Delivery.chat_id == chat_id, Delivery.status.in_(_OPEN))
                .values(status=DeliveryStatus.DEAD, last_error=error)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]
