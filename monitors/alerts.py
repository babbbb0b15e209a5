"""Alerts: a chat's "tell me at once when …" on a monitor it receives, checked on every run against the run's new
stories and pushed at once as a notice through the outbox (outside any briefing), once per (alert, story).

A story is the same story across runs in two ways: novelty files a later report of a delivered story as an update or
a repeat, never as new (only a condition counting outlets looks at such a grown story, with its earlier reports:
`research.new_stories`), and a story sharing an item with one an alert fired for is skipped even when the clustering
drew it otherwise. The firing and its notice are one transaction under a unique (alert, story key), so a run taken
over by another worker cannot tell a story twice.

Exactly once across a crash: a run whose monitor has alerts is stored with a pending check of its stories, in the
run's own transaction; the runner checks them right after and then deletes the pending check. A process that stops
in between leaves it, and the recovery pass (`MonitorRunner.check_pending_alerts`, on every scheduler or worker tick)
checks it later; the unique firing makes a check made twice tell each story once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pydantic_ai.models import Model

from kernel import Clock
from monitors.notices import NOTICE_KIND
from research import (
    MAX_QUESTIONS,
    AlertCheck,
    AlertStory,
    LlmUsage,
    PipelineResult,
    alert_message,
    ask_alert_model,
    new_stories,
    parse_condition,
    record_usage,
    sum_usage,
    words_check,
)
from sources import Item
from storage import AlertRecord, Database, MonitorRecord
from storage.repositories import AlertRepository

__all__ = [
    "MAX_ALERTS_PER_CHAT",
    "MAX_CONDITION_CHARS",
    "AlertService",
    "alert_stories",
    "check_alerts",
    "check_may_use_models",
    "pending_stories",
    "stories_of_check",
]

logger = logging.getLogger(__name__)

MAX_ALERTS_PER_CHAT: Final = 20
"""Alerts one chat may keep: each is a check on every run of its monitor."""
MAX_CONDITION_CHARS: Final = 300
"""A condition is a sentence; a longer one is a topic for a monitor of its own."""


class AlertService:
    """A chat's alerts: create, list, remove (the caller checked that the chat receives the monitor)."""

    def __init__(self, database: Database, *, clock: Clock) -> None:
        self._alerts = AlertRepository(database)
        self._clock = clock

    @staticmethod
    def check_condition(condition: str) -> str:
        """The condition with its spaces collapsed; ValueError (a sentence for the person) when it is empty or too
        long."""
        clean = " ".join(condition.split())
        if not clean:
            raise ValueError("Say what should happen, after “when”.")
        if len(clean) > MAX_CONDITION_CHARS:
            raise ValueError(f"Keep the condition under {MAX_CONDITION_CHARS} characters.")
        return clean

    async def check_room(self, chat_id: int) -> None:
        """ValueError (a sentence for the person) when the chat has `MAX_ALERTS_PER_CHAT` alerts already."""
        if await self._alerts.count_for_chat(chat_id) >= MAX_ALERTS_PER_CHAT:
            raise ValueError(f"This chat has {MAX_ALERTS_PER_CHAT} alerts already; `/alert off <n>` removes one.")

    async def create(self, chat_id: int, *, monitor_id: int, topic: str, condition: str) -> AlertRecord:
        """Store the alert; ValueError (see `check_condition`, `check_room`) when it cannot be one."""
        clean = self.check_condition(condition)
        await self.check_room(chat_id)
        return await self._alerts.create(
            chat_id=chat_id, monitor_id=monitor_id, topic=" ".join(topic.split()), condition=clean, now=self._clock()
        )

    async def list(self, chat_id: int) -> list[AlertRecord]:
        return await self._alerts.list_for_chat(chat_id)

    async def remove(self, chat_id: int, alert_id: int) -> bool:
        return await self._alerts.remove(alert_id, chat_id=chat_id)


def alert_stories(result: PipelineResult) -> list[AlertStory]:
    """The stories of a run its monitor's alerts check (`research.new_stories`: new ones, and delivered ones that grew,
    with their earlier reports)."""
    return new_stories(result.items, result.told_before)


_WORDS_ONLY: Final = "words_only"
"""Set on a pending check's stories when the run was not allowed model tokens (the budget of the chat that asked
was spent): the check, recovered or not, decides by the words then, as the run's own check does."""


def pending_stories(stories: Sequence[AlertStory], *, use_models: bool) -> list[dict[str, object]]:
    """The stories a run's pending check keeps, with whether its check may ask the model (the run's own budget
    decision, which a recovered check keeps)."""
    return [story.stored() | ({} if use_models else {_WORDS_ONLY: True}) for story in stories]


def check_may_use_models(stored: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a pending check may ask the model: not when its run was not allowed model tokens (`pending_stories`)."""
    return not any(entry.get(_WORDS_ONLY) for entry in stored)


def stories_of_check(stored: Sequence[Mapping[str, Any]], items: Mapping[str, Item]) -> list[AlertStory]:
    """A pending check's stories again, from their stored item ids (`AlertStory.stored`) and the run's items; a story
    none of whose reports of that run is still stored is left out."""
    stories = []
    for entry in stored:
        reports = tuple(items[item_id] for item_id in entry.get("items", ()) if item_id in items)
        if not reports:
            continue
        earlier = tuple(items[item_id] for item_id in entry.get("earlier", ()) if item_id in items)
        stories.append(
            AlertStory(key=str(entry.get("key") or reports[0].id), items=reports, earlier=earlier,
                       grown=bool(entry.get("grown")))
        )  # fmt: skip
    return stories


async def check_alerts(
    database: Database,
    *,
    monitor: MonitorRecord,
    stories: Sequence[AlertStory],
    model: Model | None,
    now: datetime,
) -> int:
    """Check the monitor's alerts against the run's stories (`alert_stories`) and queue a notice for each (alert,
    story) that fires for the first time; the number queued. With a model, at most `MAX_QUESTIONS` candidates (the
    ones carrying most of their condition's words first) are asked; the rest, and every candidate without a model,
    are decided by the words and the count. An alert whose own topic is not its monitor's looks only at stories
    carrying that topic's words (`parse_condition`'s `topic_words`). Checking the same stories again queues nothing
    twice."""
    repository = AlertRepository(database)
    alerts = await repository.receiving_alerts(monitor.id)
    if not alerts or not stories:
        return 0
    fired_before = await repository.fired_items([alert.id for alert in alerts])
    conditions = {
        alert.id: parse_condition(alert.condition, topic=alert.topic, monitor_topic=monitor.topic) for alert in alerts
    }
    candidates: list[tuple[float, int, AlertRecord, AlertStory]] = []
    for alert in alerts:
        condition = conditions[alert.id]
        for story in stories:
            if fired_before[alert.id].intersection(item.id for item in story.reports):
                continue  # the same story, drawn otherwise this time
            if story.candidate(condition):
                candidates.append((story.share_of(condition), story.outlets, alert, story))
    candidates.sort(key=lambda entry: (-entry[0], -entry[1], entry[2].id))
    queued = 0
    spent: list[LlmUsage] = []
    for position, (_share, _outlets, alert, story) in enumerate(candidates):
        condition = conditions[alert.id]
        check: AlertCheck
        if model is not None and position < MAX_QUESTIONS:
            check = await ask_alert_model(model, topic=alert.topic, condition=condition, story=story, now=now)
            spent.append(check.usage)
        else:
            check = words_check(condition, story)
        logger.info("monitor %d alert %d story %s: %s (%s)", monitor.id, alert.id, story.key, check.fires, check.path)
        if not check.fires:
            continue
        text = alert_message(
            alert_id=alert.id, monitor_id=monitor.id, topic=alert.topic, condition=alert.condition, check=check
        )
        run_id = await repository.fire(
            alert,
            story_key=story.key,
            item_ids=[item.id for item in story.reports],
            text=text,
            stats={"kind": NOTICE_KIND, "monitor_id": monitor.id, "alert_id": alert.id, "alert_path": check.path},
            now=now,
        )
        queued += run_id is not None
    if spent:
        await record_usage(database, chat_id=monitor.owner_chat_id, now=now, usage=sum_usage(spent), kind="monitor")
    return queued
