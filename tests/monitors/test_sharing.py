"""Sharing monitors between chats: who may subscribe, whose pause stops what, deletion and handover notices,
/track's offer, and one collection with one digest written per subscriber language."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from app.monitor_service import build_monitor_service
from kernel import RetryLater
from monitors.delivery import DeliveryWorker, mark_chat_gone
from monitors.service import MonitorService
from monitors.sharing import normalise_topic
from monitors.views import MonitorAccessError, MonitorNotFoundError, MonitorSettings
from research.pipeline import run_pipeline
from sources.base import Item, SearchQuery
from storage import DeliveryMode
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    MonitorRepository,
    RunRepository,
    SubscriptionRepository,
)
from tests.kit import ScriptedModel
from tests.monitors.conftest import T0, World
from tests.monitors.fakes import RecordingSender, resolver
from tests.research.fake_sources import RecordingSource, make_item


async def _shared(world: World, service: MonitorService, topic: str = "DeepSeek", *, quiet: bool = False) -> int:
    # Not quiet by default here: a run with nothing new still sends its note, so every run shows which chats
    # receive it.
    view = await service.create_monitor(
        world.chats[0].id, topic, schedule_text="daily at 08:00", sources="hn", quiet=quiet
    )
    await service.sharing.share(view.id, chat_id=world.chats[0].id)
    return view.id


async def test_only_shared_monitors_can_be_browsed_and_subscribed(world: World) -> None:
    service = world.service()
    owner, other = world.chats[0].id, world.chats[1].id
    private = await service.create_monitor(owner, "Mistral", sources="hn")
    shared = await _shared(world, service)

    listed = await service.sharing.browse(other)
    with pytest.raises(MonitorAccessError, match="no shared monitor #"):
        await service.sharing.subscribe(other, private.id)
    view, fresh = await service.sharing.subscribe(other, shared)
    again, fresh_again = await service.sharing.subscribe(other, shared)

    assert [entry.view.id for entry in listed] == [shared]
    assert listed[0].owner == "chat 0" and listed[0].view.receivers == 1 and not listed[0].view.subscribed
    assert fresh and not fresh_again
    assert not view.owned_here and view.subscribed and again.receivers == 2
    assert [entry.view.subscribed for entry in await service.sharing.browse(other)] == [True]
    assert [entry.view.id for entry in await service.sharing.browse(other, words="deep")] == [shared]
    assert await service.sharing.browse(other, words="mistral") == []
    # an admin may put a chat on a private monitor
    _, admin_fresh = await service.sharing.subscribe(other, private.id, is_admin=True)
    assert admin_fresh
    # subscribers cannot change the monitor
    with pytest.raises(MonitorAccessError):
        await service.sharing.share(shared, chat_id=other)
    with pytest.raises(MonitorAccessError):
        await service.pause(shared, chat_id=other)


async def test_unsharing_keeps_subscribers_but_takes_it_out_of_browse(world: World) -> None:
    service = world.service()
    shared = await _shared(world, service)
    await service.sharing.subscribe(world.chats[1].id, shared)

    view = await service.sharing.unshare(shared, chat_id=world.chats[0].id)

    assert not view.shared and view.receivers == 2
    assert await service.sharing.browse(world.chats[2].id) == []
    with pytest.raises(MonitorAccessError):
        await service.sharing.subscribe(world.chats[2].id, shared)


async def test_one_run_one_collection_a_row_per_receiving_chat_and_a_subscriber_pause_is_its_own(world: World) -> None:
    service = world.service()
    owner, second, third = (chat.id for chat in world.chats)
    shared = await _shared(world, service)
    await service.sharing.subscribe(second, shared)
    await service.sharing.subscribe(third, shared)

    first = await service.runs.run_monitor(shared, T0)
    searches_for_three_chats = world.searches()
    alone = await service.create_monitor(owner, "DeepSeek", schedule_text="daily at 08:00", sources="hn")
    await service.runs.run_monitor(alone.id, T0)
    searches_for_one_chat = world.searches() - searches_for_three_chats
    await world.worker().run_once()
    await service.sharing.pause_delivery(second, shared)
    paused_run = await service.runs.run_monitor(shared, T0 + timedelta(days=1))
    await service.sharing.unsubscribe(third, shared)
    after_leaving = await service.runs.run_monitor(shared, T0 + timedelta(days=2))

    assert first is not None and first.deliveries == 3
    assert searches_for_three_chats == searches_for_one_chat > 0  # one collection, whatever the subscribers
    assert sorted(world.sender.delivered_to()) == ["100", "100", "101", "102"]
    assert paused_run is not None and paused_run.deliveries == 2  # the monitor ran for the others
    monitor = await MonitorRepository(world.database).get(shared)
    assert monitor is not None and not monitor.paused
    assert after_leaving is not None and after_leaving.deliveries == 1
    assert len(await RunRepository(world.database).list_for_monitor(shared)) == 3
    view, changed = await service.sharing.resume_delivery(second, shared)
    assert changed and not view.delivery_paused


async def test_the_owner_cannot_leave_its_own_monitor(world: World) -> None:
    service = world.service()
    shared = await _shared(world, service)
    with pytest.raises(ValueError, match="owns monitor"):
        await service.sharing.unsubscribe(world.chats[0].id, shared)
    with pytest.raises(MonitorNotFoundError):
        await service.sharing.unsubscribe(world.chats[1].id, shared)


async def test_deleting_a_shared_monitor_tells_its_subscribers_through_the_outbox(world: World) -> None:
    service = world.service()
    owner, second, third = (chat.id for chat in world.chats)
    shared = await _shared(world, service)
    await service.sharing.subscribe(second, shared)
    await service.sharing.subscribe(third, shared)
    await service.sharing.pause_delivery(third, shared)

    await service.delete(shared, chat_id=owner)
    await world.worker().run_once()

    told = world.sender.sent
    assert [sent.chat.external_id for sent in told] == ["101"]  # not the owner, not a chat that paused it
    assert "“DeepSeek” was deleted by the chat that owned it" in told[0].text


async def test_transfer_goes_to_a_subscriber_who_is_told(world: World) -> None:
    service = world.service()
    owner, second, third = world.chats
    shared = await _shared(world, service)
    await service.sharing.subscribe(second.id, shared)

    with pytest.raises(ValueError, match="does not subscribe"):
        await service.sharing.transfer(shared, chat_id=owner.id, to_chat=third)
    view = await service.sharing.transfer(shared, chat_id=owner.id, to_chat=second)
    await world.worker().run_once()

    assert not view.owned_here and view.subscribed  # the old owner keeps receiving it
    monitor = await MonitorRepository(world.database).get(shared)
    assert monitor is not None and monitor.owner_chat_id == second.id
    (notice,) = world.sender.sent
    assert notice.chat.id == second.id and "You now own monitor" in notice.text
    await service.pause(shared, chat_id=second.id)  # the new owner may change it
    with pytest.raises(MonitorAccessError):
        await service.resume(shared, chat_id=owner.id)


async def test_when_the_owner_chat_is_gone_the_oldest_receiving_subscriber_takes_over(world: World) -> None:
    service = world.service()
    owner, second, third = world.chats
    shared = await _shared(world, service)
    await service.sharing.subscribe(second.id, shared)
    await service.sharing.subscribe(third.id, shared)
    await service.sharing.pause_delivery(second.id, shared)  # the oldest, but it paused it: skipped
    alone = await service.create_monitor(owner.id, "Qwen", sources="hn")

    await mark_chat_gone(world.database, owner, reason="bot was blocked by the user", now=world.clock())
    await world.worker().run_once()

    monitors = MonitorRepository(world.database)
    handed = await monitors.get(shared)
    kept = await monitors.get(alone.id)
    assert handed is not None and handed.owner_chat_id == third.id
    assert kept is not None and kept.owner_chat_id == owner.id  # nobody else received it
    assert [sent.chat.id for sent in world.sender.sent] == [third.id]
    assert "the chat that owned it is gone" in world.sender.sent[0].text
    # the monitor keeps running for its new owner; the gone chat's subscription is inactive
    run = await service.runs.run_monitor(shared, T0)
    assert run is not None and run.deliveries == 1


async def test_track_finds_a_shared_monitor_with_the_same_topic_and_compatible_sources(world: World) -> None:
    service = world.service()
    other = world.chats[1].id
    shared = await _shared(world, service, topic="Open-Source LLM", quiet=True)  # quiet, as /track creates it

    same = await service.sharing.offer_for(other, "open source llm", schedule_words="every 6 hours")
    subset = await service.sharing.offer_for(other, "Open Source LLM", sources=["hn"])
    wider = await service.sharing.offer_for(other, "Open Source LLM", sources=["hn", "news"])
    other_topic = await service.sharing.offer_for(other, "open source LLM licences")
    mine = await service.sharing.offer_for(world.chats[0].id, "open source llm")

    assert normalise_topic("  Open-Source   LLM! ") == normalise_topic("open source llm") == "open source llm"
    assert same is not None and same.view.id == shared
    assert same.differences == ("it runs every day at 08:00 (UTC) (you asked for every 6 hours)", "it searches hn")
    assert subset is not None and subset.differences == ()
    assert wider is None and other_topic is None and mine is None
    await service.sharing.subscribe(other, shared)
    assert await service.sharing.offer_for(other, "open source llm") is None  # already receives it

    await service.update_monitor(shared, chat_id=world.chats[0].id, quiet=False)
    noisy = await service.sharing.offer_for(world.chats[2].id, "Open Source LLM", sources=["hn"])
    assert noisy is not None and noisy.differences == ("it sends a short note when there is nothing new",)


async def test_set_delivery_keeps_a_monitor_out_of_a_briefing(world: World) -> None:
    service = world.service()
    owner = world.chats[0]
    shared = await _shared(world, service)
    await service.briefings.set_briefing(owner.id, None)
    from monitors.schedule import parse_schedule

    await service.briefings.set_briefing(
        owner.id, parse_schedule("daily at 07:00", timezone="UTC", min_interval_seconds=900)
    )
    in_briefing = await service.runs.run_monitor(shared, T0)
    await service.sharing.set_delivery(owner.id, shared, DeliveryMode.NOW)
    one_by_one = await service.runs.run_monitor(shared, T0 + timedelta(days=1))

    assert in_briefing is not None and in_briefing.deliveries == 0  # it waits for the briefing
    assert one_by_one is not None and one_by_one.deliveries == 1
    subscription = await SubscriptionRepository(world.database).get(shared, owner.id)
    assert subscription is not None and subscription.delivery is DeliveryMode.NOW


# ---- one collection, one digest per language -------------------------------------------------------------


ITEM_LINE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


class DigestWriter:
    """The heavy model: critiques every item as relevant and writes each digest in the language it is asked for
    (recording which); what it is asked is read from the request, as a real model reads it."""

    def __init__(self) -> None:
        self.digests: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        request = messages[0]
        assert isinstance(request, ModelRequest)
        prompt = "\n".join(
            p.content for p in request.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        )
        numbers = [int(n) for n in ITEM_LINE.findall(prompt)]
        if "assessments" in tool.parameters_json_schema.get("properties", {}):
            verdicts = [{"number": n, "relevance": 0.9, "credibility": 0.8, "reason": "on topic"} for n in numbers]
            return ModelResponse(parts=[ToolCallPart(tool.name, {"assessments": verdicts, "contradictions": []})])
        asked = re.search(r"the reader's language, ([a-z-]+)", request.instructions or "")
        language = asked.group(1) if asked else "none"
        self.digests.append(language)
        draft = {
            "headline": f"[{language}] DeepSeek news",
            "developments": [{"text": f"[{language}] a DeepSeek story", "citations": [numbers[0]]}],
            "quality": {"completeness": 0.8, "quality": 0.7},
        }
        return ModelResponse(parts=[ToolCallPart(tool.name, draft)])


def _written_by(world: World, writer: DigestWriter) -> MonitorService:
    """The world's service with `writer` as its model (synthesis in each reader's language)."""
    return build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=None,
        heavy_model=ScriptedModel(writer, repeat_last=True).model,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=world.clock,
        pipeline=run_pipeline,
    )


async def test_two_languages_among_subscribers_make_two_digests_from_one_collection(world: World) -> None:
    writer = DigestWriter()
    service = _written_by(world, writer)
    chats = ChatRepository(world.database)
    _owner, german, english = world.chats
    await chats.update(german.id, language="de")
    shared = await _shared(world, service)
    await service.sharing.subscribe(german.id, shared)
    await service.sharing.subscribe(english.id, shared)

    summary = await service.runs.run_monitor(shared, T0)
    await world.worker().run_once()

    assert summary is not None and summary.deliveries == 3
    assert len(world.sources["hn"].queries) == world.searches()  # collected once
    assert sorted(writer.digests) == ["de", "none"]  # one synthesis per language, not per chat
    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    assert "[de] DeepSeek news" in received["101"]
    assert "[none] DeepSeek news" in received["100"] and "[none] DeepSeek news" in received["102"]


def next_days_stories(query: SearchQuery) -> list[Item]:
    """What the source finds a day later: a story the monitor has not seen (one, as `DigestWriter` writes one
    development)."""
    title = "DeepSeek publishes V4 weights"
    return [make_item("hn", "day2", title=title, text=f"DeepSeek {title}", points=20, hours_ago=1 - 24)]


async def test_a_language_change_mid_delivery_finishes_that_digest_as_begun_and_the_next_uses_the_new_one(
    world: World,
) -> None:
    writer = DigestWriter()
    service = _written_by(world, writer)
    chats = ChatRepository(world.database)
    _owner, reader, _ = world.chats
    await chats.update(reader.id, language="de")
    shared = await _shared(world, service)
    await service.sharing.subscribe(reader.id, shared)
    sender = RecordingSender(split=True)  # the text, the CSV, the chart: three parts
    worker = DeliveryWorker(world.database, {"telegram": sender}, clock=world.clock)

    sender.fail_part(reader.id, 1, RetryLater("429", retry_after=5))  # the reader's CSV is refused once
    first = await service.runs.run_monitor(shared, T0)
    assert first is not None and first.run_id is not None
    await worker.run_once()
    await chats.update(reader.id, language="en")  # /language en while the German digest is half sent
    world.clock.advance(seconds=5)
    await worker.run_once()
    world.sources["hn"] = RecordingSource("hn", next_days_stories)
    world.clock.advance(days=1)
    second = await service.runs.run_monitor(shared, T0 + timedelta(days=1))
    await worker.run_once()

    to_reader = [(sent.index, sent.message.text) for sent in sender.sent if sent.chat.id == reader.id]
    first_digest, next_digest = to_reader[:3], to_reader[3:]
    assert [index for index, _ in first_digest] == [0, 1, 2]  # nothing sent twice, nothing lost
    assert all("[de] DeepSeek news" in text for _, text in first_digest)  # the resend went on in German
    [row] = [r for r in await DeliveryRepository(world.database).list_for_run(first.run_id) if r.chat_id == reader.id]
    assert (row.parts_sent, row.rendered_language) == (3, "de")
    assert second is not None and "en" in writer.digests
    assert next_digest and all("[en] DeepSeek news" in text for _, text in next_digest)
