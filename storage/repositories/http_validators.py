"""Conditional-GET memory per URL: ETag, Last-Modified and the body to reuse on a 304."""

from __future__ import annotations

import hashlib
from datetime import datetime

from kernel import utc_now
from storage.models import HttpValidator
from storage.records import HttpValidatorRecord
from storage.repositories._common import Repository, record_of, upsert_insert


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


class HttpValidatorRepository(Repository):
    async def get(self, url: str) -> HttpValidatorRecord | None:
        async with self._db.sessions() as session:
            row = await session.get(HttpValidator, url_key(url))
            return record_of(HttpValidatorRecord, row) if row is not None else None

    async def put(
        self,
        url: str,
        *,
        etag: str | None,
        last_modified: str | None,
        body: bytes | None,
        content_type: str | None = None,
        now: datetime | None = None,
    ) -> None:
        """Remember the validators (and body) of the latest 200 response for `url`."""
        values = {
            "etag": etag,
            "last_modified": last_modified,
            "body": body,
            "content_type": content_type,
            "updated_at": now or utc_now(),
        }
        async with self._db.transaction() as session:
            statement = upsert_insert(session, HttpValidator).values(url_key=url_key(url), url=url, **values)
            await session.execute(statement.on_conflict_do_update(index_elements=["url_key"], set_=values))

    async def delete(self, url: str) -> bool:
        return bool(await self._delete(HttpValidator, HttpValidator.url_key == url_key(url)))
