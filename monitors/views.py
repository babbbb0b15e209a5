"""What the monitor service hands back to chats: monitor listings, run summaries, settings and its errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from research import Digest, escape_markdown, render_digest_markdown
from storage import DeliveryMode

RunStatusText = Literal["ok", "empty", "failed", "skipped"]
"""How a monitor run ended, as `/monitors` shows it: `ok` (digest queued), `empty` (nothing new, quiet),
`failed` (all sources failed or an error), `skipped` (nobody to deliver to)."""


class MonitorNotFoundError(LookupError):
    """No such monitor for this chat; the message is one sentence for the person."""


class MonitorAccessError(MonitorNotFoundError):
    """The monitor belongs to another chat. Its message is the same as "not found", so nothing leaks."""


@dataclass(frozen=True, kw_only=True)
class MonitorSettings:
    """Settings values the monitor service needs (app passes them in from `Settings`)."""

    min_interval_seconds: int = 900
    """No monitor may run more often (MIN_MONITOR_INTERVAL)."""
    default_timezone: str = "UTC"
    """For chats without their own timezone."""
    failure_notice_after: int = 1
    """Failed runs in a row before the monitor's chats are told (once per streak): the first, by default."""
    failure_backoff_after: int = 3
    """Failed runs in a row after which a failing monitor skips scheduled runs, doubling the wait each time."""
    max_failure_backoff_hours: int = 24
    """The longest a failing monitor, or a failing source of a monitor, is left alone."""
    source_backoff_after: int = 3
    """Runs in a row in which one source failed (while others answered) before it is asked less often and the
    owner is told (once)."""
    novelty_memory_days: int = 30
    """How far back "already delivered" items are remembered."""
    story_memory_days: int = 7
    """How far back the items a monitor delivered are handed to novelty whole (title, text), so a delivered story's
    later copies from other outlets fall in its story (a repeat) and not in a story of their own (sent again): the
    monitor's look-back, if longer, and the previous run's items always. bench/novelty_real.py: the previous run's
    alone sent 1 in 3 events twice on real Japanese news."""
    max_topic_chars: int = 200


@dataclass(frozen=True, kw_only=True)
class MonitorView:
    """One monitor as a chat sees it (times in the chat's timezone)."""

    id: int
    topic: str
    schedule: str
    """The schedule in words: "every day at 08:30 (Asia/Shanghai)"."""
    schedule_text: str
    """The canonical grammar text, e.g. `daily at 08:30 in Asia/Shanghai`."""
    next_run: datetime | None
    """In the chat's timezone; None while paused."""
    paused: bool
    sources: tuple[str, ...]
    last_run: datetime | None
    """When the last run finished, in the chat's timezone."""
    last_result: str
    """"never run yet", "ok: 7 new items", "nothing new", "failed: …"."""
    owner_chat_id: int
    quiet: bool
    lookback_hours: int
    extra_queries: tuple[str, ...] = ()
    include_keywords: tuple[str, ...] = ()
    exclude_keywords: tuple[str, ...] = ()
    language: str | None = None
    owned_here: bool = True
    """The chat it is seen from owns it (may change it); False for a monitor the chat subscribes to."""
    shared: bool = False
    """Listed in /browse: other chats may subscribe."""
    receivers: int = 0
    """Chats that receive its digests (the owner included), not counting paused or gone ones."""
    subscribed: bool = False
    """The chat it is seen from has a subscription (owners do too, unless they left it)."""
    delivery_paused: bool = False
    """The chat it is seen from paused its own delivery (the monitor runs on for the others)."""
    delivery: DeliveryMode = DeliveryMode.AUTO
    """How the chat it is seen from receives it (its own choice)."""
    in_briefing: bool = False
    """The chat it is seen from gets it in its briefing rather than one message per run."""

    def summary(self, *, owner: str | None = None) -> str:
        """One markdown paragraph for `/monitors` and for the reply to `/track`; `owner` names the owner chat
        (`telegram:123`) where listings span chats."""
        state = "paused" if self.paused else (f"next {self.next_run:%Y-%m-%d %H:%M %Z}" if self.next_run else "")
        # quiet is the default: only a monitor that sends "nothing new" notes says so
        quiet = "" if self.quiet else " · notes when nothing is new"
        quiet += " · shared" if self.shared else ""
        quiet += f" · owner {escape_markdown(owner)}" if owner else ""
        last_run = f" ({self.last_run:%Y-%m-%d %H:%M %Z})" if self.last_run is not None else ""
        return (
            f"**#{self.id} {escape_markdown(self.topic)}** — {self.schedule}{quiet}\n"
            f"{state} · sources: {escape_markdown(', '.join(self.sources))}\n"
            f"last: {escape_markdown(self.last_result)}{last_run}"
        )


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What one monitor run did."""

    run_id: int | None
    monitor_id: int
    scheduled_for: datetime
    status: RunStatusText
    digest: Digest | None = None
    items: int = 0
    """Items collected (after de-duplication)."""
    new_items: int = 0
    deliveries: int = 0
    """Outbox rows queued (one per recipient chat)."""
    artifacts: dict[str, Path] = field(default_factory=dict)
    """`csv`, `json`, `chart` paths when the run exported files."""
    error: str | None = None
    error_id: str | None = None
    """The id logged with the traceback, to quote to an operator."""
    source_errors: tuple[str, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0

    def markdown(self) -> str:
        """The digest as markdown, or one line saying why there is none."""
        if self.digest is not None:
            return render_digest_markdown(self.digest)
        if self.status == "failed":
            suffix = f" (error id {self.error_id})" if self.error_id else ""
            return f"The run failed: {escape_markdown(self.error or 'unknown error')}{suffix}."
        return "Nothing new to report."
