"""The test kit every package's tests share: a clock that moves only when told, waiting for something that
happens in the background, and the scripted model (a pydantic-ai `FunctionModel` played from a script, recording
what it was sent). Database URLs and throwaway databases: `tests/backends.py`; real model requests are blocked
for every test in `tests/conftest.py`."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sources import SourceError, SourceErrorKind

__all__ = [
    "Answer",
    "FakeClock",
    "NameLookups",
    "ScriptedModel",
    "Step",
    "call",
    "eventually",
    "eventually_async",
    "last_user_text",
    "offline_resolver",
    "replying",
    "say",
    "tool_returns",
    "user_prompts",
]


POLL_SECONDS = 0.02
"""How often `eventually` looks again: short against what tests wait for, long enough not to busy the loop."""


class FakeClock:
    """A clock that moves only when told to (call it for "now")."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, now: datetime) -> None:
        self.now = now


async def eventually(condition: Callable[[], bool], *, what: str = "the condition", timeout: float = 30.0) -> None:
    """Wait until `condition()` holds (polling); fail the test naming `what` after a generous timeout."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


async def eventually_async(
    condition: Callable[[], Awaitable[bool]], *, what: str = "the condition", timeout: float = 30.0
) -> None:
    """`eventually` for a condition that must be awaited (a database query)."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL_SECONDS)


Answer = ModelResponse | str | dict[str, Any] | BaseException
"""What a script step gives: a response as is, a text, the arguments of a call to the output tool (a structured
answer), or an error to raise (an API failure)."""
Step = Answer | Callable[[list[ModelMessage], AgentInfo], Answer | Awaitable[Answer]]
"""One request's answer, or a function of the request that returns one (for answers that depend on what was sent)."""


def call(tool: str, **args: Any) -> ModelResponse:
    """A model response calling one tool."""
    return ModelResponse(parts=[ToolCallPart(tool_name=tool, args=args)])


def say(text: str) -> ModelResponse:
    """A model response with one text."""
    return ModelResponse(parts=[TextPart(content=text)])


class ScriptedModel:
    """A pydantic-ai `FunctionModel` (`.model`) answering each request with the script's next step, in order.

    Every request is recorded before it is answered (`requests`, `infos`, `calls`), so a test can check what the
    model was sent, and a step function can read how many came before. When the script runs out the test fails,
    unless `repeat_last` (the last step then answers every further request). `seconds` delays each answer.
    `aside` sees each request first; what it answers (not None) is neither scripted nor recorded (another agent
    sharing the model, such as a job's planner).
    """

    def __init__(
        self,
        *steps: Step,
        name: str = "scripted",
        repeat_last: bool = False,
        seconds: float = 0.0,
        aside: Callable[[list[ModelMessage], AgentInfo], Answer | None] | None = None,
    ) -> None:
        self.steps: list[Step] = list(steps)
        self.name = name
        self.repeat_last = repeat_last
        self.seconds = seconds
        self.aside = aside
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []
        self.model = FunctionModel(self._answer, model_name=name)

    @property
    def calls(self) -> int:
        """How many requests the model got."""
        return len(self.requests)

    async def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        aside = self.aside(messages, info) if self.aside is not None else None
        if aside is not None:
            return _response(aside, info)
        self.requests.append(list(messages))
        self.infos.append(info)
        if self.seconds:
            await asyncio.sleep(self.seconds)
        assert self.steps, f"{self.name}: the script ran out (request {self.calls})"
        step = self.steps[0] if self.repeat_last and len(self.steps) == 1 else self.steps.pop(0)
        answer = step(messages, info) if callable(step) else step
        if inspect.isawaitable(answer):
            answer = await answer
        return _response(answer, info)

    def user_prompt(self, request: int = 0) -> str:
        """The user prompt text the `request`-th request opened with."""
        first = self.requests[request][0]
        assert isinstance(first, ModelRequest)
        return "\n".join(p.content for p in first.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))


def _response(answer: Answer, info: AgentInfo) -> ModelResponse:
    if isinstance(answer, BaseException):
        raise answer
    if isinstance(answer, str):
        return say(answer)
    if isinstance(answer, dict):
        return call(info.output_tools[0].name, **answer)
    return answer


def replying(answer: Callable[[str], str]) -> Step:
    """A step answering with `answer(what the person said last)`."""

    def step(messages: list[ModelMessage], _info: AgentInfo) -> Answer:
        return answer(last_user_text(messages))

    return step


def last_user_text(messages: Sequence[ModelMessage]) -> str:
    """The newest thing the person said, as the model received it."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def user_prompts(messages: Sequence[ModelMessage]) -> list[str]:
    """Every user prompt the messages carry, oldest first."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def tool_returns(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """Every tool return the messages carry, oldest first."""
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


@dataclass
class NameLookups:
    """What the name-lookup guard refused in one test, and the names the test expects refused (a test that checks
    what Lookout does offline lists them in `expected`)."""

    refused: list[str] = field(default_factory=list)
    expected: set[str] = field(default_factory=set)
    offline: bool = False
    """Set by a test of the whole app that checks many outside names (an imported feed reader's list): all of them
    are refused, as on a machine without a network, and none fails it."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def unexpected(self) -> list[str]:
        with self.lock:
            return [] if self.offline else sorted(set(self.refused) - self.expected)


async def offline_resolver(host: str, port: int) -> list[str]:
    """A test client's DNS (`HttpClient(resolver=...)`): the fake servers' names resolve, nothing else does (as on a
    machine without a network), so checking a feed's host (`HttpClient.check_untrusted`) never asks the internet."""
    if host in ("localhost", "127.0.0.1"):
        return ["127.0.0.1"]
    raise SourceError(SourceErrorKind.NETWORK, f"cannot resolve {host}: the test world has no network")
