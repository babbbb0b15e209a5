"""Conditional-GET validators kept in the database, so an unchanged feed still costs a 304 after a restart."""

from __future__ import annotations

from sources import StoredResponse
from storage import Database
from storage.repositories import HttpValidatorRepository


class DatabaseValidatorStore:
    """The sources' `ValidatorStore`, on the `http_validators` table."""

    def __init__(self, database: Database) -> None:
        self._validators = HttpValidatorRepository(database)

    async def get(self, key: str) -> StoredResponse | None:
        record = await self._validators.get(key)
        if record is None or record.body is None:
            return None
        return StoredResponse(
            etag=record.etag,
            last_modified=record.last_modified,
            content=record.body,
            content_type=record.content_type,
        )

    async def put(self, key: str, stored: StoredResponse) -> None:
        await self._validators.put(
            key,
            etag=stored.etag,
            last_modified=stored.last_modified,
            body=stored.content,
            content_type=stored.content_type,
        )
