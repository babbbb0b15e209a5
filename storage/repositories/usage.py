"""LLM usage per chat per day: requests, tokens and cost, added atomically."""

from __future__ import annotations

from datetime import date

from sqlalchemy import func, select

from storage.models import Usage
from storage.records import UsageTotals
from storage.repositories._common import Repository, upsert_insert


class UsageRepository(Repository):
    async def add(
        self,
        chat_id: int,
        day: date,
        *,
        requests: int = 1,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
    ) -> None:
        """Add to the chat's totals for `day`; concurrent adds all count (one upsert, no read)."""
        async with self._db.transaction() as session:
            statement = upsert_insert(session, Usage).values(
                chat_id=chat_id,
                day=day,
                requests=requests,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=cost,
            )
            statement = statement.on_conflict_do_update(
                index_elements=["chat_id", "day"],
                set_={
                    "requests": Usage.requests + statement.excluded.requests,
                    "input_tokens": Usage.input_tokens + statement.excluded.input_tokens,
                    "output_tokens": Usage.output_tokens + statement.excluded.output_tokens,
                    "cost": Usage.cost + statement.excluded.cost,
                },
            )
            await session.execute(statement)

    async def for_day(self, chat_id: int, day: date) -> UsageTotals:
        return await self._totals(chat_id, day, day)

    async def for_month(self, chat_id: int, year: int, month: int) -> UsageTotals:
        first = date(year, month, 1)
        last = date(year + month // 12, month % 12 + 1, 1).toordinal() - 1
        return await self._totals(chat_id, first, date.fromordinal(last))

    async def _totals(self, chat_id: int, first: date, last: date) -> UsageTotals:
        async with self._db.sessions() as session:
            row = (
                await session.execute(
                    select(
                        func.coalesce(func.sum(Usage.requests), 0),
                        func.coalesce(func.sum(Usage.input_tokens), 0),
                        func.coalesce(func.sum(Usage.output_tokens), 0),
                        func.coalesce(func.sum(Usage.cost), 0.0),
                    ).where(Usage.chat_id == chat_id, Usage.day >= first, Usage.day <= last)
                )
            ).one()
            return UsageTotals(
                requests=int(row[0]), input_tokens=int(row[1]), output_tokens=int(row[2]), cost=float(row[3])
            )
