"""What the monitor service hands back to chats: monitor listings, run summaries, settings and its errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal
from zoneinfo import ZoneInfo

from kernel import error_reference
from monitors.schedule import Schedule, ScheduleError, parse_schedule
from research import escape_markdown
from storage import AlertRecord, ChatRecord, DeliveryMode, MonitorListing, MonitorRecord, SubscriptionRecord

if TYPE_CHECKING:  # the digest's module loads the model library: imported where a digest is drawn
    from research import Digest

MAX_TOPIC_CHARS: Final = 200
"""A monitor's topic is a few words (/track, an alert's topic, a /search); a longer one is a request better served
by /collect."""

RunStatusText = Literal["ok", "empty", "failed", "skipped"]
"""How a monitor run ended, as `/monitors` shows it: `ok` (digest queued), `empty` (nothing new, quiet),
`failed` (all sources failed or an error), `skipped` (nobody to deliver to)."""


NameStyle = Literal["quoted", "bold", "plain"]
"""How a monitor is named: `quoted` inside a reply's sentence, `bold` where it heads a line or a listing entry,
`plain` for text that is not markdown (status lines, answers to the chat model)."""


def monitor_name(monitor_id: int, topic: str, style: NameStyle = "quoted") -> str:
    """The way every message names a monitor: `#3 “C++ news”`, or `**#3 C++ news**` (bold); in markdown the topic
    is escaped, so a topic with `*` or `_` cannot break the message's formatting."""
    if style == "plain":
        return f"#{monitor_id} “{topic}”"
    if style == "bold":
        return f"**#{monitor_id} {escape_markdown(topic)}**"
    return f"#{monitor_id} “{escape_markdown(topic)}”"


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
    monitor's look-back, if longer, and the previous run's items always (the previous run's alone let a story's
    later copies through again: `bench/novelty_real.py`)."""
    chat_daily_tokens: int = 0
    """CHAT_DAILY_TOKENS: a scheduled run whose owner chat has spent it today runs without the model; 0: no limit."""


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
    rules: str = ""
    """The chat it is seen from's own rules on it, in one short line (`include ai · max 5`); "" when it has none."""
    alerts: tuple[str, ...] = ()
    """The chat it is seen from's own alerts on it, one short line each (`#3 when it releases a new model`)."""

    @property
    def other_receivers(self) -> int:
        """Chats besides the one it is seen from that receive its digests (`receivers` less this chat's own)."""
        return self.receivers - (1 if self.subscribed and not self.delivery_paused else 0)

    def summary(self, *, owner: str | None = None) -> str:
        """One markdown paragraph for `/monitors` and for the reply to `/track`; `owner` names the owner chat
        (`telegram:123`) where listings span chats."""
        state = "paused" if self.paused else (f"next {self.next_run:%Y-%m-%d %H:%M %Z}" if self.next_run else "")
        # quiet is the default: only a monitor that sends "nothing new" notes says so
        quiet = "" if self.quiet else " · notes when nothing is new"
        quiet += " · shared" if self.shared else ""
        quiet += f" · owner {escape_markdown(owner)}" if owner else ""
        last_run = f" ({self.last_run:%Y-%m-%d %H:%M %Z})" if self.last_run is not None else ""
        rules = f"\nrules: {escape_markdown(self.rules)}" if self.rules else ""
        alerts = "".join(f"\nalert {escape_markdown(line)}" for line in self.alerts)
        return (
            f"{monitor_name(self.id, self.topic, 'bold')} — {self.schedule}{quiet}\n"
            f"{state} · sources: {escape_markdown(', '.join(self.sources))}\n"
            f"last: {escape_markdown(self.last_result)}{last_run}{rules}{alerts}"
        )


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """What one monitor run did."""

    run_id: int | None
    monitor_id: int | None
    """The monitor run; None for a one-off search (no monitor)."""
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
            from research import render_digest_markdown

            return render_digest_markdown(self.digest)
        if self.status == "failed":
            suffix = error_reference(self.error_id)
            return f"The run failed: {escape_markdown(self.error or 'unknown error')}{suffix}."
        return "Nothing new to report."


def schedule_of(monitor: MonitorRecord, *, min_interval_seconds: int = 60) -> Schedule:
    """The monitor's stored schedule, parsed (the stored text carries its timezone)."""
    return parse_schedule(monitor.schedule, timezone=monitor.timezone, min_interval_seconds=min_interval_seconds)


def effective_timezone(chat: ChatRecord, default: str) -> str:
    """The chat's timezone: its own, or `default` (TIMEZONE) while it still has the storage default."""
    # "UTC" is what storage gives every new chat; a deployment default is a better guess until /timezone.
    return chat.timezone if chat.timezone and chat.timezone != "UTC" else default


def in_briefing(subscription: SubscriptionRecord, chat: ChatRecord) -> bool:
    """Whether the chat reads this subscription's digests in its briefing (it has one, and did not ask for them
    one by one); the rule the outbox applies in `storage`'s `immediate_recipients`."""
    return chat.briefing_schedule is not None and subscription.delivery is not DeliveryMode.NOW


def monitor_view(listing: MonitorListing, chat: ChatRecord, *, default_timezone: str) -> MonitorView:
    """The monitor of `listing` as `chat` sees it: times in its timezone (`default_timezone` is TIMEZONE), its own
    subscription's state. Reads nothing: `/monitors`, the CLI's listing and every reply about a monitor draw it."""
    monitor, subscription = listing.monitor, listing.subscription
    zone = ZoneInfo(effective_timezone(chat, default_timezone))
    try:
        schedule_words, schedule_text = schedule_of(monitor).describe(), schedule_of(monitor).to_text()
    except ScheduleError:
        schedule_words = schedule_text = monitor.schedule
    return MonitorView(
        id=monitor.id,
        topic=monitor.topic,
        schedule=schedule_words,
        schedule_text=schedule_text,
        next_run=monitor.next_run_at.astimezone(zone) if monitor.next_run_at and not monitor.paused else None,
        paused=monitor.paused,
        sources=monitor.sources,
        last_run=monitor.last_run_at.astimezone(zone) if monitor.last_run_at else None,
        last_result=_last_result(monitor, listing.latest_run_stats or {}),
        owner_chat_id=monitor.owner_chat_id,
        quiet=monitor.quiet,
        lookback_hours=monitor.lookback_hours,
        extra_queries=monitor.extra_queries,
        include_keywords=monitor.include_keywords,
        exclude_keywords=monitor.exclude_keywords,
        language=monitor.language,
        owned_here=monitor.owner_chat_id == chat.id,
        shared=monitor.shared,
        receivers=listing.receivers,
        subscribed=subscription is not None,
        delivery_paused=subscription is not None and subscription.paused,
        delivery=subscription.delivery if subscription is not None else DeliveryMode.AUTO,
        in_briefing=subscription is not None and in_briefing(subscription, chat),
        rules=_rules_line(listing.reader_rules),
        alerts=tuple(alert_line(alert, monitor.topic) for alert in listing.alerts),
    )


def alert_line(alert: AlertRecord, monitor_topic: str) -> str:
    """One alert in one line, as `/monitors` shows it: `#3 when it releases a new model · fired for 2 stories`
    (`#4 about Mistral when …` for an alert on a topic of its own)."""
    from research import own_topic_words  # loaded only for a chat that has alerts: listings stay cheap

    about = f" about {alert.topic}" if own_topic_words(alert.topic, monitor_topic) else ""
    fired = f" · fired for {alert.fired} stor{'y' if alert.fired == 1 else 'ies'}" if alert.fired else ""
    return f"#{alert.id}{about} when {alert.condition}{fired}"


def _rules_line(stored: Mapping[str, Any] | None) -> str:
    if not stored:
        return ""
    from research import ReaderRules  # loaded only for a chat that has rules: listings stay cheap

    rules = ReaderRules.from_stored(dict(stored))
    return rules.summary() if rules is not None else ""


def _last_result(monitor: MonitorRecord, stats: Mapping[str, Any]) -> str:
    """The last run's outcome in words: its status, new items and failed sources (`stats` of its latest run)."""
    if monitor.last_status is None:
        return "never run yet"
    if monitor.last_status == "failed":
        streak = f" ({monitor.consecutive_failures} runs in a row)" if monitor.consecutive_failures > 1 else ""
        return f"failed{streak}: {monitor.last_error or 'unknown error'}"
    new_items = stats.get("new_items")
    if monitor.last_status == "empty":
        result = "nothing new"
    else:
        result = f"ok: {new_items} new item{'s' if new_items != 1 else ''}" if isinstance(new_items, int) else "ok"
    failed = [line for line in stats.get("source_errors") or [] if isinstance(line, str)]
    if failed:
        result += f"; {len(failed)} source{'s' if len(failed) != 1 else ''} failed: " + "; ".join(failed)
    return result
