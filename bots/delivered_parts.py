"""Which parts of a digest a sender already delivered, so a retried delivery does not send them twice."""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from monitors import OutgoingDigest
from storage import ChatRecord

__all__ = ["DeliveredParts", "fingerprint"]

logger = logging.getLogger(__name__)

_Part = TypeVar("_Part")

MAX_ENTRIES = 10_000
"""Partly delivered messages remembered (oldest forgotten first)."""


def fingerprint(message: OutgoingDigest) -> str:
    """Which message this is, so a retry of it is recognised (the run id alone would merge notices)."""
    digest = hashlib.sha256(message.text.encode()).hexdigest()[:16]
    names = ",".join(attachment.filename for attachment in message.attachments)
    return f"{message.run_id}:{digest}:{names}"


class DeliveredParts:
    """Per process memory of partly delivered messages: the outbox retries a whole message, this skips the parts
    that already arrived (a digest's first two Telegram messages, say, before a 429 on the third)."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES) -> None:
        self._done: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._max_entries = max_entries

    async def send_remaining(
        self,
        chat: ChatRecord,
        message: OutgoingDigest,
        parts: Sequence[_Part],
        send: Callable[[_Part], Awaitable[None]],
    ) -> None:
        """Send `parts` in order, starting after the ones a failed earlier attempt already delivered."""
        key = (chat.external_id, fingerprint(message))
        done = self._done.get(key, 0)
        if done:
            logger.info("chat %d: resuming a delivery after %d of %d parts", chat.id, done, len(parts))
        for index in range(done, len(parts)):
            await send(parts[index])
            self._done[key] = index + 1
            self._done.move_to_end(key)
            while len(self._done) > self._max_entries:
                self._done.popitem(last=False)
        self._done.pop(key, None)
