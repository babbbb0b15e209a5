"""Embed items (title + lead) with pydantic-ai's `Embedder`, in batches, each text once: vectors are cached by a key
of model, size and text, so an item seen by another run or another monitor is never embedded again.

Guarantees: never raises for a model failure; `embed_items` then returns no vectors and says why (the caller
clusters lexically); what was embedded before the failure is still cached. Usage is counted per request; where the
provider reports no token counts (the Gemini API does not for embeddings), tokens are estimated from the text.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pydantic_ai.exceptions import AgentRunError, FallbackExceptionGroup, ModelAPIError, UserError

from research.llm import describe_failure
from research.usage import LlmUsage, estimate_cost_usd
from sources import Item

if TYPE_CHECKING:
    from pydantic_ai.embeddings import Embedder, EmbeddingSettings

__all__ = [
    "EMBEDDING_LEAD_CHARS",
    "EmbeddedItems",
    "ItemEmbedder",
    "VectorCache",
    "embedding_key",
    "embedding_text",
]

logger = logging.getLogger(__name__)

EMBEDDING_LEAD_CHARS = 500
"""How much of an item's text is embedded with its title: the lead tells the story; the rest is detail."""
BATCH_SIZE = 100
"""Texts per request (Gemini's `batchEmbedContents` takes up to 100)."""
CHARS_PER_TOKEN = 4.0
"""For estimating tokens where the provider does not count them."""


class VectorCache(Protocol):
    """Where vectors are kept between runs (the database's embedding table in the app)."""

    async def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors for those keys that have one."""
        ...

    async def put_many(self, vectors: Mapping[str, Sequence[float]], *, model: str) -> None:
        """Store vectors by key; a key stored before keeps its vector."""
        ...


def embedding_text(item: Item) -> str:
    """What is embedded for an item: its title and lead."""
    lead = " ".join(item.text.split())[:EMBEDDING_LEAD_CHARS]
    return f"{item.title.strip()}\n{lead}".strip()


def embedding_key(model: str, dimensions: int | None, text: str) -> str:
    """The cache key of a text under a model and vector size."""
    return hashlib.sha256(f"{model}\x00{dimensions or ''}\x00{text}".encode()).hexdigest()


@dataclass(frozen=True)
class EmbeddedItems:
    """The vectors of a batch of items, or none and why."""

    vectors: dict[str, list[float]] = field(default_factory=dict)
    """By item id; empty when embedding failed (the run clusters lexically)."""
    usage: LlmUsage = field(default_factory=LlmUsage)
    embedded: int = 0
    """Texts sent to the model in this call."""
    cached: int = 0
    """Texts whose vectors came from the cache."""
    fallback_reason: str | None = None


def _settings_for(model_name: str, dimensions: int | None) -> EmbeddingSettings:
    settings: dict[str, object] = {}
    if dimensions:
        settings["dimensions"] = dimensions
    if model_name.startswith(("google:", "google-cloud:")):
        # Symmetric "clustering" conditioning: every text plays the same role (no query/document split).
        if model_name.endswith("gemini-embedding-2"):
            settings["google_task"] = "clustering"
        else:
            settings["google_task_type"] = "CLUSTERING"
    return settings  # type: ignore[return-value]


@dataclass(frozen=True)
class ItemEmbedder:
    """An embedding model with its cache: what a run needs to cluster items semantically."""

    embedder: Embedder
    model_name: str
    """`provider:model`, as configured (names the usage and keys the cache)."""
    cache: VectorCache | None = None
    dimensions: int | None = 768
    """Vector size asked of models that can shorten theirs (Gemini's can); `None` keeps the model's own."""
    batch_size: int = BATCH_SIZE

    async def embed_items(self, items: Sequence[Item]) -> EmbeddedItems:
        """Vectors for every item (from the cache where possible, the rest in batches), or none and why."""
        texts = {item.id: embedding_text(item) for item in items}
        keys = {item_id: embedding_key(self.model_name, self.dimensions, text) for item_id, text in texts.items()}
        usage = LlmUsage(model=self.model_name)
        try:
            stored = await self.cache.get_many(list(dict.fromkeys(keys.values()))) if self.cache else {}
        except Exception as error:  # a broken cache costs money, not the run
            logger.warning("embedding cache unreadable (%s); embedding everything", error)
            stored = {}
        missing = list(dict.fromkeys(key for key in keys.values() if key not in stored))
        text_of_key = {keys[item_id]: text for item_id, text in texts.items()}
        fresh: dict[str, list[float]] = {}
        reason: str | None = None
        try:
            for start in range(0, len(missing), max(self.batch_size, 1)):
                chunk = missing[start : start + self.batch_size]
                chunk_texts = [text_of_key[key] for key in chunk]
                result = await self.embedder.embed(
                    chunk_texts,
                    input_type="document",
                    settings=_settings_for(self.model_name, self.dimensions),
                )
                if len(result.embeddings) != len(chunk):
                    raise ValueError(f"asked for {len(chunk)} vectors, got {len(result.embeddings)}")
                tokens = result.usage.input_tokens or sum(
                    math.ceil(len(text) / CHARS_PER_TOKEN) for text in chunk_texts
                )
                usage = usage.model_copy(
                    update={"requests": usage.requests + 1, "input_tokens": usage.input_tokens + tokens}
                )
                batch = {key: [float(x) for x in vector] for key, vector in zip(chunk, result.embeddings, strict=True)}
                fresh.update(batch)
                await self._store(batch)
        except (ModelAPIError, AgentRunError, FallbackExceptionGroup, UserError, ValueError, OSError) as error:
            reason = describe_failure(error)
            logger.warning("embedding failed (%s); clustering lexically", reason)
        usage = usage.model_copy(
            update={"cost_usd": estimate_cost_usd(self.model_name, input_tokens=usage.input_tokens, output_tokens=0)}
        )
        if reason is not None:
            return EmbeddedItems(usage=usage, embedded=len(fresh), cached=len(stored), fallback_reason=reason)
        vectors = {item_id: stored.get(key) or fresh[key] for item_id, key in keys.items()}
        return EmbeddedItems(vectors=vectors, usage=usage, embedded=len(fresh), cached=len(stored))

    @property
    def vector_model(self) -> str:
        """What names this embedder's vectors (model and size asked): vectors of two of them are not comparable."""
        return f"{self.model_name}@{self.dimensions or 'native'}"

    async def stored_vectors(self, items: Sequence[Item]) -> dict[str, list[float]]:
        """The cached vectors of those items that have one, by item id; the model is never asked (what reads this,
        a delivery, must not spend). Empty without a cache or when it cannot be read."""
        if self.cache is None or not items:
            return {}
        keys = {item.id: embedding_key(self.model_name, self.dimensions, embedding_text(item)) for item in items}
        try:
            stored = await self.cache.get_many(list(dict.fromkeys(keys.values())))
        except Exception as error:  # without vectors the words decide
            logger.warning("embedding cache unreadable (%s)", error)
            return {}
        return {item_id: stored[key] for item_id, key in keys.items() if key in stored}

    async def _store(self, batch: Mapping[str, Sequence[float]]) -> None:
        if self.cache is None or not batch:
            return
        try:
            await self.cache.put_many(batch, model=self.model_name)
        except Exception as error:  # the vectors still serve this run
            logger.warning("could not cache %d embedding(s): %s", len(batch), error)
