"""Domain records the repositories take and return: frozen dataclasses, never ORM objects."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from typing import Any, TypedDict

JSONObject = dict[str, Any]
"""A JSON object whose shape belongs to the caller (plans, digests, stats): dump pydantic models with
`model_dump(mode="json")` before storing and validate them after loading."""


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    """Not tried yet."""
    FAILED = "failed"
    """Tried and failed; retried at `next_attempt_at`."""
    SENT = "sent"
    DEAD = "dead"
    """Given up: a permanent error or too many attempts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRecord:
    id: int
    platform: str
    external_id: str
    title: str | None
    timezone: str
    language: str | None
    profile: str | None
    active: bool
    created_at: datetime
    briefing_schedule: str | None = None
    """The chat's briefing schedule (grammar of `monitors`, with its zone); None: digests come one by one."""
    briefing_next_at: datetime | None = None
    briefing_since: datetime | None = None
    """Runs that finished after this go into the next briefing."""


class DeliveryMode(StrEnum):
    """How a subscribed chat receives a monitor's digests."""

    AUTO = "auto"
    """In the chat's briefing when it has one, else one message per run."""
    NOW = "now"
    """One message per run, even when the chat has a briefing."""
    BRIEFING = "briefing"
    """Only in the chat's briefing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord:
    id: int
    platform: str
    external_id: str
    display_name: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationRecord:
    """The stored state of one conversation (chat, thread): its memory and what must outlive the process."""

    id: int
    chat_id: int
    thread_key: str
    messages: bytes
    """pydantic-ai JSON (`ModelMessagesTypeAdapter.dump_json`)."""
    summary: str | None
    created_at: datetime
    updated_at: datetime
    """When the memory last changed (idle expiry counts from here)."""
    confirmation_token: str | None = None
    """The token of the open confirmation (its buttons carry it), if one is open."""
    confirmation: JSONObject | None = None
    """The open confirmation of proposed monitor changes, if any (the conversation layer's own JSON)."""
    told_no_model: bool = False
    """The person was told once that free text needs a language model."""
    revision: int = 0
    """Grows with every write; a background fold writes only over the revision it read."""


class ConversationChanges(TypedDict, total=False):
    """Fields one conversation write may set; absent keys stay as they are (a new row takes the defaults)."""

    messages: bytes
    summary: str | None
    confirmation: tuple[str, JSONObject] | None
    """A new open confirmation (its token and its JSON), replacing any other; None closes it."""
    told_no_model: bool
    touch: bool
    """Set `updated_at` to now (any change of the memory does; a flag alone does not)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnState:
    """What a turn reads before the conversation layer starts: the conversation's stored state and the chat's
    model tokens today (for the daily budget)."""

    conversation: ConversationRecord | None
    """None when the conversation has no stored state yet."""
    tokens_today: int
    """Input + output tokens of every model call counted against the chat today (UTC)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnOpening:
    """Who a turn comes from and when, as the turn's first transaction reads it (one value, so the dispatcher,
    the chats service and the repository share one signature)."""

    platform: str
    chat_external_id: str
    user_external_id: str
    thread_key: str
    day: date
    """The UTC day the turn's tokens count against."""
    now: datetime
    event_id: str | None = None
    """The update's de-duplication mark; None stores no mark (a retry that found its own)."""
    chat_title: str | None = None
    user_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart:
    """The one read of a turn: the chat and the person (stored or created), the conversation state."""

    chat: ChatRecord
    user: UserRecord
    state: TurnState


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorRecord:
    id: int
    owner_chat_id: int
    topic: str
    extra_queries: tuple[str, ...]
    include_keywords: tuple[str, ...]
    exclude_keywords: tuple[str, ...]
    sources: tuple[str, ...]
    """Source specs: names (`hn`) or `rss:<url>`."""
    schedule: str
    """The schedule as the person wrote it, in the grammar of `monitors`."""
    timezone: str
    lookback_hours: int
    language: str | None
    quiet: bool
    paused: bool
    plan: JSONObject | None
    plan_updated_at: datetime | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    consecutive_failures: int
    failure_notified_at: datetime | None
    created_at: datetime
    updated_at: datetime
    shared: bool = False
    """Listed in /browse: other chats may subscribe."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionRecord:
    id: int
    monitor_id: int
    chat_id: int
    active: bool
    """False while the chat is gone (blocked, kicked, archived)."""
    created_at: datetime
    paused: bool = False
    """The subscriber paused its own delivery; the monitor runs on for the others."""
    delivery: DeliveryMode = DeliveryMode.AUTO


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorListing:
    """One monitor as a chat's listing shows it, read in the listing's one statement."""

    monitor: MonitorRecord
    subscription: SubscriptionRecord | None
    """The listing chat's own subscription to it, if any."""
    receivers: int
    """Chats that receive its digests (active, delivery not paused)."""
    latest_run_stats: JSONObject | None
    """The stats of its most recent run (None before the first)."""
    reader_rules: JSONObject | None = None
    """The listing chat's own rules on it (`research.ReaderRules` as JSON), None when it has set none."""
    alerts: tuple[AlertRecord, ...] = ()
    """The listing chat's own alerts on it, oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    id: int
    monitor_id: int | None
    chat_id: int | None
    query: str | None
    scheduled_for: datetime
    status: RunStatus
    started_at: datetime
    finished_at: datetime | None
    stats: JSONObject
    digest: JSONObject | None
    artifacts: JSONObject
    error: str | None
    input_tokens: int
    output_tokens: int
    cost: float
    language_digests: JSONObject = field(default_factory=dict)
    """The digest in the other languages of the monitor's subscribers, by language code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOutcome:
    """What a finished run stores about itself."""

    finished_at: datetime
    stats: JSONObject = field(default_factory=dict)
    digest: JSONObject | None = None
    language_digests: JSONObject = field(default_factory=dict)
    """The digest in other languages, by language code (see `RunRecord.language_digests`)."""
    artifacts: JSONObject = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    alert_stories: list[JSONObject] = field(default_factory=list)
    """The run's stories its monitor's alerts are still to check (`{"key", "items", "earlier"}`): stored with the
    run as one pending check, so the check happens even when the process stops right after the run is stored."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRecord:
    """A collected item; field names follow `sources.Item` so one converts into the other directly."""

    id: str
    source: str
    url: str
    title: str
    text: str = ""
    author: str | None = None
    published: datetime | None = None
    engagement: dict[str, int | None] = field(default_factory=dict)
    language: str | None = None
    query: str = ""
    collected_at: datetime
    first_seen_at: datetime | None = None
    """Set by the database on the first insert; ignored on input."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemScore:
    """How a run judged one item: what `DeliveryRepository.complete_run` stores per item."""

    item_id: str
    relevance: float | None = None
    credibility: float | None = None
    score: float | None = None
    cluster_id: str | None = None
    rank: int | None = None
    delivered: bool = False
    """The item made it into the digest: the monitor's novelty filter skips it next time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunItemRecord(ItemScore):
    """An item's place in one run: its scores, cluster and whether the digest used it."""

    run_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemWithScores:
    """A stored item with the scores of the most recent run that included it (exports, the data tools)."""

    item: ItemRecord
    scores: RunItemRecord
    """The scores from the most recent run that included the item."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryRecord:
    id: int
    run_id: int
    chat_id: int
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None
    parts_sent: int = 0
    """Parts of the message confirmed sent (a resend starts after them)."""
    claimed_by: str | None = None
    """The worker whose claim is on the row until `next_attempt_at`."""
    rendered_language: str | None = None
    rendered_timezone: str | None = None
    """Language ("" for the monitor's own) and timezone of the parts already sent; None before the first part."""
    left_out: JSONObject | None = None
    """What the chat's own rules took out of the digest (`research.RulesDecision` as JSON); None: nothing decided."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotals:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def total(cls, parts: Iterable[UsageTotals]) -> UsageTotals:
        """Several totals added up."""
        items = list(parts)
        return cls(
            requests=sum(p.requests for p in items),
            input_tokens=sum(p.input_tokens for p in items),
            output_tokens=sum(p.output_tokens for p in items),
            cost=sum(p.cost for p in items),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageEntry(UsageTotals):
    """Model usage to add to a chat's day, under what the calls were for (`research.UsageKind`): totals with a
    kind, so `UsageTotals.total` adds entries up too."""

    kind: str
    requests: int = 1
    """Model calls (one unless said)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DailyUsage:
    chat_id: int
    day: date
    totals: UsageTotals


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpValidatorRecord:
    url: str
    etag: str | None
    last_modified: str | None
    body: bytes | None
    content_type: str | None
    updated_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceFailureRecord:
    """A monitor's source that failed in its latest runs (see `SourceFailureRepository`)."""

    monitor_id: int
    spec: str
    failures: int
    """Runs in a row in which it failed."""
    last_reason: str
    first_failed_at: datetime
    last_failed_at: datetime
    retry_at: datetime | None
    """Runs before this leave the source out."""
    notified_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlertRecord:
    """A chat's alert on a monitor (see `AlertRepository`)."""

    id: int
    chat_id: int
    monitor_id: int
    monitor_topic: str
    topic: str
    condition: str
    created_at: datetime
    fired: int = 0
    """Stories it fired for so far."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingAlertCheckRecord:
    """A stored run whose alerts are still to be checked (see `RunOutcome.alert_stories`)."""

    run_id: int
    monitor_id: int
    stories: list[JSONObject]
    created_at: datetime
