"""The per-chat daily token budget: every model call counted against a chat today (chat answers, memory summaries,
monitor runs, collection jobs; `research.record_usage` and the chat turn's write count them) against
CHAT_DAILY_TOKENS. A chat whose budget is spent still gets its commands and its monitors' digests, made without the
language model; its scheduled runs count against its owner's budget like its commands do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Protocol

from storage import UsageTotals

__all__ = ["BUDGET_SPENT_MESSAGE", "ChatBudget"]

BUDGET_SPENT_MESSAGE = (
    "This chat has used its language-model budget for today ({limit:,} tokens). Free-text answers are back "
    "tomorrow (UTC); commands like /monitors, /track and /digest still work."
)


class DailyUsage(Protocol):
    """Where a chat's model usage per day is read (`ChatService.usage`)."""

    async def for_day(self, chat_id: int, day: date) -> UsageTotals: ...


@dataclass(frozen=True, kw_only=True)
class ChatBudget:
    """Tokens per chat per (UTC) day; `daily_tokens` 0 means no limit."""

    usage: DailyUsage
    daily_tokens: int

    def left(self, tokens_today: int) -> int | None:
        """Tokens left after `tokens_today`, or None without a limit (0 or less: spent)."""
        if self.daily_tokens <= 0:
            return None
        return self.daily_tokens - tokens_today

    def spent(self, tokens_today: int) -> bool:
        """Whether `tokens_today` uses up the day's budget (never, without a limit)."""
        left = self.left(tokens_today)
        return left is not None and left <= 0

    async def allows(self, chat_id: int, now: datetime) -> bool:
        """Whether the chat may still spend model tokens today (its usage read from storage)."""
        if self.daily_tokens <= 0:
            return True
        totals = await self.usage.for_day(chat_id, now.astimezone(UTC).date())
        return not self.spent(totals.input_tokens + totals.output_tokens)

    def spent_message(self) -> str:
        return BUDGET_SPENT_MESSAGE.format(limit=self.daily_tokens)
