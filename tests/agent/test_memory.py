"""Conversation memory on a real SQLite database, with histories written by a real pydantic-ai Agent run."""

from __future__ import annotations

from dataclasses import dataclass, field

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
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.memory import ConversationMemory, MemoryWindow, turn_starts
from storage import ChatRecord, ConversationRepository, Database
from tests.agent.conftest import FakeClock


@dataclass
class ScriptedModel:
    """Answers "weather …" with a tool call, a tool return with a sentence, anything else with an echo;
    records every request it gets (the messages and the instructions)."""

    requests: list[list[ModelMessage]] = field(default_factory=list)
    instructions: list[str | None] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        self.instructions.append(info.instructions)
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(content=f"It is {returns[0].content}.")])
        prompt = next(str(p.content) for p in last.parts if isinstance(p, UserPromptPart))
        if prompt.startswith("weather"):
            return ModelResponse(parts=[ToolCallPart(tool_name="weather", args={"city": prompt.split()[-1]})])
        return ModelResponse(parts=[TextPart(content=f"echo: {prompt}")])


def make_agent(model: ScriptedModel) -> Agent[None, str]:
    agent = Agent(FunctionModel(model), instructions="You are Lookout.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


async def chat_turn(memory: ConversationMemory, agent: Agent[None, str], text: str) -> MemoryWindow:
    """What the conversation layer will do per message: load, run with the window, append."""
    window = await memory.load()
    result = await agent.run(text, message_history=window.messages, instructions=window.summary_instructions)
    await memory.append(result.new_messages())
    return window


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


def memory_of(
    database: Database, chat: ChatRecord, clock: FakeClock, *, max_turns: int = 10, idle_hours: float = 24
) -> ConversationMemory:
    return ConversationMemory(
        ConversationRepository(database),
        chat_id=chat.id,
        thread_key="t1",
        max_turns=max_turns,
        idle_hours=idle_hours,
        clock=clock,
    )


async def test_history_round_trips_through_storage_and_a_restart(
    database: Database, db_url: str, chat: ChatRecord, clock: FakeClock
) -> None:
    model = ScriptedModel()
    agent = make_agent(model)
    memory = memory_of(database, chat, clock)
    await chat_turn(memory, agent, "hello")
    clock.advance(minutes=1)
    await chat_turn(memory, agent, "weather in Paris")
    clock.advance(minutes=1)
    await chat_turn(memory, agent, "thanks")

    # the third request the model saw carried both earlier exchanges, tool call and return included
    assert prompts(model.requests[-1]) == ["hello", "weather in Paris", "thanks"]
    assert any(isinstance(p, ToolCallPart) for m in model.requests[-1] for p in m.parts)

    restarted = Database(db_url)
    try:
        reloaded = ConversationMemory(ConversationRepository(restarted), chat_id=chat.id, thread_key="t1", clock=clock)
        window = await reloaded.load()
    finally:
        await restarted.dispose()
    assert window.messages == memory.history
    assert len(window.messages) == 8  # 3 turns: 2 + 4 (request, tool call, tool return, answer) + 2
    assert_pairs_whole(window.messages)
    assert (window.summary, window.expired) == (None, False)
    # and the stored bytes are pydantic-ai's own serialisation
    stored = await ConversationRepository(database).load(chat.id, "t1")
    assert stored is not None
    assert ModelMessagesTypeAdapter.validate_json(stored.messages) == window.messages


async def test_threads_and_chats_are_separate(database: Database, chat: ChatRecord, clock: FakeClock) -> None:
    agent = make_agent(ScriptedModel())
    await chat_turn(memory_of(database, chat, clock), agent, "in thread one")
    other = ConversationMemory(ConversationRepository(database), chat_id=chat.id, thread_key="t2", clock=clock)
    assert (await other.load()).messages == []


async def test_window_keeps_the_last_turns_and_never_splits_a_tool_call(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    model = ScriptedModel()
    agent = make_agent(model)
    memory = memory_of(database, chat, clock, max_turns=3)
    texts = [f"weather in city{n}" if n % 2 else f"note {n}" for n in range(8)]
    for text in texts:
        await chat_turn(memory, agent, text)
        clock.advance(minutes=1)

    window = await memory.load()
    assert prompts(window.messages) == texts[-3:]
    assert isinstance(window.messages[0], ModelRequest) and prompts(window.messages[:1]) == [texts[-3]]
    assert_pairs_whole(window.messages)
    assert memory.needs_summary()
    old = memory.turns_to_summarise()
    assert prompts(old) == texts[:-3]
    assert_pairs_whole(old)
    assert old + window.messages == memory.history

    # the next run's model sees exactly the window plus the new prompt
    await chat_turn(memory, agent, "and now?")
    assert prompts(model.requests[-1]) == [*texts[-3:], "and now?"]
    assert_pairs_whole(model.requests[-1])


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


async def test_summary_replaces_old_turns_and_reaches_the_model(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    model = ScriptedModel()
    agent = make_agent(model)
    memory = memory_of(database, chat, clock, max_turns=2)
    for text in ["one", "weather in Rome", "three"]:
        await chat_turn(memory, agent, text)
    await memory.load()
    assert memory.needs_summary()
    assert prompts(memory.turns_to_summarise()) == ["one"]

    await memory.apply_summary("The person said one.")
    assert not memory.needs_summary()
    assert memory.turns_to_summarise() == []

    fresh = memory_of(database, chat, clock, max_turns=2)
    window = await fresh.load()
    assert window.summary == "The person said one."
    assert prompts(window.messages) == ["weather in Rome", "three"]
    assert_pairs_whole(window.messages)

    await chat_turn(fresh, agent, "four")
    instructions = model.instructions[-1] or ""
    assert "You are Lookout." in instructions
    assert "<summary>\nThe person said one.\n</summary>" in instructions
    assert prompts(model.requests[-1]) == ["weather in Rome", "three", "four"]


async def test_idle_expiry_starts_fresh_carrying_only_the_summary(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    model = ScriptedModel()
    agent = make_agent(model)
    memory = memory_of(database, chat, clock, idle_hours=24)
    await chat_turn(memory, agent, "old news")
    await memory.apply_summary("Earlier: the person follows DeepSeek.")  # nothing old yet: history stays
    await chat_turn(memory, agent, "weather in Lima")

    clock.advance(hours=23, minutes=59)
    assert not (await memory.load()).expired  # a minute short of a day: still the same conversation

    clock.advance(hours=24)
    window = await memory.load()
    assert window.expired
    assert window.messages == []
    assert window.summary == "Earlier: the person follows DeepSeek."
    assert memory.needs_summary()
    assert prompts(memory.turns_to_summarise()) == ["old news", "weather in Lima"]

    result = await agent.run("hello again", message_history=window.messages, instructions=window.summary_instructions)
    assert prompts(model.requests[-1]) == ["hello again"]
    assert "follows DeepSeek" in (model.instructions[-1] or "")
    await memory.append(result.new_messages())
    await memory.apply_summary("Earlier: DeepSeek; the weather in Lima was sunny.")

    window = await memory_of(database, chat, clock).load()
    assert prompts(window.messages) == ["hello again"]
    assert window.summary == "Earlier: DeepSeek; the weather in Lima was sunny."
    assert not window.expired


async def test_idle_expiry_without_a_summariser_drops_the_old_messages(
    database: Database, chat: ChatRecord, clock: FakeClock
) -> None:
    agent = make_agent(ScriptedModel())
    memory = memory_of(database, chat, clock)
    await chat_turn(memory, agent, "old")
    clock.advance(hours=30)
    await chat_turn(memory, agent, "new")
    window = await memory_of(database, chat, clock).load()
    assert prompts(window.messages) == ["new"]


async def test_forget_clears_messages_and_summary(database: Database, chat: ChatRecord, clock: FakeClock) -> None:
    agent = make_agent(ScriptedModel())
    memory = memory_of(database, chat, clock)
    await chat_turn(memory, agent, "remember me")
    await memory.apply_summary("Something to forget.")
    assert await memory.forget()
    assert not await memory.forget()  # nothing left the second time
    window = await memory_of(database, chat, clock).load()
    assert (window.messages, window.summary, window.expired) == ([], None, False)
    assert await ConversationRepository(database).load(chat.id, "t1") is None


async def test_unreadable_stored_messages_start_fresh_and_keep_the_summary(
    database: Database, chat: ChatRecord, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    repository = ConversationRepository(database)
    await repository.save(chat.id, "t1", messages=b'[{"kind": "telegram?"}]', summary="kept", now=clock())
    window = await memory_of(database, chat, clock).load()
    assert (window.messages, window.summary) == ([], "kept")
    assert "unreadable" in caplog.text
