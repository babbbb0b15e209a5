"""The per-chat daily token budget, and recording what each chat-agent run spent (tokens and estimated cost)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic_ai import RunUsage
from pydantic_ai.messages import ModelMessage, ModelResponse

from research import estimate_cost_usd
from storage import Database, UsageRepository

__all__ = ["BUDGET_SPENT_MESSAGE", "ChatBudget", "run_cost_usd"]

logger = logging.getLogger(__name__)

BUDGET_SPENT_MESSAGE = (
    "This chat has used its language-model budget for today ({limit:,} tokens). Free-text answers are back "
    "tomorrow (UTC); commands like /monitors, /track and /digest still work."
)


def _response_cost(response: ModelResponse) -> float:
    names = [response.model_name or ""]
    if response.provider_name and response.model_name:
        names.insert(0, f"{response.provider_name.split('-')[0]}:{response.model_name}")
    for name in names:
        if name and (cost := estimate_cost_usd(name, input_tokens=response.usage.input_tokens,
                                               output_tokens=response.usage.output_tokens)) is not None:  # fmt: skip
            return cost
    return 0.0


def run_cost_usd(messages: Sequence[ModelMessage]) -> float:
    """The estimated price of the model responses among `messages`, each priced by the model that answered
    (with a fallback model a run can mix two); unpriced models count as 0."""
    return sum(_response_cost(message) for message in messages if isinstance(message, ModelResponse))


@dataclass(frozen=True, kw_only=True)
class ChatBudget:
    """Tokens per chat per (UTC) day; `daily_tokens` 0 means no limit."""

    database: Database
    daily_tokens: int

    async def remaining(self, chat_id: int, now: datetime) -> int | None:
        """Tokens left today, or None without a limit (0 or less: spent)."""
        if self.daily_tokens <= 0:
            return None
        totals = await UsageRepository(self.database).for_day(chat_id, now.date())
        return self.daily_tokens - (totals.input_tokens + totals.output_tokens)

    def spent_message(self) -> str:
        return BUDGET_SPENT_MESSAGE.format(limit=self.daily_tokens)

    async def record(self, chat_id: int, now: datetime, usage: RunUsage, *, cost: float) -> None:
        """Add a run's usage to the chat's day; a failing write is logged, never raised (the answer still goes out)."""
        if not usage.requests and not usage.input_tokens and not usage.output_tokens:
            return
        try:
            await UsageRepository(self.database).add(
                chat_id,
                now.date(),
                requests=usage.requests,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost=cost,
            )
        except Exception:
            logger.exception("could not record usage for chat %d", chat_id)
