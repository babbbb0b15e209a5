"""Users: the people who write to Lookout, by platform and platform user id."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from storage.models import User
from storage.records import UserRecord
from storage.repositories._common import AnyConnection, Repository, by_platform_key, platform_upsert, record_of


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
    return platform_upsert(
        connection,
        User,
        platform,
        external_id,
        values={"display_name": display_name},
        replace={"display_name": display_name} if display_name else {},
    )


class UserRepository(Repository):
    async def get_or_create(self, platform: str, external_id: str, *, display_name: str | None = None) -> UserRecord:
        """The user, created on first sight; a new non-empty display name replaces the stored one."""

        def upsert(session: AsyncSession) -> Any:
            return user_upsert(session, platform, external_id, display_name=display_name)

        return await self._upserted(User, upsert, (platform, external_id), to_user_record)

    async def get(self, user_id: int) -> UserRecord | None:
        return await self._record_by_key(User, user_id, to_user_record)

    async def find(self, platform: str, external_id: str) -> UserRecord | None:
        return await self._record_where(by_platform_key(User, platform, external_id), to_user_record)

    async def delete(self, user_id: int) -> bool:
        return bool(await self._delete(User, User.id == user_id))
