"""Inbound de-duplication: platform update/event ids already processed survive a restart."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from kernel import utc_now
from storage.models import ProcessedInbound
from storage.repositories._common import Repository, upsert_insert


class InboundRepository(Repository):
    async def seen_before(self, platform: str, external_id: str, *, now: datetime | None = None) -> bool:
        """Mark the id processed and say whether it already was; atomic, so of two racing
        deliveries of the same event exactly one gets False."""
        async with self._db.transaction() as session:
            statement = (
                upsert_insert(session, ProcessedInbound)
                .values(platform=platform, external_id=external_id, received_at=now or utc_now())
                .on_conflict_do_nothing(index_elements=["platform", "external_id"])
                .returning(ProcessedInbound.id)
            )
            inserted = (await session.execute(statement)).scalar_one_or_none()
            return inserted is None

    async def received_at(self, platform: str, external_id: str) -> datetime | None:
        """When the id was marked processed (the `now` its mark was stored with); None when it was not."""
        async with self._db.sessions() as session:
            statement = select(ProcessedInbound.received_at).where(
                ProcessedInbound.platform == platform, ProcessedInbound.external_id == external_id
            )
            return (await session.execute(statement)).scalar_one_or_none()

    async def forget_before(self, cutoff: datetime) -> int:
        """Drop ids received before `cutoff` (platforms stop retrying long before); returns how many."""
        return await self._delete(ProcessedInbound, ProcessedInbound.received_at < cutoff)
