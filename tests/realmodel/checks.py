"""What must hold with any model, checked on what the recording proxy saw and what Lookout stored — never on the
model's wording."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart

from tests.realmodel.proxy import Exchange

CONTEXT_TOKENS = 8192
"""The context the CI server allocates (`.ci/model_server.sh` N_CTX): no request may need more than this."""

REQUEST_SECONDS = 120.0
"""The longest one model request may take before Lookout gives up on it (the issue: a 20-item digest ≤ 60 s, a chat
turn ≤ 20 s on this machine; twice the digest leaves room for a loaded CI machine)."""

RECITED_CHARS = 80
"""A stored answer sharing this many consecutive characters with a system message recites Lookout's prompt."""

REPEATING_RATIO = 0.15
"""A long answer that compresses below this fraction of its size is the same few words over and over (ordinary
prose compresses to 35-60 %)."""

REPEATING_MIN_CHARS = 600
"""Shorter answers are not judged by compression (too little text to tell)."""


def request_problems(exchanges: Sequence[Exchange]) -> list[str]:
    """Every way the Chat Completions requests in `exchanges` broke the rules for real models, one line each."""
    problems: list[str] = []
    for number, exchange in enumerate(e for e in exchanges if e.is_chat):
        label = f"request {number + 1}"
        if not exchange.had_output_limit:
            problems.append(f"{label} came without an output limit (max_tokens)")
        systems = exchange.system_messages
        if len(systems) > 1:
            problems.append(f"{label} carried {len(systems)} system messages (a chat template allows one)")
        if systems and exchange.messages and exchange.messages[0] is not systems[0]:
            problems.append(f"{label} put its system message after another message")
        if exchange.status == 200 and exchange.output_limit is not None:
            needed = exchange.prompt_tokens + exchange.output_limit
            if needed > CONTEXT_TOKENS:
                problems.append(
                    f"{label} needed {exchange.prompt_tokens} prompt + {exchange.output_limit} output tokens, "
                    f"over the context of {CONTEXT_TOKENS}"
                )
        if exchange.status != 200 and "context" in exchange.error_text.lower():
            problems.append(f"{label} was sent over the context: {exchange.error_text[:200]}")
        if exchange.seconds > REQUEST_SECONDS:
            problems.append(f"{label} took {exchange.seconds:.0f} s (over {REQUEST_SECONDS:.0f} s)")
    return problems


def response_texts(messages: Iterable[ModelMessage]) -> list[str]:
    """The text of every model response in a stored conversation."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, TextPart)
    ]


def _shares_run(text: str, other: str, length: int) -> bool:
    squeezed = re.sub(r"\s+", " ", text)
    source = re.sub(r"\s+", " ", other)
    if len(squeezed) < length or len(source) < length:
        return False
    step = max(1, length // 4)
    return any(squeezed[start : start + length] in source for start in range(0, len(squeezed) - length + 1, step))


TEMPLATE_TOKENS = ("<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>")
"""Chat-template tokens a model writes as text when it speaks past its own turn."""


def degenerate_reason(text: str, *, system_texts: Sequence[str] = (), cut_answers: Sequence[str] = ()) -> str | None:
    """Why `text` (a model's answer) must not be stored or shown, or None: empty, the same words over and over,
    chat-template markup, Lookout's own system prompt recited, or an answer the server cut at the output limit."""
    stripped = text.strip()
    if not stripped:
        return "empty"
    if len(stripped) >= REPEATING_MIN_CHARS:
        ratio = len(zlib.compress(stripped.encode())) / len(stripped.encode())
        if ratio < REPEATING_RATIO:
            return f"repeating (compresses to {ratio:.0%})"
    if any(token in stripped for token in TEMPLATE_TOKENS):
        return "chat-template markup"
    for system in system_texts:
        if _shares_run(stripped, system, RECITED_CHARS):
            return "recites the system prompt"
    if any(stripped and stripped == cut.strip() for cut in cut_answers):
        return "cut at the output limit"
    return None


def system_texts(exchanges: Sequence[Exchange]) -> list[str]:
    """Every distinct system message the requests carried."""
    seen: dict[str, None] = {}
    for exchange in exchanges:
        for message in exchange.system_messages:
            content = message.get("content")
            text = content if isinstance(content, str) else " ".join(str(p.get("text", "")) for p in content or [])
            seen[text] = None
    return list(seen)


def cut_answers(exchanges: Sequence[Exchange]) -> list[str]:
    """The text of every answer the server stopped at the output limit."""
    return [e.answer_text for e in exchanges if e.is_chat and "length" in e.finish_reasons and e.answer_text]


def true_to_the_wire(reason: str, exchanges: Sequence[Exchange]) -> bool:
    """Whether a step's fallback reason agrees with what the server answered: a server error or a refused request
    only when one came back, an unusable answer only when answers came back, a timeout only when a request took
    that long or never came back."""
    statuses = [e.status for e in exchanges if e.is_chat]
    said = reason.lower()
    if "timed out" in said or "no answer in time" in said or "runtimedout" in said:
        return True  # a request cut by Lookout's own deadline may have no recorded answer yet
    if "http 5" in said or "status_code: 5" in said or "server error" in said or "refused" in said:
        return any(status >= 500 for status in statuses)
    if "connection" in said:
        return any(status >= 500 for status in statuses)
    answered = ("output retries", "unusable", "length limit", "assessed none", "another language", "request_limit")
    if any(words in said for words in answered):
        return 200 in statuses
    return "llm_pipeline_seconds" in said  # the run's model time was spent before the step
