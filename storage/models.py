"""The database schema as SQLAlchemy declarative models; nothing outside storage/ sees these classes."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    Date,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from kernel import utc_now
from storage.records import DeliveryStatus, RunStatus
from storage.types import UTCDateTime

# Named constraints let Alembic alter them later (SQLite batch mode needs names to find them).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _enum(cls: type[StrEnum]) -> Enum:
    """A VARCHAR holding the enum's values (not a native PostgreSQL type: no ALTER TYPE later)."""
    return Enum(
        cls,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda members: [m.value for m in members],
    )


class Base(DeclarativeBase):
    """Base of every table; shares one metadata with a naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime(), dict[str, Any]: JSON(), list[str]: JSON()}


class Chat(Base):
    __tablename__ = "chats"
    __table_args__ = (UniqueConstraint("platform", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str] = mapped_column(String(128))
    title: Mapped[str | None] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    language: Mapped[str | None] = mapped_column(String(16))
    profile: Mapped[str | None] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    briefing_schedule: Mapped[str | None] = mapped_column(String(200))
    """The chat's morning briefing, in the schedule grammar of `monitors` (with its zone); NULL: no briefing."""
    briefing_next_at: Mapped[datetime | None] = mapped_column(index=True)
    briefing_since: Mapped[datetime | None] = mapped_column()
    """Runs that finished after this go into the next briefing."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class User(Base):
    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("platform", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str] = mapped_column(String(128))
    display_name: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = (UniqueConstraint("chat_id", "thread_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    thread_key: Mapped[str] = mapped_column(String(128), default="")
    messages: Mapped[bytes] = mapped_column(LargeBinary)
    """pydantic-ai's JSON serialisation of the recent messages."""
    summary: Mapped[str | None] = mapped_column(Text)
    """Rolling summary of turns older than the ones kept in `messages`."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)
    confirmation_token: Mapped[str | None] = mapped_column(String(64))
    """The open confirmation's token (its buttons carry it); claimed atomically when answered."""
    confirmation: Mapped[dict[str, Any] | None] = mapped_column()
    """The open confirmation of proposed monitor changes (the conversation layer's JSON)."""
    told_no_model: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    """The person was told that free text needs a language model (the full explanation is said once)."""
    revision: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Grows with every write, so a background fold never overwrites newer turns."""


class Monitor(Base):
    __tablename__ = "monitors"
    __table_args__ = (Index("ix_monitors_due", "paused", "next_run_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner_chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    topic: Mapped[str] = mapped_column(Text)
    extra_queries: Mapped[list[str]] = mapped_column(default=list)
    include_keywords: Mapped[list[str]] = mapped_column(default=list)
    exclude_keywords: Mapped[list[str]] = mapped_column(default=list)
    sources: Mapped[list[str]] = mapped_column(default=list)
    schedule: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    lookback_hours: Mapped[int] = mapped_column(Integer, default=24)
    language: Mapped[str | None] = mapped_column(String(16))
    quiet: Mapped[bool] = mapped_column(Boolean, default=True)
    """Send nothing when a run finds nothing new (the default); False: a one-line "nothing new" note."""
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    shared: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Listed in /browse: chats other than the owner may subscribe."""
    plan: Mapped[dict[str, Any] | None] = mapped_column()
    plan_updated_at: Mapped[datetime | None] = mapped_column()
    next_run_at: Mapped[datetime | None] = mapped_column()
    last_run_at: Mapped[datetime | None] = mapped_column()
    last_status: Mapped[str | None] = mapped_column(String(32))
    last_error: Mapped[str | None] = mapped_column(Text)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    failure_notified_at: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)


class Subscription(Base):
    __tablename__ = "subscriptions"
    __table_args__ = (UniqueConstraint("monitor_id", "chat_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    """False while the chat is gone (blocked, kicked, archived); set again when someone writes there."""
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """The subscriber paused its own delivery (the monitor runs on for the others)."""
    delivery: Mapped[str] = mapped_column(String(16), default="auto", server_default="auto")
    """"now" (a message per run), "briefing" (in the chat's briefing) or "auto" (briefing when it has one)."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class Run(Base):
    __tablename__ = "runs"
    # NULL monitor ids (one-off searches) never collide: NULLs are distinct in unique constraints.
    __table_args__ = (UniqueConstraint("monitor_id", "scheduled_for"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    monitor_id: Mapped[int | None] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    chat_id: Mapped[int | None] = mapped_column(ForeignKey("chats.id", ondelete="SET NULL"), index=True)
    """The chat that asked for a one-off search; NULL for scheduled runs."""
    query: Mapped[str | None] = mapped_column(Text)
    scheduled_for: Mapped[datetime] = mapped_column()
    status: Mapped[RunStatus] = mapped_column(_enum(RunStatus), default=RunStatus.RUNNING)
    started_at: Mapped[datetime] = mapped_column(default=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column()
    stats: Mapped[dict[str, Any]] = mapped_column(default=dict)
    digest: Mapped[dict[str, Any] | None] = mapped_column()
    language_digests: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    """The digest written again in the other languages of the monitor's subscribers: {"de": {...}}."""
    artifacts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """Where the exported files went, e.g. {"csv": "...", "chart": "..."}."""
    error: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)


class Item(Base):
    __tablename__ = "items"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    source: Mapped[str] = mapped_column(String(64), index=True)
    url: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text, default="")
    author: Mapped[str | None] = mapped_column(Text)
    """Text, not VARCHAR: a paper can list hundreds of authors."""
    published_at: Mapped[datetime | None] = mapped_column(index=True)
    engagement: Mapped[dict[str, Any]] = mapped_column(default=dict)
    language: Mapped[str | None] = mapped_column(String(64))
    query: Mapped[str] = mapped_column(Text, default="")
    collected_at: Mapped[datetime] = mapped_column(index=True)
    first_seen_at: Mapped[datetime] = mapped_column(default=utc_now)


class RunItem(Base):
    __tablename__ = "run_items"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), primary_key=True, index=True)
    relevance: Mapped[float | None] = mapped_column(Float)
    credibility: Mapped[float | None] = mapped_column(Float)
    score: Mapped[float | None] = mapped_column(Float)
    cluster_id: Mapped[str | None] = mapped_column(Text)
    rank: Mapped[int | None] = mapped_column(Integer)
    delivered: Mapped[bool] = mapped_column(Boolean, default=False)
    """The item made it into the digest: the monitor's novelty filter skips it next time."""


class Delivery(Base):
    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("run_id", "chat_id"), Index("ix_deliveries_due", "status", "next_attempt_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    status: Mapped[DeliveryStatus] = mapped_column(_enum(DeliveryStatus), default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utc_now)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    sent_at: Mapped[datetime | None] = mapped_column()
    parts_sent: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Parts of the message confirmed sent; a resend starts after them."""
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    """The process (worker identity) whose claim is on the row while `next_attempt_at` is in the future."""
    rendered_language: Mapped[str | None] = mapped_column(String(35))
    rendered_timezone: Mapped[str | None] = mapped_column(String(64))
    """The reader's language ("" for the monitor's own) and timezone the message was rendered in when its first part
    was confirmed sent: a resend goes on in that rendering even if the chat changed /language or /timezone since."""
    left_out: Mapped[dict[str, Any] | None] = mapped_column()
    """What this chat's own rules took out of the run's digest, decided when its message was first built: each
    dropped story's cited numbers, title and the rule that dropped it (`research.RulesDecision`); None: no rules."""


class Usage(Base):
    __tablename__ = "usage"
    __table_args__ = (UniqueConstraint("chat_id", "day", "kind"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    day: Mapped[date] = mapped_column(Date)
    kind: Mapped[str] = mapped_column(String(32), default="chat", server_default="earlier")
    """What the calls were for (`research.UsageKind`); rows from before kinds were kept say "earlier"."""
    requests: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)


class ProcessedInbound(Base):
    __tablename__ = "processed_inbound"
    __table_args__ = (UniqueConstraint("platform", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str] = mapped_column(String(128))
    received_at: Mapped[datetime] = mapped_column(default=utc_now, index=True)


class HttpValidator(Base):
    __tablename__ = "http_validators"

    url_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 of the URL: URLs can outgrow what an index accepts."""
    url: Mapped[str] = mapped_column(Text)
    etag: Mapped[str | None] = mapped_column(Text)
    last_modified: Mapped[str | None] = mapped_column(String(64))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    """The last 200 body, served again on a 304."""
    content_type: Mapped[str | None] = mapped_column(String(255))
    """The body's Content-Type (its charset decodes the body served on a 304)."""
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)


class RateSlot(Base):
    """The next free send slot of one rate limit (a platform token overall, one group, one channel), shared by
    every process: the generic cell rate algorithm keeps one "theoretical arrival time" per limit."""

    __tablename__ = "rate_slots"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    tat: Mapped[float] = mapped_column(Float)
    """The theoretical arrival time of the next message, in seconds since the epoch on the database's clock."""


class ItemEmbedding(Base):
    __tablename__ = "item_embeddings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    """SHA-256 of model, vector size and the embedded text (title + lead): the same text is embedded once."""
    model: Mapped[str] = mapped_column(String(128))
    dimensions: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    """Little-endian float32 values."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class SourceFailure(Base):
    """A source of a monitor that failed in its latest runs; the row goes when the source works again."""

    __tablename__ = "source_failures"
    __table_args__ = (UniqueConstraint("monitor_id", "spec_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"), index=True)
    spec_key: Mapped[str] = mapped_column(String(64))
    """SHA-256 of the spec: a feed's spec holds its URL, which can outgrow what an index accepts."""
    spec: Mapped[str] = mapped_column(Text)
    """`hn`, `rss:<url>`, …"""
    failures: Mapped[int] = mapped_column(Integer, default=0)
    """Runs in a row in which the source failed."""
    last_reason: Mapped[str] = mapped_column(Text, default="")
    first_failed_at: Mapped[datetime] = mapped_column(default=utc_now)
    last_failed_at: Mapped[datetime] = mapped_column(default=utc_now)
    retry_at: Mapped[datetime | None] = mapped_column()
    """Runs before this leave the source out (backed off); None while it is still asked every run."""
    notified_at: Mapped[datetime | None] = mapped_column()
    """When the monitor's owner was told the source keeps failing (once per streak)."""


class DigestPage(Base):
    """The unguessable token in the URL of one digest's web page (and of its files): one per run, made on first use.
    A token per digest rather than the monitor's feed token, so a forwarded link shows that digest and nothing else.
    """

    __tablename__ = "digest_pages"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class FeedToken(Base):
    """The unguessable token in the feed URLs of a monitor or of a chat's briefing (exactly one of the two); a new
    token replaces (revokes) the old."""

    __tablename__ = "feed_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    monitor_id: Mapped[int | None] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"), unique=True)
    chat_id: Mapped[int | None] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), unique=True)
    """The chat whose briefing the feed lists."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class Destination(Base):
    """A place outside the chat platforms that receives digests (an Apprise URL: email, Discord, ntfy, …, or a signed
    webhook). It is a chat of its own (`chat_id`, platform "apprise" or "webhook"), so subscriptions, the outbox and
    briefings treat it like any chat; this row holds what only it has: its URL (a secret) and its failure streak."""

    __tablename__ = "destinations"

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), unique=True)
    """The destination's own chat row (what subscriptions and outbox rows point at)."""
    added_by_chat_id: Mapped[int | None] = mapped_column(ForeignKey("chats.id", ondelete="SET NULL"), index=True)
    """The chat that added it: it may list, test and remove it, and is told when it keeps failing (None: the CLI)."""
    kind: Mapped[str] = mapped_column(String(16))
    """"email", "chat" (any other Apprise service) or "webhook"."""
    url: Mapped[str] = mapped_column(Text)
    """The Apprise URL or the webhook's https URL: it carries credentials, so it is never logged or shown."""
    secret: Mapped[str | None] = mapped_column(String(128))
    """A webhook's HMAC-SHA256 key (shown once when added); None for Apprise URLs."""
    label: Mapped[str] = mapped_column(String(255))
    """The URL masked (what lists and messages show)."""
    briefing_of_chat_id: Mapped[int | None] = mapped_column(ForeignKey("chats.id", ondelete="SET NULL"), index=True)
    """The chat whose briefing this destination also receives (None: none)."""
    failing_since: Mapped[datetime | None] = mapped_column()
    """The first failure of the current streak (None: the last attempt went through)."""
    failure_told: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """The adding chat was told of the current streak (once per streak)."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class FeedbackMark(Base):
    """One reader's mark on a story of a monitor's digest (👍, 👎, fewer like this) or on an outlet (mute): per
    (monitor, chat), with what it needs to generalise without a model (the story's outlets, title and term weights)."""

    __tablename__ = "feedback_marks"
    __table_args__ = (Index("ix_feedback_marks_reader", "monitor_id", "chat_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    """more, less, fewer or mute."""
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    """The digest the story was in (None for a mute typed by outlet name, or once the run was cleaned up)."""
    story: Mapped[int | None] = mapped_column(Integer)
    """The story's number as that chat saw it in that digest."""
    title: Mapped[str] = mapped_column(Text, default="")
    outlets: Mapped[list[str]] = mapped_column(default=list)
    terms: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """Term → weight (L2-normalised), the clustering's own weighting."""
    vector: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    """The story's embedding when it had one (`research.StoryVector.to_json`: the model and the values)."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class ReaderViewRow(Base):
    """What one chat was shown of one run's digest after its marks (kept stories in order, dropped ones with their
    reasons): stored when the delivery's first part is built, so a resend and `/why` use the very same view."""

    __tablename__ = "reader_views"
    __table_args__ = (UniqueConstraint("run_id", "chat_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    view: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class ReaderRule(Base):
    """One chat's own rules on one monitor it receives (owned or subscribed): words, RE2 patterns, outlets, a cap
    and a minimum relevance, applied to its copy of each digest at delivery (`research.ReaderRules` as JSON)."""

    __tablename__ = "reader_rules"
    __table_args__ = (UniqueConstraint("monitor_id", "chat_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"))
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    rules: Mapped[dict[str, Any]] = mapped_column(default=dict)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now)


class Alert(Base):
    """A chat's standing "tell me at once when …" on a monitor it receives: checked against each run's new stories."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(primary_key=True)
    chat_id: Mapped[int] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"), index=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"), index=True)
    topic: Mapped[str] = mapped_column(Text)
    """What the alert is about, as the person said it (the monitor's topic when they named a monitor number)."""
    condition: Mapped[str] = mapped_column(Text)
    """What must happen, as the person said it ("it releases a new model")."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)


class AlertFiring(Base):
    """An alert that fired for a story: at most one row per (alert, story), so a story is told once."""

    __tablename__ = "alert_firings"
    __table_args__ = (UniqueConstraint("alert_id", "story_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    story_key: Mapped[str] = mapped_column(String(255))
    """The id of the story's first new item when it fired."""
    item_ids: Mapped[list[str]] = mapped_column(default=list)
    """Every item of the story when it fired: a later run's story sharing one of them is the same story."""
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    """The notice run that carries the message."""
    fired_at: Mapped[datetime] = mapped_column(default=utc_now)


class PendingAlertCheck(Base):
    """A stored run whose alerts are still to be checked: written in the run's own transaction and deleted once its
    alerts were checked, so a process that stops in between leaves it for the recovery pass (exactly once)."""

    __tablename__ = "pending_alert_checks"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    monitor_id: Mapped[int] = mapped_column(ForeignKey("monitors.id", ondelete="CASCADE"), index=True)
    stories: Mapped[list[Any]] = mapped_column(JSON, default=list)
    """The run's candidate stories: `{"key", "items", "earlier"}` with item ids, best-ranked first."""
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
