"""Rules per reader: at most one set of rules per (monitor, chat), stored as the JSON the research layer reads
(`research.ReaderRules`); storage neither checks nor interprets them."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import delete, select

from kernel import utc_now
from storage.models import ReaderRule
from storage.records import JSONObject
from storage.repositories._common import Repository, upsert_insert


class ReaderRuleRepository(Repository):
    async def get(self, monitor_id: int, chat_id: int) -> JSONObject | None:
        """The chat's rules on the monitor; None when it has set none."""
        async with self._db.sessions() as session:
            rules: JSONObject | None = await session.scalar(
                select(ReaderRule.rules).where(ReaderRule.monitor_id == monitor_id, ReaderRule.chat_id == chat_id)
            )
            return rules

    async def put(
        self, monitor_id: int, chat_id: int, rules: JSONObject | None, *, now: datetime | None = None
    ) -> None:
        """Replace the chat's rules on the monitor; None (or an empty object) removes them."""
        async with self._db.transaction() as session:
            if not rules:
                await session.execute(
                    delete(ReaderRule).where(ReaderRule.monitor_id == monitor_id, ReaderRule.chat_id == chat_id)
                )
                return
            when = now or utc_now()
            statement = upsert_insert(session, ReaderRule).values(
                monitor_id=monitor_id, chat_id=chat_id, rules=rules, updated_at=when
            )
            await session.execute(
                statement.on_conflict_do_update(
                    index_elements=["monitor_id", "chat_id"], set_={"rules": rules, "updated_at": when}
                )
            )

    async def of_chat(self, chat_id: int, monitor_ids: Collection[int] | None = None) -> dict[int, JSONObject]:
        """The chat's rules by monitor id (only those monitors, when given)."""
        query = select(ReaderRule.monitor_id, ReaderRule.rules).where(ReaderRule.chat_id == chat_id)
        if monitor_ids is not None:
            query = query.where(ReaderRule.monitor_id.in_(sorted(monitor_ids)))
        async with self._db.sessions() as session:
            return {row.monitor_id: row.rules for row in await session.execute(query)}

    async def of_chats(self, chat_ids: Collection[int]) -> dict[int, dict[int, JSONObject]]:
        """Each chat's rules by monitor id, for many chats in one query (a page of briefings)."""
        if not chat_ids:
            return {}
        query = select(ReaderRule.chat_id, ReaderRule.monitor_id, ReaderRule.rules).where(
            ReaderRule.chat_id.in_(sorted(chat_ids))
        )
        found: dict[int, dict[int, JSONObject]] = {}
        async with self._db.sessions() as session:
            for row in await session.execute(query):
                found.setdefault(row.chat_id, {})[row.monitor_id] = row.rules
        return found
