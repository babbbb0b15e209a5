"""Composition: turn settings into the objects the lower layers take (sources, HTTP client, the language models)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from app.settings import Settings
from sources import SourcesConfig
from storage import Database, upgrade_database
from storage.repositories import EmbeddingRepository

if TYPE_CHECKING:  # the model library and the sources load when a command builds them, not to open the database
    from pydantic_ai.models import Model
    from pydantic_ai.profiles.openai import OpenAIModelProfile

    from research import ItemEmbedder, ModelLimits, ModelSet, RetryPolicy
    from sources import HttpClient, Source

logger = logging.getLogger(__name__)


def sources_config(settings: Settings) -> SourcesConfig:
    """The sources' endpoints and keys, from the settings of the same names."""
    # Every SourcesConfig field has a setting of the same name, except the User-Agent.
    values: dict[str, object] = {
        field.name: getattr(settings, field.name) for field in fields(SourcesConfig) if field.name != "user_agent"
    }
    values["rsshub_platforms"] = tuple(settings.rsshub_platforms)
    return SourcesConfig(user_agent=settings.http_user_agent, **values)  # type: ignore[arg-type]


@asynccontextmanager
async def open_database(settings: Settings) -> AsyncIterator[Database]:
    """The database with DATA_DIR created and every migration applied; disposed on exit."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await upgrade_database(settings.database_url)
    database = Database(settings.database_url)
    try:
        yield database
    finally:
        await database.dispose()


def open_http_client(settings: Settings, *, database: Database | None = None) -> HttpClient:
    """The one polite HTTP client every source shares; close it with `aclose()`.

    With a database, conditional-GET validators outlive the process (see `app.http_cache`).
    """
    from app.http_cache import DatabaseValidatorStore
    from sources import HttpClient

    return HttpClient(
        user_agent=settings.http_user_agent,
        allow_private=settings.allow_private_urls,
        validators=DatabaseValidatorStore(database) if database is not None else None,
    )


@dataclass(frozen=True)
class SourceCatalog:
    """Every source built from settings, and the way to pick some by a spec like `hn,news,rss:<url>`."""

    config: SourcesConfig
    client: HttpClient
    by_name: dict[str, Source]

    @classmethod
    def build(cls, settings: Settings, client: HttpClient) -> SourceCatalog:
        from sources import build_sources

        config = sources_config(settings)
        return cls(config=config, client=client, by_name=build_sources(client=client, config=config))

    def resolve(self, spec: str | Sequence[str] | None) -> list[Source]:
        """The sources a spec names (default: the keyless mix); raises ValueError saying what is wrong."""
        from sources import DEFAULT_SOURCES, feed_factory, resolve_source_specs, rsshub_factory

        return resolve_source_specs(
            spec if spec else list(DEFAULT_SOURCES),
            available=self.by_name,
            make_feed=feed_factory(client=self.client, config=self.config),
            make_rsshub=rsshub_factory(client=self.client, config=self.config),
        )


Providers = dict[str, Any]
"""Model providers built so far, by name: pass the same one to `language_models` and `item_embedder`, so the
process has one client per provider (one HTTP client for every Gemini model and the embedder)."""

LOCAL_API_KEY = "not-needed"
"""The key sent to an OpenAI-compatible server given by URL alone (llama.cpp, vLLM and Ollama ignore it; the
client refuses to start without one)."""


class ModelConfigError(Exception):
    """A configured model cannot be built; the message is one sentence naming the variable and the cause."""


def model_limits(settings: Settings) -> ModelLimits:
    """What every model request is held to, from the LLM_* settings."""
    from research import ModelLimits

    return ModelLimits(
        chat_max_tokens=settings.llm_chat_max_tokens,
        plan_max_tokens=settings.llm_plan_max_tokens,
        critique_max_tokens=settings.llm_critique_max_tokens,
        synthesis_max_tokens=settings.llm_synthesis_max_tokens,
        summary_max_tokens=settings.llm_summary_max_tokens,
        collect_max_tokens=settings.llm_plan_max_tokens,
        timeout_seconds=settings.llm_timeout_seconds,
        run_seconds=settings.llm_run_seconds,
        pipeline_seconds=settings.llm_pipeline_seconds,
        context_tokens=settings.context_tokens(),
        output_mode=settings.llm_output_mode,
        chat_tools=settings.llm_chat_tools,
        max_tool_calls_per_response=settings.llm_max_tool_calls,
        max_tool_calls_per_turn=settings.llm_max_tool_calls_per_turn,
    )


def language_models(
    settings: Settings, *, policy: RetryPolicy | None = None, providers: Providers | None = None
) -> ModelSet:
    """The process's one set of language models (build it once per process and share it): LLM_MODEL and
    LLM_HEAVY_MODEL, each retried and falling back to the other, one memory of spent quotas, every request bounded
    by `model_limits`. Each model name is built once, and each provider once, from settings (one HTTP client per
    provider for the process). Empty when no model can be used (see `Settings.llm_unavailable_reason`); raises
    `ModelConfigError` for a model name no provider knows."""
    from research import ModelSet

    if settings.llm_unavailable_reason() is not None:
        return ModelSet.none()
    built: dict[str, Model] = {}
    providers = providers if providers is not None else {}

    def model(variable: str, name: str) -> Model:
        if name not in built:
            built[name] = _model(settings, variable, name, providers)
        return built[name]

    if (problem := settings.heavy_model_problem()) is not None:
        logger.warning("%s; critique and synthesis use LLM_MODEL", problem)
    try:
        light = model("LLM_MODEL", settings.llm_model)
        heavy = model("LLM_HEAVY_MODEL", settings.heavy_model) if settings.heavy_model else None
    except ModelConfigError as problem:
        # commands keep working without a model; the sentence says what to change
        logger.warning("no language model: %s", problem)
        return ModelSet.none()
    return ModelSet.of(light, heavy, policy=policy, limits=model_limits(settings))


def item_embedder(
    settings: Settings, database: Database | None, *, providers: Providers | None = None
) -> ItemEmbedder | None:
    """The embedding model for story clustering with its cache in the database, or None when it is off (see
    `Settings.embedding_unavailable_reason`). It uses the provider in `providers` its chat models use."""
    if settings.embedding_unavailable_reason() is not None:
        return None
    from pydantic_ai.embeddings import Embedder

    from research import ItemEmbedder

    name = settings.embedding_model.strip()
    providers = providers if providers is not None else {}
    if name.startswith("google:"):
        from pydantic_ai.embeddings.google import GoogleEmbeddingModel

        embedder = Embedder(
            GoogleEmbeddingModel(name.removeprefix("google:"), provider=_google_provider(settings, providers))
        )
    elif name.startswith("openai:"):
        from pydantic_ai.embeddings.openai import OpenAIEmbeddingModel

        embedder = Embedder(
            OpenAIEmbeddingModel(name.removeprefix("openai:"), provider=_provider(settings, "openai", providers))
        )
    else:
        embedder = Embedder(name)
    cache = EmbeddingRepository(database) if database is not None else None
    return ItemEmbedder(embedder=embedder, model_name=name, cache=cache)


def server_profile(self_hosted: bool) -> OpenAIModelProfile:
    """How Lookout talks to an OpenAI-compatible server: all system text in one leading message (llama.cpp's Gemma 3
    template refuses a second); a self-hosted server (a base URL, Ollama) gets the output limit as `max_tokens`, the
    field every compatible server reads (llama-cpp-python ignores `max_completion_tokens` and writes to the end of
    its context)."""
    from pydantic_ai.profiles.openai import OpenAIModelProfile

    return OpenAIModelProfile(
        openai_chat_supports_multiple_system_messages=False,
        openai_chat_supports_max_completion_tokens=not self_hosted,
    )


def _model(settings: Settings, variable: str, name: str, providers: Providers) -> Model:
    from pydantic_ai.models import infer_model

    try:
        provider, _, model_name = name.partition(":")
        if provider in ("openai-chat", "ollama"):
            # every request's system text in one leading system message: llama.cpp's Gemma 3 template refuses a
            # second one, which output-format instructions would otherwise add
            from pydantic_ai.models.ollama import OllamaModel
            from pydantic_ai.models.openai import OpenAIChatModel

            chat_model = OllamaModel if provider == "ollama" else OpenAIChatModel
            self_hosted = provider == "ollama" or bool(settings.openai_base_url)
            return chat_model(
                model_name, provider=_provider(settings, provider, providers), profile=server_profile(self_hosted)
            )
        return infer_model(name, provider_factory=lambda provider: _provider(settings, provider, providers))
    except Exception as error:  # an unknown provider or model name, a missing client library
        cause = " ".join(str(error).split()) or type(error).__name__
        raise ModelConfigError(f"{variable}={name!r} cannot be used: {cause}") from None


def _provider(settings: Settings, name: str, providers: Providers) -> Any:
    """The provider `name` in `providers`, built there on first use from settings (never from the environment,
    for the providers Lookout documents); any other provider pydantic-ai builds itself."""
    key = "openai" if name == "openai-chat" else name
    if key not in providers:
        providers[key] = _build_provider(settings, key)
    return providers[key]


def _secret(value: Any) -> str | None:
    return value.get_secret_value() if value is not None else None


def _build_provider(settings: Settings, name: str) -> Any:
    # Imported here: each client library is only needed when a model of its provider is configured. The clients are
    # built with their own retries off and LLM_TIMEOUT_SECONDS (also for the embedder, which takes no model
    # settings): Lookout's one retry rule (`research.RetryingModel`) is the only one.
    timeout = settings.llm_timeout_seconds
    if name == "google":
        return _google_provider(settings, {})
    if name in ("openai", "ollama"):
        from openai import AsyncOpenAI

        if name == "openai":
            from pydantic_ai.providers.openai import OpenAIProvider

            api_key = _secret(settings.openai_api_key) or (LOCAL_API_KEY if settings.openai_base_url else None)
            client = AsyncOpenAI(base_url=settings.openai_base_url, api_key=api_key, max_retries=0, timeout=timeout)
            return OpenAIProvider(openai_client=client)
        from pydantic_ai.providers.ollama import OllamaProvider

        api_key = _secret(settings.ollama_api_key) or LOCAL_API_KEY
        client = AsyncOpenAI(base_url=settings.ollama_base_url, api_key=api_key, max_retries=0, timeout=timeout)
        return OllamaProvider(openai_client=client)
    if name == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.providers.anthropic import AnthropicProvider

        anthropic = AsyncAnthropic(
            api_key=_secret(settings.anthropic_api_key),
            base_url=settings.anthropic_base_url,
            max_retries=0,
            timeout=timeout,
        )
        return AnthropicProvider(anthropic_client=anthropic)
    from pydantic_ai.providers import infer_provider

    return infer_provider(name)


def _google_provider(settings: Settings, providers: Providers) -> Any:
    """The Gemini provider in `providers`, built there on first use."""
    if "google" not in providers:
        # Imported here: the Google client is only needed when a Gemini model is configured.
        from pydantic_ai.providers.google import GoogleProvider

        if settings.gemini_api_key is None:
            raise ModelConfigError("GEMINI_API_KEY is not set; get a key at aistudio.google.com and put it in .env")
        providers["google"] = GoogleProvider(
            api_key=settings.gemini_api_key.get_secret_value(), base_url=settings.gemini_base_url
        )
    return providers["google"]
