"""What a chat turn costs, through the real dispatcher, conversation and chat agent, on SQLite and PostgreSQL:
database transactions and statements per turn (counted at the engine), model calls per turn over a long
conversation (memory folded in batches, after the reply), and usage counted exactly once. The `database` fixture
is `tests.backends`'."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo
from sqlalchemy import event, text

from agent.access import AccessPolicy
from agent.chat.agent import ChatAgent
from agent.commands.router import CommandRouter
from agent.context import ConversationSettings, Services
from agent.conversation import Conversation
from agent.messages import Incoming
from bots.dispatcher import Dispatcher
from kernel import Reply
from monitors import ChatService, ItemService
from research import ModelSet
from storage import Database
from storage.repositories import ChatRepository, TurnRepository, UsageRepository
from tests.bots.slack_world import T0, monitor_service
from tests.fakes.postgres_proxy import postgres_proxy
from tests.kit import ScriptedModel

SUMMARY_MARK = "You keep the memory of a chat"


@dataclass
class Counter:
    """Transactions begun and statements sent on one engine (BEGIN/COMMIT themselves not counted as statements)."""

    transactions: int = 0
    statements: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.transactions, self.statements = 0, []


@contextmanager
def counting(database: Database) -> Iterator[Counter]:
    counter = Counter()
    engines = database.sync_engines  # on a SQLite file, the turn's transactions run on the writer thread's engine

    def on_begin(_connection: Any) -> None:
        counter.transactions += 1

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            counter.statements.append(statement.split(None, 1)[0].upper())

    for engine in engines:
        event.listen(engine, "begin", on_begin)
        event.listen(engine, "before_cursor_execute", on_statement)
    try:
        yield counter
    finally:
        for engine in engines:
            event.remove(engine, "begin", on_begin)
            event.remove(engine, "before_cursor_execute", on_statement)


def echo_answers(log: list[str]) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    """A script step answering at once: the summary, or an echo of the prompt; logs every call (chat or summary)
    in `log`, shared with the replies delivered."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if SUMMARY_MARK in (info.instructions or ""):
            log.append("summary")
            return ModelResponse(parts=[TextPart("The person counts.")])
        prompt = next(
            str(part.content)
            for part in reversed(messages[-1].parts)
            if isinstance(messages[-1], ModelRequest) and isinstance(part, UserPromptPart)
        )
        log.append(f"chat {prompt}")
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])

    return answer


def echo_model(log: list[str]) -> ScriptedModel:
    return ScriptedModel(echo_answers(log), name="echo", repeat_last=True)


def dispatcher(database: Database, model: ScriptedModel, tmp_path: Path, *, memory_turns: int = 10) -> Dispatcher:
    def no_sources(_specs: object) -> list[Any]:
        raise ValueError("no sources here")

    services = Services(
        chats=ChatService(database),
        items=ItemService(database),
        monitors=monitor_service(database, no_sources, tmp_path),
        resolve_sources=no_sources,
        http=None,  # type: ignore[arg-type]  # no tool reaches the web in these turns
        models=ModelSet.of(model.model, None),
        settings=ConversationSettings(exports_dir=tmp_path, memory_turns=memory_turns),
        clock=lambda: T0,
    )
    conversation = Conversation(
        commands=CommandRouter(services), free_text=ChatAgent(services), settings=services.settings
    )
    return Dispatcher(ChatService(database), conversation, AccessPolicy(), clock=lambda: T0)


def said(text: str, update: int) -> Incoming:
    return Incoming(
        platform="telegram",
        chat_external_id="7",
        user_external_id="7",
        text=text,
        event_id=str(update),
        is_private=True,
        user_display_name="Ada",
    )


async def test_a_turn_is_one_transaction_in_and_one_out(database: Database, tmp_path: Path) -> None:
    log: list[str] = []
    chat = dispatcher(database, echo_model(log), tmp_path)
    await chat.dispatch(said("hello", 1))  # the first message stores the chat and the person
    await chat.dispatch(said("/help", 2))

    with counting(database) as counter:
        replies = await chat.dispatch(said("how are you?", 3))
        free_text = (counter.transactions, list(counter.statements))
        counter.reset()
        await chat.dispatch(said("/help", 4))
        command = (counter.transactions, list(counter.statements))
        counter.reset()
        await chat.dispatch(said("how are you?", 3))  # the platform delivered update 3 again
        duplicate = (counter.transactions, list(counter.statements))

    assert replies == [Reply(text="echo: how are you?")]
    # in: the de-duplication mark and one read (chat ⟕ person ⟕ conversation, today's tokens), on PostgreSQL
    # one statement (the mark a data-modifying CTE); out: the memory and the usage of the run, together
    # (on PostgreSQL one statement too: the memory's upsert and the usage's, data-modifying CTEs of it)
    mark_and_read = ["WITH"] if database.dialect == "postgresql" else ["INSERT", "SELECT"]
    write = ["WITH"] if database.dialect == "postgresql" else ["INSERT", "INSERT"]
    assert free_text == (2, [*mark_and_read, *write])
    assert command == (1, mark_and_read)  # a command that stores nothing reads once and writes nothing
    assert duplicate == (1, mark_and_read[:1])  # known: nothing else is read or done
    assert log == ["chat hello", "chat how are you?"]


async def test_a_new_chat_and_a_renamed_person_cost_their_writes_in_the_same_transaction(
    database: Database, tmp_path: Path
) -> None:
    chat = dispatcher(database, echo_model([]), tmp_path)
    await chat.dispatch(said("/help", 1).model_copy(update={"chat_external_id": "8"}))  # the hourly prune ran here
    with counting(database) as counter:
        await chat.dispatch(said("/help", 2))
    # created inside the turn's one transaction in (on PostgreSQL after the mark and read, committed as it ran)
    assert counter.transactions == (2 if database.dialect == "postgresql" else 1)
    stored = await ChatRepository(database).find("telegram", "7")
    assert stored is not None and stored.title == "Ada"

    renamed = said("/help", 3).model_copy(update={"user_display_name": "Ada L."})
    with counting(database) as counter:
        await chat.dispatch(renamed)
    if database.dialect == "postgresql":  # the mark and read first, committed as it runs; then the two names
        assert counter.transactions == 2 and counter.statements == ["WITH", "INSERT", "INSERT", "SELECT"]
    else:
        assert counter.transactions == 1 and counter.statements.count("INSERT") == 3  # mark, chat title, person


async def test_thirty_turns_fold_in_batches_after_their_replies_and_count_every_call_once(
    database: Database, tmp_path: Path
) -> None:
    log: list[str] = []
    model = echo_model(log)
    chat = dispatcher(database, model, tmp_path, memory_turns=10)

    async def deliver(replies: list[Reply]) -> None:
        log.extend(f"reply {reply.text.removeprefix('echo: ')}" for reply in replies)

    for n in range(30):
        await chat.dispatch(said(f"message {n}", n + 1), deliver=deliver)
    await chat.finish_background()

    chat_calls = [entry for entry in log if entry.startswith("chat ")]
    summaries = log.count("summary")
    assert len(chat_calls) == 30
    assert 1 <= summaries <= 5 and len(chat_calls) + summaries <= 35
    # no reply waited for a summary: between a turn's model call and its reply there is nothing else
    for n in range(30):
        asked = log.index(f"chat message {n}")
        assert log[asked + 1] == f"reply message {n}", log[asked : asked + 3]
    # every summary followed a reply (a fold after the answer went out)
    assert all(log[index - 1].startswith("reply ") for index, entry in enumerate(log) if entry == "summary")

    stored = await ChatRepository(database).find("telegram", "7")
    assert stored is not None
    usage = await UsageRepository(database).by_kind(stored.id, T0.date(), T0.date())
    assert (usage["chat"].requests, usage["memory"].requests) == (30, summaries)
    state = await TurnRepository(database).state(stored.id, "", T0.date())
    assert state.tokens_today == sum(totals.tokens for totals in usage.values())  # what the daily budget counts
    assert state.conversation is not None and state.conversation.summary == "The person counts."
    answer = await chat.dispatch(said("/usage", 99))
    assert f"memory summaries {usage['memory'].tokens:,}" in answer[0].text


async def test_the_next_turn_waits_for_a_fold_still_running(database: Database, tmp_path: Path) -> None:
    log: list[str] = []
    release = asyncio.Event()
    answer = echo_answers(log)

    async def slow_summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if SUMMARY_MARK in (info.instructions or ""):
            await release.wait()
        return answer(messages, info)

    model = ScriptedModel(slow_summary, name="echo", repeat_last=True)
    chat = dispatcher(database, model, tmp_path, memory_turns=1)  # folds after the third turn
    for n in range(3):
        await chat.dispatch(said(f"message {n}", n + 1))  # the third returns with its fold still running
    assert log[-1] == "chat message 2"

    following = asyncio.create_task(chat.dispatch(said("message 3", 4)))
    await asyncio.sleep(0.2)
    assert not following.done() and log[-1] == "chat message 2"  # waiting for the fold, not answering over it
    release.set()
    await following
    assert log[-2:] == ["summary", "chat message 3"]


async def test_a_command_on_postgresql_is_two_round_trips_and_the_first_after_a_restart_is_answered(
    database: Database, tmp_path: Path
) -> None:
    """Counted on the wire (a recording proxy in front of the server): the pooled connection's liveness check and
    the one statement that marks and reads the turn. Every connection dropped (a restart), or ended by the server
    (`pg_terminate_backend`, what a restart's shutdown sends), the next message is still answered: the liveness
    check replaces the dead connection before the turn uses it."""
    if database.dialect != "postgresql":
        pytest.skip("round trips and restarts of a PostgreSQL server")
    async with postgres_proxy(database.engine.url.render_as_string(hide_password=False)) as proxy:
        proxied = Database(proxy.url)
        try:
            chat = dispatcher(proxied, echo_model([]), tmp_path)
            await chat.dispatch(said("/help", 1))  # stores the chat and the person; prepares the statements
            await chat.dispatch(said("/help", 2))
            proxy.reset()
            help_text = await chat.dispatch(said("/help", 3))
            assert proxy.round_trips == 2 and proxy.queries == []  # prepared once: no statement parsed again
            assert "/monitors" in help_text[0].text
            await chat.dispatch(said("/monitors", 30))  # prepares the listing's statement
            proxy.reset()
            await chat.dispatch(said("/monitors", 31))
            assert proxy.round_trips == 4  # the turn's two, then the listing's check and its one statement

            await chat.dispatch(said("hello", 40))  # prepares the free-text turn's write
            proxy.reset()
            assert await chat.dispatch(said("hello again", 41)) == [Reply(text="echo: hello again")]
            # in: the check and the mark-and-read; out: the check and the one statement writing the memory and
            # the usage together (no BEGIN, no COMMIT: committed as it runs)
            assert proxy.round_trips == 4 and proxy.queries == []

            await proxy.drop_connections()
            assert await chat.dispatch(said("/help", 4)) == help_text

            async with database.engine.connect() as admin:
                ended = await admin.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
                assert ended.all()  # the proxied session was among them
            await asyncio.sleep(0.1)  # the server's goodbye reaches the idle pooled connection
            assert await chat.dispatch(said("/help", 5)) == help_text
            assert await chat.dispatch(said("/help", 5)) == []  # still marked once: a redelivery is ignored
        finally:
            await proxied.dispose()
