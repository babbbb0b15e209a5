"""The one recorder of runs: a finished run is stored with its items, scores and usage and queues its rows once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitors.recorder import RunRecorder
from monitors.runner import item_record
from research import LlmUsage
from storage import Database, ItemScore, RunOutcome, RunStatus
from storage.repositories import DeliveryRepository, ItemRepository, RunRepository, UsageRepository
from storage.repositories.deliveries import RunNotOpenError
from tests.monitors.conftest import T0, World
from tests.research.fake_sources import make_item

SPENT = LlmUsage(model="light", requests=2, input_tokens=300, output_tokens=40, cost_usd=0.01)


class Wakes:
    """Counts how often the recorder woke whoever delivers."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


async def test_a_finished_run_is_stored_with_its_items_scores_and_usage_and_queues_nothing(
    world: World, database: Database
) -> None:
    wakes = Wakes()
    chat = world.chats[0]
    items = [make_item("hn", f"k{n}", title=f"story {n}") for n in range(2)]
    run = await RunRecorder(database, on_queued=wakes).record(
        chat_id=chat.id,
        query="collect: DeepSeek",
        outcome=RunOutcome(finished_at=T0, stats={"kind": "collect", "items": 2}),
        items=[item_record(item) for item in items],
        scores=[ItemScore(item_id=item.id, relevance=0.5, rank=n) for n, item in enumerate(items, start=1)],
        usage=[("collect", SPENT)],
        deliver=False,
    )

    stored = await RunRepository(database).get(run.id)
    assert stored is not None and stored.status is RunStatus.SUCCEEDED and stored.stats["kind"] == "collect"
    assert stored.monitor_id is None and stored.chat_id == chat.id
    assert {entry.item_id for entry in await RunRepository(database).items_of_run(run.id)} == {i.id for i in items}
    assert len(await ItemRepository(database).search("story", chat_id=chat.id)) == 2
    usage = await UsageRepository(database).by_kind(chat.id, T0.date(), T0.date())
    assert usage["collect"].input_tokens == 300 and usage["collect"].output_tokens == 40
    assert await DeliveryRepository(database).list_for_run(run.id) == []
    assert wakes.count == 0  # nothing queued, nobody woken


async def test_a_notice_queues_one_row_per_chat_and_wakes_the_worker_once(world: World, database: Database) -> None:
    wakes = Wakes()
    first, second = world.chats[0], world.chats[1]
    run = await RunRecorder(database, on_queued=wakes).record(
        chat_id=first.id,
        query="notice",
        outcome=RunOutcome(finished_at=T0, stats={"kind": "notice", "text": "hello"}),
        extra_chat_ids=[second.id],
    )

    rows = await DeliveryRepository(database).list_for_run(run.id)
    assert sorted(row.chat_id for row in rows) == sorted([first.id, second.id])
    assert wakes.count == 1


async def test_usage_is_counted_even_when_the_run_cannot_be_completed(world: World, database: Database) -> None:
    chat = world.chats[0]
    recorder = RunRecorder(database)
    run = await recorder.open_search(chat_id=chat.id, query="search", now=T0)
    assert await recorder.fail(run.id, error="stopped", finished_at=T0)
    assert not await recorder.fail(run.id, error="again")  # only a running run fails

    with pytest.raises(RunNotOpenError):
        await recorder.complete(
            run.id, RunOutcome(finished_at=T0, stats={}), usage=[("monitor", SPENT)], usage_chat_id=chat.id
        )

    usage = await UsageRepository(database).by_kind(chat.id, T0.date(), T0.date())
    assert usage["monitor"].requests == 2  # the tokens were spent: the daily budget counts them


async def test_a_monitor_run_for_one_time_is_opened_once(world: World, database: Database) -> None:
    service = world.service()
    monitor = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="daily at 9", sources="hn")
    recorder = RunRecorder(database)
    when = T0 + timedelta(hours=1)

    opened = await recorder.open_scheduled(monitor.id, when, now=T0)
    assert opened is not None
    assert await recorder.open_scheduled(monitor.id, when, now=T0) is None  # a second firing gets nothing
    taken = await recorder.take_over(monitor.id, when, now=T0)
    assert taken is not None and taken.id == opened.id  # still running: a worker that comes back takes it over
