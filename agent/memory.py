"""Conversation memory per (chat, thread): the last N turns plus a rolling summary, with idle expiry."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from storage import ConversationRepository

if TYPE_CHECKING:
    from agent.context import Services, Turn

__all__ = [
    "DEFAULT_IDLE_HOURS",
    "DEFAULT_MAX_TURNS",
    "ConversationMemory",
    "MemoryWindow",
    "conversation_memory",
    "memory_for",
    "turn_starts",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 10
DEFAULT_IDLE_HOURS = 24.0


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWindow:
    """What one agent run should see of the conversation."""

    messages: list[ModelMessage]
    """The last N turns, whole (pass as `message_history`)."""
    summary: str | None
    """The rolling summary of everything older, if any."""
    expired: bool
    """The conversation was idle too long: `messages` is empty and only the summary carries over."""

    @property
    def summary_instructions(self) -> str | None:
        """The summary worded as extra instructions for the run (None without a summary)."""
        if not self.summary:
            return None
        return (
            "Summary of the earlier conversation with this chat (older messages are not shown; "
            f"use it as background, it may be out of date):\n<summary>\n{self.summary}\n</summary>"
        )


def _tool_call_ids(message: ModelMessage) -> set[str]:
    # every part that pairs a call with its return carries the same tool_call_id (calls in responses,
    # returns and retries in requests; native tool calls and returns both in responses)
    return {part_id for part in message.parts if isinstance(part_id := getattr(part, "tool_call_id", None), str)}


def turn_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Indexes where a turn starts: a request carrying a user prompt, such that no tool call before it is
    answered after it (cutting there never splits a tool call from its return)."""
    ids_after: list[set[str]] = [set() for _ in range(len(messages) + 1)]
    for index in range(len(messages) - 1, -1, -1):
        ids_after[index] = ids_after[index + 1] | _tool_call_ids(messages[index])
    starts: list[int] = []
    ids_before: set[str] = set()
    for index, message in enumerate(messages):
        is_prompt = isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)
        if is_prompt and not ids_before & ids_after[index]:
            starts.append(index)
        ids_before |= _tool_call_ids(message)
    return starts


class ConversationMemory:
    """The memory of one conversation. Use under the dispatcher's per-conversation lock:

    `load()` → run the agent with `window.messages` (and `window.summary_instructions`) → `append(new)` →
    if `needs_summary()`: summarise `turns_to_summarise()` (with the old `summary`) → `apply_summary(text)`.
    """

    def __init__(
        self,
        repository: ConversationRepository,
        *,
        chat_id: int,
        thread_key: str = "",
        max_turns: int = DEFAULT_MAX_TURNS,
        idle_hours: float = DEFAULT_IDLE_HOURS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self._repository = repository
        self.chat_id = chat_id
        """The chat's database id."""
        self.thread_key = thread_key
        """The thread inside the chat ("" for none)."""
        self.max_turns = max_turns
        self.idle = timedelta(hours=idle_hours)
        self._clock = clock
        self._history: list[ModelMessage] = []
        self._summary: str | None = None
        self._expired: list[ModelMessage] = []
        self._loaded = False

    @property
    def summary(self) -> str | None:
        """The stored rolling summary (after `load()`)."""
        return self._summary

    @property
    def history(self) -> list[ModelMessage]:
        """Every unsummarised message of the live conversation (after `load()`)."""
        return list(self._history)

    async def load(self) -> MemoryWindow:
        """Read the conversation. After `idle_hours` of silence the stored history is set aside: the run sees
        only the summary, and `turns_to_summarise()` offers the set-aside messages to this object's caller
        (they are no longer saved, so unless summarised now they are gone)."""
        record = await self._repository.load(self.chat_id, self.thread_key)
        self._loaded = True
        self._history, self._expired, self._summary = [], [], None
        if record is None:
            return self.window()
        self._summary = record.summary
        messages = self._decode(record.messages)
        if self._clock() - record.updated_at >= self.idle:
            self._expired = messages
        else:
            self._history = messages
        return self.window()

    def window(self) -> MemoryWindow:
        """The last `max_turns` turns of the live history, and the summary."""
        return MemoryWindow(
            messages=self._history[self._window_start() :],
            summary=self._summary,
            expired=bool(self._expired),
        )

    async def append(self, new_messages: Sequence[ModelMessage]) -> None:
        """Add a run's new messages (`result.new_messages()`) and save (without anything idle expiry set aside)."""
        await self._ensure_loaded()
        self._history = [*self._history, *new_messages]
        await self._save()

    def needs_summary(self) -> bool:
        """Whether older turns should be folded into the summary: the history outgrew `max_turns`, or an
        idle conversation left messages behind."""
        return bool(self._expired) or self._window_start() > 0

    def turns_to_summarise(self) -> list[ModelMessage]:
        """The messages the summariser should read (together with `summary`): whole turns older than the
        window, or everything an idle expiry set aside."""
        if self._expired:
            return list(self._expired)
        return self._history[: self._window_start()]

    async def apply_summary(self, summary: str) -> None:
        """Store the new rolling summary (it replaces the old one, so it must cover it) and drop the turns
        it summarised."""
        await self._ensure_loaded()
        if self._expired:
            self._expired = []
        else:
            self._history = self._history[self._window_start() :]
        self._summary = summary.strip() or None
        await self._save()

    async def forget(self) -> bool:
        """Clear the conversation, summary included (`/forget`). True if there was anything to clear."""
        self._history, self._expired, self._summary = [], [], None
        self._loaded = True
        return await self._repository.clear(self.chat_id, self.thread_key)

    def _window_start(self) -> int:
        starts = turn_starts(self._history)
        if len(starts) <= self.max_turns:
            return 0
        return starts[-self.max_turns]

    async def _ensure_loaded(self) -> None:
        if not self._loaded:
            await self.load()

    async def _save(self) -> None:
        await self._repository.save(
            self.chat_id,
            self.thread_key,
            messages=ModelMessagesTypeAdapter.dump_json(self._history),
            summary=self._summary,
            now=self._clock(),
        )

    def _decode(self, stored: bytes) -> list[ModelMessage]:
        if not stored:
            return []
        try:
            return ModelMessagesTypeAdapter.validate_json(stored)
        except ValidationError as problem:
            # a history written by an incompatible pydantic-ai must not break the chat: start over, keep the summary
            logger.warning(
                "conversation %s/%r: stored messages unreadable, starting fresh (%d errors)",
                self.chat_id,
                self.thread_key,
                problem.error_count(),
            )
            return []


def memory_for(services: Services, turn: Turn) -> ConversationMemory:
    """The memory of the conversation `turn` belongs to (its chat and thread), with the configured window and
    idle expiry: what the chat agent reads and writes, and what `/forget` clears."""
    return conversation_memory(services, chat_id=turn.chat.id, thread_key=turn.incoming.thread_key)


def conversation_memory(services: Services, *, chat_id: int, thread_key: str) -> ConversationMemory:
    """The memory of one (chat, thread) with the configured window and idle expiry."""
    return ConversationMemory(
        ConversationRepository(services.database),
        chat_id=chat_id,
        thread_key=thread_key,
        max_turns=services.settings.memory_turns,
        idle_hours=services.settings.memory_idle_hours,
        clock=services.clock,
    )
