"""What holds every chat run to the model's limits, whatever the model does: tool calls per response and per turn,
and each request's prompt within the context budget (tool results cut to fit). Both are pydantic-ai capabilities
of the chat agent, stateless (they read the run's messages), so one agent serves every conversation at once."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import SkipToolExecution
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from research import CHARS_PER_TOKEN, ModelLimits, estimate_tokens

__all__ = ["PromptBudget", "ToolCallCap", "refused_call_message", "request_tokens"]

CUT_NOTE = "\n[cut: the rest did not fit the model's context]"
"""Said where a tool result was cut, so the model knows it saw part of it."""

MIN_RESULT_CHARS = 400
"""A tool result is never cut below this: a few lines still tell the model what came back."""


def refused_call_message(limit: int, *, per: str) -> str:
    """The tool return a refused call gets (the model reads it and can answer with what it has)."""
    return (
        f"Not run: at most {limit} tool calls per {per}. Answer with what you have, or call fewer tools, one at a time."
    )


def _turn_start(messages: list[ModelMessage]) -> int:
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
        responses = [m for m in messages[_turn_start(messages) :] if isinstance(m, ModelResponse)]
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


def request_tokens(messages: list[ModelMessage], tools: list[ToolDefinition]) -> int:
    """An estimate of a request's prompt tokens: its messages (instructions included) and tool schemas."""
    schemas = [(tool.name, tool.description, tool.parameters_json_schema) for tool in tools]
    size = len(ModelMessagesTypeAdapter.dump_json(messages)) + len(json.dumps(schemas))
    return int(size / CHARS_PER_TOKEN) + 1


def _result_text(part: ToolReturnPart) -> str:
    return part.content if isinstance(part.content, str) else part.model_response_str()


@dataclass
class PromptBudget(AbstractCapability[Any]):
    """Before each request of a chat run: when the prompt would exceed the context budget of the chat stage, the
    tool results of this turn are cut (largest first) until it fits. Only the request sent is cut; the turn's
    messages are kept whole. Older turns are trimmed before the run (see `agent.memory.trim_to_tokens`)."""

    limits: ModelLimits

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        budget = self.limits.prompt_tokens("chat")
        messages = list(request_context.messages)
        tools = list(request_context.model_request_parameters.function_tools)
        over = request_tokens(messages, tools) - budget
        if over <= 0:
            return request_context
        start = _turn_start(messages)
        results = sorted(
            (
                (len(_result_text(part)), index, number)
                for index in range(start, len(messages))
                if isinstance(message := messages[index], ModelRequest)
                for number, part in enumerate(message.parts)
                if isinstance(part, ToolReturnPart)
            ),
            reverse=True,
        )
        for size, index, number in results:
            if over <= 0:
                break
            keep = max(MIN_RESULT_CHARS, size - int(over * CHARS_PER_TOKEN) - len(CUT_NOTE))
            if keep >= size:
                continue
            message = messages[index]
            assert isinstance(message, ModelRequest)
            part = message.parts[number]
            assert isinstance(part, ToolReturnPart)
            text = _result_text(part)[:keep] + CUT_NOTE
            cut = replace(part, content=cast(Any, text))
            parts = list(message.parts)
            parts[number] = cut
            messages[index] = replace(message, parts=parts)
            over -= estimate_tokens(_result_text(part)) - estimate_tokens(text)
        return replace(request_context, messages=messages)
