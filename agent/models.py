"""The chat's model: the light model with a short retry on rate limits and server errors, then the heavy model;
and what a failed model call means for the person (a daily quota is said as such, never retried in a loop)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.exceptions import (
    FallbackExceptionGroup,
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelServerError,
    ModelUnavailableError,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = [
    "DAILY_QUOTA_MESSAGE",
    "MODEL_DOWN_MESSAGE",
    "FailureKind",
    "RetryingModel",
    "chat_model",
    "failure_kind",
    "failure_message",
]

logger = logging.getLogger(__name__)

FailureKind = Literal["quota", "transient", "other"]
"""`quota`: a daily or billing quota is used up (waiting minutes will not help); `transient`: a rate limit, an
overloaded or failing server, a dropped connection (worth a short retry, then the other model); `other`: a
rejected request, bad credentials, an unknown model."""

DAILY_QUOTA_MESSAGE = (
    "The daily quota of the language model is used up, so I can't answer free text until it resets "
    "(Gemini's daily quotas reset at midnight Pacific time). Commands like /monitors, /track and /digest still work."
)
MODEL_DOWN_MESSAGE = (
    "The language model is not answering right now (rate-limited or having trouble). Please try again in a "
    "few minutes; commands like /monitors and /digest still work."
)
MODEL_REJECTED_MESSAGE = (
    "The language model refused the request (check the model name and API key in the settings). Commands still work."
)

Sleep = Callable[[float], Awaitable[None]]


def _says_daily_quota(error: ModelAPIError) -> bool:
    # A plain ModelHTTPError (a provider pydantic-ai does not categorise, or a scripted test error) still says
    # "per day" in Gemini's QuotaFailure details; look for it in the body.
    body = str(error.body or "")
    return "PerDay" in body or "per day" in body.lower()


def failure_kind(error: BaseException) -> FailureKind:
    """How a model error should be handled (see `FailureKind`)."""
    if isinstance(error, ModelQuotaExceededError):
        return "quota"
    if isinstance(error, ModelRateLimitError | ModelUnavailableError | ModelServerError | ModelConnectionError):
        return "quota" if _says_daily_quota(error) else "transient"
    if isinstance(error, ModelHTTPError):
        if error.status_code == 429:
            return "quota" if _says_daily_quota(error) else "transient"
        if error.status_code >= 500:
            return "transient"
    return "other"


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def failure_message(error: BaseException) -> str:
    """One true sentence for the person about a failed model call (a fallback group: judged by all its errors)."""
    kinds = {failure_kind(leaf) for leaf in _leaves(error)}
    if kinds == {"quota"}:
        return DAILY_QUOTA_MESSAGE
    if "transient" in kinds or "quota" in kinds:
        return MODEL_DOWN_MESSAGE
    return MODEL_REJECTED_MESSAGE


class RetryingModel(WrapperModel):
    """Retries a request that failed transiently (429 rate limit, 5xx, dropped connection) a few times with a
    short exponential backoff, honouring a short `Retry-After`. A quota error, a long `Retry-After` or the last
    failure is raised at once, so a `FallbackModel` around it can move on to the other model."""

    def __init__(
        self,
        wrapped: Model,
        *,
        attempts: int = 3,
        base_delay: float = 1.0,
        max_delay: float = 8.0,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__(wrapped)
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        for attempt in range(1, self.attempts + 1):
            try:
                return await self.wrapped.request(messages, model_settings, model_request_parameters)
            except ModelAPIError as error:
                delay = self._delay(error, attempt)
                if delay is None:
                    raise
                logger.info(
                    "model %s failed (%s), retry %d/%d in %.1fs",
                    self.wrapped.model_name, type(error).__name__, attempt, self.attempts - 1, delay,
                )  # fmt: skip
                await self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _delay(self, error: ModelAPIError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or None to give up now."""
        if attempt >= self.attempts or failure_kind(error) != "transient":
            return None
        wanted: float | None = error.retry_after
        if wanted is not None and wanted > self.max_delay:
            return None  # the provider wants a long pause: better to ask the other model now
        backoff: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return max(backoff, float(wanted or 0.0))


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How `chat_model` retries each model before falling back."""

    attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 8.0
    sleep: Sleep = asyncio.sleep


def _fall_back_on(error: Any) -> bool:
    # Transient trouble and quotas move on to the other model (quotas are per model, so the other may still
    # have some); a rejected request (bad key, bad input) would fail the same way there.
    return isinstance(error, BaseException) and failure_kind(error) != "other"


def chat_model(light: Model | None, heavy: Model | None, *, policy: RetryPolicy | None = None) -> Model | None:
    """The model the chat runs on: the light one with retries, then the heavy one; None without a light model."""
    if light is None:
        return None
    policy = policy or RetryPolicy()

    def retrying(model: Model) -> Model:
        return RetryingModel(
            model,
            attempts=policy.attempts,
            base_delay=policy.base_delay,
            max_delay=policy.max_delay,
            sleep=policy.sleep,
        )

    if heavy is None or heavy is light:
        return retrying(light)
    return FallbackModel(retrying(light), retrying(heavy), fallback_on=_fall_back_on)


def is_model_failure(error: BaseException) -> bool:
    """Whether an agent run failed because the model could not be reached or refused (not a bug of ours)."""
    return isinstance(error, ModelAPIError | FallbackExceptionGroup)
