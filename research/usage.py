"""What language-model calls cost and how they are counted: the one pricing function, the usage of a run, and the
one recorder that adds it to a chat's day (for `/usage` and the daily budget).

Guarantees: a run is priced per response by the model that wrote it (with a fallback chain a run can mix two);
every recorded call carries a kind (`chat`, `memory`, `monitor`, `collect`, `embedding`, …) and adds to exactly
one (chat, day, kind) row.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Literal

from genai_prices import Usage as PriceUsage
from genai_prices import calc_price
from pydantic import BaseModel, NonNegativeFloat, NonNegativeInt
from pydantic_ai import RunUsage
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model

from research.llm import answering_model, configured_model, model_chain, model_label
from storage import Database, UsageEntry
from storage.repositories import UsageRepository

__all__ = ["USAGE_KIND_LABELS", "LlmUsage", "UsageKind", "estimate_cost_usd", "record_usage", "sum_usage"]

logger = logging.getLogger(__name__)

UsageKind = Literal["chat", "memory", "monitor", "collect", "embedding"]
"""What a model call was for: a chat answer, a memory summary, a monitor run (or a one-off search), a /collect
job, embeddings of items. `/usage` shows the day's tokens by kind; the daily budget counts them all."""

USAGE_KIND_LABELS: dict[str, str] = {
    "chat": "chat answers",
    "memory": "memory summaries",
    "monitor": "monitors and searches",
    "collect": "collections",
    "embedding": "embeddings",
    "earlier": "before kinds were kept",
}
"""How `/usage` names each kind (stored rows from before kinds were kept have the kind "earlier")."""


def estimate_cost_usd(model: str, *, input_tokens: int, output_tokens: int) -> float | None:
    """The price of the tokens for `provider:model` from genai-prices' bundled table; None when it is not listed.

    The one pricing function: every cost Lookout shows or stores comes from here."""
    provider, _, name = model.partition(":")
    if not name:
        provider, name = "", model
    try:
        price = calc_price(
            PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens),
            name,
            provider_id=provider or None,
        )
    except LookupError:  # an unknown model or provider (test models, local models): no price, not an error
        return None
    return float(price.total_price)


def _response_labels(response: ModelResponse, candidates: Sequence[Model]) -> list[str]:
    """The names to price a response by: the configured model that wrote it, else the provider's own names."""
    labels: list[str] = []
    answered = response.model_name or ""
    if answered:
        configured = configured_model(answered, candidates)
        if configured is not None:
            labels.append(model_label(configured))
        if response.provider_name:
            labels.append(f"{response.provider_name.split('-')[0]}:{answered}")
        labels.append(answered)
    return labels


def _response_cost(response: ModelResponse, candidates: Sequence[Model]) -> float | None:
    for label in _response_labels(response, candidates):
        cost = estimate_cost_usd(
            label, input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens
        )
        if cost is not None:
            return cost
    return None


def _sum_priced(costs: Iterable[float | None]) -> float | None:
    priced = [cost for cost in costs if cost is not None]
    return sum(priced) if priced else None


class LlmUsage(BaseModel):
    """Tokens and requests one model step spent, and what they cost."""

    model: str | None = None
    """The model's name; `None` when no model ran."""
    requests: NonNegativeInt = 0
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cost_usd: NonNegativeFloat | None = None
    """Estimated price in US dollars from the providers' published prices; `None` when the model is unpriced."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_run(cls, usage: RunUsage, *, model: Model | str, messages: Sequence[ModelMessage] = ()) -> LlmUsage:
        """A run's usage, named after the model that answered last (for a fallback chain, the one whose name is on
        the last response in `messages`; the chain's first without them) and priced per response by the model that
        wrote it. Pass only the run's own messages (not the history it was given). Without responses (a run that
        failed before any answer) the tokens are priced at the named model's price."""
        answering = answering_model(model, messages)
        name = answering if isinstance(answering, str) else model_label(answering)
        responses = [message for message in messages if isinstance(message, ModelResponse)]
        if responses:
            candidates = [] if isinstance(model, str) else list(model_chain(model))
            cost = _sum_priced(_response_cost(response, candidates) for response in responses)
        else:
            cost = estimate_cost_usd(name, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        return cls(
            model=name,
            requests=usage.requests,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost,
        )

    def entry(self, kind: UsageKind) -> UsageEntry:
        """This usage as a stored row of its kind."""
        return UsageEntry(
            kind=kind,
            requests=self.requests,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost=self.cost_usd or 0.0,
        )


def sum_usage(parts: Sequence[LlmUsage]) -> LlmUsage:
    """Several steps' usage as one; the model names joined."""
    names = list(dict.fromkeys(p.model for p in parts if p.model))
    return LlmUsage(
        model=", ".join(names) or None,
        requests=sum(p.requests for p in parts),
        input_tokens=sum(p.input_tokens for p in parts),
        output_tokens=sum(p.output_tokens for p in parts),
        cost_usd=_sum_priced(p.cost_usd for p in parts),
    )


async def record_usage(database: Database, *, chat_id: int, now: datetime, usage: LlmUsage, kind: UsageKind) -> None:
    """Add `usage` to the chat's (UTC) day under `kind`: the one recorder of model usage outside a chat turn (a
    turn writes its usage together with its memory). Nothing is written when nothing was spent; a failing write
    is logged, never raised (the work it counts is done)."""
    if not usage.requests and not usage.total_tokens:
        return
    try:
        await UsageRepository(database).add(chat_id, now.astimezone(UTC).date(), usage.entry(kind))
    except Exception:
        logger.exception("could not record %s usage for chat %d", kind, chat_id)
