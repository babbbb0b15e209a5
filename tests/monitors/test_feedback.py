"""Readers' feedback on a shared monitor: a chat's marks change only that chat's next digest (muted outlets and
stories like a 👎 left out, with one line saying so), presses on digests a chat never received change nothing, and
marks survive a restart."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.embeddings import Embedder, EmbeddingResult, TestEmbeddingModel
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo

from app.monitor_service import build_monitor_service
from monitors import FeedbackError, create_imported, export_monitors, read_monitor_file
from monitors.delivery import DeliveryWorker
from monitors.schedule import parse_schedule
from monitors.service import MonitorService
from monitors.views import MonitorSettings
from research import ItemEmbedder, PipelineRequest, PipelineResult
from research.pipeline import run_pipeline
from sources.base import Item, SearchQuery
from storage import Database
from storage.repositories import EmbeddingRepository, FeedbackRepository
from tests.backends import sqlite_url
from tests.kit import ScriptedModel, user_prompts
from tests.monitors.conftest import T0, World
from tests.monitors.fakes import resolver
from tests.research.fake_sources import RecordingSource, make_item

DAY_ONE = [
    ("chips-1", "Nvidia unveils Blackwell GPU chips for datacenters", "https://chipwire.com/a"),
    ("tour-1", "Pop singer Taylor Swift announces stadium tour dates", "https://celebgossip.net/a"),
    ("rates-1", "Central bank raises interest rates to curb inflation", "https://moneydaily.org/a"),
]
DAY_TWO = [
    ("chips-2", "Intel shows its Gaudi accelerator for training AI models", "https://chipwire.com/b"),
    ("tour-2", "Beyonce wins a Grammy for her pop album", "https://celebgossip.net/b"),
    ("rates-2", "Bond markets rally as inflation cools and rates hold", "https://moneydaily.org/b"),
]


def _items(stories: list[tuple[str, str, str]], hours_ago: float) -> list[Item]:
    return [
        make_item("news", key, title=title, url=url, text=title, points=10, hours_ago=hours_ago)
        for key, title, url in stories
    ]


class Feed:
    """The monitor's one source: today's stories."""

    def __init__(self) -> None:
        self.today = _items(DAY_ONE, 1.0)

    def answer(self, _query: SearchQuery) -> list[Item]:
        return list(self.today)


@pytest.fixture
def feed(world: World) -> Feed:
    feed = Feed()
    world.sources["news"] = RecordingSource("news", feed.answer)
    return feed


def _stories(text: str) -> dict[str, int]:
    """The digest's numbered stories: a word of each title → its number."""
    found = {}
    for number, line in re.findall(r"^(\d+)\. (.*)$", text, re.M):
        for word in ("Nvidia", "Intel", "Swift", "Beyonce", "bank", "Bond"):
            if word in line.split("—")[0]:
                found[word] = int(number)
    return found


async def _shared_monitor(world: World, service: MonitorService) -> int:
    owner, reader = world.chats[0].id, world.chats[1].id
    view = await service.create_monitor(owner, "news", schedule_text="daily at 08:00", sources="news")
    await service.sharing.share(view.id, chat_id=owner)
    await service.sharing.subscribe(reader, view.id)
    return view.id


async def _run_and_deliver(world: World, service: MonitorService, monitor: int, when: object) -> dict[str, str]:
    before = len(world.sender.sent)
    await service.runs.run_monitor(monitor, when)  # type: ignore[arg-type]
    await world.worker().run_once()
    return {sent.chat.external_id: sent.text for sent in world.sender.sent[before:]}


async def test_one_subscribers_marks_change_only_its_own_next_digest(world: World, feed: Feed) -> None:
    service = world.service()
    monitor = await _shared_monitor(world, service)
    owner, reader = world.chats[0].id, world.chats[1].id

    first = await _run_and_deliver(world, service, monitor, T0)
    numbers = _stories(first["101"])
    less = await service.feedback.mark(reader, "less", numbers["Swift"])
    more = await service.feedback.mark(reader, "more", numbers["Nvidia"])
    feed.today = _items(DAY_TWO, -23.0)
    second = await _run_and_deliver(world, service, monitor, T0 + timedelta(days=1))
    why_dropped = await service.feedback.why(reader, None)
    why_owner = await service.feedback.why(owner, None)

    assert set(numbers) == {"Nvidia", "Swift", "bank"}
    assert "Recorded 👎 less like this on story" in less.text and less.monitor_id == monitor
    assert "Recorded 👍 more like this" in more.text
    assert set(_stories(second["100"])) == {"Intel", "Beyonce", "Bond"}  # the owner marked nothing
    assert "left out by your feedback" not in second["100"]
    reader_stories = _stories(second["101"])
    assert set(reader_stories) == {"Intel", "Bond"}
    assert reader_stories["Intel"] == 1  # like a 👍 story: first
    assert "_1 story left out by your feedback — /why dropped_" in second["101"]
    assert "Beyonce wins a Grammy" in why_dropped and "marked 👎" in why_dropped
    assert "nothing was left out" in why_owner


async def test_a_readers_briefing_section_follows_its_feedback_as_its_digest_would(world: World, feed: Feed) -> None:
    service = world.service()
    monitor = await _shared_monitor(world, service)
    reader = world.chats[1]
    first = await _run_and_deliver(world, service, monitor, T0)
    numbers = _stories(first["101"])
    await service.feedback.mark(reader.id, "less", numbers["Swift"])
    await service.feedback.mark(reader.id, "more", numbers["Nvidia"])
    await service.briefings.set_briefing(
        reader.id, parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
    )

    world.clock.advance(minutes=1)
    feed.today = _items(DAY_TWO, -23.0)
    second = await _run_and_deliver(world, service, monitor, T0 + timedelta(days=1))  # the owner's digest only
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))
    before = len(world.sender.sent)
    queued = await service.briefings.run_due()
    await world.worker().run_once()
    [briefing] = [sent.text for sent in world.sender.sent[before:] if sent.chat.external_id == "101"]

    assert [q.chat_id for q in queued] == [reader.id] and set(second) == {"100"}
    assert "Beyonce" in second["100"]  # the owner marked nothing
    assert "Intel" in briefing and "Bond" in briefing
    assert "Beyonce" not in briefing  # like the story the reader marked 👎
    assert "_1 story left out by your feedback" in briefing


async def test_a_muted_outlet_is_left_out_for_that_chat_only_and_unmute_brings_it_back(
    world: World, feed: Feed
) -> None:
    service = world.service()
    monitor = await _shared_monitor(world, service)
    reader = world.chats[1].id
    first = await _run_and_deliver(world, service, monitor, T0)
    muted = await service.feedback.mark(reader, "mute", _stories(first["101"])["bank"])
    feed.today = _items(DAY_TWO, -23.0)
    second = await _run_and_deliver(world, service, monitor, T0 + timedelta(days=1))
    unmuted = await service.feedback.unmute(reader, "moneydaily.org")
    again = await service.feedback.unmute(reader, "moneydaily.org")

    assert muted.text.startswith("Muted moneydaily.org on monitor #")
    assert "Bond" not in _stories(second["101"]) and "Bond" in _stories(second["100"])
    assert unmuted.startswith("Unmuted moneydaily.org") and "was not muted" in again
    assert await FeedbackRepository(world.database).marks(monitor, reader) == []


async def test_presses_for_a_digest_the_chat_never_received_or_a_story_it_never_saw_change_nothing(
    world: World, feed: Feed
) -> None:
    service = world.service()
    monitor = await _shared_monitor(world, service)
    stranger = world.chats[2].id
    await _run_and_deliver(world, service, monitor, T0)
    (run,) = [r.id for r in await _runs(world, monitor)]

    with pytest.raises(FeedbackError, match="never reached this chat"):
        await service.feedback.mark(stranger, "less", 1, run_id=run)
    with pytest.raises(FeedbackError, match="No digest or briefing has reached this chat yet"):
        await service.feedback.mark(stranger, "more", 1)
    with pytest.raises(FeedbackError, match="never reached this chat"):
        await service.feedback.mark(world.chats[1].id, "less", 1, run_id=run + 99)  # forged run
    with pytest.raises(FeedbackError, match="pick a number from 1 to 3"):
        await service.feedback.mark(world.chats[1].id, "less", 9)

    repository = FeedbackRepository(world.database)
    assert await repository.marks(monitor, stranger) == []
    assert await repository.marks(monitor, world.chats[1].id) == []


async def test_marks_survive_a_restart_and_a_second_press_replaces_the_first(
    world: World, feed: Feed, db_path: Path
) -> None:
    service = world.service()
    monitor = await _shared_monitor(world, service)
    reader = world.chats[1].id
    first = await _run_and_deliver(world, service, monitor, T0)
    number = _stories(first["101"])["Swift"]
    await service.feedback.mark(reader, "more", number)
    await service.feedback.mark(reader, "less", number)  # changed their mind: one mark, the last

    await world.database.dispose()
    reopened = Database(sqlite_url(db_path))
    try:
        marks = await FeedbackRepository(reopened).marks(monitor, reader)
    finally:
        await reopened.dispose()

    assert [(m.kind, m.story, m.outlets) for m in marks] == [("less", number, ("celebgossip.net",))]
    assert "swift" in marks[0].terms and "news" not in marks[0].terms  # the monitor's topic words weigh nothing


async def test_a_headline_with_markdown_characters_is_named_as_written(world: World, feed: Feed) -> None:
    feed.today = _items([("cpp-1", "C++ *templates* and snake_case_names explained", "https://chipwire.com/c")], 1.0)
    service = world.service()
    monitor = await _shared_monitor(world, service)
    reader = world.chats[1].id
    await _run_and_deliver(world, service, monitor, T0)
    marked = await service.feedback.mark(reader, "less", 1)
    why = await service.feedback.why(reader, 1)
    unmarked = await service.feedback.unmark(reader, 1)

    await service.feedback.mark(reader, "less", 1)
    feed.today = _items(
        [
            ("rust-2", "Rust release adds *macros* lint for snake_case_names in compiler", "https://chipwire.com/d"),
            ("rates-2", "Bond markets rally as inflation cools and rates hold", "https://moneydaily.org/b"),
        ],
        -23.0,
    )
    second = await _run_and_deliver(world, service, monitor, T0 + timedelta(days=1))
    [rust] = [int(n) for n, line in re.findall(r"^(\d+)\. (.*)$", second["101"], re.M) if "Rust" in line]
    lowered = await service.feedback.why(reader, rust)

    escaped = r"C++ \*templates\* and snake\_case\_names explained"
    assert f"“{escaped}”" in marked.text
    assert f"“{escaped}”" in why
    assert f"“{escaped}”" in unmarked.text
    assert f"Your feedback: moved down: like “{escaped}”" in lowered, lowered


async def _runs(world: World, monitor: int) -> list:  # type: ignore[type-arg]
    from storage.repositories import RunRepository

    return await RunRepository(world.database).list_for_monitor(monitor)


async def test_export_and_import_keep_the_chats_marks(world: World, feed: Feed) -> None:
    service = world.service()
    owner, other = world.chats[0], world.chats[2]
    view = await service.create_monitor(owner.id, "news", schedule_text="daily at 08:00", sources="news")
    first = await _run_and_deliver(world, service, view.id, T0)
    await service.feedback.mark(owner.id, "less", _stories(first["100"])["Swift"])
    await service.feedback.mute(owner.id, "moneydaily.org")

    exported = await export_monitors(service, owner, now=T0)
    plan = read_monitor_file(exported.json)
    result = await create_imported(service, other.id, plan.entries)
    [(imported, _topic)] = result.created
    again = await export_monitors(service, other, now=T0)

    repository = FeedbackRepository(world.database)
    source_marks = await repository.marks(view.id, owner.id)
    copied = await repository.marks(imported, other.id)
    assert [(m.kind, m.title, m.outlets, m.terms) for m in copied] == [
        (m.kind, m.title, m.outlets, m.terms) for m in source_marks
    ]
    assert [m.kind for m in copied] == ["less", "mute"] and copied[0].run_id is None
    assert json.loads(again.json)["monitors"][0]["feedback"] == json.loads(exported.json)["monitors"][0]["feedback"]


# ---- with an embedding model: the stories' stored vectors decide ----------------------------------------------

DAY_TWO_NEW_WORDS = [  # no word and no outlet in common with DAY_ONE: only meaning relates them
    ("chips-3", "Qualcomm accelerator arrives for laptops", "https://siliconpost.com/c"),
    ("tour-3", "Beyonce wins a Grammy for her album", "https://musicwire.org/c"),
    ("rates-3", "Bond markets rally as inflation cools", "https://ledger.com/c"),
]
KINDS = {"Nvidia": 0, "Qualcomm": 0, "Swift": 1, "Beyonce": 1, "bank": 2, "Bond": 2}
TITLES = [title for day in (DAY_ONE, DAY_TWO_NEW_WORDS) for _key, title, _url in day]


class KindModel(TestEmbeddingModel):
    """pydantic-ai's test embedding model answering as a real one would: one direction per kind of story (chips,
    pop music, money) plus one of the item's own, so two stories of a kind are alike (cosine 0.5) but never one
    story (the clustering keeps them apart)."""

    def __init__(self) -> None:
        super().__init__("kinds", provider_name="test")
        self.texts: list[str] = []

    async def embed(self, inputs, *, input_type, settings=None):  # type: ignore[no-untyped-def]
        result: EmbeddingResult = await super().embed(inputs, input_type=input_type, settings=settings)
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        self.texts.extend(texts)
        result.embeddings = [self._vector(text) for text in texts]
        return result

    @staticmethod
    def _vector(text: str) -> list[float]:
        vector = [0.0] * (3 + len(TITLES))
        for word, kind in KINDS.items():
            if word in text:
                vector[kind] = 1.0
        own = next((n for n, title in enumerate(TITLES) if title in text), None)
        if own is not None:
            vector[3 + own] = 1.0
        return vector


@pytest.mark.parametrize("embedding", [True, False], ids=["vectors", "words"])
async def test_with_an_embedding_model_a_story_like_a_marked_down_one_in_meaning_only_is_left_out(
    world: World, feed: Feed, embedding: bool
) -> None:
    model = KindModel()
    embedder = ItemEmbedder(
        embedder=Embedder(model), model_name="test:kinds", cache=EmbeddingRepository(world.database), dimensions=None
    )

    async def pipeline(request: PipelineRequest, **options: Any) -> PipelineResult:
        return await run_pipeline(request, embedder=embedder, **options)

    service = world.service(pipeline=pipeline, embedder=embedder if embedding else None)
    worker = DeliveryWorker(world.database, {"telegram": world.sender}, clock=world.clock, feedback=service.feedback)
    monitor = await _shared_monitor(world, service)
    reader = world.chats[1].id

    async def run_and_deliver(when: object) -> dict[str, str]:
        before = len(world.sender.sent)
        await service.runs.run_monitor(monitor, when)  # type: ignore[arg-type]
        await worker.run_once()
        return {sent.chat.external_id: sent.text for sent in world.sender.sent[before:]}

    first = await run_and_deliver(T0)
    numbers = _stories(first["101"])
    await service.feedback.mark(reader, "less", numbers["Swift"])
    await service.feedback.mark(reader, "more", numbers["Nvidia"])
    feed.today = _items(DAY_TWO_NEW_WORDS, -23.0)
    second = await run_and_deliver(T0 + timedelta(days=1))
    why_dropped = await service.feedback.why(reader, None)
    [mark_down, mark_up] = await FeedbackRepository(world.database).marks(monitor, reader)

    assert model.texts, "the runs embedded their items"
    assert "Qualcomm" in second["100"] and "Beyonce" in second["100"]  # the owner marked nothing
    reader_titles = [line for line in second["101"].splitlines() if re.match(r"^\d+\. ", line)]
    if embedding:
        assert mark_down.vector is not None and mark_down.vector["model"] == "test:kinds@native"
        assert not any("Beyonce" in line for line in reader_titles)
        assert "Qualcomm" in reader_titles[0]  # close in meaning to the 👍 story: first
        assert "Beyonce wins a Grammy" in why_dropped and "close in meaning to stories you marked 👎" in why_dropped
        stored = await FeedbackRepository(world.database).last_views(reader, monitor_id=monitor)
        assert {d["by"] for d in stored[0].view["kept"]} == {"vectors"}
    else:  # no vectors at delivery: the words decide, and they share nothing with the marks
        assert mark_down.vector is None and mark_up.vector is None
        assert any("Beyonce" in line for line in reader_titles)
        assert "nothing was left out" in why_dropped


async def test_imported_marks_get_vectors_so_the_importers_view_is_the_exporters(world: World, feed: Feed) -> None:
    """An exported monitor's marks, imported into another chat with an embedding model configured, decide by
    meaning as they did for the exporter: the story like the marked-down one in meaning only is left out of both."""
    model = KindModel()
    embedder = ItemEmbedder(
        embedder=Embedder(model), model_name="test:kinds", cache=EmbeddingRepository(world.database), dimensions=None
    )

    async def pipeline(request: PipelineRequest, **options: Any) -> PipelineResult:
        return await run_pipeline(request, embedder=embedder, **options)

    service = world.service(pipeline=pipeline, embedder=embedder)
    worker = DeliveryWorker(world.database, {"telegram": world.sender}, clock=world.clock, feedback=service.feedback)
    owner, other = world.chats[0], world.chats[2]
    created = await service.create_monitor(owner.id, "news", schedule_text="daily at 08:00", sources="news")
    exported_monitor = created.id

    async def run_and_deliver(monitor: int, when: object) -> dict[str, str]:
        before = len(world.sender.sent)
        await service.runs.run_monitor(monitor, when)  # type: ignore[arg-type]
        await worker.run_once()
        return {sent.chat.external_id: sent.text for sent in world.sender.sent[before:]}

    first = await run_and_deliver(exported_monitor, T0)
    numbers = _stories(first["100"])
    await service.feedback.mark(owner.id, "less", numbers["Swift"])
    await service.feedback.mark(owner.id, "more", numbers["Nvidia"])
    exported = await export_monitors(service, owner, now=T0)
    [(imported, _topic)] = (await create_imported(service, other.id, read_monitor_file(exported.json).entries)).created
    copied = await FeedbackRepository(world.database).marks(imported, other.id)

    feed.today = _items(DAY_TWO_NEW_WORDS, -23.0)
    exporters = await run_and_deliver(exported_monitor, T0 + timedelta(days=1))
    importers = await run_and_deliver(imported, T0 + timedelta(days=1, minutes=5))

    assert [m.vector["model"] if m.vector else None for m in copied] == ["test:kinds@native"] * 2
    assert "vector" not in exported.json.decode()  # a file holds no vectors: they belong to one model
    for text in (exporters["100"], importers["102"]):
        titles = [line for line in text.splitlines() if re.match(r"^\d+\. ", line)]
        assert not any("Beyonce" in line for line in titles) and "Qualcomm" in titles[0], text
    stored = await FeedbackRepository(world.database).last_views(other.id, monitor_id=imported)
    assert {d["by"] for d in stored[0].view["kept"]} == {"vectors"}


# ---- with a model: the critique sees a few of the reader's marks ------------------------------------------------


def _critique_answer(messages: list[ModelMessage], info: AgentInfo) -> dict[str, Any] | BaseException:
    """The heavy model: a plain critique of every item it is asked about; any other request (the digest) fails, so
    the run writes its digest without a model."""
    prompt = "\n".join(user_prompts(messages))
    asked = re.search(r"Assess these (\d+) items", prompt)
    if asked is None:
        return ModelHTTPError(503, "scripted", body={"error": "only the critique is scripted"})
    return {
        "assessments": [
            {"number": n, "relevance": 0.5, "credibility": 0.5, "reason": "plausible"}
            for n in range(1, int(asked[1]) + 1)
        ],
        "contradictions": [],
    }


async def test_the_critique_sees_the_owners_recent_marks_on_that_monitor_only(world: World, feed: Feed) -> None:
    script = ScriptedModel(_critique_answer, repeat_last=True)
    service = build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=None,
        heavy_model=script.model,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=world.clock,
    )
    owner, subscriber = world.chats[0].id, world.chats[1].id
    marked = await _shared_monitor(world, service)
    other = (await service.create_monitor(owner, "markets", schedule_text="daily at 09:00", sources="news")).id
    first = await _run_and_deliver(world, service, marked, T0)
    await service.runs.run_monitor(other, T0)
    await world.worker().run_once()
    await service.feedback.mark(owner, "less", _stories(first["100"])["Swift"], monitor_id=marked)
    await service.feedback.mark(subscriber, "less", _stories(first["101"])["bank"])  # a subscriber's own view
    feed.today = _items(DAY_TWO, -23.0)

    before = script.calls
    await service.runs.run_monitor(marked, T0 + timedelta(days=1))
    marked_prompts = [p for r in script.requests[before:] for p in user_prompts(r) if "Assess these" in p]
    before = script.calls
    await service.runs.run_monitor(other, T0 + timedelta(days=1))
    other_prompts = [p for r in script.requests[before:] for p in user_prompts(r) if "Assess these" in p]

    assert len(marked_prompts) == 1 and len(other_prompts) == 1, "one critique per run, for every subscriber"
    assert "not wanted: Pop singer Taylor Swift announces stadium tour dates (celebgossip.net)" in marked_prompts[0]
    assert "Central bank" not in marked_prompts[0].split("<reader_marks>")[1], "the owner's marks, not a subscriber's"
    assert "reader_marks" not in other_prompts[0], "a mark on one monitor changes nothing for another"
