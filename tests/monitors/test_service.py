"""MonitorService: creating and managing monitors per chat, and running them through the real pipeline."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.embeddings import Embedder, TestEmbeddingModel
from pydantic_ai.models.test import TestModel

from app.monitor_service import build_monitor_service
from monitors.schedule import ScheduleError
from monitors.service import split_source_specs
from monitors.views import MonitorAccessError, MonitorNotFoundError, MonitorSettings
from research import ItemEmbedder
from research.pipeline import run_pipeline
from research.pipeline_models import PipelineRequest, PipelineResult
from sources.base import Item, SourceError, SourceErrorKind
from sources.registry import DEFAULT_SOURCES
from storage import RunStatus, UsageEntry
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    ItemRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
    UsageRepository,
)
from tests.monitors.conftest import T0, World, story_source
from tests.monitors.fakes import resolver
from tests.research.fake_sources import FailingSource, RecordingSource, make_item

# ---- managing monitors -------------------------------------------------------------------------------------


async def test_create_monitor_validates_and_describes_it(world: World) -> None:
    service = world.service()
    changed: list[int] = []

    async def listener(monitor_id: int) -> None:
        changed.append(monitor_id)

    service.add_listener(listener)
    view = await service.create_monitor(
        world.chats[0].id, "  DeepSeek  ", schedule_text="daily at 08:30 in Asia/Shanghai", sources="hn, news"
    )

    assert view.topic == "DeepSeek"
    assert view.schedule == "every day at 08:30 (Asia/Shanghai)"
    assert view.sources == ("hn", "news")
    assert view.last_result == "never run yet"
    # 13:00 UTC is 21:00 in Shanghai: the next 08:30 there is 00:30 UTC the next day (the chat's zone is UTC)
    assert view.next_run is not None and view.next_run.isoformat() == "2026-11-21T00:30:00+00:00"
    assert changed == [view.id]
    stored = await MonitorRepository(world.database).get(view.id)
    assert stored is not None and stored.schedule == "daily at 08:30 in Asia/Shanghai"
    assert stored.lookback_hours == 24
    assert f"#{view.id} DeepSeek" in view.summary()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"schedule_text": "every 5 minutes"}, ScheduleError, "too often"),
        ({"schedule_text": "fortnightly"}, ScheduleError, "don't understand"),
        ({"sources": "hn,myspace"}, ValueError, "myspace"),
        ({"lookback_hours": 0, "sources": "hn"}, ValueError, "look-back"),
    ],
)
async def test_create_monitor_refuses_bad_input_with_a_reason(
    world: World, kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    service = world.service()
    with pytest.raises(error, match=words):
        await service.create_monitor(world.chats[0].id, "DeepSeek", **kwargs)
    with pytest.raises(ValueError, match="topic"):
        await service.create_monitor(world.chats[0].id, "   ")
    assert await MonitorRepository(world.database).list_all() == []


async def test_acting_on_another_chats_monitor_is_refused_but_an_admin_may(world: World) -> None:
    service = world.service()
    owner, stranger = world.chats[0].id, world.chats[1].id
    view = await service.create_monitor(owner, "DeepSeek", sources="hn")

    for action in (service.pause, service.resume, service.delete):
        with pytest.raises(MonitorAccessError, match=f"no monitor #{view.id}"):
            await action(view.id, chat_id=stranger)
    with pytest.raises(MonitorAccessError):
        await service.update_monitor(view.id, chat_id=stranger, topic="hijacked")
    with pytest.raises(MonitorAccessError):
        await service.runs.run_now(view.id, stranger)
    assert [v.id for v in await service.list_monitors(stranger)] == []
    stored = await MonitorRepository(world.database).get(view.id)
    assert stored is not None and stored.topic == "DeepSeek" and not stored.paused
    assert world.searches() == 0

    paused = await service.pause(view.id, chat_id=stranger, is_admin=True)
    assert paused.paused and paused.next_run is None
    deleted = await service.delete(view.id, chat_id=stranger, is_admin=True)
    assert deleted.id == view.id
    with pytest.raises(MonitorNotFoundError):
        await service.pause(view.id, chat_id=owner)


async def test_pause_resume_and_update_move_the_next_run(world: World) -> None:
    service = world.service()
    chat = world.chats[0].id
    view = await service.create_monitor(chat, "DeepSeek", schedule_text="every 6 hours", sources="hn")
    assert view.next_run is not None and view.next_run.isoformat() == "2026-11-20T18:00:00+00:00"

    assert (await service.pause(view.id, chat_id=chat)).next_run is None
    world.clock.advance(hours=6)  # 19:00: the 18:00 run was missed while paused and is not made up
    resumed = await service.resume(view.id, chat_id=chat)
    assert resumed.next_run is not None and resumed.next_run.isoformat() == "2026-11-21T00:00:00+00:00"

    await MonitorRepository(world.database).set_plan(view.id, {"topic": "DeepSeek"}, now=T0)
    updated = await service.update_monitor(
        view.id, chat_id=chat, topic="DeepSeek R2", schedule_text="daily at 07:00", timezone="Europe/Berlin"
    )
    assert updated.topic == "DeepSeek R2"
    assert updated.schedule == "every day at 07:00 (Europe/Berlin)"
    assert updated.next_run is not None and updated.next_run.isoformat() == "2026-11-21T06:00:00+00:00"
    stored = await MonitorRepository(world.database).get(view.id)
    assert stored is not None and stored.plan is None  # a new topic needs a new plan

    moved = await service.update_monitor(view.id, chat_id=chat, timezone="Asia/Tokyo")
    assert moved.schedule == "every day at 07:00 (Asia/Tokyo)"
    with pytest.raises(ScheduleError):
        await service.update_monitor(view.id, chat_id=chat, schedule_text="every minute")


# ---- running -------------------------------------------------------------------------------------------------


async def test_a_run_stores_items_and_queues_the_digest_for_the_owner(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn,news")

    summary = await service.runs.run_monitor(view.id, T0)

    assert summary is not None and summary.status == "ok"
    assert summary.items == 6 and summary.new_items == 6 and summary.deliveries == 1
    assert summary.digest is not None and summary.digest.cited
    assert summary.artifacts["csv"].is_file() and summary.artifacts["chart"].is_file()
    rows = await DeliveryRepository(world.database).list_for_run(summary.run_id or 0)
    assert [row.chat_id for row in rows] == [world.chats[0].id]
    delivered = await ItemRepository(world.database).delivered_ids(view.id)
    assert delivered == {f"{name}:{name}-{n}" for name in ("hn", "news") for n in range(3)}
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.last_status == "ok" and monitor.plan is not None
    assert monitor.next_run_at is not None and monitor.next_run_at > T0
    listed = await service.list_monitors(world.chats[0].id)
    assert listed[0].last_result == "ok: 6 new items"


async def test_a_runs_embeddings_are_counted_apart_from_its_language_model(world: World) -> None:
    embedder = ItemEmbedder(
        embedder=Embedder(TestEmbeddingModel("embed", provider_name="test")), model_name="test:embed"
    )

    async def pipeline(request: PipelineRequest, **options: Any) -> PipelineResult:
        return await run_pipeline(request, embedder=embedder, **options)

    service = world.service(pipeline=pipeline)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn,news")

    summary = await service.runs.run_monitor(view.id, T0)

    assert summary is not None and summary.status == "ok"
    kinds = await UsageRepository(world.database).by_kind(world.chats[0].id, T0.date(), T0.date())
    # No language model ran (none configured): the day shows the embeddings, as embeddings.
    assert set(kinds) == {"embedding"}
    assert kinds["embedding"].requests >= 1 and kinds["embedding"].input_tokens > 0


async def test_double_firing_gives_one_run(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")

    first, second = await asyncio.gather(service.runs.run_monitor(view.id, T0), service.runs.run_monitor(view.id, T0))
    again = await service.runs.run_monitor(view.id, T0)

    assert [s is None for s in (first, second)].count(True) == 1
    assert again is None
    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert len(runs) == 1 and runs[0].status is RunStatus.SUCCEEDED
    searches_of_one_run = world.searches()
    assert searches_of_one_run == len(world.sources["hn"].queries) > 0
    assert len(await DeliveryRepository(world.database).list_for_run(runs[0].id)) == 1


async def test_one_monitor_with_three_chats_collects_once_and_delivers_three_times(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    for chat in world.chats[1:]:
        await service.subscribe(chat.id, view.id)

    summary = await service.runs.run_monitor(view.id, T0)
    report = await world.worker().run_once()

    assert summary is not None and summary.deliveries == 3
    assert len(await RunRepository(world.database).list_for_monitor(view.id)) == 1
    assert report.sent == 3
    assert sorted(world.sender.delivered_to()) == ["100", "101", "102"]
    assert {sent.message.run_id for sent in world.sender.sent} == {summary.run_id}
    first = world.sender.pop_message()
    assert "DeepSeek" in first.text and "[1]" in first.text
    assert [a.kind for a in first.message.attachments] == ["document", "image"]
    assert first.message.attachments[0].filename.endswith(".csv")


async def test_by_default_a_monitor_sends_nothing_on_an_empty_day(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    assert view.quiet
    worker = world.worker()

    first = await service.runs.run_monitor(view.id, T0)
    await worker.run_once()
    assert first is not None and first.status == "ok"
    assert "story" in world.sender.pop_message().text.lower()

    # the next day the sources return the very same stories: nothing is new
    world.clock.advance(days=1)
    second = await service.runs.run_monitor(view.id, T0 + timedelta(days=1))
    await worker.run_once()

    assert second is not None and second.status == "empty" and second.deliveries == 0
    assert world.sender.is_quiet()
    assert (await service.list_monitors(world.chats[0].id))[0].last_result == "nothing new"


async def test_a_monitor_that_asks_for_notes_gets_a_short_one_when_nothing_is_new(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    await service.update_monitor(view.id, chat_id=world.chats[0].id, quiet=False)
    worker = world.worker()
    await service.runs.run_monitor(view.id, T0)
    await worker.run_once()
    world.sender.pop_message()

    world.clock.advance(days=1)
    second = await service.runs.run_monitor(view.id, T0 + timedelta(days=1))
    await worker.run_once()

    assert second is not None and second.status == "empty" and second.deliveries == 1
    note = world.sender.pop_message()
    assert note.message.run_id == second.run_id
    assert note.text.startswith("Nothing new about “DeepSeek” (monitor #1) since the last digest: 3 items collected")
    assert "`/quiet 1 on` stops these notes." in note.text
    # a note, not a digest: no self-check score, no files
    assert "Self-check" not in note.text and "%" not in note.text
    assert note.message.attachments == ()
    assert (await service.list_monitors(world.chats[0].id))[0].last_result == "nothing new"


async def test_a_failing_monitor_tells_its_chats_once_per_streak_and_backs_off(world: World) -> None:
    world.sources["hn"] = FailingSource("hn", SourceError(SourceErrorKind.TIMEOUT, "timed out after 30 s"))
    world.sources["news"] = FailingSource("news", SourceError(SourceErrorKind.RATE_LIMITED, "429", status=429))
    service = world.service()
    owner, other = world.chats[0], world.chats[1]
    view = await service.create_monitor(owner.id, "DeepSeek", schedule_text="every 1 hour", sources="hn,news")
    await service.subscribe(other.id, view.id)
    monitors, worker = MonitorRepository(world.database), world.worker()

    next_runs = []
    for hour in range(5):
        when = T0 + timedelta(hours=hour)
        world.clock.set(when)
        summary = await service.runs.run_monitor(view.id, when)
        assert summary is not None and summary.status == "failed"
        monitor = await monitors.get(view.id)
        assert monitor is not None
        next_runs.append(monitor.next_run_at)
        await worker.run_once()

    # told at the first failure, every chat of the monitor, once for the whole streak
    notices = [world.sender.pop_message(), world.sender.pop_message()]
    assert world.sender.is_quiet()
    assert {notice.chat.id for notice in notices} == {owner.id, other.id}
    assert (
        notices[0].text
        == notices[1].text
        == (
            "⚠️ Monitor #1 “DeepSeek” failed: every source failed.\n- hn: timed out\n- news: rate-limited (HTTP 429)\n"
            "I'll try again at 2026-11-20 14:00 UTC. Send /pause 1 to stop it."
        )
    )
    # hourly runs for the first failures, then skipped slots growing: 1, 3 then 7 hours skipped
    assert [(run - T0).total_seconds() / 3600 for run in next_runs if run] == [1, 2, 4, 7, 12]
    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert {run.status for run in runs} == {RunStatus.FAILED}
    listed = (await service.list_monitors(owner.id))[0]
    assert listed.last_result == (
        "failed (5 runs in a row): every source failed: hn: timed out; news: rate-limited (HTTP 429)"
    )

    # a run that works ends the streak; the next failure is told again
    failing = world.sources["hn"], world.sources["news"]
    world.sources["hn"], world.sources["news"] = story_source("hn"), story_source("news")
    await service.runs.run_monitor(view.id, T0 + timedelta(hours=12))
    world.sources["hn"], world.sources["news"] = failing
    await service.runs.run_monitor(view.id, T0 + timedelta(hours=13))
    await worker.run_once()
    texts = [world.sender.pop_message().text for _ in range(4)]
    assert world.sender.is_quiet()
    assert sum(text.startswith("⚠️ Monitor #1 “DeepSeek” failed: every source failed.") for text in texts) == 2


async def test_success_after_failures_resets_the_notice(world: World) -> None:
    healthy = world.sources["hn"]
    world.sources["hn"] = FailingSource("hn", SourceError(SourceErrorKind.SERVER, "502 Bad Gateway", status=502))
    service = world.service(failure_notice_after=1)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="hourly", sources="hn")
    await service.runs.run_monitor(view.id, T0)
    world.sources["hn"] = healthy
    await service.runs.run_monitor(view.id, T0 + timedelta(hours=2))

    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None
    assert monitor.consecutive_failures == 0 and monitor.failure_notified_at is None and monitor.last_status == "ok"


async def test_an_exception_inside_a_run_is_caught_logged_and_marked_failed(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken_pipeline(request: PipelineRequest, **_: Any) -> PipelineResult:
        raise RuntimeError("the pipeline tripped")

    service = world.service(pipeline=broken_pipeline)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")

    summary = await service.runs.run_monitor(view.id, T0)

    assert summary is not None and summary.status == "failed" and summary.error_id
    assert summary.error == "RuntimeError: the pipeline tripped"
    assert f"error id {summary.error_id}" in caplog.text
    runs = await RunRepository(world.database).list_for_monitor(view.id)
    assert runs[0].status is RunStatus.FAILED and summary.error_id in (runs[0].error or "")
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.next_run_at is not None and monitor.next_run_at > T0


async def test_the_pipeline_request_carries_the_monitor_and_what_it_delivered(world: World) -> None:
    requests: list[PipelineRequest] = []

    async def recording_pipeline(request: PipelineRequest, **kwargs: Any) -> PipelineResult:
        requests.append(request)
        return await run_pipeline(request, **kwargs)

    service = world.service(pipeline=recording_pipeline)
    chats = world.database

    await ChatRepository(chats).update(world.chats[0].id, profile="We build inference chips.", language="en")
    view = await service.create_monitor(
        world.chats[0].id, "DeepSeek", sources="hn", include_keywords=["DeepSeek"], lookback_hours=48
    )
    await service.runs.run_monitor(view.id, T0)
    await service.runs.run_monitor(view.id, T0 + timedelta(days=1))

    first, second = requests
    assert first.until == T0 and first.since == T0 - timedelta(hours=48)
    assert first.profile == "We build inference chips." and first.language == "en"
    assert list(first.include_keywords) == ["DeepSeek"]
    assert first.already_delivered == frozenset() and first.previous_digest is None
    assert second.already_delivered == {f"hn:hn-{n}" for n in range(3)}
    assert second.previous_digest is not None and second.plan is not None
    assert {item.id for item in second.delivered_items} == second.already_delivered


async def test_novelty_is_handed_the_items_delivered_in_the_last_week_not_only_by_the_last_run(world: World) -> None:
    # A story delivered two digests ago must still be known by its words, or a copy of it by another outlet is a
    # story of its own and is sent again; past `story_memory_days` only the ids are remembered.
    requests: list[PipelineRequest] = []

    async def recording_pipeline(request: PipelineRequest, **kwargs: Any) -> PipelineResult:
        requests.append(request)
        return await run_pipeline(request, **kwargs)

    found: list[Item] = [
        make_item("hn", f"hn-{n}", title=f"HN story {n} about DeepSeek", text="DeepSeek") for n in range(3)
    ]
    world.sources["hn"] = RecordingSource("hn", lambda query: list(found))
    service = world.service(pipeline=recording_pipeline)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    await service.runs.run_monitor(view.id, T0)
    found[:] = [make_item("hn", "qwen", title="Qwen 3 weights released, says DeepSeek rival", hours_ago=-23)]
    await service.runs.run_monitor(view.id, T0 + timedelta(days=1))
    for days in (2, MonitorSettings.story_memory_days + 2):
        await service.runs.run_monitor(view.id, T0 + timedelta(days=days))

    _, second, third, much_later = requests
    first_delivered = {f"hn:hn-{n}" for n in range(3)}
    assert {item.id for item in second.delivered_items} == first_delivered
    assert {item.id for item in third.delivered_items} == {*first_delivered, "hn:qwen"}, "not only the last digest's"
    assert {item.id for item in much_later.delivered_items} == {"hn:qwen"}, "the last digest's, and no older"
    assert much_later.already_delivered == {*first_delivered, "hn:qwen"}


async def test_run_now_delivers_to_the_asking_chat_only(world: World) -> None:
    service = world.service()
    owner, subscriber = world.chats[0], world.chats[1]
    view = await service.create_monitor(owner.id, "DeepSeek", sources="hn")
    await service.subscribe(subscriber.id, view.id)

    preview = await service.runs.run_now(view.id, subscriber.id)
    await world.worker().run_once()

    assert preview.status == "ok" and preview.deliveries == 1
    assert world.sender.delivered_to() == [subscriber.external_id]
    # a preview does not use up the items: the scheduled digest still brings them to everyone
    assert await ItemRepository(world.database).delivered_ids(view.id) == set()
    scheduled = await service.runs.run_monitor(view.id, T0)
    assert scheduled is not None and scheduled.new_items == 3 and scheduled.deliveries == 2


async def test_run_now_for_the_only_subscriber_counts_as_a_monitor_run(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")

    summary = await service.runs.run_now(view.id, world.chats[0].id)

    assert summary.deliveries == 1
    assert len(await ItemRepository(world.database).delivered_ids(view.id)) == 3
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.last_status == "ok"
    assert monitor.next_run_at == (await service.get_monitor(view.id, chat_id=world.chats[0].id)).next_run


async def test_a_monitor_without_active_subscribers_does_not_run(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    await SubscriptionRepository(world.database).set_active_for_chat(world.chats[0].id, active=False)

    assert await service.runs.run_monitor(view.id, T0) is None
    assert world.searches() == 0
    monitor = await MonitorRepository(world.database).get(view.id)
    assert monitor is not None and monitor.next_run_at is not None and monitor.next_run_at > T0


def test_service_takes_the_real_pipeline_by_default(world: World) -> None:
    service = build_monitor_service(
        world.database, resolve_sources=lambda specs: [], light_model=None, heavy_model=None, out_dir=world.out_dir
    )
    assert service._runner._pipeline is run_pipeline


async def test_a_chats_timezone_is_the_default_and_times_are_shown_in_it(world: World) -> None:
    await ChatRepository(world.database).update(world.chats[0].id, timezone="Asia/Shanghai")
    service = world.service()

    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="daily at 08:30", sources="hn")

    assert view.schedule == "every day at 08:30 (Asia/Shanghai)"
    assert view.next_run is not None and view.next_run.isoformat() == "2026-11-21T08:30:00+08:00"
    assert "next 2026-11-21 08:30 CST" in view.summary()


async def test_run_now_reports_progress(world: World) -> None:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn")
    events: list[str] = []

    await service.runs.run_now(view.id, world.chats[0].id, progress=lambda event: events.append(event.message))

    assert any("hn" in message for message in events)


@pytest.mark.parametrize(
    ("given", "specs"),
    [
        ("hn, news,hn", ["hn", "news"]),
        (["rss:https://example.com/feed?tags=a,b", " hn "], ["rss:https://example.com/feed?tags=a,b", "hn"]),
        ("", list(DEFAULT_SOURCES)),
        (None, list(DEFAULT_SOURCES)),
    ],
)
def test_source_specs_are_split_and_default_to_the_mix(given: str | list[str] | None, specs: list[str]) -> None:
    assert split_source_specs(given) == specs


async def test_the_previous_digest_is_the_last_one_that_went_out(world: World) -> None:
    requests: list[PipelineRequest] = []

    async def recording_pipeline(request: PipelineRequest, **kwargs: Any) -> PipelineResult:
        requests.append(request)
        return await run_pipeline(request, **kwargs)

    service = world.service(pipeline=recording_pipeline)
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn", quiet=True)
    first = await service.runs.run_monitor(view.id, T0)
    empty = await service.runs.run_monitor(view.id, T0 + timedelta(days=1))
    await service.runs.run_monitor(view.id, T0 + timedelta(days=2))

    assert first is not None and first.digest is not None
    assert empty is not None and empty.status == "empty"
    assert requests[2].previous_digest is not None
    assert requests[2].previous_digest.headline == first.digest.headline


async def test_a_chat_without_its_own_timezone_sees_times_in_the_deployment_default(world: World) -> None:
    service = build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=None,
        heavy_model=None,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900, default_timezone="Asia/Shanghai"),
        clock=world.clock,
    )
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="daily at 08:30", sources="hn")
    assert view.next_run is not None
    assert str(view.next_run.tzinfo) == "Asia/Shanghai"
    assert (view.next_run.hour, view.next_run.minute) == (8, 30)


@pytest.mark.parametrize("spent", [True, False], ids=["budget-spent", "budget-left"])
async def test_a_scheduled_run_of_a_chat_over_its_daily_budget_runs_without_the_model(
    world: World, spent: bool
) -> None:
    """CHAT_DAILY_TOKENS bounds a chat's monitors too: a scheduled run whose owner has spent today's budget runs the
    model-free path (its digest says so) and still goes out; with budget left the run is handed the models."""
    handed: list[tuple[Any, Any]] = []

    async def recording_pipeline(request: PipelineRequest, **options: Any) -> PipelineResult:
        handed.append((options["light_model"], options["heavy_model"]))
        return await run_pipeline(request, **options)

    model = TestModel()
    service = build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=model,
        heavy_model=model,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900, chat_daily_tokens=1_000),
        clock=world.clock,
        pipeline=recording_pipeline,
    )
    owner = world.chats[0]
    monitor = await service.create_monitor(owner.id, "DeepSeek", sources="hn")
    used = 1_000 if spent else 999
    await UsageRepository(world.database).add(
        owner.id, T0.date(), UsageEntry(kind="chat", input_tokens=used, output_tokens=0)
    )

    summary = await service.runs.run_monitor(monitor.id, T0)
    await world.worker().run_once()

    assert summary is not None and summary.status == "ok"
    assert handed == ([(None, None)] if spent else [(model, model)])
    digests = [sent.text for sent in world.sender.sent]
    assert len(digests) == 1
    assert ("Summarised without a language model." in digests[0]) is spent
