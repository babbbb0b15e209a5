"""A fake OpenAI-compatible Chat Completions server (what llama.cpp, vLLM, Ollama, LM Studio and OpenAI speak) on
top of `FakeHTTPServer`: replays scripted answers and records every request.

It speaks the real wire format, so the real `openai` client (and pydantic-ai's `openai-chat:` / `ollama:` models on
top of it) talks to it unchanged:

    fake = FakeOpenAI(fake_server)                      # the `fake_server` fixture from tests/conftest.py
    fake.reply_tool_calls([("collect", {"queries": [...]})])
    fake.reply_text("Collected 40 items.")
    fake.reply_text("and so on and so on", finish_reason="length")   # cut at the output limit
    fake.reply_context_exceeded()                       # llama.cpp's 400 for a prompt over n_ctx
    fake.reply_text("late", delay=5)                    # a slow server
    settings: OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=fake.api_key, LLM_MODEL=f"openai-chat:{fake.model}"
    fake.requests[0].system_messages, fake.requests[0].max_tokens, fake.requests[1].tool_results

`POST /v1/chat/completions` is served (also without the `/v1` prefix). Answers are queued and served in order;
when the queue runs dry the last answer repeats; `reply_with(handler)` answers from a function of the request.
`POST /v1/embeddings` answers vectors from `vector_of(text)`. Streaming is not served.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest

Json = dict[str, Any]


@dataclass
class ChatRequest:
    """One `chat/completions` call as the fake received it."""

    api_key: str | None
    body: Json

    @property
    def messages(self) -> list[Json]:
        return list(self.body.get("messages", []))

    @property
    def roles(self) -> list[str]:
        return [message.get("role", "") for message in self.messages]

    @property
    def system_messages(self) -> list[str]:
        """The text of every system (or developer) message, in order."""
        return [
            _text(message.get("content")) for message in self.messages if message.get("role") in ("system", "developer")
        ]

    @property
    def user_text(self) -> str:
        return "\n".join(_text(m.get("content")) for m in self.messages if m.get("role") == "user")

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.body.get("tools", []) if "function" in tool]

    @property
    def tool_results(self) -> list[Json]:
        """The `role: tool` messages sent back (tool results), oldest first."""
        return [m for m in self.messages if m.get("role") == "tool"]

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_completion_tokens", self.body.get("max_tokens"))
        return int(value) if value is not None else None

    @property
    def prompt_chars(self) -> int:
        """Characters of every message and tool schema sent (what a context budget bounds)."""
        return len(json.dumps(self.messages)) + len(json.dumps(self.body.get("tools", [])))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def usage(prompt_tokens: int = 100, completion_tokens: int = 20) -> Json:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion(
    *,
    content: str | None = None,
    tool_calls: list[tuple[str, Json]] = (),  # type: ignore[assignment]
    finish_reason: str = "stop",
    model: str = "fake-model",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> Json:
    """A `chat.completion` object with one choice."""
    message: Json = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for index, (name, args) in enumerate(tool_calls)
        ]
        if finish_reason == "stop":
            finish_reason = "tool_calls"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def error_body(code: int, message: str, kind: str = "invalid_request_error", **extra: Any) -> Json:
    """The OpenAI-style error envelope (llama.cpp and vLLM answer the same shape)."""
    return {"error": {"code": code, "message": message, "type": kind, **extra}}


CONTEXT_EXCEEDED = error_body(
    400,
    "the request exceeds the available context size, try increasing it",
    "exceed_context_size_error",
    n_prompt_tokens=9000,
    n_ctx=8192,
)
"""llama.cpp's answer to a prompt longer than its context (`n_ctx`)."""

TEMPLATE_ERROR = error_body(
    500,
    "Jinja Exception: Conversation roles must alternate user/assistant/user/assistant/...",
    "server_error",
)
"""llama.cpp's answer when the model's chat template refuses the order of roles (Gemma 3's official template)."""

RESPONSE_FORMAT_REFUSED = error_body(
    500,
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input "
    "should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}"
    '\n\n  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n    POST /v1/chat/completions',
    "internal_server_error",
    param=None,
)
"""llama-cpp-python 0.3.36's server's answer to a `json_schema` response format (recorded): an HTTP 500 carrying
the request's validation error."""


class FakeOpenAI:
    """Scripted Chat Completions (and embeddings) for one model on a `FakeHTTPServer`."""

    def __init__(
        self,
        server: FakeHTTPServer,
        *,
        model: str = "fake-model",
        api_key: str = "sk-test",
        vector_of: Callable[[str], list[float]] | None = None,
    ) -> None:
        self.server = server
        self.model = model
        self.api_key = api_key
        self.requests: list[ChatRequest] = []
        self.embedding_requests: list[Json] = []
        self._queue: list[FakeResponse] = []
        self._handler: Callable[[ChatRequest], Json] | None = None
        self._vector_of = vector_of or (lambda text: [float(len(text) % 7), 1.0, 0.5])
        for prefix in ("/v1", ""):
            server.route("POST", f"{prefix}/chat/completions", self._answer)
            server.route("POST", f"{prefix}/embeddings", self._embed)

    @property
    def base_url(self) -> str:
        """For `OPENAI_BASE_URL` / `OLLAMA_BASE_URL` (the `/v1` root, as the servers document it)."""
        return f"{self.server.url}/v1"

    def reply_text(
        self, text: str | None, *, finish_reason: str = "stop", delay: float = 0.0, completion_tokens: int = 20
    ) -> None:
        body = completion(
            content=text, finish_reason=finish_reason, model=self.model, completion_tokens=completion_tokens
        )
        self._queue.append(FakeResponse.json(body, delay=delay))

    def reply_tool_calls(self, calls: list[tuple[str, Json]], *, text: str | None = None) -> None:
        self._queue.append(FakeResponse.json(completion(content=text, tool_calls=calls, model=self.model)))

    def reply_json(self, payload: Json, *, delay: float = 0.0) -> None:
        """Answer a whole `chat.completion` object (see `completion`)."""
        self._queue.append(FakeResponse.json(payload, delay=delay))

    def reply_error(self, status: int, body: Json) -> None:
        self._queue.append(FakeResponse.json(body, status=status))

    def reply_context_exceeded(self) -> None:
        self.reply_error(400, CONTEXT_EXCEEDED)

    def reply_template_error(self) -> None:
        self.reply_error(500, TEMPLATE_ERROR)

    def reply_with(self, handler: Callable[[ChatRequest], Json]) -> None:
        """Answer every request (after the queue is used up) with `handler(request)`, a `chat.completion`."""
        self._handler = handler

    def _answer(self, recorded: RecordedRequest) -> FakeResponse:
        try:
            body = json.loads(recorded.body or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": recorded.body.decode(errors="replace")}
        auth = recorded.headers.get("authorization", "")
        request = ChatRequest(api_key=auth.removeprefix("Bearer ") or None, body=body)
        self.requests.append(request)
        if request.api_key != self.api_key:
            return FakeResponse.json(error_body(401, "Incorrect API key provided."), status=401)
        if body.get("model") != self.model:
            return FakeResponse.json(
                error_body(404, f"The model `{body.get('model')}` does not exist", "not_found_error"), status=404
            )
        if self._queue:
            return self._queue.pop(0) if len(self._queue) > 1 or self._handler else self._queue[0]
        if self._handler is not None:
            return FakeResponse.json(self._handler(request))
        return FakeResponse.json(error_body(500, "FakeOpenAI has no scripted answer", "server_error"), status=500)

    def _embed(self, recorded: RecordedRequest) -> FakeResponse:
        body = json.loads(recorded.body or b"{}")
        self.embedding_requests.append(body)
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else texts
        data = [{"object": "embedding", "index": i, "embedding": self._vector_of(t)} for i, t in enumerate(texts)]
        return FakeResponse.json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        )
