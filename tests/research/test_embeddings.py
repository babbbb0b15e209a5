"""Semantic story clustering: items embedded once (cached), in batches, through pydantic-ai's Embedder; stories in
two languages merged with vectors and not without; any embedding failure falls back to words and says so."""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from pydantic_ai import models
from pydantic_ai.embeddings import Embedder, EmbeddingResult, TestEmbeddingModel
from pydantic_ai.embeddings.google import GoogleEmbeddingModel
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.providers.google import GoogleProvider

from research.dedupe import Deduper
from research.embeddings import ItemEmbedder, embedding_key, embedding_text
from research.pipeline import run_pipeline
from sources import Item
from tests.fakes.gemini import FakeGeminiEmbeddings
from tests.fakes.http_server import FakeHTTPServer
from tests.research.fake_sources import make_item
from tests.research.test_pipeline import BASE_TIME, TOPIC, RecordingSource, request_for

ENGLISH = make_item(
    "news", "en", title="Toyota recalls 1 million cars over faulty airbags", url="https://reuters.example/toyota"
)
CHINESE = make_item(
    "rsshub", "zh", title="丰田因安全气囊缺陷召回100万辆汽车", url="https://sina.example/toyota", language="zh"
)
OTHER = make_item("news", "x", title="Apple opens its first store in India", url="https://bbc.example/apple")

STORY_VECTORS = {"toyota": [0.9, 0.1, 0.0], "丰田": [0.88, 0.12, 0.02], "apple": [0.0, 0.2, 0.98]}


def story_vector(text: str) -> list[float]:
    """What an embedding model would do: one direction per story, whatever the language."""
    lowered = text.lower()
    return next((vector for word, vector in STORY_VECTORS.items() if word in lowered), [0.0, 1.0, 0.0])


class MemoryCache:
    """An in-memory `VectorCache` that records what was stored."""

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.reads: list[list[str]] = []

    async def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        self.reads.append(list(keys))
        return {key: self.vectors[key] for key in keys if key in self.vectors}

    async def put_many(self, vectors: Mapping[str, Sequence[float]], *, model: str) -> None:
        self.vectors.update({key: list(vector) for key, vector in vectors.items()})


class CountingModel(TestEmbeddingModel):
    """pydantic-ai's test embedding model, counting the texts it is asked for and answering per story."""

    def __init__(self) -> None:
        super().__init__("counting", provider_name="test")
        self.texts: list[str] = []

    async def embed(self, inputs, *, input_type, settings=None):  # type: ignore[no-untyped-def]
        result: EmbeddingResult = await super().embed(inputs, input_type=input_type, settings=settings)
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        self.texts.extend(texts)
        result.embeddings = [story_vector(text) for text in texts]
        return result


class FailingModel(TestEmbeddingModel):
    async def embed(self, inputs, *, input_type, settings=None):  # type: ignore[no-untyped-def]
        raise ModelHTTPError(status_code=503, model_name="failing", body={"error": "overloaded"})


def cluster(items: list[Item], vectors: Mapping[str, Sequence[float]] | None) -> dict[str, str | None]:
    deduper = Deduper(vectors=vectors)
    deduper.add(items)
    return {item.id: deduper.cluster_id(item.id) for item in items}


async def test_an_item_is_embedded_once_across_runs_and_usage_is_counted() -> None:
    model, cache = CountingModel(), MemoryCache()
    embedder = ItemEmbedder(embedder=Embedder(model), model_name="test:counting", cache=cache, batch_size=2)

    first = await embedder.embed_items([ENGLISH, CHINESE, OTHER])
    assert first.fallback_reason is None and set(first.vectors) == {"news:en", "rsshub:zh", "news:x"}
    assert (first.embedded, first.cached) == (3, 0)
    assert first.usage.requests == 2, "three texts in batches of two"
    assert first.usage.input_tokens > 0 and first.usage.model == "test:counting"
    assert len(cache.vectors) == 3

    again = await embedder.embed_items([CHINESE, ENGLISH, make_item("news", "new", title="Toyota shares fall")])
    assert model.texts[3:] == ["Toyota shares fall"], "only the new item is embedded the second time"
    assert (again.embedded, again.cached) == (1, 2)
    assert again.vectors["rsshub:zh"] == first.vectors["rsshub:zh"]
    assert embedding_key("test:counting", 768, embedding_text(ENGLISH)) in cache.vectors


async def test_an_embedding_failure_gives_no_vectors_and_a_reason() -> None:
    embedder = ItemEmbedder(embedder=Embedder(FailingModel()), model_name="test:failing", cache=MemoryCache())
    result = await embedder.embed_items([ENGLISH, CHINESE])
    assert result.vectors == {}
    assert result.fallback_reason is not None and "503" in result.fallback_reason


def test_an_english_and_a_chinese_report_are_one_story_with_vectors_and_two_without() -> None:
    vectors = {item.id: story_vector(item.title) for item in (ENGLISH, CHINESE, OTHER)}
    with_vectors = cluster([ENGLISH, CHINESE, OTHER], vectors)
    assert with_vectors["news:en"] == with_vectors["rsshub:zh"] != with_vectors["news:x"]
    without = cluster([ENGLISH, CHINESE, OTHER], None)
    assert without["news:en"] != without["rsshub:zh"]


async def test_the_real_gemini_client_embeds_in_batches_and_the_stories_merge(fake_server: FakeHTTPServer) -> None:
    fake = FakeGeminiEmbeddings(fake_server, vector_of=story_vector)
    provider = GoogleProvider(api_key=fake.api_key, base_url=fake.url)
    embedder = ItemEmbedder(
        embedder=Embedder(GoogleEmbeddingModel(fake.model, provider=provider)),
        model_name=f"google:{fake.model}",
        cache=MemoryCache(),
    )
    with models.override_allow_model_requests(True):
        result = await embedder.embed_items([ENGLISH, CHINESE, OTHER])
    assert result.fallback_reason is None
    assert [r.method for r in fake.requests] == ["batchEmbedContents"], "one request for the batch"
    assert fake.requests[0].texts == [embedding_text(i) for i in (ENGLISH, CHINESE, OTHER)]
    assert fake.requests[0].task_types == ["CLUSTERING"] * 3
    assert fake.requests[0].dimensions == [768] * 3
    stories = cluster([ENGLISH, CHINESE, OTHER], result.vectors)
    assert stories["news:en"] == stories["rsshub:zh"] != stories["news:x"]


async def test_the_real_gemini_client_reports_an_api_error_as_a_fallback(fake_server: FakeHTTPServer) -> None:
    fake = FakeGeminiEmbeddings(fake_server)
    fake.fail_with(429, "RESOURCE_EXHAUSTED", "Quota exceeded for embed_content_requests per day")
    provider = GoogleProvider(api_key=fake.api_key, base_url=fake.url)
    embedder = ItemEmbedder(
        embedder=Embedder(GoogleEmbeddingModel(fake.model, provider=provider)), model_name=f"google:{fake.model}"
    )
    with models.override_allow_model_requests(True):
        result = await embedder.embed_items([ENGLISH])
    assert result.vectors == {} and result.fallback_reason


def test_the_fake_speaks_the_single_embed_content_wire_format(fake_server: FakeHTTPServer) -> None:
    fake = FakeGeminiEmbeddings(fake_server, vector_of=story_vector)
    body = json.dumps({"content": {"parts": [{"text": "Toyota recall"}]}, "taskType": "CLUSTERING"}).encode()
    request = urllib.request.Request(
        f"{fake.url}/v1beta/models/{fake.model}:embedContent",
        data=body,
        headers={"x-goog-api-key": fake.api_key, "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # a local fake server
        answer = json.loads(response.read())
    assert answer == {"embedding": {"values": STORY_VECTORS["toyota"]}}
    assert fake.requests[0].method == "embedContent" and fake.requests[0].texts == ["Toyota recall"]


async def test_a_run_groups_stories_by_embeddings_and_reports_a_fallback(tmp_path: Path) -> None:
    items = [
        ENGLISH.model_copy(update={"published": BASE_TIME - timedelta(hours=2)}),
        CHINESE.model_copy(update={"published": BASE_TIME - timedelta(hours=3)}),
        OTHER.model_copy(update={"published": BASE_TIME - timedelta(hours=1)}),
    ]
    source = RecordingSource("news", lambda query: items if query.text == TOPIC else [])
    model, cache = CountingModel(), MemoryCache()
    embedder = ItemEmbedder(embedder=Embedder(model), model_name="test:counting", cache=cache)

    result = await run_pipeline(
        request_for([source]), light_model=None, heavy_model=None, out_dir=tmp_path, stem="emb",
        now=lambda: BASE_TIME, embedder=embedder,
    )  # fmt: skip
    assert result.report is not None and result.report.stories_path == "embedding"
    assert result.report.usage["embeddings"].requests == 1
    assert result.usage.requests == 1, "embedding requests count in the run's usage"
    clusters = {s.item.id: s.cluster_id for s in result.items}
    assert clusters["news:en"] == clusters["rsshub:zh"] != clusters["news:x"]

    failing = ItemEmbedder(embedder=Embedder(FailingModel()), model_name="test:failing")
    fallback = await run_pipeline(
        request_for([source]), light_model=None, heavy_model=None, out_dir=tmp_path, stem="lex",
        now=lambda: BASE_TIME, embedder=failing,
    )  # fmt: skip
    assert fallback.report is not None and fallback.report.stories_path == "lexical"
    assert fallback.report.stories_fallback_reason and "503" in fallback.report.stories_fallback_reason
    lexical = {s.item.id: s.cluster_id for s in fallback.items}
    assert lexical["news:en"] != lexical["rsshub:zh"]


def test_vectors_are_unit_length_or_made_so() -> None:
    vectors = {"news:en": [9.0, 1.0, 0.0], "rsshub:zh": [0.88, 0.12, 0.02]}
    stories = cluster([ENGLISH, CHINESE], vectors)
    assert stories["news:en"] == stories["rsshub:zh"]
    assert math.isclose(sum(x * x for x in story_vector("toyota")), 0.82, rel_tol=0.01)


def test_vectors_are_no_evidence_between_items_published_more_than_a_week_apart() -> None:
    # A follow-up weeks later (the bankruptcy decision after the petition) looks like the same subject to a model.
    vectors = {"news:en": STORY_VECTORS["toyota"], "rsshub:zh": STORY_VECTORS["丰田"]}
    assert ENGLISH.published is not None
    days_apart = {}
    for days in (2, 10):
        earlier = CHINESE.model_copy(update={"published": ENGLISH.published - timedelta(days=days)})
        days_apart[days] = cluster([ENGLISH, earlier], vectors)
    assert days_apart[2]["news:en"] == days_apart[2]["rsshub:zh"], "within a week the vectors join them"
    assert days_apart[10]["news:en"] != days_apart[10]["rsshub:zh"], "ten days apart they are two stories"
    undated = cluster([ENGLISH, CHINESE.model_copy(update={"published": None})], vectors)
    assert undated["news:en"] == undated["rsshub:zh"], "an unknown date keeps nothing apart"


def test_words_still_join_a_pair_whose_vectors_miss_it() -> None:
    # The stronger of the two scores counts: a model that misses a plain match of wording does not split it.
    reuters = make_item("news", "r", title="Volkswagen recalls 239,000 Tiguan SUVs over seat belt fault")
    ap = make_item("wire", "a", title="Volkswagen recalls 239,000 Tiguan SUVs to fix seat belt fault")
    vectors = {reuters.id: [1.0, 0.0, 0.0], ap.id: [0.0, 1.0, 0.0]}
    stories = cluster([reuters, ap, OTHER], {**vectors, OTHER.id: [0.0, 0.0, 1.0]})
    assert stories[reuters.id] == stories[ap.id] != stories[OTHER.id]


def test_a_pair_in_two_languages_needs_a_little_less_cosine_than_a_pair_in_one() -> None:
    # A multilingual model scores a report and its translation lower than two texts in one language: the same
    # cosine, just under the threshold (0.80 against 0.82), joins an English and a Chinese report and keeps two
    # differently worded English reports apart.
    under_threshold = ([1.0, 0.0], [0.8, 0.6])
    reworded = make_item("wire", "en2", title="Japanese carmaker calls back a million vehicles after inflator flaw")
    across = cluster([ENGLISH, CHINESE], dict(zip([ENGLISH.id, CHINESE.id], under_threshold, strict=True)))
    within = cluster([ENGLISH, reworded], dict(zip([ENGLISH.id, reworded.id], under_threshold, strict=True)))
    assert across[ENGLISH.id] == across[CHINESE.id]
    assert within[ENGLISH.id] != within[reworded.id]
