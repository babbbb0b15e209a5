"""Conversation memory on a real SQLite database, with histories written by a real pydantic-ai Agent run."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from agent.memory import (
    ConversationMemory,
    Fold,
    HistoryCache,
    MemoryWindow,
    encode_messages,
    fold_batch,
    trim_to_tokens,
    turn_starts,
)
from storage import ChatRecord, ConversationChanges, ConversationRecord, Database
from storage.repositories import ConversationRepository
from tests.agent.conftest import T0
from tests.kit import FakeClock, ScriptedModel


def weather_or_echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answers "weather …" with a tool call, a tool return with a sentence, anything else with an echo."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returns:
        return ModelResponse(parts=[TextPart(content=f"It is {returns[0].content}.")])
    prompt = next(str(p.content) for p in last.parts if isinstance(p, UserPromptPart))
    if prompt.startswith("weather"):
        return ModelResponse(parts=[ToolCallPart(tool_name="weather", args={"city": prompt.split()[-1]})])
    return ModelResponse(parts=[TextPart(content=f"echo: {prompt}")])


def weather_model() -> ScriptedModel:
    """A scripted model answering every request with `weather_or_echo`, recording the messages and instructions."""
    return ScriptedModel(weather_or_echo, repeat_last=True)


def make_agent(model: ScriptedModel) -> Agent[None, str]:
    agent = Agent(model.model, instructions="You are Lookout.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


@dataclass
class Stored:
    """One conversation as the chat agent keeps it: read at the start of a turn, written once after it."""

    database: Database
    chat: ChatRecord
    clock: FakeClock
    thread_key: str = "t1"
    max_turns: int = 10
    idle_hours: float = 24
    last_fold: Fold | None = None
    kept: HistoryCache | None = None
    """The chat agent's cache of what it wrote, decoded (None: decode every turn)."""

    @property
    def repository(self) -> ConversationRepository:
        return ConversationRepository(self.database)

    async def memory(self) -> ConversationMemory:
        record = await self.repository.load(self.chat.id, self.thread_key)
        return ConversationMemory(
            record, now=self.clock(), max_turns=self.max_turns, idle_hours=self.idle_hours, decoded=self.kept
        )

    async def turn(self, agent: Agent[None, str], text: str) -> MemoryWindow:
        """What the chat agent does per message: read, run with the window, store the history, plan a fold."""
        memory = await self.memory()
        window = memory.window()
        result = await agent.run(text, message_history=window.messages, instructions=window.summary_instructions)
        history = memory.after(result.new_messages())
        stored = memory.encode_after(result.new_messages())
        assert ModelMessagesTypeAdapter.validate_json(stored) == history  # appended, not re-encoded, and the same
        revision = await self.repository.write(
            self.chat.id, self.thread_key, {"messages": stored, "touch": True}, now=self.clock()
        )
        assert revision is not None
        if self.kept is not None:
            self.kept.keep(self.chat.id, self.thread_key, stored, history)
        self.last_fold = memory.fold(history, revision=revision)
        return window

    async def apply(self, fold: Fold, summary: str) -> int | None:
        """What the fold after a reply writes (only over the revision it was planned on)."""
        changes: ConversationChanges = {"messages": encode_messages(fold.keep), "summary": summary}
        return await self.repository.write(
            self.chat.id, self.thread_key, changes, now=self.clock(), if_revision=fold.revision
        )


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def assert_pairs_whole(messages: list[ModelMessage]) -> None:
    calls = {
        p.tool_call_id for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)
    }
    returns = {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert calls == returns


async def test_history_round_trips_through_storage_and_a_restart(
    database: Database, db_url: str, chat: ChatRecord, clock: FakeClock
) -> None:
    model = weather_model()
    agent = make_agent(model)
    stored = Stored(database, chat, clock)
    await stored.turn(agent, "hello")
    clock.advance(minutes=1)
    await stored.turn(agent, "weather in Paris")
    clock.advance(minutes=1)
    await stored.turn(agent, "thanks")

    # the third request the model saw carried both earlier exchanges, tool call and return included
    assert prompts(model.requests[-1]) == ["hello", "weather in Paris", "thanks"]
    assert any(isinstance(p, ToolCallPart) for m in model.requests[-1] for p in m.parts)

    restarted = Database(db_url)
    try:
        window = (await Stored(restarted, chat, clock).memory()).window()
    finally:
        await restarted.dispose()
    assert window.messages == (await stored.memory()).history
    assert len(window.messages) == 8  # 3 turns: 2 + 4 (request, tool call, tool return, answer) + 2
    assert_pairs_whole(window.messages)
    assert (window.summary, window.expired) == (None, False)
    # and the stored bytes are pydantic-ai's own serialisation
    record = await ConversationRepository(database).load(chat.id, "t1")
    assert record is not None
    assert ModelMessagesTypeAdapter.validate_json(record.messages) == window.messages


async def test_a_kept_history_stands_in_for_exactly_the_bytes_it_was_kept_with(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    kept = HistoryCache()
    agent = make_agent(weather_model())
    stored = Stored(database, chat, clock, kept=kept)
    for text in ("hello", "weather in Paris", "thanks", "weather in Oslo", "bye"):
        await stored.turn(agent, text)
        record = await stored.repository.load(chat.id, "t1")
        assert record is not None
        reused = kept.get(record)
        # used (no decode) and the same as decoding the stored JSON: the runs since did not alter the kept messages
        assert reused is not None and reused == ModelMessagesTypeAdapter.validate_json(record.messages)
        assert (await stored.memory()).history == reused
    assert len(reused) == 14

    # anything else that wrote the conversation (a fold, /forget, another process) makes it a miss: decoded again
    await stored.repository.write(chat.id, "t1", {"messages": encode_messages(reused[:2]), "touch": True}, now=clock())
    record = await stored.repository.load(chat.id, "t1")
    assert record is not None and kept.get(record) is None
    assert (await stored.memory()).history == reused[:2]


def test_the_history_cache_keeps_the_conversations_used_last() -> None:
    kept = HistoryCache(size=2)
    said = [ModelRequest(parts=[UserPromptPart(content="hi")])]
    for chat_id in (1, 2):
        kept.keep(chat_id, "", encode_messages(said), said)

    def record(chat_id: int) -> ConversationRecord:
        return ConversationRecord(id=chat_id, chat_id=chat_id, thread_key="", messages=encode_messages(said),
                                  summary=None, created_at=T0, updated_at=T0)  # fmt: skip

    assert kept.get(record(1)) == said  # 1 is now the one used last…
    kept.keep(3, "", encode_messages(said), said)  # …so 2 makes room for 3
    assert [kept.get(record(n)) is not None for n in (1, 2, 3)] == [True, False, True]


async def test_threads_and_chats_are_separate(database: Database, chat: ChatRecord, clock: FakeClock) -> None:
    agent = make_agent(weather_model())
    await Stored(database, chat, clock).turn(agent, "in thread one")
    assert (await Stored(database, chat, clock, thread_key="t2").memory()).window().messages == []


def test_the_fold_batch_is_half_the_window_within_bounds() -> None:
    assert [fold_batch(turns) for turns in (1, 2, 3, 4, 10, 11, 40, 100)] == [2, 2, 2, 2, 5, 5, 10, 10]


async def test_turns_are_folded_in_batches_and_never_split_a_tool_call(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    model = weather_model()
    agent = make_agent(model)
    stored = Stored(database, chat, clock, max_turns=3)  # folds once 3 + 2 turns are stored
    texts = [f"weather in city{n}" if n % 2 else f"note {n}" for n in range(5)]
    folds = []
    for text in texts:
        window = await stored.turn(agent, text)
        folds.append(stored.last_fold)
        clock.advance(minutes=1)

    assert folds[:4] == [None] * 4  # no summary call for the first four turns
    assert prompts(window.messages) == texts[:4]  # the agent saw every unsummarised turn
    fold = folds[4]
    assert fold is not None
    assert prompts(fold.messages) == texts[:2] and prompts(fold.keep) == texts[2:]
    assert_pairs_whole(fold.messages)
    assert_pairs_whole(fold.keep)
    assert fold.messages + fold.keep == (await stored.memory()).history

    assert await stored.apply(fold, "Notes 0 and the weather in city1.") is not None
    window = await stored.turn(agent, "and now?")
    # the next run's model sees the kept turns plus the new prompt, and the summary in its instructions
    assert prompts(model.requests[-1]) == [*texts[2:], "and now?"]
    assert_pairs_whole(model.requests[-1])
    assert "Notes 0 and the weather in city1." in (model.infos[-1].instructions or "")
    assert stored.last_fold is None  # 4 turns: the next fold comes two turns later


def test_a_prompt_that_answers_an_earlier_tool_call_is_not_a_cut_point() -> None:
    call = ToolCallPart(tool_name="weather", args={"city": "Oslo"}, tool_call_id="call-1")
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content="weather in Oslo")]),
        ModelResponse(parts=[call]),
        # a run interrupted by the person: the tool result and the next prompt travel in one request
        ModelRequest(
            parts=[
                ToolReturnPart(tool_name="weather", content="rain", tool_call_id="call-1"),
                UserPromptPart(content="never mind"),
            ]
        ),
        ModelResponse(parts=[TextPart(content="ok")]),
        ModelRequest(parts=[UserPromptPart(content="next")]),
        ModelResponse(parts=[TextPart(content="sure")]),
    ]
    assert turn_starts(messages) == [0, 4]


async def test_a_fold_never_overwrites_turns_stored_after_it_was_planned(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    agent = make_agent(weather_model())
    stored = Stored(database, chat, clock, max_turns=1)
    for text in ["one", "two", "three"]:
        await stored.turn(agent, text)
    fold = stored.last_fold
    assert fold is not None
    await stored.turn(agent, "four")  # another turn was stored before the fold's write (another process)

    assert await stored.apply(fold, "one and two") is None
    record = await stored.repository.load(chat.id, "t1")
    assert record is not None and record.summary is None
    assert prompts((await stored.memory()).history) == ["one", "two", "three", "four"]


async def test_idle_expiry_starts_fresh_carrying_only_the_summary(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    model = weather_model()
    agent = make_agent(model)
    stored = Stored(database, chat, clock, idle_hours=24)
    await stored.turn(agent, "old news")
    await stored.repository.write(chat.id, "t1", {"summary": "Earlier: the person follows DeepSeek."}, now=clock())
    await stored.turn(agent, "weather in Lima")

    clock.advance(hours=23, minutes=59)
    assert not (await stored.memory()).window().expired  # a minute short of a day: still the same conversation

    clock.advance(hours=24)
    window = await stored.turn(agent, "hello again")
    assert window.expired
    assert window.messages == []
    assert prompts(model.requests[-1]) == ["hello again"]
    assert "follows DeepSeek" in (model.infos[-1].instructions or "")
    fold = stored.last_fold
    assert fold is not None and fold.previous_summary == "Earlier: the person follows DeepSeek."
    assert prompts(fold.messages) == ["old news", "weather in Lima"]  # what the expiry set aside
    assert prompts(fold.keep) == ["hello again"]

    await stored.apply(fold, "Earlier: DeepSeek; the weather in Lima was sunny.")
    window = (await stored.memory()).window()
    assert prompts(window.messages) == ["hello again"]
    assert window.summary == "Earlier: DeepSeek; the weather in Lima was sunny."
    assert not window.expired


async def test_idle_expiry_without_a_summary_drops_the_old_messages(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    agent = make_agent(weather_model())
    stored = Stored(database, chat, clock)
    await stored.turn(agent, "old")
    clock.advance(hours=30)
    await stored.turn(agent, "new")  # its fold is never applied (the summary call failed)
    assert prompts((await stored.memory()).window().messages) == ["new"]


async def test_unreadable_stored_messages_start_fresh_and_keep_the_summary(
    database: Database, chat: ChatRecord, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    repository = ConversationRepository(database)
    await repository.save(chat.id, "t1", messages=b'[{"kind": "telegram?"}]', summary="kept", now=clock())
    window = (await Stored(database, chat, clock).memory()).window()
    assert (window.messages, window.summary) == ([], "kept")
    assert "unreadable" in caplog.text


def test_trim_to_tokens_keeps_the_newest_whole_turns_that_fit() -> None:
    def turn(said: str, answer: str) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart(content=said)]), ModelResponse(parts=[TextPart(content=answer)])]

    history = [*turn("first", "x " * 2000), *turn("second", "short"), *turn("third", "short too")]
    assert trim_to_tokens(history, 100_000) == history
    kept = trim_to_tokens(history, 300)
    assert kept == history[2:], "the long old turn gives way; the newest turns are whole"
    assert trim_to_tokens(history, 5) == [], "not even the last turn fits: none"
