"""Notices: a line of text for one chat (a monitor keeps failing, was deleted, changed hands), sent through the
outbox like a digest, so it keeps the outbox's guarantees (sent once, retried, rate-limited)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from monitors.recorder import RunRecorder
from storage import Database, RunOutcome

__all__ = ["BRIEFING_KIND", "NOTICE_KIND", "TEXT_KINDS", "queue_notice"]

NOTICE_KIND: Final = "notice"
"""`RunRecord.stats["kind"]` of a run that only carries a text notice for one chat (no digest)."""
BRIEFING_KIND: Final = "briefing"
"""`RunRecord.stats["kind"]` of the run that carries one chat's briefing (its text, with its CSV and chart)."""
TEXT_KINDS: Final = frozenset({NOTICE_KIND, BRIEFING_KIND})
"""Runs whose message is the stored `stats["text"]` (plus their files), not a rendered digest."""


async def queue_notice(
    database: Database,
    *,
    chat_id: int,
    text: str,
    monitor_id: int | None,
    now: datetime,
    also: Sequence[int] = (),
) -> None:
    """Queue `text` (markdown) for the chat (and the chats in `also`), as a finished run of its own with one outbox
    row per chat."""
    label = f"notice: monitor #{monitor_id}" if monitor_id is not None else "notice"
    await RunRecorder(database).record(
        chat_id=chat_id,
        query=label,
        outcome=RunOutcome(finished_at=now, stats={"kind": NOTICE_KIND, "monitor_id": monitor_id, "text": text}),
        extra_chat_ids=[chat for chat in also if chat != chat_id],
    )
