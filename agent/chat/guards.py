"""What holds every chat run to the model's limits, whatever the model does: tool calls per response and per turn,
and each request's prompt within the context budget (tool results cut to fit). Both are pydantic-ai capabilities
of the chat agent, stateless (they read the run's messages), so one agent serves every conversation at once."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ToolReturnPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from research import (
    CHARS_PER_TOKEN,
    ModelLimits,
    ToolCallCap,
    estimate_tokens,
    messages_tokens,
    refused_call_message,
    turn_start,
)

__all__ = ["PromptBudget", "ToolCallCap", "refused_call_message", "request_tokens"]  # the cap is research's

CUT_NOTE = "\n[cut: the rest did not fit the model's context]"
"""Said where a tool result was cut, so the model knows it saw part of it."""

MIN_RESULT_CHARS = 400
"""A tool result is never cut below this: a few lines still tell the model what came back."""


def request_tokens(messages: list[ModelMessage], tools: list[ToolDefinition], instructions: str = "") -> int:
    """An estimate of a request's prompt tokens: its messages, instructions and tool schemas."""
    schemas = [(tool.name, tool.description, tool.parameters_json_schema) for tool in tools]
    return messages_tokens(messages) + estimate_tokens(instructions) + estimate_tokens(json.dumps(schemas))


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
        parameters = request_context.model_request_parameters
        tools = list(parameters.function_tools)
        instructions = "\n\n".join(part.content for part in parameters.instruction_parts or [])
        over = request_tokens(messages, tools, instructions) - budget
        if over <= 0:
            return request_context
        start = turn_start(messages)
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
