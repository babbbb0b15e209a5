"""Users: the people who write to Lookout, by platform and platform user id."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import User
from storage.records import UserRecord
from storage.repositories._common import AnyConnection, Repository, record_of, upsert_insert


def to_user_record(row: User) -> UserRecord:
    return record_of(UserRecord, row)


def user_upsert(
    connection: AnyConnection,
    platform: str,
    external_id: str,
    *,
    display_name: str | None,
) -> Any:
    """The INSERT that creates the person on first sight; a non-empty display name replaces the stored one."""
    statement = upsert_insert(connection, User).values(
        platform=platform, external_id=external_id, display_name=display_name
    )
    if display_name:
        return statement.on_conflict_do_update(
            index_elements=["platform", "external_id"], set_={"display_name": display_name}
        )
    return statement.on_conflict_do_nothing(index_elements=["platform", "external_id"])


class UserRepository(Repository):
    async def get_or_create(self, platform: str, external_id: str, *, display_name: str | None = None) -> UserRecord:
        """The user, created on first sight; a new non-empty display name replaces the stored one."""

        def upsert(session: AsyncSession) -> Any:
            return user_upsert(session, platform, external_id, display_name=display_name)

        return await self._upserted(User, upsert, (platform, external_id), to_user_record)

    async def get(self, user_id: int) -> UserRecord | None:
        return await self._record_by_key(User, user_id, to_user_record)

    async def find(self, platform: str, external_id: str) -> UserRecord | None:
        statement = select(User).where(User.platform == platform, User.external_id == external_id)
        return await self._record_where(statement, to_user_record)

    async def delete(self, user_id: int) -> bool:
        async with self._db.transaction() as session:
            result = await session.execute(delete(User).where(User.id == user_id))
            return bool(result.rowcount)  # type: ignore[attr-defined]
