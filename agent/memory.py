"""Conversation memory per (chat, thread): the recent turns verbatim plus a rolling summary, folded in batches.

The agent sees every unsummarised turn: at least `max_turns` once there are that many, and fewer than
`max_turns + fold_batch(max_turns)`. When a turn brings the history to that bound, the oldest turns beyond
`max_turns` are folded into the summary at once, after the reply (the dispatcher runs the fold in the background
and the conversation's next turn waits for it only if it is still running). So a summary call happens about once
per `fold_batch` turns, and the summary is rewritten once per batch, never turn by turn.

After `idle_hours` of silence the stored history is set aside: the next run sees only the summary, and the fold
after that turn summarises what was set aside (it is not stored again, so a failed fold drops it).

This module does no I/O of its own: the turn's state is read in the dispatcher's one read and written in the
turn's one write (`storage.TurnRepository`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

from research import messages_tokens
from storage import ConversationRecord

__all__ = [
    "DEFAULT_IDLE_HOURS",
    "DEFAULT_MAX_TURNS",
    "ConversationMemory",
    "Fold",
    "HistoryCache",
    "MemoryWindow",
    "encode_messages",
    "fold_batch",
    "trim_to_tokens",
    "turn_starts",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 10
DEFAULT_IDLE_HOURS = 24.0
MAX_FOLD_BATCH = 10
"""At most this many turns are folded at once, so one summary prompt stays well inside its token limit."""
HISTORIES_KEPT = 512
"""Conversations whose decoded history a `HistoryCache` keeps (the ones answered last)."""


def fold_batch(max_turns: int) -> int:
    """How many turns beyond `max_turns` the history may hold before the oldest are folded: half the window
    (2 to `MAX_FOLD_BATCH`), so a summary is written about once per that many turns."""
    return max(2, min(MAX_FOLD_BATCH, max_turns // 2))


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWindow:
    """What one agent run should see of the conversation."""

    messages: list[ModelMessage]
    """The unsummarised turns, whole (pass as `message_history`)."""
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold:
    """Turns to fold into the summary after a reply, and what the memory is afterwards."""

    previous_summary: str | None
    """The summary the new one must cover."""
    messages: list[ModelMessage]
    """What the summariser reads: whole turns leaving the memory, or everything an idle expiry set aside."""
    keep: list[ModelMessage]
    """The history after the fold."""
    revision: int
    """The stored revision the fold was planned on: it is written only over that (never over newer turns)."""


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


def trim_to_tokens(messages: Sequence[ModelMessage], budget: int) -> list[ModelMessage]:
    """The newest whole turns of `messages` whose estimated tokens fit `budget` (the oldest dropped first; none
    when even the last turn does not fit). What is dropped stays stored and is folded into the summary later."""
    starts = turn_starts(messages)
    for start in starts:
        kept = list(messages[start:])
        if messages_tokens(kept) <= budget:
            return kept
    return []


def encode_messages(messages: Sequence[ModelMessage]) -> bytes:
    """The stored form: pydantic-ai's own JSON serialisation."""
    return ModelMessagesTypeAdapter.dump_json(list(messages))


class HistoryCache:
    """The decoded histories of the conversations this process answered last, each with the stored JSON it is.

    A conversation's next turn usually reads back exactly the JSON this process wrote after its previous turn:
    then the messages kept with it are used instead of decoding that JSON again (pydantic-ai's `validate_json` of
    a ten-turn history was about 6 % of a free-text turn's CPU). An entry is used only when the stored bytes are
    the very bytes it was kept with, so whatever else wrote the conversation since (a fold, a confirmation,
    /forget, another process) is simply a miss. Bounded: the least recently used conversations go first.
    """

    def __init__(self, size: int = HISTORIES_KEPT) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, str], tuple[bytes, tuple[ModelMessage, ...]]] = OrderedDict()

    def get(self, record: ConversationRecord) -> list[ModelMessage] | None:
        """The messages of `record.messages` when kept for exactly those bytes, else None."""
        key = (record.chat_id, record.thread_key)
        entry = self._entries.get(key)
        if entry is None or entry[0] != record.messages:
            return None
        self._entries.move_to_end(key)
        return list(entry[1])

    def keep(self, chat_id: int, thread_key: str, stored: bytes, messages: Sequence[ModelMessage]) -> None:
        """Remember that `stored` (just written) decodes to `messages`."""
        key = (chat_id, thread_key)
        self._entries[key] = (stored, tuple(messages))
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class ConversationMemory:
    """The memory of one conversation as the turn read it: the window for the run, the history to store after it,
    and the fold that history calls for."""

    def __init__(
        self,
        record: ConversationRecord | None,
        *,
        now: datetime,
        max_turns: int = DEFAULT_MAX_TURNS,
        idle_hours: float = DEFAULT_IDLE_HOURS,
        decoded: HistoryCache | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.max_turns = max_turns
        self.summary = record.summary if record is not None else None
        """The stored rolling summary."""
        self.revision = record.revision if record is not None else 0
        messages: list[ModelMessage] = []
        if record is not None:
            kept = decoded.get(record) if decoded is not None else None
            messages = kept if kept is not None else self._decode(record)
        idle = record is not None and now - record.updated_at >= timedelta(hours=idle_hours)
        self._expired = messages if idle else []
        self.history = [] if idle else messages
        """Every unsummarised message of the live conversation."""
        self._stored = record.messages.strip() if record is not None and messages and not idle else b""
        """The stored JSON of `history` (empty when there is none to extend)."""

    def window(self) -> MemoryWindow:
        """What the run sees: the live history and the summary."""
        return MemoryWindow(messages=list(self.history), summary=self.summary, expired=bool(self._expired))

    def after(self, new_messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The history to store after a run with `new_messages` (`result.new_messages()`); what an idle expiry
        set aside is not stored again."""
        return [*self.history, *new_messages]

    def encode_after(self, new_messages: Sequence[ModelMessage]) -> bytes:
        """The stored form of `after(new_messages)`: the new messages' JSON appended to the stored JSON array,
        so a turn encodes only what it added."""
        added = encode_messages(new_messages)
        stored = self._stored
        if not (stored.startswith(b"[") and stored.endswith(b"]")):  # nothing stored to extend
            return encode_messages(self.after(new_messages))
        if added == b"[]":
            return stored
        if stored == b"[]":
            return added
        return stored[:-1] + b"," + added[1:]

    def fold(self, history: Sequence[ModelMessage], *, revision: int) -> Fold | None:
        """The fold the stored `history` (at `revision`) calls for, or None: everything an idle expiry set aside,
        or, once the history holds `max_turns + fold_batch` turns, the oldest turns beyond `max_turns`."""
        if self._expired:
            return Fold(
                previous_summary=self.summary, messages=list(self._expired), keep=list(history), revision=revision
            )
        starts = turn_starts(history)
        if len(starts) < self.max_turns + fold_batch(self.max_turns):
            return None
        cut = starts[-self.max_turns]
        return Fold(
            previous_summary=self.summary, messages=list(history[:cut]), keep=list(history[cut:]), revision=revision
        )

    @staticmethod
    def _decode(record: ConversationRecord) -> list[ModelMessage]:
        if not record.messages:
            return []
        try:
            return ModelMessagesTypeAdapter.validate_json(record.messages)
        except ValidationError as problem:
            # a history written by an incompatible pydantic-ai must not break the chat: start over, keep the summary
            logger.warning(
                "conversation %s/%r: stored messages unreadable, starting fresh (%d errors)",
                record.chat_id,
                record.thread_key,
                problem.error_count(),
            )
            return []
