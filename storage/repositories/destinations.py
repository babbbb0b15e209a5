"""Destinations: Apprise URLs and signed webhooks that receive digests. Each is created together with its own chat
row (platform "apprise" or "webhook"), so subscriptions and the outbox treat it like a chat; this repository keeps
what only a destination has: its URL (a secret), its webhook key, who added it and its failure streak."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.sql.elements import ColumnElement

from kernel import utc_now
from storage.models import Chat, Destination
from storage.repositories._common import Repository, record_of


@dataclass(frozen=True, slots=True, kw_only=True)
class DestinationRecord:
    """One destination; `url` and `secret` are secrets: never log or show them (show `label`)."""

    id: int
    chat_id: int
    added_by_chat_id: int | None
    kind: str
    url: str
    secret: str | None
    label: str
    briefing_of_chat_id: int | None
    failing_since: datetime | None
    failure_told: bool
    last_error: str | None
    active: bool
    """Its chat is active (False: removed as gone, or paused after failing for days)."""
    created_at: datetime


def _record(row: Destination, active: bool) -> DestinationRecord:
    return record_of(DestinationRecord, row, active=active)


class DestinationRepository(Repository):
    async def add(
        self,
        *,
        platform: str,
        external_id: str,
        kind: str,
        url: str,
        secret: str | None,
        label: str,
        added_by_chat_id: int | None,
        now: datetime | None = None,
    ) -> DestinationRecord:
        """Create the destination and its chat in one transaction (`external_id` must be new)."""
        async with self._db.transaction() as session:
            chat = Chat(platform=platform, external_id=external_id, title=label[:255], timezone="UTC", active=True)
            session.add(chat)
            await session.flush()
            row = Destination(
                chat_id=chat.id,
                added_by_chat_id=added_by_chat_id,
                kind=kind,
                url=url,
                secret=secret,
                label=label[:255],
                created_at=now or utc_now(),
            )
            session.add(row)
            await session.flush()
            return _record(row, True)

    async def get(self, destination_id: int) -> DestinationRecord | None:
        return await self._one(Destination.id == destination_id)

    async def of_chat(self, chat_id: int) -> DestinationRecord | None:
        """The destination whose own chat is `chat_id` (what a sender is handed)."""
        return await self._one(Destination.chat_id == chat_id)

    async def _one(self, condition: ColumnElement[bool]) -> DestinationRecord | None:
        async with self._db.sessions() as session:
            query = select(Destination, Chat.active).join(Chat, Chat.id == Destination.chat_id).where(condition)
            found = (await session.execute(query)).one_or_none()
            return _record(found[0], found[1]) if found is not None else None

    async def all(self, *, added_by_chat_id: int | None = None) -> list[DestinationRecord]:
        """Every destination (oldest first), or those one chat added."""
        async with self._db.sessions() as session:
            query = select(Destination, Chat.active).join(Chat, Chat.id == Destination.chat_id).order_by(Destination.id)
            if added_by_chat_id is not None:
                query = query.where(Destination.added_by_chat_id == added_by_chat_id)
            return [_record(row, active) for row, active in (await session.execute(query)).all()]

    async def briefing_copies(self, chat_id: int) -> list[int]:
        """The chats of the active destinations that also receive `chat_id`'s briefing."""
        async with self._db.sessions() as session:
            rows = await session.scalars(
                select(Destination.chat_id)
                .join(Chat, Chat.id == Destination.chat_id)
                .where(Destination.briefing_of_chat_id == chat_id, Chat.active.is_(True))
                .order_by(Destination.id)
            )
            return list(rows)

    async def set_briefing_of(self, destination_id: int, chat_id: int | None) -> bool:
        async with self._db.transaction() as session:
            result = await session.execute(
                update(Destination).where(Destination.id == destination_id).values(briefing_of_chat_id=chat_id)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    async def record_failure(self, chat_id: int, *, error: str, now: datetime) -> tuple[DestinationRecord, bool] | None:
        """Note a failed attempt: the streak starts now unless it runs already. Returns the destination and whether
        this call is the one that should tell the adding chat (once per streak)."""
        async with self._db.transaction() as session:
            row = await session.scalar(select(Destination).where(Destination.chat_id == chat_id).with_for_update())
            if row is None:
                return None
            if row.failing_since is None:
                row.failing_since = now
            tell = not row.failure_told
            row.failure_told = True
            row.last_error = error[:500]
            await session.flush()
            active = bool(await session.scalar(select(Chat.active).where(Chat.id == chat_id)))
            return _record(row, active), tell

    async def record_success(self, chat_id: int) -> None:
        """The streak (if any) is over."""
        async with self._db.transaction() as session:
            await session.execute(
                update(Destination)
                .where(Destination.chat_id == chat_id, Destination.failing_since.is_not(None))
                .values(failing_since=None, failure_told=False, last_error=None)
            )
