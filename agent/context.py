"""What the conversation layer works with: the process-wide services and the one message being handled."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from agent.access import AccessPolicy
from agent.messages import Incoming
from kernel import Clock, ProgressSink, ProgressUpdate, utc_now
from monitors import ChatService, ItemService, MonitorService, SourceResolver, effective_timezone
from research import ModelSet
from sources import HttpClient
from storage import ChatRecord, TurnState, UserRecord

__all__ = [
    "DEFAULT_CONFIRMATION_TTL",
    "AfterReply",
    "ConversationSettings",
    "Services",
    "Turn",
    "chat_timezone",
    "ignore_progress",
]

DEFAULT_CONFIRMATION_TTL = timedelta(minutes=10)
"""How long a proposal waits for "yes": long enough to read it and think, short enough that a stray "yes" an hour
later does not change anything."""

AfterReply = Callable[[], Awaitable[None]]
"""Work a turn leaves for after its reply is delivered (a memory fold)."""


async def ignore_progress(_update: ProgressUpdate) -> None:
    """A progress sink for callers that show no progress (scripts, tests of a single reply)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationSettings:
    """The settings the conversation layer reads (built from `app.settings.Settings`)."""

    default_timezone: str = "UTC"
    """TIMEZONE: a chat's timezone until it sets one with /timezone."""
    min_interval_seconds: int = 900
    """MIN_MONITOR_INTERVAL."""
    chat_daily_tokens: int = 200_000
    """CHAT_DAILY_TOKENS: model tokens per chat per day; 0 means no limit."""
    memory_turns: int = 10
    """MEMORY_TURNS."""
    memory_idle_hours: float = 24.0
    """MEMORY_IDLE_HOURS."""
    request_limit: int = 12
    """AGENT_REQUEST_LIMIT: model requests per message."""
    token_limit: int = 60_000
    """AGENT_TOKEN_LIMIT: model tokens per message."""
    exports_dir: Path = Path("data/exports")
    """DATA_DIR/exports: where CSVs, metadata and charts for chats are written."""
    llm_unavailable_reason: str | None = None
    """Why no model is configured (from `Settings.llm_unavailable_reason()`), said once per conversation."""
    bot_username: str | None = None
    """The bot's @username on platforms that have one (commands addressed to other bots are ignored)."""
    confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL
    """How long a proposal (the chat agent's, /track's offer, /import's list) stays open."""
    public_url: str | None = None
    """PUBLIC_URL: where people reach `lookout run`'s HTTP server (feed URLs start with it); None: not set."""


@dataclass(frozen=True, kw_only=True)
class Services:
    """Everything the commands and the chat agent use, built once per process and shared by every chat."""

    chats: ChatService
    """Chats, turns, conversations and usage in storage (the conversation layer builds no repository: it asks
    this service, `items` or `monitors`)."""
    items: ItemService
    """The items collected for chats: history search, timelines, a monitor's items for /export, /collect stored."""
    monitors: MonitorService
    resolve_sources: SourceResolver
    """`hn,news,rss:<url>` specs to sources; raises ValueError naming unknown or switched-off ones."""
    http: HttpClient
    """The one polite HTTP client (read_page goes through it, SSRF guard included)."""
    models: ModelSet
    """The process's language models (the same set the monitor pipeline uses): `models.light` answers the chat,
    writes memory summaries and plans collections, falling back to the heavy model."""
    settings: ConversationSettings = field(default_factory=ConversationSettings)
    clock: Clock = field(default=utc_now)
    access: AccessPolicy = field(default_factory=AccessPolicy)
    """ALLOWED_*/ADMIN_USERS: the dispatcher checks people; sharing also checks the chat itself."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One incoming message being handled: what was said, in which chat, by whom, and where progress goes.

    The dispatcher builds it after the access check, with the chat and user rows already stored.
    """

    incoming: Incoming
    chat: ChatRecord
    """The chat's stored row (its timezone, language, profile)."""
    user: UserRecord
    """The person's stored row."""
    is_admin: bool = False
    """The person is in ADMIN_USERS: may see and manage every chat's monitors."""
    progress: ProgressSink = ignore_progress
    """Where status lines for long work go; the adapter shows them as one edited message."""
    state: TurnState | None = None
    """The conversation's stored state and the chat's tokens today, read by the dispatcher in the turn's one read;
    None when the turn was built elsewhere (the conversation layer then reads it itself)."""
    after_reply: list[AfterReply] = field(default_factory=list)
    """Work for after the reply is delivered (memory folds): the dispatcher runs it in the background, and the
    conversation's next turn waits for it if it is still running. Whoever builds a turn runs what is left here."""


def chat_timezone(turn: Turn, services: Services) -> str:
    """The IANA timezone this chat's times and schedules are in (its own, else TIMEZONE)."""
    return effective_timezone(turn.chat, services.settings.default_timezone)
