"""Composition: turn settings into the objects the lower layers take (sources, HTTP client, the language models)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from app.settings import Settings
from sources import SourcesConfig
from storage import Database, EmbeddingRepository, upgrade_database

if TYPE_CHECKING:  # the model library and the sources load when a command builds them, not to open the database
    from pydantic_ai.models import Model

    from research import ItemEmbedder, ModelSet, RetryPolicy
    from sources import HttpClient, Source


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


def language_models(
    settings: Settings, *, policy: RetryPolicy | None = None, providers: Providers | None = None
) -> ModelSet:
    """The process's one set of language models (build it once per process and share it): LLM_MODEL and
    LLM_HEAVY_MODEL, each retried and falling back to the other, one memory of spent quotas. Each model name is
    built once, and every Gemini model shares one provider (one HTTP client for the process). Empty when no model
    can be used (see `Settings.llm_unavailable_reason`)."""
    from research import ModelSet

    if settings.llm_unavailable_reason() is not None:
        return ModelSet.none()
    built: dict[str, Model] = {}
    providers = providers if providers is not None else {}

    def model(name: str) -> Model:
        if name not in built:
            built[name] = _model(settings, name, providers)
        return built[name]

    heavy_name = settings.llm_heavy_model.strip()
    return ModelSet.of(model(settings.llm_model.strip()), model(heavy_name) if heavy_name else None, policy=policy)


def item_embedder(
    settings: Settings, database: Database | None, *, providers: Providers | None = None
) -> ItemEmbedder | None:
    """The embedding model for story clustering with its cache in the database, or None when it is off (see
    `Settings.embedding_unavailable_reason`). A Gemini embedder uses the Gemini provider in `providers`."""
    if settings.embedding_unavailable_reason() is not None:
        return None
    from pydantic_ai.embeddings import Embedder

    from research import ItemEmbedder

    name = settings.embedding_model.strip()
    if name.startswith("google:"):
        from pydantic_ai.embeddings.google import GoogleEmbeddingModel

        provider = _google_provider(settings, providers if providers is not None else {})
        embedder = Embedder(GoogleEmbeddingModel(name.removeprefix("google:"), provider=provider))
    else:
        embedder = Embedder(name)
    cache = EmbeddingRepository(database) if database is not None else None
    return ItemEmbedder(embedder=embedder, model_name=name, cache=cache)


def _model(settings: Settings, name: str, providers: Providers) -> Model:
    if name.startswith("google:"):
        # Imported here: the Google client is only needed when a Gemini model is configured.
        from pydantic_ai.models.google import GoogleModel

        return GoogleModel(name.removeprefix("google:"), provider=_google_provider(settings, providers))
    from pydantic_ai.models import infer_model

    return infer_model(name)


def _google_provider(settings: Settings, providers: Providers) -> Any:
    """The Gemini provider in `providers`, built there on first use."""
    if "google" not in providers:
        # Imported here: the Google client is only needed when a Gemini model is configured.
        from pydantic_ai.providers.google import GoogleProvider

        assert settings.gemini_api_key is not None  # checked by llm_/embedding_unavailable_reason
        providers["google"] = GoogleProvider(
            api_key=settings.gemini_api_key.get_secret_value(), base_url=settings.gemini_base_url
        )
    return providers["google"]
