"""The embedding model as the app builds it from settings: Gemini through its real client, vectors cached in the
database, so a second run (or another monitor) embeds nothing it embedded before."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai import models

from app.settings import load_settings
from app.wiring import item_embedder, open_database
from storage.repositories import EmbeddingRepository
from tests.fakes.gemini import FakeGeminiEmbeddings
from tests.fakes.http_server import FakeHTTPServer
from tests.research.fake_sources import make_item


async def test_settings_build_a_cached_gemini_embedder(fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    fake = FakeGeminiEmbeddings(fake_server, vector_of=lambda text: [float(len(text)), 1.0, 0.0])
    settings = load_settings(
        gemini_api_key=fake.api_key, gemini_base_url=fake.url, data_dir=tmp_path, embedding_model=f"google:{fake.model}"
    )
    items = [make_item("news", str(n), title=f"Headline number {n}") for n in range(3)]
    async with open_database(settings) as database:
        embedder = item_embedder(settings, database)
        assert embedder is not None
        with models.override_allow_model_requests(True):
            first = await embedder.embed_items(items)
            second = await embedder.embed_items([*items, make_item("news", "new", title="A new headline")])
        assert first.fallback_reason is None and len(first.vectors) == 3
        assert fake.texts_embedded == [*(f"Headline number {n}" for n in range(3)), "A new headline"]
        assert (second.embedded, second.cached) == (1, 3)
        assert await EmbeddingRepository(database).count() == 4
    assert item_embedder(load_settings(gemini_api_key=None, data_dir=tmp_path), None) is None
