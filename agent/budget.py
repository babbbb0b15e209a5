"""The per-chat daily token budget: every model call counted against a chat today (chat answers, memory summaries,
monitor runs, collection jobs; `research.record_usage` and the chat turn's write count them) against
CHAT_DAILY_TOKENS."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from monitors import ChatService

__all__ = ["BUDGET_SPENT_MESSAGE", "ChatBudget"]

BUDGET_SPENT_MESSAGE = (
    "This chat has used its language-model budget for today ({limit:,} tokens). Free-text answers are back "
    "tomorrow (UTC); commands like /monitors, /track and /digest still work."
)


@dataclass(frozen=True, kw_only=True)
class ChatBudget:
    """Tokens per chat per (UTC) day; `daily_tokens` 0 means no limit."""

    chats: ChatService
    daily_tokens: int

    def left(self, tokens_today: int) -> int | None:
        """Tokens left after `tokens_today`, or None without a limit (0 or less: spent)."""
        if self.daily_tokens <= 0:
            return None
        return self.daily_tokens - tokens_today

    async def remaining(self, chat_id: int, now: datetime) -> int | None:
        """Tokens left today, read from storage, or None without a limit (0 or less: spent)."""
        if self.daily_tokens <= 0:
            return None
        totals = await self.chats.usage.for_day(chat_id, now.astimezone(UTC).date())
        return self.left(totals.input_tokens + totals.output_tokens)

    def spent_message(self) -> str:
        return BUDGET_SPENT_MESSAGE.format(limit=self.daily_tokens)
