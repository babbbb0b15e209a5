"""What a failed model call means for the person in the chat (a daily quota is said as such, never retried in a
loop). The chat's model itself is the process's `research.ModelSet.light`: the light model with a short retry on
rate limits and server errors, then the heavy model."""

from __future__ import annotations

from pydantic_ai.exceptions import FallbackExceptionGroup, ModelAPIError, ModelConnectionError

# The machinery is platform-neutral and shared with the monitor pipeline; re-exported here for the chat.
from research import (
    MARKUP_REASON,
    FailureKind,
    RetryingModel,
    RetryPolicy,
    context_too_long,
    failure_in_words,
    failure_kind,
    failure_leaves,
    template_refused,
    timed_out,
)

__all__ = [
    "CONTEXT_MESSAGE",
    "DAILY_QUOTA_MESSAGE",
    "MODEL_DOWN_MESSAGE",
    "MODEL_REJECTED_MESSAGE",
    "NO_TIME_MESSAGE",
    "TEMPLATE_MESSAGE",
    "UNREACHABLE_MESSAGE",
    "FailureKind",
    "RetryPolicy",
    "RetryingModel",
    "failure_kind",
    "failure_message",
    "is_model_failure",
    "unusable_message",
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
    "The language model refused the request ({reason}). Check LLM_MODEL (and LLM_HEAVY_MODEL) and the key of its "
    "provider in .env; commands still work."
)
UNREACHABLE_MESSAGE = (
    "The language model's server can't be reached ({reason}). Check that it is running and the URL in .env "
    "(OPENAI_BASE_URL, OLLAMA_BASE_URL, GEMINI_BASE_URL); commands still work."
)

CONTEXT_MESSAGE = (
    "The conversation no longer fits the language model's context, so the server refused it. Send /forget to start "
    "afresh (monitors and settings stay); a larger LLM_CONTEXT_TOKENS only helps if the server has that context."
)
TEMPLATE_MESSAGE = (
    "The model server's chat template refused the conversation ({reason}). The server needs a chat template that "
    "takes a system message and tool calls (llama.cpp: --jinja with the model's template); commands still work."
)
NO_TIME_MESSAGE = (
    "The language model gave no answer in time, so I stopped waiting. Try a shorter question, or again later; "
    "commands like /monitors and /digest still work."
)
UNUSABLE_MESSAGE = "The language model's answer was {reason}, so I didn't use it. Please rephrase or ask for less."
MARKUP_MESSAGE = (
    "The language model's answer was {reason}, so I didn't use it: the model server's chat format does not match the "
    "model (llama.cpp: --jinja uses the model's own template). Commands still work."
)


def unusable_message(reason: str) -> str:
    """The line the person gets for an answer that was not used (`research.unusable_answer`'s reason); template
    markup is the server's setup, not the question, so it is not answered with "rephrase"."""
    template = MARKUP_MESSAGE if reason.startswith(MARKUP_REASON) else UNUSABLE_MESSAGE
    return template.format(reason=reason)


def failure_message(error: BaseException) -> str:
    """One true sentence for the person about a failed model call, naming the real reason (a connection error is
    not a rate limit, a prompt over the context is not a bad key); a fallback group is judged by all its errors."""
    leaves = list(failure_leaves(error))
    if any(context_too_long(leaf) for leaf in leaves):
        return CONTEXT_MESSAGE
    if any(template_refused(leaf) for leaf in leaves):
        return TEMPLATE_MESSAGE.format(reason=failure_in_words(error))
    if leaves and all(timed_out(leaf) for leaf in leaves):
        return NO_TIME_MESSAGE
    if leaves and all(isinstance(leaf, ModelConnectionError) for leaf in leaves):
        return UNREACHABLE_MESSAGE.format(reason=failure_in_words(error))
    kinds = {failure_kind(leaf) for leaf in leaves}
    if kinds == {"quota"}:
        return DAILY_QUOTA_MESSAGE
    template = MODEL_DOWN_MESSAGE if "transient" in kinds or "quota" in kinds else MODEL_REJECTED_MESSAGE
    return template.format(reason=failure_in_words(error))


def is_model_failure(error: BaseException) -> bool:
    """Whether an agent run failed because the model could not be reached or refused (not a bug of ours)."""
    return isinstance(error, ModelAPIError | FallbackExceptionGroup)
