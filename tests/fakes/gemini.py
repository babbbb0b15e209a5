"""A fake Gemini API (`generateContent`) on top of `FakeHTTPServer`: replays scripted answers, records requests.

It speaks the real REST wire format, so the real google-genai client (and pydantic-ai's `GoogleModel` on top
of it) talks to it unchanged:

    fake = FakeGemini(fake_server)                      # the `fake_server` fixture from tests/conftest.py
    fake.reply_function_call("collect", {"queries": [{"text": "DeepSeek"}]})
    fake.reply_text("Collected 40 items.")
    model = GoogleModel(fake.model, provider=GoogleProvider(api_key=fake.api_key, base_url=fake.url))
    with models.override_allow_model_requests(True):
        ...                                             # run the agent
    fake.requests[0].system_text, fake.requests[0].function_names, fake.requests[1].function_responses

google-genai 2.x posts to `/v1beta/models/{model}:generateContent` (3.x to `/v1/...`; both are served) with
the key in the `x-goog-api-key` header. Answers are queued and served in order; when the queue runs dry the
last answer repeats (like `FakeHTTPServer` routes). `reply_with(handler)` answers from a function of the
request instead, for scripts that depend on what the model was sent. Streaming (`streamGenerateContent`) is
not served.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest

Json = dict[str, Any]


@dataclass
class GeminiRequest:
    """One `generateContent` call as the fake received it."""

    model: str
    api_key: str | None
    body: Json

    @property
    def contents(self) -> list[Json]:
        """The conversation: `{"role": "user"|"model", "parts": [...]}` entries."""
        return list(self.body.get("contents", []))

    @property
    def system_text(self) -> str:
        """All text of `systemInstruction` (where pydantic-ai puts instructions)."""
        parts = (self.body.get("systemInstruction") or {}).get("parts", [])
        return "\n".join(p.get("text", "") for p in parts)

    @property
    def function_declarations(self) -> list[Json]:
        """Every declared function (tool) with its name, description and parameters schema."""
        return [d for tool in self.body.get("tools", []) for d in tool.get("functionDeclarations", [])]

    @property
    def function_names(self) -> list[str]:
        return [d["name"] for d in self.function_declarations]

    @property
    def function_responses(self) -> list[Json]:
        """`functionResponse` parts sent back to the model (tool results), oldest first."""
        return [
            part["functionResponse"]
            for content in self.contents
            for part in content.get("parts", [])
            if "functionResponse" in part
        ]

    @property
    def user_text(self) -> str:
        """All text the user turns carry."""
        return "\n".join(
            part.get("text", "")
            for content in self.contents
            if content.get("role") == "user"
            for part in content.get("parts", [])
        )


def usage_metadata(prompt_tokens: int = 100, output_tokens: int = 20) -> Json:
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": prompt_tokens + output_tokens,
    }


def text_response(text: str, *, model: str = "gemini-test", usage: Json | None = None) -> Json:
    """A `GenerateContentResponse` whose one candidate says `text`."""
    return _response([{"text": text}], model=model, usage=usage)


def function_call_response(
    calls: list[tuple[str, Json]], *, text: str | None = None, model: str = "gemini-test", usage: Json | None = None
) -> Json:
    """A `GenerateContentResponse` asking to call functions: `[(name, args), ...]`, optionally with text."""
    parts: list[Json] = [{"text": text}] if text else []
    for index, (name, args) in enumerate(calls):
        parts.append({"functionCall": {"id": f"call-{index}-{name}", "name": name, "args": args}})
    return _response(parts, model=model, usage=usage)


def error_body(code: int, status: str, message: str) -> Json:
    """Google's error envelope, e.g. `(429, "RESOURCE_EXHAUSTED", "Quota exceeded")`."""
    return {"error": {"code": code, "message": message, "status": status}}


def _response(parts: list[Json], *, model: str, usage: Json | None) -> Json:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage or usage_metadata(),
        "modelVersion": model,
        "responseId": "fake-response",
    }


class FakeGemini:
    """Scripted `generateContent` for one model name on a `FakeHTTPServer`."""

    def __init__(self, server: FakeHTTPServer, *, model: str = "gemini-test", api_key: str = "test-key") -> None:
        self.server = server
        self.model = model
        self.api_key = api_key
        self.requests: list[GeminiRequest] = []
        self._queue: list[FakeResponse] = []
        self._handler: Callable[[GeminiRequest], Json] | None = None
        for version in ("v1beta", "v1"):
            server.route("POST", f"/{version}/models/{model}:generateContent", self._answer)

    @property
    def url(self) -> str:
        """Base URL for `GoogleProvider(base_url=...)` / `GEMINI_BASE_URL`."""
        return self.server.url

    def reply_text(self, text: str, *, usage: Json | None = None) -> None:
        self._queue.append(FakeResponse.json(text_response(text, model=self.model, usage=usage)))

    def reply_function_call(self, name: str, args: Json, *, text: str | None = None) -> None:
        self._queue.append(FakeResponse.json(function_call_response([(name, args)], text=text, model=self.model)))

    def reply_function_calls(self, calls: list[tuple[str, Json]]) -> None:
        self._queue.append(FakeResponse.json(function_call_response(calls, model=self.model)))

    def reply_error(self, code: int, status: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        """Queue an API error, e.g. `reply_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded")`."""
        self._queue.append(FakeResponse.json(error_body(code, status, message), status=code, headers=headers or {}))

    def reply_raw(self, response: FakeResponse) -> None:
        """Queue any response, e.g. garbage JSON or a delay."""
        self._queue.append(response)

    def reply_with(self, handler: Callable[[GeminiRequest], Json]) -> None:
        """Answer every request (after the queue is used up) with `handler(request)` as JSON."""
        self._handler = handler

    def _answer(self, recorded: RecordedRequest) -> FakeResponse:
        try:
            body = json.loads(recorded.body or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": recorded.body.decode(errors="replace")}
        request = GeminiRequest(model=self.model, api_key=recorded.headers.get("x-goog-api-key"), body=body)
        self.requests.append(request)
        if request.api_key != self.api_key:
            return FakeResponse.json(error_body(400, "INVALID_ARGUMENT", "API key not valid."), status=400)
        if self._queue:
            return self._queue.pop(0) if len(self._queue) > 1 or self._handler else self._queue[0]
        if self._handler is not None:
            return FakeResponse.json(self._handler(request))
        return FakeResponse.json(error_body(500, "INTERNAL", "FakeGemini has no scripted answer"), status=500)


def daily_quota_body(model: str = "gemini-test") -> Json:
    """Gemini's 429 for a used-up daily quota: `RESOURCE_EXHAUSTED` whose `QuotaFailure` names a per-day quota."""
    return {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": model},
                            "quotaValue": "250",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "43s"},
            ],
        }
    }


# ---- embeddings ------------------------------------------------------------------------------------------

VectorFunction = Callable[[str], list[float]]
"""The vector the fake answers for a text (what the model would embed it as)."""


@dataclass
class EmbeddingRequest:
    """One embedding call as the fake received it: `embedContent` (one text) or `batchEmbedContents`."""

    method: str
    """`embedContent` or `batchEmbedContents`."""
    api_key: str | None
    body: Json

    @property
    def texts(self) -> list[str]:
        """The texts asked for, in order."""
        contents = [r.get("content", {}) for r in self.body.get("requests", [])] or [self.body.get("content", {})]
        return ["".join(part.get("text", "") for part in content.get("parts", [])) for content in contents]

    @property
    def task_types(self) -> list[str | None]:
        requests = self.body.get("requests") or [self.body]
        return [request.get("taskType") for request in requests]

    @property
    def dimensions(self) -> list[int | None]:
        requests = self.body.get("requests") or [self.body]
        return [request.get("outputDimensionality") for request in requests]


class FakeGeminiEmbeddings:
    """Gemini's embedding endpoints for one model on a `FakeHTTPServer`, in the real REST wire format:

    - `POST /{v1beta,v1}/models/{model}:embedContent` with `{"content": {"parts": [{"text": ...}]}, ...}` answers
      `{"embedding": {"values": [...]}}`;
    - `POST /{v1beta,v1}/models/{model}:batchEmbedContents` with `{"requests": [{"model": ..., "content": ...}]}`
      answers `{"embeddings": [{"values": [...]}, ...]}` (google-genai sends this one, even for a single text).

    Vectors come from `vector_of(text)`; `fail_with(code, status, message)` queues an API error instead; `delay`
    seconds pass before each answer (a slow server, or one that hangs).
    """

    def __init__(
        self,
        server: FakeHTTPServer,
        *,
        model: str = "gemini-embedding-001",
        api_key: str = "test-key",
        vector_of: VectorFunction | None = None,
    ) -> None:
        self.server = server
        self.model = model
        self.api_key = api_key
        self.vector_of: VectorFunction = vector_of or (lambda text: [1.0, 0.0, 0.0])
        self.requests: list[EmbeddingRequest] = []
        self._errors: list[FakeResponse] = []
        self.delay = 0.0
        for version in ("v1beta", "v1"):
            server.route("POST", f"/{version}/models/{model}:embedContent", self._single)
            server.route("POST", f"/{version}/models/{model}:batchEmbedContents", self._batch)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def texts_embedded(self) -> list[str]:
        return [text for request in self.requests for text in request.texts]

    def fail_with(self, code: int, status: str, message: str) -> None:
        """Answer the next request with Google's error envelope."""
        self._errors.append(FakeResponse.json(error_body(code, status, message), status=code))

    def _record(self, method: str, recorded: RecordedRequest) -> EmbeddingRequest | FakeResponse:
        request = EmbeddingRequest(
            method=method, api_key=recorded.headers.get("x-goog-api-key"), body=json.loads(recorded.body or b"{}")
        )
        self.requests.append(request)
        if request.api_key != self.api_key:
            return FakeResponse.json(error_body(400, "INVALID_ARGUMENT", "API key not valid."), status=400)
        if self._errors:
            return self._errors.pop(0)
        return request

    def _single(self, recorded: RecordedRequest) -> FakeResponse:
        request = self._record("embedContent", recorded)
        if isinstance(request, FakeResponse):
            return request
        return FakeResponse.json({"embedding": {"values": self.vector_of(request.texts[0])}}, delay=self.delay)

    def _batch(self, recorded: RecordedRequest) -> FakeResponse:
        request = self._record("batchEmbedContents", recorded)
        if isinstance(request, FakeResponse):
            return request
        return FakeResponse.json(
            {"embeddings": [{"values": self.vector_of(text)} for text in request.texts]}, delay=self.delay
        )
