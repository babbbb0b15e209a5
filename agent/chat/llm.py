"""What a failed model call means for the person in the chat (a daily quota is said as such, never retried in a
loop). The chat's model itself is the process's `research.ModelSet.light`: the light model with a short retry on
rate limits and server errors, then the heavy model."""

from __future__ import annotations

from pydantic_ai.exceptions import FallbackExceptionGroup, ModelAPIError

# The machinery is platform-neutral and shared with the monitor pipeline; re-exported here for the chat.
from research import FailureKind, RetryingModel, RetryPolicy, Sleep, failure_in_words, failure_kind, failure_leaves

__all__ = [
    "DAILY_QUOTA_MESSAGE",
    "MODEL_DOWN_MESSAGE",
    "MODEL_REJECTED_MESSAGE",
    "FailureKind",
    "RetryPolicy",
    "RetryingModel",
    "Sleep",
    "failure_kind",
    "failure_message",
    "is_model_failure",
]

DAILY_QUOTA_MESSAGE = (
    "The daily quota of the language model is used up, so I can't answer free text until it resets "
    "(Gemini's daily quotas reset at midnight Pacific time). Commands like /monitors, /track and /digest still work."
)
MODEL_DOWN_MESSAGE = (
    "The language model is not answering right now ({reason}). Please try again in a few minutes; commands like "
    "/monitors and /digest still work."
)
MODEL_REJECTED_MESSAGE = (
    "The language model refused the request ({reason}). Check the model name and API key in the settings; "
    "commands still work."
)


def failure_message(error: BaseException) -> str:
    """One true sentence for the person about a failed model call, naming the real reason (a connection error is
    not a rate limit); a fallback group is judged by all its errors."""
    kinds = {failure_kind(leaf) for leaf in failure_leaves(error)}
    if kinds == {"quota"}:
        return DAILY_QUOTA_MESSAGE
    template = MODEL_DOWN_MESSAGE if "transient" in kinds or "quota" in kinds else MODEL_REJECTED_MESSAGE
    return template.format(reason=failure_in_words(error))


def is_model_failure(error: BaseException) -> bool:
    """Whether an agent run failed because the model could not be reached or refused (not a bug of ours)."""
    return isinstance(error, ModelAPIError | FallbackExceptionGroup)
