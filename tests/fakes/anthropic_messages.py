"""A fake of Anthropic's Messages API (`POST /v1/messages`) on a `FakeHTTPServer`, for `anthropic:` models tested
through the real `anthropic` client: it checks the key (`x-api-key`, or `Authorization: Bearer`, which anthropic 2.x
sends) and the model, requires `max_tokens` (the real
API refuses a request without it), records every request, and answers scripted messages in the API's shape (text or
`tool_use` blocks, `stop_reason`, `usage`) or its error envelope."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest

Json = dict[str, Any]


@dataclass
class MessagesRequest:
    """One `messages.create` call as the fake received it."""

    api_key: str | None
    version: str | None
    """The `anthropic-version` header the client sent."""
    body: Json

    @property
    def system(self) -> str:
        """The top-level system prompt, as text (a string or a list of text blocks)."""
        return _text(self.body.get("system"))

    @property
    def system_blocks(self) -> int:
        """How many system texts the request carries: the Messages API takes one top-level `system` only."""
        system = self.body.get("system")
        if system is None:
            return 0
        return 1 if isinstance(system, str) else len(system)

    @property
    def roles(self) -> list[str]:
        return [message.get("role", "") for message in self.body.get("messages", [])]

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_tokens")
        return int(value) if value is not None else None

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("name", "") for tool in self.body.get("tools", [])]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def message(
    *,
    text: str | None = None,
    tool_uses: list[tuple[str, Json]] = (),  # type: ignore[assignment]
    stop_reason: str | None = None,
    model: str = "claude-fake",
    input_tokens: int = 100,
    output_tokens: int = 20,
) -> Json:
    """A `message` object: a text block and/or `tool_use` blocks."""
    content: list[Json] = [{"type": "text", "text": text}] if text is not None else []
    content += [
        {"type": "tool_use", "id": f"toolu_{index}_{name}", "name": name, "input": args}
        for index, (name, args) in enumerate(tool_uses)
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def error_body(kind: str, text: str) -> Json:
    """The Messages API's error envelope."""
    return {"type": "error", "error": {"type": kind, "message": text}}


class FakeAnthropic:
    """Scripted Messages API answers for one model; the last scripted answer repeats."""

    def __init__(self, server: FakeHTTPServer, *, model: str = "claude-fake", api_key: str = "sk-ant-test") -> None:
        self.server = server
        self.model = model
        self.api_key = api_key
        self.requests: list[MessagesRequest] = []
        self._queue: list[FakeResponse] = []
        server.route("POST", "/v1/messages", self._answer)

    @property
    def base_url(self) -> str:
        """For `ANTHROPIC_BASE_URL` (the client adds `/v1/messages`)."""
        return self.server.url

    def reply_text(self, text: str, *, stop_reason: str = "end_turn") -> None:
        self._queue.append(FakeResponse.json(message(text=text, stop_reason=stop_reason, model=self.model)))

    def reply_tool_uses(self, calls: list[tuple[str, Json]], *, text: str | None = None) -> None:
        self._queue.append(FakeResponse.json(message(text=text, tool_uses=calls, model=self.model)))

    def reply_error(self, status: int, kind: str, text: str) -> None:
        self._queue.append(FakeResponse.json(error_body(kind, text), status=status))

    def _answer(self, recorded: RecordedRequest) -> FakeResponse:
        try:
            body = json.loads(recorded.body or b"{}")
        except json.JSONDecodeError:
            body = {}
        request = MessagesRequest(
            api_key=recorded.headers.get("x-api-key")
            or recorded.headers.get("authorization", "").removeprefix("Bearer ")
            or None,
            version=recorded.headers.get("anthropic-version"),
            body=body,
        )
        self.requests.append(request)
        if request.api_key != self.api_key:
            return FakeResponse.json(error_body("authentication_error", "invalid x-api-key"), status=401)
        if body.get("model") != self.model:
            return FakeResponse.json(error_body("not_found_error", f"model: {body.get('model')}"), status=404)
        if request.max_tokens is None:
            return FakeResponse.json(error_body("invalid_request_error", "max_tokens: Field required"), status=400)
        if any(role not in ("user", "assistant") for role in request.roles):
            return FakeResponse.json(
                error_body("invalid_request_error", "messages: roles are user/assistant"), status=400
            )
        if not self._queue:
            return FakeResponse.json(error_body("api_error", "FakeAnthropic has no scripted answer"), status=500)
        return self._queue.pop(0) if len(self._queue) > 1 else self._queue[0]
