"""The dispatcher on a real database: ordering per conversation, concurrency across chats, de-duplication that
survives a restart, the access policy, the error boundary, and what adapters report about chats."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.access import AccessPolicy
from agent.context import Turn
from agent.messages import Incoming
from bots.dispatcher import Dispatcher
from kernel import ProgressUpdate, Reply
from monitors import ChatService
from storage import Database
from storage.repositories import ChatRepository, MonitorRepository, SubscriptionRepository
from tests.bots.slack_world import T0, copy_database, migrated_template


@pytest.fixture(scope="session")
def dispatcher_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("dispatcher-template"))


@pytest.fixture
async def database(tmp_path: Path, dispatcher_db_template: Path) -> AsyncIterator[Database]:
    db = Database(copy_database(dispatcher_db_template, tmp_path))
    yield db
    await db.dispose()


@dataclass
class Responder:
    """A conversation layer that echoes, records what it saw, and can hold a message until released."""

    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    fail_with: Exception | None = None

    async def respond(self, turn: Turn) -> list[Reply]:
        text = turn.incoming.text
        self.turns.append(turn)
        self.log.append(f"start {text}")
        if self.fail_with is not None:
            raise self.fail_with
        gate = self.gates.get(text)
        if gate is not None:
            await gate.wait()
        await turn.progress(ProgressUpdate(text=f"working on {text}"))
        self.log.append(f"end {text}")
        return [Reply(text=f"re: {text}")]


def message(text: str, *, chat: str = "100", user: str = "100", event: str | None = None, **extra: object) -> Incoming:
    return Incoming(
        platform="telegram",
        chat_external_id=chat,
        user_external_id=user,
        text=text,
        event_id=event,
        is_private=chat == user,
        **extra,  # type: ignore[arg-type]
    )


class Outbox:
    """A `deliver` that records replies per chat in the order they were delivered."""

    def __init__(self) -> None:
        self.delivered: list[tuple[str, str]] = []

    def to(self, chat: str):  # type: ignore[no-untyped-def]
        async def deliver(replies: list[Reply]) -> None:
            await asyncio.sleep(0)  # a real send awaits the network
            self.delivered.extend((chat, reply.text) for reply in replies)

        return deliver


async def test_one_conversation_is_answered_in_order_while_other_chats_go_ahead(database: Database) -> None:
    responder = Responder(gates={"a1": asyncio.Event()})
    dispatcher = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    outbox = Outbox()

    tasks = [
        asyncio.create_task(dispatcher.dispatch(message(text, chat="A", user="A"), deliver=outbox.to("A")))
        for text in ("a1", "a2", "a3")
    ]
    other = asyncio.create_task(dispatcher.dispatch(message("b1", chat="B", user="B"), deliver=outbox.to("B")))
    assert await asyncio.wait_for(other, timeout=10) == [Reply(text="re: b1")]
    # b1 was answered while a1 is still held; a2 and a3 have not even started.
    assert outbox.delivered == [("B", "re: b1")]
    assert "start a2" not in responder.log and dispatcher.conversations_in_flight == 1

    responder.gates["a1"].set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
    assert [text for chat, text in outbox.delivered if chat == "A"] == ["re: a1", "re: a2", "re: a3"]
    a_log = [entry for entry in responder.log if entry.endswith(("a1", "a2", "a3"))]
    assert a_log == ["start a1", "end a1", "start a2", "end a2", "start a3", "end a3"]
    assert dispatcher.conversations_in_flight == 0  # the locks went with the last message


async def test_threads_of_one_chat_are_separate_conversations(database: Database) -> None:
    responder = Responder(gates={"held": asyncio.Event()})
    dispatcher = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    held = asyncio.create_task(dispatcher.dispatch(message("held", chat="-5", user="7", thread_key="t1")))
    other = await asyncio.wait_for(dispatcher.dispatch(message("free", chat="-5", user="7", thread_key="t2")), 10)
    assert other == [Reply(text="re: free")] and not held.done()
    responder.gates["held"].set()
    assert await asyncio.wait_for(held, 10) == [Reply(text="re: held")]


async def test_a_repeated_event_is_handled_once_even_after_a_restart(database: Database) -> None:
    responder = Responder()
    first = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    assert await first.dispatch(message("hi", event="900")) == [Reply(text="re: hi")]
    assert await first.dispatch(message("hi", event="900")) == []

    restarted = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    assert await restarted.dispatch(message("hi", event="900")) == []
    assert await restarted.dispatch(message("hi", event="901")) == [Reply(text="re: hi")]
    slack = message("hi", event="900").model_copy(update={"platform": "slack"})
    assert await restarted.dispatch(slack) == [Reply(text="re: hi")]  # ids are per platform
    assert len(responder.turns) == 3


async def test_marked_first_a_message_behind_a_long_turn_is_admitted_at_once_and_answered_in_order(
    database: Database,
) -> None:
    # Slack's 3 s: a mention arriving while its conversation's previous turn is still thinking is acknowledged as
    # soon as its mark is stored, not when its turn begins; it is still answered after the previous one, and once.
    responder = Responder(gates={"slow": asyncio.Event()})
    dispatcher = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    outbox = Outbox()
    admitted: list[str] = []
    slow = asyncio.create_task(dispatcher.dispatch(message("slow", event="E1"), deliver=outbox.to("100")))
    await asyncio.sleep(0.2)
    behind = asyncio.create_task(
        dispatcher.dispatch(
            message("behind", event="E2"),
            deliver=outbox.to("100"),
            admitted=lambda: admitted.append("E2"),
            mark_first=True,
        )
    )
    for _ in range(200):
        if admitted:
            break
        await asyncio.sleep(0.01)
    assert admitted == ["E2"] and "start behind" not in responder.log and not slow.done()

    retry = await dispatcher.dispatch(message("behind", event="E2"), mark_first=True)
    assert retry == []  # its stored mark: a duplicate, without waiting for the conversation
    responder.gates["slow"].set()
    await asyncio.wait_for(asyncio.gather(slow, behind), timeout=10)
    assert outbox.delivered == [("100", "re: slow"), ("100", "re: behind")]
    assert [t.incoming.text for t in responder.turns] == ["slow", "behind"]


async def test_strangers_are_told_once_in_private_and_ignored_in_groups(database: Database) -> None:
    responder = Responder()
    access = AccessPolicy(allowed_users=["100"], allowed_chats=["-300"], admin_users=["telegram:999"])
    dispatcher = Dispatcher(ChatService(database), responder, access, clock=lambda: T0)
    outbox = Outbox()

    [denied] = await dispatcher.dispatch(message("hello", chat="555", user="555"), deliver=outbox.to("555"))
    assert denied.text.startswith("This bot is private.") and "555" in denied.text
    assert outbox.delivered == [("555", denied.text)]
    assert await dispatcher.dispatch(message("hello?", chat="555", user="555")) == []  # told once
    assert await dispatcher.dispatch(message("@bot hi", chat="-200", user="555", mentions_bot=True)) == []
    assert responder.turns == []
    assert await ChatRepository(database).find("telegram", "555") is None  # nothing stored for strangers

    assert await dispatcher.dispatch(message("mine", chat="100", user="100")) == [Reply(text="re: mine")]
    assert await dispatcher.dispatch(message("group", chat="-300", user="555")) == [Reply(text="re: group")]
    assert await dispatcher.dispatch(message("admin", chat="999", user="999")) == [Reply(text="re: admin")]
    assert [turn.is_admin for turn in responder.turns] == [False, False, True]
    assert responder.turns[0].user.external_id == "100" and responder.turns[1].chat.external_id == "-300"


async def test_a_failure_is_logged_with_an_id_and_the_person_reads_a_short_sentence(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    responder = Responder(fail_with=RuntimeError("secret internals: /etc/lookout.db locked"))
    dispatcher = Dispatcher(ChatService(database), responder, AccessPolicy(), clock=lambda: T0)
    caplog.set_level(logging.ERROR, logger="bots.dispatcher")
    [reply] = await dispatcher.dispatch(message("hi"))

    match = re.fullmatch(r"Something went wrong on my side \(error id ([0-9a-f]{8})\)\. Try again later\.", reply.text)
    assert match is not None, reply.text
    [record] = [r for r in caplog.records if match[1] in r.getMessage()]
    assert record.exc_info is not None and "secret internals" in str(record.exc_info[1])
    # The next message works again, and nothing was left locked.
    responder.fail_with = None
    assert await dispatcher.dispatch(message("again")) == [Reply(text="re: again")]
    assert dispatcher.conversations_in_flight == 0


async def test_failing_progress_or_delivery_does_not_lose_the_answer(database: Database) -> None:
    dispatcher = Dispatcher(ChatService(database), Responder(), AccessPolicy(), clock=lambda: T0)

    async def broken_progress(_update: ProgressUpdate) -> None:
        raise ConnectionError("status message could not be edited")

    assert await dispatcher.dispatch(message("hi"), progress=broken_progress) == [Reply(text="re: hi")]

    attempts: list[list[str]] = []

    async def flaky(replies: list[Reply]) -> None:
        attempts.append([reply.text for reply in replies])
        if len(attempts) == 1:
            raise RuntimeError("socket closed")

    await dispatcher.dispatch(message("again"), deliver=flaky)
    assert attempts[0] == ["re: again"]
    assert attempts[1][0].startswith("Something went wrong on my side (error id ")


async def test_a_chat_that_blocked_the_bot_comes_back_when_someone_writes(database: Database) -> None:
    dispatcher = Dispatcher(ChatService(database), Responder(), AccessPolicy(), clock=lambda: T0)
    await dispatcher.dispatch(message("hi", chat="42", user="42"))
    chats, subscriptions = ChatRepository(database), SubscriptionRepository(database)
    chat = await chats.find("telegram", "42")
    assert chat is not None
    await MonitorRepository(database).create(owner_chat_id=chat.id, topic="DeepSeek", schedule="daily at 09:00")

    await dispatcher.chat_gone("telegram", "42", reason="Forbidden: bot was blocked by the user")
    assert (await chats.get(chat.id)).active is False  # type: ignore[union-attr]
    assert [s.active for s in await subscriptions.for_chat(chat.id)] == [False]

    await dispatcher.dispatch(message("I'm back", chat="42", user="42"))
    assert (await chats.get(chat.id)).active is True  # type: ignore[union-attr]
    assert [s.active for s in await subscriptions.for_chat(chat.id)] == [True]


async def test_a_moved_chat_keeps_its_row(database: Database) -> None:
    dispatcher = Dispatcher(ChatService(database), Responder(), AccessPolicy(), clock=lambda: T0)
    await dispatcher.dispatch(message("hi", chat="-555", user="7"))
    chats = ChatRepository(database)
    before = await chats.find("telegram", "-555")
    await dispatcher.chat_moved("telegram", "-555", "-100555")
    after = await chats.find("telegram", "-100555")
    assert before is not None and after is not None and after.id == before.id
    assert await chats.find("telegram", "-555") is None
