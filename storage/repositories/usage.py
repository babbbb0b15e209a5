"""LLM usage per chat, day and kind of call: requests, tokens and cost, added atomically."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import date
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, ScalarSelect, bindparam, func, select
from sqlalchemy.engine import Connection

from storage.models import Usage
from storage.records import UsageEntry, UsageTotals
from storage.repositories._common import Repository, dialect_insert, dialect_name

_COUNT_COLUMNS = ("requests", "input_tokens", "output_tokens", "cost")
"""What a usage row counts (`UsageTotals`' fields), each added to the stored row on conflict."""


@functools.cache
def _add_statement(dialect: str) -> Any:
    return _adding(dialect_insert(dialect, Usage))


def _adding(insert: Any) -> Any:
    """`insert`, adding its values to the (chat, day, kind) row already stored."""
    return insert.on_conflict_do_update(
        index_elements=["chat_id", "day", "kind"],
        set_={name: getattr(Usage, name) + getattr(insert.excluded, name) for name in _COUNT_COLUMNS},
    )


def add_usage(connection: Connection, chat_id: int, day: date, entry: UsageEntry) -> None:
    """Add `entry` to the chat's (day, kind) row inside the caller's transaction: one upsert, no read, so
    concurrent adds all count."""
    connection.execute(
        _add_statement(dialect_name(connection)),
        {"chat_id": chat_id, "day": day, "kind": entry.kind, **{name: getattr(entry, name) for name in _COUNT_COLUMNS}},
    )


def usage_upsert_ctes(chat_id: int, day: date, entries: Sequence[UsageEntry]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """PostgreSQL: `add_usage` of every entry as data-modifying CTEs (`usage_0`, …) and their parameters, for a
    caller that runs it inside a larger statement. Entries of one kind are summed first: one statement may not
    update a row twice."""
    kinds = list(dict.fromkeys(entry.kind for entry in entries))
    parameters: dict[str, Any] = {"usage_chat_id": chat_id, "usage_day": day}
    for index, kind in enumerate(kinds):
        totals = UsageTotals.total(entry for entry in entries if entry.kind == kind)
        parameters[f"usage_{index}_kind"] = kind
        parameters |= {f"usage_{index}_{name}": getattr(totals, name) for name in _COUNT_COLUMNS}
    return _add_rows(len(kinds)), parameters


@functools.cache
def _add_rows(count: int) -> tuple[Any, ...]:
    """`_add_statement` on PostgreSQL for `count` rows (of distinct kinds), every value bound by name: one CTE per
    row, built once per count. (One INSERT of several VALUES rows would do, but SQLAlchemy gives such a statement
    no cache key and would compile it on every turn.)"""
    return tuple(
        _adding(
            dialect_insert("postgresql", Usage).values(
                chat_id=bindparam("usage_chat_id"),
                day=bindparam("usage_day"),
                **{name: bindparam(f"usage_{index}_{name}") for name in ("kind", *_COUNT_COLUMNS)},
            )
        ).cte(f"usage_{index}")
        for index in range(count)
    )


def tokens_on(chat_id: ColumnElement[int], day: date | BindParameter[date]) -> ScalarSelect[int]:
    """A scalar subquery: the chat's input + output tokens on `day`, every kind together (0 when none)."""
    return (
        select(func.coalesce(func.sum(Usage.input_tokens + Usage.output_tokens), 0))
        .where(Usage.chat_id == chat_id, Usage.day == day)
        .scalar_subquery()
    )


class UsageRepository(Repository):
    async def add(self, chat_id: int, day: date, entry: UsageEntry) -> None:
        """Add to the chat's totals for `day` under the entry's kind, in a transaction of its own."""
        await self._db.write(lambda connection: add_usage(connection, chat_id, day, entry))

    async def for_day(self, chat_id: int, day: date) -> UsageTotals:
        return UsageTotals.total((await self.by_kind(chat_id, day, day)).values())

    async def for_month(self, chat_id: int, year: int, month: int) -> UsageTotals:
        first, last = month_bounds(year, month)
        return UsageTotals.total((await self.by_kind(chat_id, first, last)).values())

    async def by_kind(self, chat_id: int, first: date, last: date) -> dict[str, UsageTotals]:
        """The chat's totals from `first` to `last` (both included) per kind of call."""
        async with self._db.begin_read() as connection:
            rows = await connection.execute(
                select(
                    Usage.kind,
                    func.sum(Usage.requests),
                    func.sum(Usage.input_tokens),
                    func.sum(Usage.output_tokens),
                    func.sum(Usage.cost),
                )
                .where(Usage.chat_id == chat_id, Usage.day >= first, Usage.day <= last)
                .group_by(Usage.kind)
            )
            return {
                str(kind): UsageTotals(
                    requests=int(requests), input_tokens=int(tokens_in), output_tokens=int(tokens_out), cost=float(cost)
                )
                for kind, requests, tokens_in, tokens_out, cost in rows
            }


def month_bounds(year: int, month: int) -> tuple[date, date]:
    """The first and the last day of a month."""
    first = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return first, date.fromordinal(following.toordinal() - 1)
