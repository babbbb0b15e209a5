"""The delivery worker against a recording sender: retries, permanent failures, moved chats and restarts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kernel import ChatGone, ChatMoved, RetryLater
from monitors.delivery import DeliveryWorker
from monitors.service import MonitorService
from storage import Database, DeliveryStatus
from storage.repositories import ChatRepository, DeliveryRepository, SubscriptionRepository
from tests.backends import sqlite_url
from tests.monitors.conftest import T0, World
from tests.monitors.fakes import RecordingSender


async def queue_digest(world: World, *, chats: int = 1) -> tuple[MonitorService, int, int]:
    """A monitor of chat 0 (plus subscribers) that ran once: returns the service, monitor id and run id."""
    service = world.service()
    # not quiet: a later run with nothing new still sends its short note to every chat
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn", quiet=False)
    for chat in world.chats[1:chats]:
        await service.subscribe(chat.id, view.id)
    summary = await service.runs.run_monitor(view.id, T0)
    assert summary is not None and summary.run_id is not None and summary.deliveries == chats
    return service, view.id, summary.run_id


async def statuses(database: Database, run_id: int) -> list[DeliveryStatus]:
    return [row.status for row in await DeliveryRepository(database).list_for_run(run_id)]


async def test_a_crash_between_commit_and_send_delivers_exactly_once_after_restart(world: World, db_path) -> None:  # type: ignore[no-untyped-def]
    _, _, run_id = await queue_digest(world)
    stop = asyncio.Event()
    stop.set()  # the process stops before its worker sends anything
    await world.worker().run_forever(stop)
    assert world.sender.sent == []
    await world.database.dispose()

    restarted = Database(sqlite_url(db_path))
    try:
        worker = world.worker(restarted)
        first = await worker.run_once()
        world.clock.advance(hours=2)
        second = await worker.run_once()
        assert (first.sent, second.claimed) == (1, 0)
        assert world.sender.pop_message().message.run_id == run_id
        assert world.sender.is_quiet()
        assert await statuses(restarted, run_id) == [DeliveryStatus.SENT]
    finally:
        await restarted.dispose()


async def test_a_worker_that_died_after_claiming_leaves_the_row_to_the_next_one(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    # Claimed by a worker on another machine that then died: its lease has to run out.
    await DeliveryRepository(world.database).claim_due(world.clock(), worker="elsewhere:1:dead")

    worker = world.worker()
    assert (await worker.run_once()).claimed == 0  # still leased
    world.clock.advance(seconds=31)
    assert (await worker.run_once()).sent == 1
    assert world.sender.pop_message().message.run_id == run_id
    assert world.sender.is_quiet()


async def test_429_waits_the_retry_after_then_succeeds(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    world.sender.fail_next(RetryLater("429 Too Many Requests", retry_after=120))
    worker = world.worker()

    assert (await worker.run_once()).retrying == 1
    row = (await DeliveryRepository(world.database).list_for_run(run_id))[0]
    assert row.status is DeliveryStatus.FAILED and row.next_attempt_at == T0 + timedelta(seconds=120)
    world.clock.advance(seconds=119)
    assert (await worker.run_once()).claimed == 0  # the wait is honoured
    world.clock.advance(seconds=1)
    assert (await worker.run_once()).sent == 1

    assert len(world.sender.attempts) == 2
    world.sender.pop_message()
    assert world.sender.is_quiet()
    assert await statuses(world.database, run_id) == [DeliveryStatus.SENT]


async def test_a_transient_error_without_retry_after_backs_off(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    world.sender.fail_next(RetryLater("502 Bad Gateway"), RetryLater("timeout"))
    worker = world.worker()

    await worker.run_once()
    first = (await DeliveryRepository(world.database).list_for_run(run_id))[0]
    world.clock.set(first.next_attempt_at)
    await worker.run_once()
    second = (await DeliveryRepository(world.database).list_for_run(run_id))[0]

    # The outbox's backoff: jittered, between half and all of 30 s, then of 60 s.
    assert timedelta(seconds=15) <= first.next_attempt_at - T0 <= timedelta(seconds=30)
    assert timedelta(seconds=30) <= second.next_attempt_at - first.next_attempt_at <= timedelta(seconds=60)
    world.clock.set(second.next_attempt_at)
    assert (await worker.run_once()).sent == 1


async def test_403_marks_the_chat_inactive_and_pauses_its_subscriptions(world: World) -> None:
    service, monitor_id, run_id = await queue_digest(world, chats=2)
    blocked = world.chats[1]
    sender = RecordingSender()
    worker = DeliveryWorker(world.database, {"telegram": sender}, clock=world.clock)

    async def send_part(chat, part):  # type: ignore[no-untyped-def]
        if chat.id == blocked.id:
            sender.attempts.append((chat, part.message))
            raise ChatGone("403 Forbidden: bot was blocked by the user")
        await RecordingSender.send_part(sender, chat, part)

    sender.send_part = send_part  # type: ignore[method-assign]
    report = await worker.run_once()

    assert (report.sent, report.dead) == (1, 1)
    chat = await ChatRepository(world.database).get(blocked.id)
    assert chat is not None and not chat.active
    assert [s.active for s in await SubscriptionRepository(world.database).for_chat(blocked.id)] == [False]
    rows = {row.chat_id: row for row in await DeliveryRepository(world.database).list_for_run(run_id)}
    assert rows[blocked.id].status is DeliveryStatus.DEAD
    assert rows[world.chats[0].id].status is DeliveryStatus.SENT

    world.clock.advance(days=1)
    assert (await worker.run_once()).claimed == 0  # nothing is retried
    later = await service.runs.run_monitor(monitor_id, T0 + timedelta(days=1))
    assert later is not None and later.deliveries == 1  # the blocked chat gets nothing more
    await worker.run_once()
    assert [a[0].id for a in sender.attempts].count(blocked.id) == 1


async def test_a_moved_chat_gets_its_new_id_and_the_message(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    world.sender.fail_next(ChatMoved("-100200300"))

    report = await world.worker().run_once()

    assert report.sent == 1
    chat = await ChatRepository(world.database).get(world.chats[0].id)
    assert chat is not None and chat.external_id == "-100200300"
    assert world.sender.pop_message().chat.external_id == "-100200300"
    assert await statuses(world.database, run_id) == [DeliveryStatus.SENT]


async def test_a_moved_chat_whose_new_id_is_already_stored_gets_the_message_there(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    newer = await ChatRepository(world.database).get_or_create("telegram", "-100200300")  # someone wrote there first
    world.sender.fail_next(ChatMoved("-100200300"))

    report = await world.worker().run_once()

    assert report.sent == 1
    assert world.sender.pop_message().chat.id == newer.id
    old = await ChatRepository(world.database).get(world.chats[0].id)
    assert old is not None and old.external_id == world.chats[0].external_id  # both rows kept
    assert await statuses(world.database, run_id) == [DeliveryStatus.SENT]


async def test_a_platform_without_a_sender_leaves_the_row_pending_and_unclaimed(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    worker = DeliveryWorker(world.database, {}, clock=world.clock)

    report = await worker.run_once()

    assert report.claimed == 0 and report.sent == 0
    assert await statuses(world.database, run_id) == [DeliveryStatus.PENDING]
    (row,) = await DeliveryRepository(world.database).list_for_run(run_id)
    assert row.attempts == 0  # waiting for a sender uses up none of the row's attempts
    worker.register("telegram", world.sender)  # e.g. the terminal chat started again
    assert (await worker.run_once()).sent == 1


async def test_an_unexpected_sender_bug_is_retried_not_fatal(world: World) -> None:
    _, _, run_id = await queue_digest(world)

    class Broken:
        def parts(self, message):  # type: ignore[no-untyped-def]
            return [message]

        async def send_part(self, chat, part):  # type: ignore[no-untyped-def]
            raise KeyError("oops")

    report = await DeliveryWorker(world.database, {"telegram": Broken()}, clock=world.clock).run_once()

    assert report.retrying == 1 and len(report.errors) == 1
    row = (await DeliveryRepository(world.database).list_for_run(run_id))[0]
    assert row.status is DeliveryStatus.FAILED and report.errors[0] in (row.last_error or "")


async def test_run_forever_sends_what_is_pending_then_stops(world: World) -> None:
    await queue_digest(world, chats=3)
    worker = world.worker()
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run_forever(stop))
    for _ in range(500):
        if len(world.sender.sent) == 3:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert sorted(world.sender.delivered_to()) == ["100", "101", "102"]


async def test_a_resend_starts_after_the_parts_confirmed_sent_even_in_another_process(world: World, db_path) -> None:  # type: ignore[no-untyped-def]
    _, _, run_id = await queue_digest(world)
    sender = RecordingSender(split=True)  # the text, then the CSV and the chart: three parts
    worker = DeliveryWorker(world.database, {"telegram": sender}, clock=world.clock)

    async def fail_on_the_chart(chat, part):  # type: ignore[no-untyped-def]
        if part.index == 2:
            raise RetryLater("429", retry_after=5)
        await RecordingSender.send_part(sender, chat, part)

    sender.send_part = fail_on_the_chart  # type: ignore[method-assign]
    assert (await worker.run_once()).retrying == 1
    [row] = await DeliveryRepository(world.database).list_for_run(run_id)
    assert (row.parts_sent, row.status) == (2, DeliveryStatus.FAILED)
    await world.database.dispose()

    # Another process (a new worker, a new database connection) picks the row up: only the chart goes.
    restarted = Database(sqlite_url(db_path))
    try:
        again = RecordingSender(split=True)
        world.clock.advance(seconds=5)
        assert (await DeliveryWorker(restarted, {"telegram": again}, clock=world.clock).run_once()).sent == 1
        assert [sent.index for sent in sender.sent] == [0, 1]
        assert [sent.index for sent in again.sent] == [2]
        [row] = await DeliveryRepository(restarted).list_for_run(run_id)
        assert (row.parts_sent, row.status) == (3, DeliveryStatus.SENT)
    finally:
        await restarted.dispose()


async def test_a_claim_of_a_dead_process_on_this_host_is_taken_back_at_once(world: World) -> None:
    import subprocess
    import sys

    from monitors.delivery import claimer_is_dead, worker_identity

    _, _, run_id = await queue_digest(world)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = worker_identity().split(":")[0]
    dead = f"{host}:{finished.stdout.strip()}:0badc0de"  # a process that has exited
    assert claimer_is_dead(dead)
    assert not claimer_is_dead(world.worker().identity)  # alive, in this process
    assert not claimer_is_dead("another-host:1:abc")  # elsewhere: wait for the lease
    await DeliveryRepository(world.database).claim_due(world.clock(), worker=dead)

    report = await world.worker().run_once()  # no lease to wait out

    assert report.sent == 1
    assert await statuses(world.database, run_id) == [DeliveryStatus.SENT]


async def test_a_stop_ends_the_delivery_after_the_part_in_flight_and_leaves_the_row_due(world: World) -> None:
    _, _, run_id = await queue_digest(world)
    sender = RecordingSender(split=True)  # three parts: the text, the CSV, the chart
    worker = DeliveryWorker(world.database, {"telegram": sender}, clock=world.clock)
    stop = asyncio.Event()

    async def stop_during_the_first_part(chat, part):  # type: ignore[no-untyped-def]
        stop.set()  # SIGTERM arrives while this part is on its way
        await RecordingSender.send_part(sender, chat, part)

    sender.send_part = stop_during_the_first_part  # type: ignore[method-assign]
    await worker.run_forever(stop)

    [row] = await DeliveryRepository(world.database).list_for_run(run_id)
    assert [sent.index for sent in sender.sent] == [0]
    assert (row.status, row.parts_sent, row.next_attempt_at) == (DeliveryStatus.PENDING, 1, world.clock())

    # The next process (no clock advance: the row is due at once, not when the lease ends) sends the rest.
    again = RecordingSender(split=True)
    assert (await DeliveryWorker(world.database, {"telegram": again}, clock=world.clock).run_once()).sent == 1
    assert [sent.index for sent in again.sent] == [1, 2]
