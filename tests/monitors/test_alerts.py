"""Alerts through real monitor runs (the real pipeline over fake sources): a matching new story is pushed once, as
its own message through the outbox, and never again for a later report of the same story; non-matching stories,
too few outlets and a model that says no or answers garbage push nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from app.monitor_service import build_monitor_service
from monitors import MonitorService, MonitorSettings
from monitors.portability import create_imported, export_monitors, plan_import, read_monitor_file
from monitors.scheduler import MonitorScheduler
from research import MAX_QUESTIONS, ModelLimits, ModelSet
from research.alerts import ALERT_INSTRUCTIONS, parse_condition
from research.pipeline import run_pipeline
from sources import Engagement, Item
from storage.models import PendingAlertCheck
from storage.repositories import AlertRepository, ChatRepository, RunRepository
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import ChatRequest, FakeOpenAI, completion
from tests.kit import Answer, ScriptedModel, eventually_async
from tests.monitors.conftest import T0, World
from tests.monitors.fakes import resolver
from tests.research.fake_sources import RecordingSource

DAY = timedelta(days=1)


@dataclass
class News:
    """What the fake sources return: per source, the items of the current day."""

    by_source: dict[str, list[Item]] = field(default_factory=dict)

    def source(self, name: str) -> RecordingSource:
        return RecordingSource(name, lambda _query: list(self.by_source.get(name, [])))


def report(source: str, key: str, title: str, *, site: str, at: datetime, text: str = "") -> Item:
    return Item(
        id=f"{source}:{key}",
        source=source,
        url=f"https://{site}/{key}",
        title=title,
        text=text or title,
        engagement=Engagement(points=10),
        published=at - timedelta(hours=1),
        language="en",
    )


def release_story(at: datetime) -> list[Item]:
    return [
        report("news", "r1", "DeepSeek releases V4 model with open weights", site="reuters.com", at=at),
        report("news", "r2", "DeepSeek released its V4 model under open weights", site="theverge.com", at=at),
    ]


def unrelated_story(at: datetime, key: str = "u1") -> list[Item]:
    return [report("hn", key, f"DeepSeek founder speaks at a Hangzhou conference {key}", site="scmp.com", at=at)]


def world_service(
    world: World, news: News, *, light: Model | None = None, on_queued: Callable[[], None] | None = None
) -> MonitorService:
    world.sources = {"hn": news.source("hn"), "news": news.source("news")}
    return build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=light,
        heavy_model=None,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=world.clock,
        pipeline=run_pipeline,
        on_deliveries_queued=on_queued,
    )


async def alert_texts(world: World) -> list[str]:
    """The texts of the alert notices delivered so far (digests left out)."""
    await world.worker().run_once()
    return [sent.text for sent in world.sender.sent if sent.text.startswith("🔔")]


async def test_an_alert_fires_once_for_a_matching_story_and_never_for_its_repeat(world: World) -> None:
    news = News({"news": release_story(T0), "hn": unrelated_story(T0)})
    service = world_service(world, news)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="hn,news")
    alert = await service.alerts.create(
        chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model"
    )

    first = await service.runs.run_monitor(monitor.id, T0)
    assert first is not None and first.status == "ok"
    texts = await alert_texts(world)

    assert len(texts) == 1
    assert texts[0].startswith(f"🔔 **Alert #{alert.id}** — DeepSeek: when it releases a new model (monitor #1)")
    assert "[DeepSeek releases V4 model with open weights](https://reuters.com/r1) — reuters.com" in texts[0]
    assert "Hangzhou" not in texts[0]  # the other story does not match
    assert f"`/alert off {alert.id}` stops this alert." in texts[0]
    # the digest went out as usual, and the alert as a message of its own (a notice run)
    assert len(world.sender.sent) == 2

    # the next day: two more outlets report the same release, and an unrelated story is new
    world.clock.advance(days=1)
    news.by_source = {
        "news": [
            report("news", "r3", "DeepSeek V4 model release: open weights and benchmarks", site="ft.com", at=T0 + DAY),
            report("news", "r4", "DeepSeek releases V4 model, open weights for all", site="bbc.co.uk", at=T0 + DAY),
        ],
        "hn": unrelated_story(T0 + DAY, "u2"),
    }
    second = await service.runs.run_monitor(monitor.id, T0 + DAY)
    assert second is not None and second.status == "ok"

    assert await alert_texts(world) == texts  # nothing more
    listed = await service.alerts.list(chat.id)
    assert [(entry.id, entry.fired) for entry in listed] == [(alert.id, 1)]


async def test_a_story_that_does_not_match_fires_nothing(world: World) -> None:
    news = News({"hn": unrelated_story(T0)})
    service = world_service(world, news)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="hn,news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")

    await service.runs.run_monitor(monitor.id, T0)

    assert await alert_texts(world) == []
    assert len(world.sender.sent) == 1  # the digest alone


def recall_story(at: datetime, sites: list[str], title: str) -> list[Item]:
    return [report("news", f"{title[:6]}{n}", title, site=site, at=at) for n, site in enumerate(sites)]


async def test_without_a_model_the_words_and_the_count_of_outlets_decide(world: World) -> None:
    assert parse_condition("3 or more outlets report a recall").min_outlets == 3
    news = News({"news": recall_story(T0, ["a.com", "b.com"], "Peanut butter recall widens over salmonella")})
    service = world_service(world, news)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "recalls", sources="news")
    condition = "3 or more outlets report a recall"
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="recalls", condition=condition)

    await service.runs.run_monitor(monitor.id, T0)
    assert await alert_texts(world) == []  # two outlets are not three

    world.clock.advance(days=1)
    spinach = "Frozen spinach recall after listeria found"
    news.by_source = {"news": recall_story(T0 + DAY, ["c.com", "d.com", "e.com"], spinach)}
    await service.runs.run_monitor(monitor.id, T0 + DAY)
    texts = await alert_texts(world)

    assert len(texts) == 1 and "3 outlets report it" in texts[0]


async def test_a_count_of_outlets_fires_when_a_later_run_brings_the_story_to_it(world: World) -> None:
    """Two outlets report a recall one day (delivered in the digest, no alert), a third the next day: the story's
    earlier reports count, so the alert fires then, once; a fourth outlet the day after fires nothing more."""
    title = "Peanut butter recall widens over salmonella"
    news = News({"news": recall_story(T0, ["a.com", "b.com"], title)})
    service = world_service(world, news)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "recalls", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="recalls", condition="3 or more outlets "
                                "report a recall")  # fmt: skip

    await service.runs.run_monitor(monitor.id, T0)
    assert await alert_texts(world) == []

    world.clock.advance(days=1)
    news.by_source = {"news": [report("news", "c", title, site="c.com", at=T0 + DAY)]}
    await service.runs.run_monitor(monitor.id, T0 + DAY)
    texts = await alert_texts(world)

    assert len(texts) == 1 and "3 outlets report it" in texts[0]
    assert "https://c.com/c" in texts[0]

    world.clock.advance(days=1)
    news.by_source = {"news": [report("news", "d", title, site="d.com", at=T0 + 2 * DAY)]}
    await service.runs.run_monitor(monitor.id, T0 + 2 * DAY)
    assert await alert_texts(world) == texts


async def _run_stopped_before_its_alerts(world: World, news: News) -> None:
    """A DeepSeek monitor with one alert whose run at T0 is cancelled right after its transaction commits (the outbox
    callback), before its alerts are checked: what a crash at that point leaves."""

    def stop_here() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    stopping = world_service(world, news, on_queued=stop_here)
    chat = world.chats[0]
    monitor = await stopping.create_monitor(chat.id, "DeepSeek", sources="news")
    await stopping.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")
    with pytest.raises(asyncio.CancelledError):
        await stopping.runs.run_monitor(monitor.id, T0)


async def test_a_process_stopped_between_storing_a_run_and_checking_its_alerts_leaves_them_to_the_recovery_pass(
    world: World,
) -> None:
    """In-process stand-in for a crash: the run's task is cancelled right after its transaction commits (the outbox
    callback), before its alerts are checked. A restarted service's recovery pass checks them once the grace is past
    and tells the story once, even when two processes recover the same run at the same time."""

    news = News({"news": release_story(T0)})
    await _run_stopped_before_its_alerts(world, news)

    assert await alert_texts(world) == []
    assert len(world.sender.sent) == 1  # the run was stored: its digest went out
    restarted, another = world_service(world, news), world_service(world, news)
    assert await restarted.check_pending_alerts() == 0  # within the grace the first process may still be checking

    world.clock.advance(minutes=11)
    queued = await asyncio.gather(restarted.check_pending_alerts(), another.check_pending_alerts())
    texts = await alert_texts(world)

    assert sum(queued) == 1 and len(texts) == 1
    assert "[DeepSeek releases V4 model with open weights](https://reuters.com/r1)" in texts[0]
    assert await restarted.check_pending_alerts() == 0
    assert await alert_texts(world) == texts


@pytest.mark.parametrize("budget_left", [False, True], ids=["budget-spent", "budget-left"])
async def test_a_recovered_check_keeps_the_budget_rule_of_the_run_it_belongs_to(
    world: World, budget_left: bool
) -> None:
    """A `/digest` by a chat whose daily token budget is spent runs without models (`use_models=False`), and so does
    its alerts' check: recovered after a crash, the check still asks no model (the words decide), while a run that
    was allowed models has its recovered check ask the model (here: "no")."""

    def stop_here() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    news = News({"news": release_story(T0)})
    chat = world.chats[0]
    stopping = world_service(world, news, on_queued=stop_here)
    monitor = await stopping.create_monitor(chat.id, "DeepSeek", sources="news")
    await stopping.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")
    with pytest.raises(asyncio.CancelledError):
        # its own task, as a job's: the cancellation is that task's, not the test's
        await asyncio.create_task(stopping.runs.run_now(monitor.id, chat.id, use_models=budget_left))
    says_no = {"fires": False, "reason": "not new", "citations": []}
    scripted = ScriptedModel(says_no, aside=only_alerts, repeat_last=True)
    restarted = world_service(world, news, light=ModelSet.of(scripted.model, None).light)

    world.clock.advance(minutes=11)
    await restarted.check_pending_alerts()
    texts = await alert_texts(world)

    if budget_left:
        assert scripted.calls == 1 and texts == []  # asked, and the model said no
    else:
        assert scripted.calls == 0, "a check whose run was over budget asks no model"
        assert len(texts) == 1 and "DeepSeek releases V4 model" in texts[0]  # the words decided


async def test_a_check_made_again_after_its_alert_fired_tells_nothing_more(world: World) -> None:
    """A process that fired the alert and stopped before deleting its pending check: the recovery pass checks the
    run again and finds the story told."""
    news = News({"news": release_story(T0)})
    service = world_service(world, news)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")
    summary = await service.runs.run_monitor(monitor.id, T0)
    assert summary is not None and summary.run_id is not None
    texts = await alert_texts(world)
    repository = AlertRepository(world.database)
    assert len(texts) == 1 and await repository.pending_checks(created_before=T0 + DAY) == []  # checked and gone

    story = {"key": "news:r1", "items": ["news:r1", "news:r2"], "earlier": [], "grown": False}
    async with world.database.transaction() as session:  # as the stopped process left it
        session.add(PendingAlertCheck(run_id=summary.run_id, monitor_id=monitor.id, stories=[story], created_at=T0))
    world.clock.advance(minutes=11)

    assert await service.check_pending_alerts() == 0
    assert await alert_texts(world) == texts
    assert await repository.pending_checks(created_before=T0 + DAY) == []


async def test_the_schedulers_tick_runs_the_recovery_pass(world: World) -> None:
    """A pending check left by a stopped process is found by the next process's scheduler as it starts ticking."""

    news = News({"news": release_story(T0)})
    await _run_stopped_before_its_alerts(world, news)
    world.clock.advance(minutes=11)
    pending = AlertRepository(world.database)
    assert len(await pending.pending_checks(created_before=world.clock())) == 1

    scheduler = MonitorScheduler(world_service(world, news), world.database, clock=world.clock)
    await scheduler.start()
    try:
        await eventually_async(lambda: _no_pending(pending, world.clock()), what="the scheduler's recovery pass")
    finally:
        await scheduler.stop()
    assert len(await alert_texts(world)) == 1


async def _no_pending(pending: AlertRepository, now: datetime) -> bool:
    return not await pending.pending_checks(created_before=now)


async def test_an_alert_stops_when_its_chat_stops_receiving_the_monitor_or_removes_it(world: World) -> None:
    news = News({"news": release_story(T0)})
    service = world_service(world, news)
    owner, subscriber = world.chats[0], world.chats[1]
    monitor = await service.create_monitor(owner.id, "DeepSeek", sources="news")
    await service.update_monitor(monitor.id, chat_id=owner.id, quiet=True)
    await service.subscribe(subscriber.id, monitor.id)
    mine = await service.alerts.create(owner.id, monitor_id=monitor.id, topic="DeepSeek", condition="a model release")
    theirs = await service.alerts.create(
        subscriber.id, monitor_id=monitor.id, topic="DeepSeek", condition="a model release"
    )
    assert await service.alerts.remove(subscriber.id, mine.id) is False  # another chat's alert stays
    assert await service.alerts.remove(owner.id, mine.id) is True
    await service.unsubscribe(subscriber.id, monitor.id)

    await service.runs.run_monitor(monitor.id, T0)

    assert await alert_texts(world) == []
    assert await AlertRepository(world.database).fired_items([theirs.id]) == {theirs.id: set()}


# ---- with a model ------------------------------------------------------------------------------------------------


def is_alert_question(messages: list[ModelMessage]) -> bool:
    first = messages[0]
    return isinstance(first, ModelRequest) and ALERT_INSTRUCTIONS in (first.instructions or "")


def only_alerts(messages: list[ModelMessage], _info: AgentInfo) -> Answer | None:
    """The planner shares the light model: it is refused (and falls back), so the script sees alert questions only."""
    if is_alert_question(messages):
        return None
    return RuntimeError("no plan scripted")


async def test_with_a_model_each_candidate_is_one_question_and_its_verdict_decides(world: World) -> None:
    at = T0
    news = News(
        {
            "news": release_story(at),
            "hn": [report("hn", "m1", "Rumour: another DeepSeek model in spring", site="rumours.io", at=at)],
        }
    )
    verdicts: list[dict[str, Any]] = [
        {"fires": True, "reason": "DeepSeek released V4.", "citations": [2, 9]},
        {"fires": False, "reason": "Only a rumour.", "citations": []},
    ]
    scripted = ScriptedModel(*verdicts, aside=only_alerts)
    service = world_service(world, news, light=ModelSet.of(scripted.model, None).light)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="hn,news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")

    await service.runs.run_monitor(monitor.id, T0)
    texts = await alert_texts(world)

    assert scripted.calls == 2  # one question per candidate story
    asked = [scripted.user_prompt(n) for n in range(2)]
    assert all("Condition: it releases a new model" in prompt and "<untrusted_items>" in prompt for prompt in asked)
    assert len(texts) == 1 and "DeepSeek released V4." in texts[0]
    # the valid citation only (item 2 of the story), never the made-up number 9
    assert "(https://theverge.com/r2)" in texts[0] and "reuters.com/r1" not in texts[0]
    assert "rumours.io" not in texts[0]


async def test_a_model_answering_garbage_fires_nothing_and_the_run_stands(world: World) -> None:
    news = News({"news": release_story(T0)})
    scripted = ScriptedModel("yes yes yes!!", aside=only_alerts, repeat_last=True)
    service = world_service(world, news, light=ModelSet.of(scripted.model, None).light)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")

    summary = await service.runs.run_monitor(monitor.id, T0)

    assert summary is not None and summary.status == "ok"
    assert scripted.calls == 1  # one request, not retried
    assert await alert_texts(world) == []
    assert len(world.sender.sent) == 1  # the digest


async def test_questions_per_run_are_capped_and_the_rest_decided_by_words(world: World) -> None:
    told = [
        ("Rust coding assistant ships for crate authors", "Compiler-aware help for crates and borrow checker errors."),
        ("Protein folding predictor opens to biologists", "Biologists can fold enzymes and antibodies with it."),
        ("Speech recogniser covers twelve African languages", "Swahili, Yoruba and Amharic transcription."),
        ("Tiny vision network runs on budget phones", "Camera apps on cheap handsets can label photos offline."),
        ("Contract reviewer trained on court filings", "Law firms test a reviewer that flags indemnity clauses."),
        ("Olympiad geometry solver beats medalists", "The solver proved 28 of 30 olympiad geometry problems."),
    ]
    stories = [
        report("news", f"s{n}", title, site=f"site{n}.com", at=T0, text=f"DeepSeek releases the model. {text}")
        for n, (title, text) in enumerate(told)
    ]  # six stories, each with every word of the condition
    news = News({"news": stories})
    scripted = ScriptedModel({"fires": False, "reason": "no", "citations": []}, aside=only_alerts, repeat_last=True)
    service = world_service(world, news, light=ModelSet.of(scripted.model, None).light)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")

    await service.runs.run_monitor(monitor.id, T0)
    texts = await alert_texts(world)

    runs = await RunRepository(world.database).list_for_monitor(monitor.id)
    assert runs  # the run stored
    assert scripted.calls == MAX_QUESTIONS
    # the candidates past the cap carry every word of the condition: the words fire them
    assert len(texts) == 6 - MAX_QUESTIONS


async def test_through_a_real_openai_client_against_a_local_server(world: World, fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")

    def answer(request: ChatRequest) -> dict[str, Any]:
        if not any("alert condition" in text for text in request.system_messages):
            return completion(content="not a plan", model=fake.model)
        return completion(
            tool_calls=[("final_result", {"fires": True, "reason": "Released.", "citations": [1]})], model=fake.model
        )

    fake.reply_with(answer)
    provider = OpenAIProvider(base_url=fake.base_url, api_key=fake.api_key)
    light = ModelSet.of(OpenAIChatModel(fake.model, provider=provider), None, limits=ModelLimits()).light
    news = News({"news": release_story(T0)})
    service = world_service(world, news, light=light)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="DeepSeek", condition="it releases a new model")

    with models.override_allow_model_requests(True):
        await service.runs.run_monitor(monitor.id, T0)
    texts = await alert_texts(world)

    questions = [r for r in fake.requests if any("alert condition" in text for text in r.system_messages)]
    assert len(questions) == 1
    assert questions[0].max_tokens == 200  # the verdict's own output limit
    assert len(texts) == 1 and "Released." in texts[0] and "(https://reuters.com/r1)" in texts[0]


# ---- shown and carried -------------------------------------------------------------------------------------------


async def test_alerts_are_shown_in_the_listing_and_exported_and_imported_with_their_monitor(world: World) -> None:
    service = world_service(world, News())
    owner, other = world.chats[0], world.chats[1]
    deepseek = await service.create_monitor(owner.id, "DeepSeek", sources="news")
    quiet = await service.create_monitor(owner.id, "Mistral", sources="news")
    alert = await service.alerts.create(owner.id, monitor_id=deepseek.id, topic="DeepSeek", condition="it releases "
                                        "a new model")  # fmt: skip
    # another chat's alert on a monitor it receives is its own: never listed or exported for the owner
    await service.subscribe(other.id, deepseek.id)
    theirs = await service.alerts.create(other.id, monitor_id=deepseek.id, topic="DeepSeek", condition="a price cut")

    views = {view.id: view for view in await service.list_monitors(owner.id, chat=owner)}
    assert views[deepseek.id].alerts == (f"#{alert.id} when it releases a new model",)
    assert views[quiet.id].alerts == ()
    summary = views[deepseek.id].summary()
    assert "\nalert \\#1 when it releases a new model" in summary and "price cut" not in summary  # markdown
    seen_by_other = await service.get_monitor(deepseek.id, chat_id=other.id)
    assert seen_by_other.alerts == (f"#{theirs.id} when a price cut",)

    exported = await export_monitors(service, owner, now=T0)
    entries = json.loads(exported.json)["monitors"]
    assert entries[0]["alerts"] == [{"topic": "DeepSeek", "condition": "it releases a new model"}]
    assert "alerts" not in entries[1]  # files stay as they were for monitors without alerts

    target = await ChatRepository(world.database).get_or_create("slack", "C0IMPORT", title="#import")
    plan = await plan_import(service, target, read_monitor_file(exported.json))
    assert "“DeepSeek” — " in plan.describe() and " · 1 alert" in plan.describe()
    result = await create_imported(service, target.id, plan.entries)

    assert result.failed == [] and len(result.created) == 2
    [imported] = await service.alerts.list(target.id)
    assert (imported.monitor_id, imported.topic, imported.condition) == (
        result.created[0][0],
        "DeepSeek",
        "it releases a new model",
    )
    again = json.loads((await export_monitors(service, target, now=T0)).json)["monitors"]
    assert again == entries


@pytest.mark.parametrize("with_model", [False, True], ids=["words", "model"])
async def test_an_alert_with_its_own_topic_looks_only_at_stories_carrying_its_words(
    world: World, with_model: bool
) -> None:
    """`/alert 1 Mistral when 3 or more outlets` on a DeepSeek monitor: a DeepSeek story from three outlets without
    "Mistral" fires nothing (without a model the words and the count decide; with one, it is not even asked about);
    one that says "Mistral" does."""
    sites = ["a.com", "b.com", "c.com"]
    news = News({"news": recall_story(T0, sites, "DeepSeek opens a new office in Hangzhou")})
    says_yes = {"fires": True, "reason": "three outlets report it", "citations": [1]}
    scripted = ScriptedModel(says_yes, aside=only_alerts, repeat_last=True)
    service = world_service(world, news, light=ModelSet.of(scripted.model, None).light if with_model else None)
    chat = world.chats[0]
    monitor = await service.create_monitor(chat.id, "DeepSeek", sources="news")
    await service.alerts.create(chat.id, monitor_id=monitor.id, topic="Mistral", condition="3 or more outlets")

    await service.runs.run_monitor(monitor.id, T0)
    assert await alert_texts(world) == []
    assert scripted.calls == 0, "a story without the alert's topic is never asked about"

    world.clock.advance(days=1)
    title = "Mistral and DeepSeek trade blows over open model licences"
    news.by_source = {"news": recall_story(T0 + DAY, sites, title)}
    await service.runs.run_monitor(monitor.id, T0 + DAY)
    texts = await alert_texts(world)

    assert len(texts) == 1 and title in texts[0]
    assert texts[0].startswith("🔔 **Alert #1** — Mistral: when 3 or more outlets (monitor #1)")
    assert scripted.calls == (1 if with_model else 0)
