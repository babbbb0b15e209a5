"""Typed configuration: the only code that reads the environment or `.env`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sources import SourcesConfig, parse_platforms

DEFAULT_LIGHT_MODEL = "google:gemini-3.5-flash-lite"
DEFAULT_HEAVY_MODEL = "google:gemini-3.8-flash"
DEFAULT_EMBEDDING_MODEL = "google:gemini-embedding-001"

LOCAL_CONTEXT_TOKENS = 8192
"""The context budget for local servers (Ollama, llama.cpp, vLLM) unless LLM_CONTEXT_TOKENS says: what small models
are commonly served with (`--n_ctx 8192`)."""
PROVIDER_CONTEXT_TOKENS = {
    "google": 1_000_000,
    "openai": 128_000,
    "openai-chat": 128_000,
    "anthropic": 200_000,
}
"""The context budget of hosted providers' current models (their smallest common window)."""
EMBEDDING_BY_PROVIDER = {"google": DEFAULT_EMBEDDING_MODEL, "openai": "openai:text-embedding-3-small"}
"""The embedding model that follows LLM_MODEL's provider when EMBEDDING_MODEL is unset (providers without embeddings
turn them off)."""


def _embedding_for(llm_model: str, *, openai_base_url: str | None) -> str:
    if not llm_model:
        return DEFAULT_EMBEDDING_MODEL  # no chat model: Gemini's embeddings still cluster stories when keyed
    provider = llm_model.split(":", 1)[0] if ":" in llm_model else ""
    if provider == "openai-chat":
        provider = "openai"
    if provider == "openai" and openai_base_url:
        return ""  # an OpenAI-compatible server's embedding model (if any) cannot be guessed
    return EMBEDDING_BY_PROVIDER.get(provider, "")


_SOURCES = SourcesConfig()
"""The sources' own defaults (public endpoints, User-Agent, RSSHub platforms): stated there, read here."""

CommaList = Annotated[list[str], NoDecode]
"""A list given in the environment as comma-separated values (`ALLOWED_USERS=123,456`)."""


class SettingsError(Exception):
    """The configuration cannot work; the message is one sentence naming the variable."""


class Settings(BaseSettings):
    """Everything Lookout can be told from outside. Field names map to UPPER_CASE variables."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        validate_default=True,
    )

    # Core
    database_url: str = ""
    """SQLAlchemy async URL: `sqlite+aiosqlite:///path` or `postgresql+asyncpg://...`; unset means
    `lookout.db` in DATA_DIR (`sqlite+aiosqlite:///./data/lookout.db` with the default DATA_DIR)."""
    data_dir: Path = Path("./data")
    """Where exports (CSV, JSON, charts) and the default database live."""
    log_level: str = "INFO"
    timezone: str = "UTC"
    """Default IANA timezone for new chats and schedules."""

    # Scale-out (several processes on one PostgreSQL; see docs/architecture.md)
    job_queue: Literal["embedded", "procrastinate"] = "embedded"
    """`embedded`: one process schedules (ticking over the database) and delivers itself (SQLite or PostgreSQL);
    `procrastinate`: monitor runs and deliveries are jobs on PostgreSQL that any `lookout run` process takes."""
    worker_concurrency: int = Field(default=16, ge=1, le=500)
    """Jobs (monitor runs, deliveries) one worker process runs at the same time."""
    worker_heartbeat_seconds: float = Field(default=10.0, gt=0, le=300)
    """How often a worker says it is alive; a worker silent for three times this is presumed dead and its
    jobs are retried by another."""
    shutdown_grace_seconds: float = Field(default=30.0, ge=0, le=3600)
    """On SIGTERM, how long jobs under way may take to finish before they are handed back to the queue."""
    leader_check_seconds: float = Field(default=5.0, gt=0, le=60)
    """How often a process that does not hold a one-per-cluster duty (Telegram long polling) tries to take it."""

    # Models
    llm_model: str = DEFAULT_LIGHT_MODEL
    """Light model for chat and planning: any pydantic-ai model string; empty turns the LLM off."""
    llm_heavy_model: str = ""
    """Heavy model for critique and synthesis; unset (or empty) means LLM_MODEL, or the default heavy Gemini model
    while LLM_MODEL is the default light one."""
    gemini_api_key: SecretStr | None = None
    gemini_base_url: str | None = None
    openai_api_key: SecretStr | None = None
    """Key of OpenAI or of an OpenAI-compatible server (`openai:` and `openai-chat:` models)."""
    openai_base_url: str | None = None
    """An OpenAI-compatible server (llama.cpp, vLLM, LM Studio, OpenRouter…), e.g. http://127.0.0.1:8080/v1."""
    ollama_base_url: str | None = None
    """Ollama's OpenAI-compatible root for `ollama:` models, e.g. http://localhost:11434/v1."""
    ollama_api_key: SecretStr | None = None
    """Only for an Ollama behind a proxy that asks for one."""
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    embedding_model: str = "auto"
    """Embedding model for story clustering (any pydantic-ai embedding model string); `auto` follows the provider
    of LLM_MODEL where it has embeddings (Gemini, OpenAI), else off; empty turns it off, and stories are then
    clustered by their words alone."""
    llm_context_tokens: int | None = Field(default=None, ge=1024)
    """The context size every prompt is budgeted to, output included; unset: a default per provider (8192 for
    local servers: Ollama, an OPENAI_BASE_URL; 128000 for OpenAI, 200000 for Anthropic, 1000000 for Gemini)."""
    llm_chat_max_tokens: int = Field(default=1024, ge=16)
    """Output limit of each response in a chat turn."""
    llm_plan_max_tokens: int = Field(default=800, ge=16)
    """Output limit of a monitor's query plan."""
    llm_critique_max_tokens: int = Field(default=2048, ge=16)
    """Output limit of the critique of a run's top items."""
    llm_synthesis_max_tokens: int = Field(default=2048, ge=16)
    """Output limit of a digest."""
    llm_summary_max_tokens: int = Field(default=512, ge=16)
    """Output limit of a conversation's rolling summary."""
    llm_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Deadline of one model request (the SDK's own retries are off; Lookout retries server errors, not timeouts)."""
    llm_run_seconds: float = Field(default=300.0, gt=0, le=7200)
    """Deadline of a whole chat turn (its requests and tool calls together)."""
    llm_pipeline_seconds: float = Field(default=600.0, gt=0, le=14400)
    """Deadline of a monitor run's model stages together (plan, critique, a digest per language); the stages left
    when it passes are done without the model (heuristic critique, extractive digest)."""
    llm_output_mode: Literal["tool", "native", "prompted", "json_object"] = "tool"
    """How structured output (plans, critiques, digests) is asked for: `tool` a tool call; `native` the server's
    JSON-schema response format (Ollama, llama.cpp's llama-server constrain to it); `prompted` the schema in the
    prompt; `json_object` the schema in the prompt and in a `json_object` response format (llama-cpp-python's server,
    which refuses `json_schema`, constrains to it)."""
    llm_chat_tools: Literal["auto", "all", "by_message"] = "auto"
    """Which chat tools a turn is offered: `all`, or `by_message` (a core pair plus those its words are about, so a
    small model is not drowned in tool definitions); `auto` chooses by message when LLM_CONTEXT_TOKENS ≤ 8192."""
    llm_max_tool_calls: int = Field(default=3, ge=1, le=50)
    """Tool calls one model response may make; more are refused with a message, not run."""
    llm_max_tool_calls_per_turn: int = Field(default=8, ge=1, le=200)
    """Tool calls one chat message may cause in all."""

    # Telegram
    telegram_bot_token: SecretStr | None = None
    telegram_api_url: str = "https://api.telegram.org"
    telegram_webhook_url: str | None = None
    telegram_webhook_secret: SecretStr | None = None
    telegram_max_messages: float = Field(default=30.0, gt=0)
    """Messages the bot may send per TELEGRAM_RATE_PERIOD over all chats (Telegram allows about 30 per second)."""
    telegram_rate_period: float = Field(default=1.0, gt=0)
    """Seconds over which TELEGRAM_MAX_MESSAGES is counted."""
    telegram_group_max_messages: float = Field(default=20.0, gt=0)
    """Messages the bot may send to one group per TELEGRAM_GROUP_RATE_PERIOD (Telegram allows 20 a minute)."""
    telegram_group_rate_period: float = Field(default=60.0, gt=0)
    """Seconds over which TELEGRAM_GROUP_MAX_MESSAGES is counted."""

    # Slack
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    slack_channel_interval: float = Field(default=1.0, ge=0)
    """Seconds between two messages to one Slack channel (Slack allows about one a second)."""

    # HTTP server
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8080, ge=1, le=65535)
    public_url: str | None = None
    """PUBLIC_URL: where people reach this HTTP server (`https://lookout.example.org`); the feeds' and digest pages'
    URLs start with it, and every chat digest links its page. Unset: commands give the path only and say to set it,
    and digests go without the link."""

    # Access
    allowed_users: CommaList = Field(default_factory=list)
    allowed_chats: CommaList = Field(default_factory=list)
    admin_users: CommaList = Field(default_factory=list)

    # Monitors
    min_monitor_interval: int = Field(default=900, ge=60)
    """Seconds; no monitor may run more often."""
    delivery_lease_seconds: float = Field(default=30.0, ge=2.0, le=3600.0)
    """How long a delivery claim holds without renewal (renewed every third of it while sending); a crashed
    process's claims on this host are taken back at its restart, other hosts' when the lease ends."""
    scheduler_poll_seconds: float = Field(default=0.0, ge=0, le=300.0)
    """Longest sleep of the scheduler between two looks at the database; 0: 5 s on SQLite, where a change made by
    another process is seen only by looking, 60 s on PostgreSQL, where changes are announced."""
    delivery_poll_seconds: float = Field(default=5.0, gt=0, le=300.0)
    """How often the delivery worker looks for due outbox rows (new digests wake it at once)."""
    destination_pause_days: float = Field(default=3.0, gt=0, le=365.0)
    """A destination (email, webhook, …) failing this many days without a success is paused and its adder told."""

    # Conversation
    chat_daily_tokens: int = Field(default=200_000, ge=0)
    """Model tokens one chat may use per day (0: no limit); its monitors' runs count too, and once it is spent their
    scheduled runs make their digests without the model (`monitors.ChatBudget`)."""
    memory_turns: int = Field(default=10, ge=1, le=100)
    """Turns of conversation the agent sees word for word (at least); older ones are folded into a rolling summary
    in batches of half as many (`agent.memory.fold_batch`), after a reply."""
    memory_idle_hours: float = Field(default=24.0, gt=0)
    """After this much silence the next message starts a fresh conversation (the summary carries over)."""
    agent_request_limit: int = Field(default=12, ge=1, le=100)
    """Model requests one chat message may cause (tool calls included)."""
    agent_token_limit: int = Field(default=60_000, ge=1000)
    """Model tokens one chat message may use, input and output together."""

    # Sources: endpoints and defaults are stated once, in `sources.SourcesConfig`; these read them.
    allow_private_urls: bool = False
    """Let feed and page URLs reach private addresses (self-hosted feeds, tests)."""
    http_user_agent: str = _SOURCES.user_agent
    hn_api_url: str = _SOURCES.hn_api_url
    news_rss_url: str = _SOURCES.news_rss_url
    arxiv_api_url: str = _SOURCES.arxiv_api_url
    github_api_url: str = _SOURCES.github_api_url
    github_token: SecretStr | None = None
    reddit_api_url: str = _SOURCES.reddit_api_url
    reddit_auth_url: str = _SOURCES.reddit_auth_url
    reddit_client_id: str | None = None
    reddit_client_secret: SecretStr | None = None
    wikipedia_api_url: str = _SOURCES.wikipedia_api_url
    openalex_api_url: str = _SOURCES.openalex_api_url
    openalex_api_key: SecretStr | None = None
    semanticscholar_api_url: str = _SOURCES.semanticscholar_api_url
    semanticscholar_api_key: SecretStr | None = None
    x_api_url: str = _SOURCES.x_api_url
    x_bearer_token: SecretStr | None = None
    rsshub_url: str | None = None
    rsshub_platforms: CommaList = Field(default_factory=lambda: list(_SOURCES.rsshub_platforms))
    """Platforms the `rsshub` source searches: weibo, bilibili, tieba, zhihu, xiaohongshu, douyin."""

    @field_validator("allowed_users", "allowed_chats", "admin_users", "rsshub_platforms", mode="before")
    @classmethod
    def _split_commas(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator(
        "gemini_api_key",
        "gemini_base_url",
        "openai_api_key",
        "openai_base_url",
        "ollama_base_url",
        "ollama_api_key",
        "anthropic_api_key",
        "anthropic_base_url",
        "llm_context_tokens",
        "telegram_bot_token",
        "telegram_webhook_url",
        "telegram_webhook_secret",
        "public_url",
        "slack_bot_token",
        "slack_app_token",
        "slack_signing_secret",
        "github_token",
        "reddit_client_id",
        "reddit_client_secret",
        "openalex_api_key",
        "semanticscholar_api_key",
        "x_bearer_token",
        "rsshub_url",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # `.env.example` copies leave `KEY=` lines; an empty value means "not configured".
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("rsshub_platforms")
    @classmethod
    def _known_platforms(cls, value: list[str]) -> list[str]:
        return list(parse_platforms(value))

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError(f"LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, not {value!r}")
        return level

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"TIMEZONE must be an IANA name such as Europe/Berlin, not {value!r}") from None
        return value

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if value and not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "DATABASE_URL must start with sqlite+aiosqlite:// or postgresql+asyncpg://, "
                f"not {value.split(':', 1)[0]!r}"
            )
        return value

    @field_validator(
        "telegram_api_url",
        "slack_api_url",
        "gemini_base_url",
        "openai_base_url",
        "ollama_base_url",
        "anthropic_base_url",
        "hn_api_url",
        "news_rss_url",
        "arxiv_api_url",
        "github_api_url",
        "reddit_api_url",
        "reddit_auth_url",
        "openalex_api_url",
        "semanticscholar_api_url",
        "x_api_url",
        "rsshub_url",
        "public_url",
    )
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
            raise ValueError(f"must be an http(s) URL, not {value!r}")
        return value

    @field_validator("llm_model", "llm_heavy_model")
    @classmethod
    def _trimmed(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if not self.llm_heavy_model:
            # LLM_MODEL alone switches both models; the default heavy Gemini model goes with the default light one
            self.llm_heavy_model = DEFAULT_HEAVY_MODEL if self.llm_model == DEFAULT_LIGHT_MODEL else self.llm_model
        if self.embedding_model.strip().lower() == "auto":
            self.embedding_model = _embedding_for(self.llm_model, openai_base_url=self.openai_base_url)
        if not self.database_url:
            path = self.data_dir / "lookout.db"
            prefix = "" if path.is_absolute() else "./"
            self.database_url = f"sqlite+aiosqlite:///{prefix}{path.as_posix()}"
        if self.slack_bot_token and not (self.slack_app_token or self.slack_signing_secret):
            raise ValueError(
                "SLACK_BOT_TOKEN is set but Slack needs SLACK_APP_TOKEN (Socket Mode) "
                "or SLACK_SIGNING_SECRET (HTTP mode) as well"
            )
        if (self.slack_app_token or self.slack_signing_secret) and not self.slack_bot_token:
            raise ValueError("SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is missing")
        if self.slack_app_token and not self.slack_app_token.get_secret_value().startswith("xapp-"):
            raise ValueError("SLACK_APP_TOKEN must be an app-level token starting with xapp-")
        if self.telegram_webhook_url:
            if not self.telegram_bot_token:
                raise ValueError("TELEGRAM_WEBHOOK_URL is set but TELEGRAM_BOT_TOKEN is missing")
            if not self.telegram_webhook_url.startswith("https://"):
                raise ValueError("TELEGRAM_WEBHOOK_URL must be an https:// URL (Telegram refuses others)")
            if not self.telegram_webhook_secret:
                raise ValueError("TELEGRAM_WEBHOOK_URL is set but TELEGRAM_WEBHOOK_SECRET is missing")
        if self.job_queue == "procrastinate" and not self.database_url.startswith("postgresql"):
            raise ValueError(
                "JOB_QUEUE=procrastinate needs a PostgreSQL DATABASE_URL (postgresql+asyncpg://…); "
                "with SQLite, leave JOB_QUEUE unset and Lookout runs as one process"
            )
        if bool(self.reddit_client_id) != bool(self.reddit_client_secret):
            raise ValueError("REDDIT_CLIENT_ID and REDDIT_CLIENT_SECRET must be set together")
        return self

    @property
    def scaled_out(self) -> bool:
        """Whether monitor runs and deliveries are jobs shared by several processes (JOB_QUEUE=procrastinate)."""
        return self.job_queue == "procrastinate"

    def secret_values(self) -> list[str]:
        """Every configured secret's value, for the log scrubber."""
        values = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr) and value.get_secret_value():
                values.append(value.get_secret_value())
        return values

    def embedding_unavailable_reason(self) -> str | None:
        """Why stories are clustered without embeddings, or `None` when the embedding model is usable."""
        name = self.embedding_model.strip()
        if not name:
            return (
                "EMBEDDING_MODEL is empty (or LLM_MODEL's provider has no embeddings), "
                "so stories are clustered by their words"
            )
        missing = self._missing_key(name, variable="EMBEDDING_MODEL")
        if missing is not None:
            return f"{missing}, so stories are clustered by their words"
        return None

    @property
    def provider_of_light_model(self) -> str:
        """The provider prefix of LLM_MODEL (`google`, `openai-chat`, `ollama`, …), empty without a model."""
        return self.llm_model.split(":", 1)[0] if ":" in self.llm_model else ""

    def context_tokens(self) -> int:
        """LLM_CONTEXT_TOKENS, or the default for LLM_MODEL's provider (a local server: a small model's 8192)."""
        if self.llm_context_tokens is not None:
            return self.llm_context_tokens
        provider = self.provider_of_light_model
        if provider == "ollama" or (provider.startswith("openai") and self.openai_base_url):
            return LOCAL_CONTEXT_TOKENS
        return PROVIDER_CONTEXT_TOKENS.get(provider, LOCAL_CONTEXT_TOKENS)

    def _missing_key(self, model: str, *, variable: str) -> str | None:
        """Why `model` cannot be asked for lack of a key or URL (one sentence naming the variable), or None."""
        provider = model.split(":", 1)[0] if ":" in model else ""
        if provider == "google" and self.gemini_api_key is None:
            return f"{variable} is {model!r} but GEMINI_API_KEY is not set; get a key at aistudio.google.com"
        if provider in ("openai", "openai-chat") and self.openai_api_key is None and self.openai_base_url is None:
            return (
                f"{variable} is {model!r} but neither OPENAI_API_KEY nor OPENAI_BASE_URL (an OpenAI-compatible "
                "server such as llama.cpp or vLLM) is set"
            )
        if provider == "anthropic" and self.anthropic_api_key is None:
            return f"{variable} is {model!r} but ANTHROPIC_API_KEY is not set"
        if provider == "ollama" and self.ollama_base_url is None:
            return f"{variable} is {model!r} but OLLAMA_BASE_URL is not set (e.g. http://localhost:11434/v1)"
        return None

    @property
    def exports_dir(self) -> Path:
        """DATA_DIR/exports: one folder per chat inside (see `research.chat_folder`), `cli/` for the command line."""
        return self.data_dir / "exports"

    def llm_unavailable_reason(self) -> str | None:
        """Why no language model can be used, or `None` when LLM_MODEL can be asked (one sentence naming the
        variable to change)."""
        if not self.llm_model:
            return "LLM_MODEL is empty, which turns the language model off; set it in .env"
        if self.llm_model == DEFAULT_LIGHT_MODEL and self.gemini_api_key is None:
            return "GEMINI_API_KEY is not set; get a key at aistudio.google.com and put it in .env"
        return self._model_problem("LLM_MODEL", self.llm_model)

    def heavy_model_problem(self) -> str | None:
        """Why LLM_HEAVY_MODEL cannot be asked while LLM_MODEL can (critique and synthesis then use LLM_MODEL), or
        None."""
        if self.llm_unavailable_reason() is not None or self.llm_heavy_model == self.llm_model:
            return None
        return self._model_problem("LLM_HEAVY_MODEL", self.llm_heavy_model)

    @property
    def heavy_model(self) -> str:
        """The heavy model that will be used: LLM_HEAVY_MODEL, or LLM_MODEL when that one cannot be asked."""
        return self.llm_model if self.heavy_model_problem() is not None else self.llm_heavy_model

    def _model_problem(self, variable: str, model: str) -> str | None:
        if ":" not in model:
            return (
                f"{variable} must name a provider and a model, such as openai-chat:qwen3 or ollama:llama3.2, "
                f"not {model!r}"
            )
        unknown = _unknown_provider(model, variable=variable)
        if unknown is not None:
            return unknown
        missing = self._missing_key(model, variable=variable)
        return f"{missing}; put it in .env" if missing is not None else None


def _unknown_provider(model: str, *, variable: str) -> str | None:
    """Why pydantic-ai cannot serve `model`'s provider (unknown, or its client library not installed), or None."""
    # Imported here: only the providers' registry, not their client libraries.
    from pydantic_ai.providers import infer_provider_class

    provider = model.split(":", 1)[0]
    try:
        infer_provider_class(provider)
    except ImportError:
        return (
            f"{variable}={model!r} needs the {provider!r} client library, which this install lacks "
            "(Lookout ships google, openai, ollama and anthropic)"
        )
    except Exception:
        return (
            f"{variable}={model!r} names an unknown provider {provider!r}; use google:, openai-chat:, openai:, "
            "ollama: or anthropic:"
        )
    return None


def _variable_of(error_loc: tuple[int | str, ...]) -> str:
    return str(error_loc[0]).upper() if error_loc else ""


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment and `.env`; raise `SettingsError` with one clear sentence."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        variable = _variable_of(first["loc"])
        if variable and variable not in message:
            message = f"{variable}: {message}"
        raise SettingsError(f"Invalid configuration — {message}.") from None
