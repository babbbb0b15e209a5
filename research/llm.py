"""Model access for every LLM step: what each request is held to (output limit, timeout, context budget, tool
calls, output mode), which answers are never used, failures classified and named, transient ones retried, then the
other model."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelNotFoundError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestTimeout,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
    OutputTokenLimitExceeded,
    RunTimedOut,
    SkipToolExecution,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from kernel import Backoff, Sleep
from research.language import other_language

__all__ = [
    "BUDGET_SPENT_REASON",
    "CHARS_PER_TOKEN",
    "CONSTRAINED_MODES",
    "DAILY_QUOTA_REASON",
    "MARKUP_REASON",
    "REASON_CHARS",
    "TEMPLATE_MARKUP",
    "BoundedModel",
    "FailureKind",
    "ModelLimits",
    "ModelSet",
    "OutputMode",
    "QuotaMemory",
    "RetryPolicy",
    "RetryingModel",
    "Stage",
    "StageBudget",
    "ToolCallCap",
    "answering_model",
    "configured_model",
    "context_too_long",
    "describe_failure",
    "estimate_tokens",
    "failure_in_words",
    "failure_kind",
    "failure_leaves",
    "limits_of",
    "messages_tokens",
    "model_chain",
    "model_label",
    "one_line",
    "output_in_mode",
    "output_spec",
    "refused_call_message",
    "request_invalid",
    "resilient_model",
    "stage_agent",
    "stage_settings",
    "template_refused",
    "timed_out",
    "turn_start",
    "unusable_answer",
    "with_schema_response_format",
]

logger = logging.getLogger(__name__)

FailureKind = Literal["quota", "transient", "other"]
"""`quota`: a daily or billing quota is used up (waiting minutes will not help); `transient`: a rate limit, an
overloaded or failing server, a dropped connection (worth a short retry, then the other model); `other`: a
rejected request, bad credentials, an unknown model, garbage output."""

DAILY_QUOTA_REASON = "daily model quota used up"
"""How a run's report names a used-up daily quota (the reason starts with it)."""

REASON_CHARS = 200
"""A reason (a failure's account, a critique's verdict) is cut here, so it stays a line or two."""

QUOTA_COOLDOWN_SECONDS = 600.0
"""After a daily-quota error a model is left alone this long (quotas reset daily; asking every message would only
collect the same 429 and slow every answer down)."""


def _says_daily_quota(error: ModelAPIError) -> bool:
    # A plain ModelHTTPError (a provider pydantic-ai does not categorise, or a scripted test error) still says
    # "per day" in Gemini's QuotaFailure details; look for it in the body.
    body = str(error.body or "")
    return "PerDay" in body or "per day" in body.lower()


_CONTEXT_WORDS = (
    "context size",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "exceed_context_size",
    "context_length_exceeded",
)
"""How servers say a prompt is longer than the model's context (llama.cpp, vLLM, OpenAI, Anthropic, Ollama)."""

_TEMPLATE_WORDS = ("chat template", "jinja", "roles must alternate", "template error", "chat_template")
"""How servers say the model's chat template refused the conversation (llama.cpp with --jinja, vLLM)."""


_INVALID_WORDS = (
    "validation error",
    "literal_error",
    "input should be",
    "extra_forbidden",
    "missing required",
    "unsupported response_format",
    "unsupported value",
)
"""How servers say a request itself is invalid, whatever its status (llama-cpp-python answers HTTP 500 with
pydantic's validation error to a `json_schema` response format): sent again, it fails the same way."""


def _error_text(error: BaseException) -> str:
    return f"{error} {getattr(error, 'body', '') or ''}".lower()


def context_too_long(error: BaseException) -> bool:
    """Whether the server refused the prompt for being longer than the model's context."""
    return isinstance(error, ModelContextWindowExceededError) or (
        isinstance(error, ModelAPIError) and any(words in _error_text(error) for words in _CONTEXT_WORDS)
    )


def template_refused(error: BaseException) -> bool:
    """Whether the server's chat template refused the conversation (an order of roles, a system message)."""
    return isinstance(error, ModelAPIError) and any(words in _error_text(error) for words in _TEMPLATE_WORDS)


def request_invalid(error: BaseException) -> bool:
    """Whether the server refused the request itself as invalid (an option it does not take, such as a response
    format), even when it says so with a 5xx status."""
    return isinstance(error, ModelAPIError) and any(words in _error_text(error) for words in _INVALID_WORDS)


def timed_out(error: BaseException) -> bool:
    """Whether a request or a run ran out of time (the transport's timeout, a request or run deadline)."""
    return isinstance(error, ModelTimeoutError | ModelRequestTimeout | RunTimedOut)


def failure_kind(error: BaseException) -> FailureKind:
    """How a model error should be handled (see `FailureKind`)."""
    if context_too_long(error) or template_refused(error) or request_invalid(error):
        return "other"  # the same request fails the same way again, on any attempt
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


def failure_leaves(error: BaseException) -> Iterator[BaseException]:
    """The single errors inside an error (a `FallbackExceptionGroup` holds one per model tried)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from failure_leaves(inner)
    else:
        yield error


def _in_words(error: BaseException) -> str:
    status = getattr(error, "status_code", None)
    code = f", HTTP {status}" if isinstance(status, int) else ""
    if failure_kind(error) == "quota":
        return "daily quota used up"
    if context_too_long(error):
        return "the prompt is longer than the model's context (LLM_CONTEXT_TOKENS)"
    if template_refused(error):
        return f"the server's chat template refused the conversation{code}"
    if request_invalid(error):
        if "response_format" in _error_text(error):
            return f"the server does not take this output mode (LLM_OUTPUT_MODE){code}"
        return f"the server refused the request as invalid{code}"
    if timed_out(error):
        return "no answer in time"
    if isinstance(error, ModelConnectionError):
        return "connection error"
    if isinstance(error, ModelRateLimitError) or status == 429:
        return f"rate limit{code}"
    if isinstance(error, ModelUnavailableError | ModelServerError) or (isinstance(status, int) and status >= 500):
        return f"server error{code}"
    if isinstance(error, ModelAuthenticationError) or status in (401, 403):
        return f"API key refused{code}"
    if isinstance(error, ModelNotFoundError) or status == 404:
        return f"unknown model name{code}"
    if isinstance(error, ModelAPIError):
        return f"request rejected{code}"
    if isinstance(error, UsageLimitExceeded):
        return "request limit of the step reached"
    if isinstance(error, OutputTokenLimitExceeded):
        return "answer cut at its length limit"
    if isinstance(error, UnexpectedModelBehavior):
        return "unusable answer"
    return "error"


def failure_in_words(error: BaseException) -> str:
    """Why a model call failed, in a few words for a person: "connection error", "rate limit, HTTP 429",
    "daily quota used up"… (each distinct reason once, for a fallback chain)."""
    return "; ".join(dict.fromkeys(_in_words(leaf) for leaf in failure_leaves(error))) or "error"


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """Whitespace collapsed (no line breaks, so content cannot fake a new item line), cut at `limit`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _describe_one(error: BaseException, *, name_model: bool) -> str:
    model = getattr(error, "model_name", None) if name_model else None
    if failure_kind(error) == "quota":
        what = "daily quota used up"
    else:
        text = one_line(str(error))
        what = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return f"{model}: {what}" if model else what


def describe_failure(error: BaseException) -> str:
    """A short, loggable account of why a model step failed; a used-up daily quota is named as such (it starts
    with `DAILY_QUOTA_REASON` when every model tried was out of quota)."""
    leaves = list(failure_leaves(error))
    if leaves and all(failure_kind(leaf) == "quota" for leaf in leaves):
        models = list(dict.fromkeys(str(name) for leaf in leaves if (name := getattr(leaf, "model_name", None))))
        return f"{DAILY_QUOTA_REASON} ({', '.join(models)})" if models else DAILY_QUOTA_REASON
    if len(leaves) == 1 and leaves[0] is error:
        return _describe_one(error, name_model=False)
    return "every model failed: " + "; ".join(_describe_one(leaf, name_model=True) for leaf in leaves)


class QuotaMemory:
    """Models whose quota ran out lately, by name, with the error they gave: they are left alone for `cooldown`
    seconds.

    One memory serves every wrapper of a `RetryPolicy` (and a process has one, in its `ModelSet`), so a model that
    appears in two fallback chains (light → heavy and heavy → light) is asked once, not once per chain and step;
    keyed by `provider:name`, so two objects for one model share what was learned.
    """

    def __init__(
        self, *, cooldown: float = QUOTA_COOLDOWN_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cooldown = cooldown
        self._clock = clock
        self._spent: dict[str, tuple[float, ModelAPIError]] = {}

    def remember(self, model: Model, error: ModelAPIError) -> None:
        logger.warning("model %s: quota used up; not asked again for %.0f s", model.model_name, self.cooldown)
        self._spent[model_label(model)] = (self._clock() + self.cooldown, error)

    def spent(self, model: Model) -> ModelAPIError | None:
        """The quota error the model gave within the cooldown, or None when it may be asked."""
        key = model_label(model)
        entry = self._spent.get(key)
        if entry is None:
            return None
        until, error = entry
        if self._clock() >= until:
            del self._spent[key]
            return None
        return error


class RetryingModel(WrapperModel):
    """Retries a request that failed transiently (429 rate limit, 5xx, dropped connection) a few times with a
    short exponential backoff, honouring a short `Retry-After`. A quota error, a long `Retry-After` or the last
    failure is raised at once, so a `FallbackModel` around it can move on to the other model. After a quota
    error the model is not asked at all for a while (see `QuotaMemory`): the same error is raised at once."""

    def __init__(
        self,
        wrapped: Model,
        *,
        attempts: int = 3,
        base_delay: float = 1.0,
        max_delay: float = 8.0,
        sleep: Sleep = asyncio.sleep,
        quota: QuotaMemory | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.attempts = max(1, attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        # The shared rule: jittered doubling up to `max_delay`; a Retry-After beyond it gives up at once.
        self._backoff = Backoff(attempts=self.attempts, base=base_delay, cap=max_delay, max_wait=max_delay)
        self._sleep = sleep
        self._quota = quota if quota is not None else QuotaMemory()

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        spent = self._quota.spent(self.wrapped)
        if spent is not None:
            # The quota was used up a moment ago: asking again now only earns the same 429.
            raise spent.with_traceback(None)

        async def attempt() -> ModelResponse:
            try:
                return await self.wrapped.request(messages, model_settings, model_request_parameters)
            except ModelAPIError as error:
                if failure_kind(error) == "quota":
                    self._quota.remember(self.wrapped, error)
                raise

        return await self._backoff.call(
            attempt,
            # a timed-out request is not sent again: a busy (local) server would only get a second copy of it
            retry_on=lambda error: (
                isinstance(error, ModelAPIError) and failure_kind(error) == "transient" and not timed_out(error)
            ),
            retry_after=lambda error: getattr(error, "retry_after", None),
            sleep=self._sleep,
            what=f"model {self.wrapped.model_name}",
        )


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How `resilient_model` retries each model before falling back."""

    attempts: int = 3
    """Tries per model, the first included."""
    base_delay: float = 1.0
    """Seconds before the first retry (jittered); doubled each time."""
    max_delay: float = 8.0
    """Cap on a backoff; a provider asking for a longer `Retry-After` gets the other model at once."""
    sleep: Sleep = asyncio.sleep
    quota: QuotaMemory = field(default_factory=lambda: QuotaMemory())
    """Which models ran out of quota lately; shared by every model this policy wraps."""

    def wrap(self, model: Model) -> RetryingModel:
        """The model with this policy's retries."""
        return RetryingModel(
            model,
            attempts=self.attempts,
            base_delay=self.base_delay,
            max_delay=self.max_delay,
            sleep=self.sleep,
            quota=self.quota,
        )


OutputMode = Literal["tool", "native", "prompted", "json_object"]
"""How structured output is asked for (LLM_OUTPUT_MODE): `tool` a tool call (pydantic-ai's default), `native` the
server's JSON-schema response format (grammar-constrained on llama.cpp's `llama-server` and Ollama), `prompted` the
schema in the prompt and JSON parsed from the text (servers whose tool calling and response formats are weak),
`json_object` prompted, plus a `json_object` response format carrying the schema (llama.cpp's extension, which
llama-cpp-python's server takes where it refuses `json_schema`: the answer is grammar-constrained to the schema)."""

CONSTRAINED_MODES: tuple[OutputMode, ...] = ("native", "json_object")
"""Output modes whose server constrains the answer to the schema by grammar: there a schema may list the numbers an
answer can use (a grammar keeps `enum`, `minItems` and `maxItems`, not `minimum`), so a small model cannot cite an
item it was not shown."""

Stage = Literal["chat", "plan", "critique", "synthesis", "summary", "collect"]
"""A kind of model request, each with its own output limit."""

CHARS_PER_TOKEN = 3.5
"""Characters per token for estimates: about 4 in English, fewer in code, JSON and other scripts; erring low keeps
a prompt estimated this way inside a real tokenizer's count."""


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of the tokens `text` costs (see `CHARS_PER_TOKEN`)."""
    return int(len(text) / CHARS_PER_TOKEN) + 1


PART_OVERHEAD_TOKENS = 4
"""What a message part costs beyond its text in a chat template (role markers, separators)."""


def messages_tokens(messages: Sequence[ModelMessage]) -> int:
    """A tokenizer-free estimate of what `messages` cost in a prompt: the text of every part (what was said, tool
    calls with their arguments, tool results) plus a little per part."""
    total = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                text = f"{part.tool_name} {part.args_as_json_str()}"
            elif hasattr(part, "model_response_str"):
                text = part.model_response_str()
            else:
                content = getattr(part, "content", "")
                text = content if isinstance(content, str) else str(content)
            total += estimate_tokens(text) + PART_OVERHEAD_TOKENS
    return total


SMALL_CONTEXT_TOKENS = 8192
"""A context this small (a local model's usual) loses a quarter of itself to all 21 chat tools' definitions."""

SMALL_MODEL_OUTPUT_RETRIES = 1
"""Output retries of a step on a small-context model: a retry costs a whole answer at tens of tokens a second, and
a model that small seldom mends what it got wrong (so a step makes at most two requests)."""

SMALL_MODEL_CRITIQUE_ITEMS = 6
"""Items a small-context model assesses, the rest scored by the heuristic: each assessment is about 45 output
tokens, and a local model writes tens of tokens a second (20 items would be most of a minute on 2 cores)."""


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    """What every request to the process's models is held to (from settings): an output limit per stage, a
    timeout, the context size prompts are budgeted to, tool calls per response and per turn, the output mode."""

    chat_max_tokens: int = 1024
    """LLM_CHAT_MAX_TOKENS: output limit of a chat reply (each response of the turn)."""
    plan_max_tokens: int = 800
    critique_max_tokens: int = 2048
    synthesis_max_tokens: int = 2048
    summary_max_tokens: int = 512
    collect_max_tokens: int = 800
    timeout_seconds: float = 120.0
    """LLM_TIMEOUT_SECONDS: one request's deadline, every attempt included (the SDK's own retries are off)."""
    run_seconds: float = 300.0
    """LLM_RUN_SECONDS: a whole chat turn's or pipeline step's deadline, tool calls and retries included."""
    pipeline_seconds: float = 600.0
    """LLM_PIPELINE_SECONDS: a monitor run's model stages together (plan, critique, a digest per language); stages
    after it is spent take the no-model path."""
    context_tokens: int = 32_768
    """LLM_CONTEXT_TOKENS: the context size prompts are budgeted to (output limit included)."""
    output_mode: OutputMode = "tool"
    chat_tools: Literal["auto", "all", "by_message"] = "auto"
    """LLM_CHAT_TOOLS: every chat tool on every turn, or those the message is about; `auto` chooses by message
    when the context is small (`SMALL_CONTEXT_TOKENS`)."""
    max_tool_calls_per_response: int = 3
    """LLM_MAX_TOOL_CALLS: calls of one response beyond this are refused with a message, not run."""
    max_tool_calls_per_turn: int = 8
    """Calls in one chat turn beyond this are refused the same way."""

    def offers_tools_by_message(self) -> bool:
        """Whether a chat turn is offered only the tools its message is about (see `chat_tools`)."""
        return self.chat_tools == "by_message" or (
            self.chat_tools == "auto" and self.context_tokens <= SMALL_CONTEXT_TOKENS
        )

    def small_model(self) -> bool:
        """Whether the context is a small local model's (`SMALL_CONTEXT_TOKENS`): its steps are asked for less."""
        return self.context_tokens <= SMALL_CONTEXT_TOKENS

    def output_retries(self, default: int) -> int:
        """A step's output retries: its `default`, at most `SMALL_MODEL_OUTPUT_RETRIES` for a small model."""
        return min(default, SMALL_MODEL_OUTPUT_RETRIES) if self.small_model() else default

    def critique_items(self, shown: int) -> int:
        """How many of the `shown` items the model assesses (see `SMALL_MODEL_CRITIQUE_ITEMS`)."""
        return min(shown, SMALL_MODEL_CRITIQUE_ITEMS) if self.small_model() else shown

    def max_tokens(self, stage: Stage) -> int:
        """The output limit of a request of `stage`."""
        limit: int = getattr(self, f"{stage}_max_tokens")
        return limit

    def prompt_tokens(self, stage: Stage) -> int:
        """The tokens a prompt of `stage` may take: the context less the stage's output limit (at least a quarter
        of the context, so a misconfigured output limit cannot leave no room at all)."""
        return max(self.context_tokens // 4, self.context_tokens - self.max_tokens(stage))

    def settings(self, stage: Stage) -> ModelSettings:
        """The model settings of a request of `stage`: its output limit, the timeout, the SDK's retries off (our
        `RetryingModel` is the one retry rule)."""
        return ModelSettings(
            max_tokens=self.max_tokens(stage),
            timeout=self.timeout_seconds,
            request_timeout=self.timeout_seconds,
            max_retries=0,
            # our instructions explain the untrusted-data tags; pydantic-ai's announcement would add a system message
            framing_announcement="never",
        )


class BoundedModel(WrapperModel):
    """The outermost wrapper of every model a `ModelSet` hands out: it carries the `ModelLimits`, and `request`
    merges their chat settings under each request's, so every request has an output limit, a timeout and no SDK
    retries and none goes out unbounded even from a step that names no stage."""

    def __init__(self, wrapped: Model, limits: ModelLimits) -> None:
        super().__init__(wrapped)
        self.limits = limits
        # pydantic-ai's `Model.__eq__` and `__repr__` read `_settings` (`WrapperModel.settings` answers with the
        # wrapped model's): set, two wrappers of one model with different limits differ, and the repr shows them.
        self._settings = limits.settings("chat")

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        merged = ModelSettings(**{**self.limits.settings("chat"), **(model_settings or {})})
        if self.limits.output_mode == "json_object":
            merged = with_schema_response_format(merged, model_request_parameters)
        return await self.wrapped.request(leading_system_text(messages), merged, model_request_parameters)


def with_schema_response_format(settings: ModelSettings, parameters: ModelRequestParameters) -> ModelSettings:
    """The settings of a request asking for prompted structured output, with the OpenAI-compatible body's
    `response_format` set to `{"type": "json_object", "schema": …}` (see `OutputMode`); any other request as is."""
    output = parameters.output_object
    if parameters.output_mode != "prompted" or output is None:
        return settings
    extra = settings.get("extra_body")
    body: dict[str, Any] = dict(extra) if isinstance(extra, dict) else {}
    body["response_format"] = {"type": "json_object", "schema": output.json_schema}
    return ModelSettings(**{**settings, "extra_body": body})


def leading_system_text(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The messages with every system prompt part in the first request: a chat template (Gemma's under llama.cpp)
    refuses a system message anywhere but first, and a run can carry one further on (pydantic-ai's own retries)."""
    later = [
        part
        for message in messages[1:]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, SystemPromptPart)
    ]
    if not later or not isinstance(messages[0], ModelRequest):
        return messages
    first = messages[0]
    leading = [part for part in first.parts if isinstance(part, SystemPromptPart)]
    rest = [part for part in first.parts if not isinstance(part, SystemPromptPart)]
    moved: list[ModelMessage] = [replace(first, parts=[*leading, *later, *rest])]
    for message in messages[1:]:
        if isinstance(message, ModelRequest) and any(isinstance(part, SystemPromptPart) for part in message.parts):
            message = replace(message, parts=[part for part in message.parts if not isinstance(part, SystemPromptPart)])
        moved.append(message)
    return moved


@dataclass
class StageBudget:
    """The time a monitor run's model stages may take together (`ModelLimits.pipeline_seconds`): each stage runs
    with what is left (never more than its own `run_seconds`), and once it is spent the later stages are not
    started, so a run's model time is bounded by one setting however many stages and languages it has. Only time
    inside `spending` counts: slow sources do not eat the models' time."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    spent: float = 0.0

    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def timeout(self, model: Model | str | None) -> float:
        """The deadline of the next stage run with `model`: its own, or what is left of the run's when less."""
        return min(limits_of(model).run_seconds, self.left())

    @contextmanager
    def spending(self) -> Iterator[None]:
        started = self.clock()
        try:
            yield
        finally:
            self.spent += self.clock() - started


BUDGET_SPENT_REASON = "the run's time for the language model (LLM_PIPELINE_SECONDS) was used up"
"""The fallback reason of a stage not started because the run's model time was spent."""


def limits_of(model: Model | str | None) -> ModelLimits:
    """The limits a model of a `ModelSet` carries; the defaults for any other model."""
    return model.limits if isinstance(model, BoundedModel) else ModelLimits()


def stage_settings(model: Model | str | None, stage: Stage, extra: ModelSettings | None = None) -> ModelSettings:
    """The settings a request of `stage` goes out with (see `ModelLimits.settings`), `extra` on top."""
    return ModelSettings(**{**limits_of(model).settings(stage), **(extra or {})})


def output_spec(model: Model | str | None, output_type: type[Any]) -> Any:
    """`output_type` asked for in the model's output mode (LLM_OUTPUT_MODE): a tool call, the server's JSON-schema
    response format, or the schema in the prompt."""
    return output_in_mode(limits_of(model).output_mode, output_type)


def output_in_mode(mode: OutputMode, output_type: type[Any]) -> Any:
    """`output_type` asked for as `mode` says (see `OutputMode`)."""
    from pydantic_ai import NativeOutput, PromptedOutput, ToolOutput

    if mode == "native":
        return NativeOutput(output_type)
    if mode in ("prompted", "json_object"):
        return PromptedOutput(output_type)
    return ToolOutput(output_type)


_DepsT = TypeVar("_DepsT")


def stage_agent(
    name: str,
    *,
    output_type: Any,
    deps_type: type[_DepsT],
    instructions: str,
    context: Callable[[RunContext[_DepsT]], str],
    output_retries: int,
) -> Agent[_DepsT, Any]:
    """A research stage's agent (plan, critique, digest): no model bound (each run passes one), its fixed
    `instructions` and the run's `context` (topic, reader) as ONE instruction, so one system message per request
    (some chat templates refuse a second), and `output_retries` chances to fix an answer that does not fit
    `output_type` (a type, or one wrapped by `output_in_mode`)."""

    async def instruction(ctx: RunContext[_DepsT]) -> str:
        return f"{instructions}\n\n{context(ctx)}"

    return Agent(
        None,
        output_type=output_type,
        deps_type=deps_type,
        instructions=instruction,
        retries={"output": output_retries},
        name=name,
    )


REPEAT_SHINGLE_WORDS = 10
"""Word runs compared to find a looping answer: long enough that ordinary repeated phrases and list items with a
shared wording do not count."""
REPEAT_MIN_WORDS = 60
"""Shorter answers are never judged repetitive (a short list may repeat its phrasing)."""
REPEAT_SHARE = 0.88
"""An answer whose word runs are more than this share repeats of earlier ones is looping (a sentence said over and
over scores 0.9 and up; deliberately repetitive but structured text, numbered paragraphs, about 0.8)."""
RECITE_WORDS = 12
"""A run of this many words of the instructions, word for word in an answer, is the model reciting them."""

TEMPLATE_MARKUP = re.compile(
    r"<\|(?:im_start|im_end|eot_id|start_header_id|end_header_id|begin_of_text|endoftext|end|user|assistant|system)\|>"
    r"|<(?:start|end)_of_turn>|<｜[^｜<>]{1,40}｜>"
)
"""Chat-template control tokens (ChatML, Gemma, Llama 3, Phi, DeepSeek) written out as text: the model is speaking
past its own turn, which happens when the server's chat format does not match the model."""
MARKUP_REASON = "mixed with chat-template markup"
"""`unusable_answer`'s reason for an answer with `TEMPLATE_MARKUP` (the token it found follows in brackets)."""

_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(text)]


def _runs(words: list[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(words[index : index + size]) for index in range(len(words) - size + 1)]


def unusable_answer(
    text: str | None,
    *,
    finish_reason: str | None = None,
    instructions: Sequence[str] = (),
    language: str | None = None,
    asked: str | None = None,
) -> str | None:
    """Why a model's answer must not be used or stored, in a few words, or None when it may: cut at the output
    limit, empty, mixed with chat-template markup, only the words it was `asked` said back, looping (nearly all of it
    repeats itself), reciting the instructions it was given, or surely in another language than `language` when
    that was asked (`research.language.other_language`)."""
    if finish_reason == "length":
        return "cut at its length limit"
    if text is None or not text.strip():
        return "empty"
    markup = TEMPLATE_MARKUP.search(text)
    if markup is not None:
        return f"{MARKUP_REASON} (“{markup.group()}”)"
    words = _words(text)
    if asked is not None and words and words == _words(asked):
        return "only your message said back"
    if len(words) >= REPEAT_MIN_WORDS:
        runs = _runs(words, REPEAT_SHINGLE_WORDS)
        if runs and 1 - len(set(runs)) / len(runs) > REPEAT_SHARE:
            return "repeating itself"
    if len(words) >= RECITE_WORDS:
        said = set(_runs(words, RECITE_WORDS))
        for instruction in instructions:
            if said & set(_runs(_words(instruction), RECITE_WORDS)):
                return "reciting its instructions"
    if language:
        written = other_language(text, language)
        if written is not None:
            return f"in another language ({written} where {language} was asked)"
    return None


def refused_call_message(limit: int, *, per: str) -> str:
    """The tool return a refused call gets (the model reads it and can answer with what it has)."""
    return (
        f"Not run: at most {limit} tool calls per {per}. Answer with what you have, or call fewer tools, one at a time."
    )


def turn_start(messages: list[ModelMessage]) -> int:
    """Index of the request that carries this turn's user prompt (0 when none does)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelRequest) and any(isinstance(part, UserPromptPart) for part in message.parts):
            return index
    return 0


@dataclass
class ToolCallCap(AbstractCapability[Any]):
    """Runs at most `per_response` tool calls of one model response and `per_turn` of one turn; the others are not
    run and return a message saying so (a small model once asked for 142 calls in one response)."""

    per_response: int
    per_turn: int

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        messages = list(ctx.messages)
        responses = [m for m in messages[turn_start(messages) :] if isinstance(m, ModelResponse)]
        if not responses:
            return args
        current = [part.tool_call_id for part in responses[-1].parts if isinstance(part, ToolCallPart)]
        position = current.index(call.tool_call_id) if call.tool_call_id in current else len(current) - 1
        if position >= self.per_response:
            raise SkipToolExecution(refused_call_message(self.per_response, per="response"))
        # calls that ran before: each earlier response's first `per_response` (the rest were refused)
        earlier = sum(
            min(self.per_response, sum(isinstance(part, ToolCallPart) for part in r.parts)) for r in responses[:-1]
        )
        if earlier + position >= self.per_turn:
            raise SkipToolExecution(refused_call_message(self.per_turn, per="message"))
        return args


def _fall_back_on(error: Any) -> bool:
    # Transient trouble and quotas move on to the other model (quotas are per model, so the other may still
    # have some); a rejected request (bad key, bad input) would fail the same way there.
    return isinstance(error, BaseException) and failure_kind(error) != "other"


def resilient_model(
    primary: Model | None, secondary: Model | None, *, policy: RetryPolicy | None = None
) -> Model | None:
    """`primary` with retries, then `secondary` with retries when the primary is rate-limited, down or out of
    quota; None without a primary (a missing primary turns the step off rather than promoting the secondary).

    When every model fails, a run raises `FallbackExceptionGroup` (one error per model); a rejected request
    (bad key, bad input) is raised as is, without trying the secondary.
    """
    if primary is None:
        return None
    policy = policy or RetryPolicy()
    if secondary is None or secondary is primary:
        return policy.wrap(primary)
    return FallbackModel(policy.wrap(primary), policy.wrap(secondary), fallback_on=_fall_back_on)


@dataclass(frozen=True, kw_only=True)
class ModelSet:
    """The language models of one process, built once (`app.wiring.language_models`) and shared by the chat, the
    monitor pipeline, `/collect`, the collect tool and the CLI: each model retried on rate limits and server
    errors, then the other one, with one memory of spent quotas for all of them."""

    light: Model | None
    """LLM_MODEL, then LLM_HEAVY_MODEL: chat answers, memory summaries, query planning, collection jobs. None when
    no model is configured."""
    heavy: Model | None
    """LLM_HEAVY_MODEL, then LLM_MODEL: critique and synthesis. None without a heavy model (those steps keep their
    no-model path)."""
    quota: QuotaMemory = field(default_factory=QuotaMemory)
    """Which models ran out of quota lately, shared by every chain above."""
    limits: ModelLimits = field(default_factory=ModelLimits)
    """What every request of the set is held to (output limits, timeout, context budget, tool calls)."""

    @classmethod
    def of(
        cls,
        light: Model | None,
        heavy: Model | None,
        *,
        policy: RetryPolicy | None = None,
        limits: ModelLimits | None = None,
    ) -> ModelSet:
        """The set over two plain models (one policy, so both chains share its quota memory), each chain bounded
        by `limits` (see `BoundedModel`)."""
        policy = policy or RetryPolicy()
        limits = limits or ModelLimits()

        def bounded(model: Model | None) -> Model | None:
            return BoundedModel(model, limits) if model is not None else None

        return cls(
            light=bounded(resilient_model(light, heavy, policy=policy)),
            heavy=bounded(resilient_model(heavy, light, policy=policy)),
            quota=policy.quota,
            limits=limits,
        )

    @classmethod
    def none(cls) -> ModelSet:
        """No language model: every step takes its no-model path."""
        return cls(light=None, heavy=None)

    def plain_models(self) -> list[Model]:
        """Every distinct plain model in the set (for checks that the process built each once)."""
        found: dict[int, Model] = {}
        for chain in (self.light, self.heavy):
            if chain is not None:
                found.update((id(model), model) for model in model_chain(chain))
        return list(found.values())


def model_chain(model: Model) -> Iterator[Model]:
    """The plain models behind `model`, in the order a fallback chain tries them (wrappers unwrapped)."""
    if isinstance(model, FallbackModel):
        for inner in model.models:
            yield from model_chain(inner)
    elif isinstance(model, WrapperModel):
        yield from model_chain(model.wrapped)
    else:
        yield model


def model_label(model: Model) -> str:
    """`provider:name`, the way settings name a model (and prices are looked up)."""
    prefix = f"{model.system}:"
    return model.model_name if model.model_name.startswith(prefix) else prefix + model.model_name


def configured_model(answered: str, candidates: Sequence[Model]) -> Model | None:
    """Which of `candidates` a response's model name belongs to. Providers may answer with a versioned name
    ("gemini-2.5-flash-001" for "gemini-2.5-flash"): then the longest configured name it starts with."""
    exact = [candidate for candidate in candidates if candidate.model_name == answered]
    if exact:
        return exact[0]
    versioned = [candidate for candidate in candidates if answered.startswith(candidate.model_name)]
    return max(versioned, key=lambda candidate: len(candidate.model_name)) if versioned else None


def answering_model(model: Model | str, messages: Sequence[ModelMessage] = ()) -> Model | str:
    """The plain model behind `model` that wrote the last response in `messages` (for a fallback chain, the one
    that answered), so usage is named and priced by it; the first of the chain when no response says."""
    if isinstance(model, str):
        return model
    candidates = list(model_chain(model))
    answered = next((m.model_name for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    found = configured_model(answered, candidates) if answered else None
    return found if found is not None else candidates[0]
