"""Test doubles for monitors: a recording chat sender and a source resolver over fake sources (the clock is
`tests.kit.FakeClock`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kernel import DeliveryError, Reply
from sources.base import Source
from storage import ChatRecord


@dataclass(frozen=True)
class Part:
    """One part of a message: the whole message, or (split) its text or one of its files."""

    message: Reply
    index: int
    total: int


@dataclass(frozen=True)
class Sent:
    """One message (or, split, one part of it) that reached a chat."""

    chat: ChatRecord
    message: Reply
    index: int = 0

    @property
    def text(self) -> str:
        return self.message.text


class RecordingSender:
    """A `ChatSender` that records what it delivered and can be scripted to fail the next sends.

    Tests read like a conversation: `sender.fail_next(RetryLater(retry_after=30))`, run the worker, then
    `sender.pop_message()` for the oldest message not yet looked at, and `sender.is_quiet()` at the end.
    """

    def __init__(self, *, split: bool = False) -> None:
        self.split = split
        """Send a message in parts (its text, then each file), as platform senders do; else in one part."""
        self.sent: list[Sent] = []
        self.attempts: list[tuple[ChatRecord, Reply]] = []
        self._script: deque[DeliveryError] = deque()
        self._part_script: dict[tuple[int, int], DeliveryError] = {}
        self._unread: deque[Sent] = deque()

    def fail_next(self, *errors: DeliveryError) -> None:
        """The next sends raise these errors, one each, in order."""
        self._script.extend(errors)

    def fail_part(self, chat_id: int, index: int, error: DeliveryError) -> None:
        """The next send of part `index` to chat `chat_id` raises `error` (once); other sends go through."""
        self._part_script[(chat_id, index)] = error

    def parts(self, message: Reply) -> list[Part]:
        total = 1 + len(message.attachments) if self.split else 1
        return [Part(message, index, total) for index in range(total)]

    async def send_part(self, chat: ChatRecord, part: Part) -> None:
        self.attempts.append((chat, part.message))
        if self._script:
            raise self._script.popleft()
        if (error := self._part_script.pop((chat.id, part.index), None)) is not None:
            raise error
        sent = Sent(chat, part.message, part.index)
        self.sent.append(sent)
        self._unread.append(sent)

    def pop_message(self) -> Sent:
        """The oldest delivered message not popped yet; fails the test when there is none."""
        assert self._unread, "no message was delivered"
        return self._unread.popleft()

    def is_quiet(self) -> bool:
        """Nothing delivered that the test has not looked at."""
        return not self._unread

    def delivered_to(self) -> list[str]:
        """External chat ids of every delivered message, in order."""
        return [sent.chat.external_id for sent in self.sent]


def resolver(available: Mapping[str, Source]) -> Callable[[Sequence[str]], list[Source]]:
    """A `(specs) -> list[Source]` over named fake sources; unknown names raise ValueError like the registry."""

    def resolve(specs: Sequence[str]) -> list[Source]:
        unknown = [spec for spec in specs if spec not in available]
        if unknown:
            raise ValueError(f"unknown source(s): {', '.join(unknown)}. Valid: {', '.join(available)}")
        return [available[spec] for spec in specs]

    return resolve
