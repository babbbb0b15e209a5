"""`MonitorService.search_now`: a one-off search runs the pipeline and queues its digest for the asking chat only."""

from __future__ import annotations

from pathlib import Path

import pytest

from research.collect import ProgressEvent
from sources.base import SearchQuery
from sources.registry import DEFAULT_SOURCES
from storage import RunStatus
from storage.repositories import ChatRepository, DeliveryRepository, MonitorRepository, RunRepository
from tests.monitors.conftest import World, story_source
from tests.research.fake_sources import RecordingSource, make_item


@pytest.fixture
def default_mix(world: World) -> World:
    """Fake sources under every name of the default mix (the search uses the default mix)."""
    for name in DEFAULT_SOURCES:
        world.sources.setdefault(name, story_source(name))
    return world


async def test_the_digest_and_files_reach_only_the_asking_chat(default_mix: World) -> None:
    world = default_mix
    service = world.service()
    events: list[ProgressEvent] = []
    # another chat's monitor on the same topic must be left alone
    other = await service.create_monitor(world.chats[1].id, "DeepSeek", sources="hn")

    summary = await service.runs.search_now(world.chats[0].id, "  DeepSeek   news ", progress=events.append)
    report = await world.worker().run_once()

    assert summary.status == "ok" and summary.monitor_id is None  # a search names no monitor
    assert summary.items == 3 * len(DEFAULT_SOURCES) and summary.deliveries == 1
    assert {name: len(world.sources[name].queries) > 0 for name in DEFAULT_SOURCES} == dict.fromkeys(
        DEFAULT_SOURCES, True
    )
    assert report.sent == 1 and world.sender.delivered_to() == ["100"]
    sent = world.sender.pop_message()
    assert sent.text.startswith("**DeepSeek news**") and "monitor #" not in sent.text
    assert "[1]" in sent.text  # a cited digest, not a notice
    assert [a.kind for a in sent.message.attachments] == ["document", "image"]
    csv_attachment = sent.message.attachments[0]
    assert csv_attachment.filename.startswith("deepseek-news-") and csv_attachment.filename.endswith(".csv")
    assert "-search-r" in csv_attachment.path.name and csv_attachment.path.is_file()
    assert "HN story 0 about DeepSeek" in csv_attachment.path.read_text(encoding="utf-8-sig")
    assert any(event.kind == "stage" and "checking the top" in event.message for event in events)

    run = await RunRepository(world.database).get(summary.run_id or 0)
    assert run is not None and run.monitor_id is None and run.chat_id == world.chats[0].id
    assert run.query == "DeepSeek news" and run.status is RunStatus.SUCCEEDED
    assert run.stats["kind"] == "search" and run.stats["monitor_id"] is None
    # no monitor was created, and the other chat's monitor is untouched (no run, no plan, no last result)
    monitors = MonitorRepository(world.database)
    assert [m.id for m in await monitors.list_all()] == [other.id]
    untouched = await monitors.get(other.id)
    assert untouched is not None and untouched.last_run_at is None and untouched.plan is None
    assert await RunRepository(world.database).list_for_monitor(other.id) == []


async def test_the_search_uses_the_chats_language_and_timezone(default_mix: World, tmp_path: Path) -> None:
    world = default_mix
    await ChatRepository(world.database).update(world.chats[0].id, language="de", timezone="Asia/Shanghai")
    service = world.service()

    summary = await service.runs.search_now(world.chats[0].id, "DeepSeek")
    await world.worker().run_once()

    assert summary.status == "ok"
    assert {query.language for query in world.sources["hn"].queries} == {"de"}
    assert "CST" in world.sender.pop_message().text.splitlines()[0]  # the header's time, in Shanghai


async def test_a_search_where_every_source_fails_queues_nothing(world: World) -> None:
    def broken(query: SearchQuery) -> list:  # type: ignore[type-arg]
        raise RuntimeError("boom")

    for name in DEFAULT_SOURCES:
        world.sources[name] = RecordingSource(name, broken)
    service = world.service()

    summary = await service.runs.search_now(world.chats[0].id, "DeepSeek")

    assert summary.status == "failed" and summary.error is not None
    assert summary.error.startswith("every source failed: hn: unexpected error, see the log; news: ")
    assert len(summary.source_errors) == len(DEFAULT_SOURCES), "every failing source is named"
    assert summary.deliveries == 0
    assert (await world.worker().run_once()).claimed == 0
    run = await RunRepository(world.database).get(summary.run_id or 0)
    assert run is not None and run.status is RunStatus.FAILED
    assert await MonitorRepository(world.database).list_all() == []


@pytest.mark.parametrize(
    ("query", "sources", "message"),
    [
        ("   ", None, "topic"),
        ("x" * 500, None, "too long"),
        ("DeepSeek", ["nosuch"], "unknown source"),
    ],
)
async def test_bad_searches_are_refused_before_any_run(
    default_mix: World, query: str, sources: list[str] | None, message: str
) -> None:
    service = default_mix.service()

    with pytest.raises(ValueError, match=message):
        await service.runs.search_now(default_mix.chats[0].id, query, sources=sources)

    assert default_mix.searches() == 0
    assert await DeliveryRepository(default_mix.database).claim_due(default_mix.clock()) == []


async def test_search_items_do_not_count_as_delivered_for_a_monitor(default_mix: World) -> None:
    """A later monitor on the same topic still reports the stories a search showed (searches are not monitors)."""
    world = default_mix
    world.sources["hn"] = RecordingSource("hn", lambda q: [make_item("hn", "only", title="DeepSeek only story")])
    service = world.service()
    await service.runs.search_now(world.chats[0].id, "DeepSeek")
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")

    summary = await service.runs.run_now(view.id, world.chats[0].id)

    assert summary.status == "ok" and summary.new_items == 1
