"""The chat agent end to end with a scripted model: tools, memory, summaries, idle expiry, budgets, models."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import ModelHTTPError, ModelRateLimitError
from pydantic_ai.exceptions import ModelQuotaExceededError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.usage import RequestUsage

from agent.chat.summary import summarise
from agent.commands.settings import ForgetCommand, forget
from storage import ChatRecord, Database, UsageEntry
from storage.repositories import ConversationRepository, UsageRepository
from tests.agent.chat_world import ChatWorld, hn_hit, make_world
from tests.fakes.http_server import FakeHTTPServer
from tests.kit import FakeClock, ScriptedModel, Step, call, say, tool_returns, user_prompts


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path, default_timezone="Europe/Berlin")
    yield built
    await built.http.aclose()


def texts(messages: list[ModelMessage]) -> str:
    return "\n".join(str(getattr(part, "content", "")) for message in messages for part in message.parts)


async def test_a_tool_using_conversation_searches_the_sources_and_answers_with_them(
    world: ChatWorld, clock: FakeClock
) -> None:
    world.serve_hn([hn_hit("1", "DeepSeek releases R2", text="A new model.", created=clock.now - timedelta(hours=2))])
    model = ScriptedModel(call("search_sources", query="DeepSeek", sources=["hn"], days=3), say("R2 is out [1]."))

    replies = await world.agent(model.model).reply(world.turn("what's new with DeepSeek?"))

    assert [reply.text for reply in replies] == ["R2 is out [1]."]
    searched = world.server.received("/hn/search_by_date")
    assert searched and searched[0].query["query"] == "DeepSeek"
    returned = tool_returns(model.requests[1])
    assert returned[0].tool_name == "search_sources"
    assert "DeepSeek releases R2" in returned[0].content
    assert "https://example.com/story/1" in returned[0].content
    assert any("Searching hn" in update.text for update in world.progress)
    # the instructions carry the chat's time and zone, the rules, and the tools are declared
    instructions = model.infos[0].instructions or ""
    assert "Europe/Berlin" in instructions
    assert "Sunday 01 March 2026, 10:00" in instructions
    assert "untrusted_source_data" in instructions
    declared = {tool.name for tool in model.infos[0].function_tools}
    assert {"search_sources", "read_page", "collect", "create_monitor", "timeline", "export_items"} <= declared


async def test_the_second_request_carries_the_first_exchange(world: ChatWorld) -> None:
    model = ScriptedModel(say("Hello Alice."), say("You asked me to say hello."))
    agent = world.agent(model.model)

    await agent.reply(world.turn("say hello"))
    replies = await agent.reply(world.turn("what did I ask?"))

    assert replies[0].text == "You asked me to say hello."
    second = model.requests[1]
    assert user_prompts(second) == ["say hello", "what did I ask?"]
    assert "Hello Alice." in texts(second)


async def test_memory_survives_a_new_agent_object_like_a_restart(world: ChatWorld) -> None:
    first = ScriptedModel(say("Noted: you like Rust."))
    await world.agent(first.model).reply(world.turn("I like Rust"))

    second = ScriptedModel(say("You like Rust."))
    await world.agent(second.model).reply(world.turn("what do I like?"))

    assert user_prompts(second.requests[0]) == ["I like Rust", "what do I like?"]


async def test_memory_is_per_thread(world: ChatWorld) -> None:
    model = ScriptedModel(say("one"), say("two"))
    agent = world.agent(model.model)
    await agent.reply(world.turn("in thread A", thread_key="A"))
    await agent.reply(world.turn("in thread B", thread_key="B"))
    assert user_prompts(model.requests[1]) == ["in thread B"]


async def test_old_turns_are_folded_in_batches_and_the_context_stays_bounded(world: ChatWorld) -> None:
    summaries: list[str] = []

    def summariser(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        summaries.append(texts(messages))
        return say(f"SUMMARY {len(summaries)}: the person counts numbers.")

    # MEMORY_TURNS=2 folds in batches of 2: after the 4th turn, then after the 6th
    steps = [say("answer 0"), say("answer 1"), say("answer 2"), say("answer 3"), summariser]
    steps += [say("answer 4"), say("answer 5"), summariser, say("answer 6")]
    model = ScriptedModel(*steps)
    agent = world.agent(model.model, memory_turns=2)

    for n in range(7):
        await world.reply(agent, world.turn(f"message {n}"))

    assert not model.steps and len(summaries) == 2  # 7 answers, 2 summaries
    # the first fold read the two oldest turns (and no summary yet), the second the next two and the first summary
    assert "Person: message 0" in summaries[0] and "Person: message 1" in summaries[0]
    assert "Assistant: answer 0" in summaries[0] and "Person: message 2" not in summaries[0]
    assert "Previous summary:\n(none)" in summaries[0]
    assert "SUMMARY 1: the person counts numbers." in summaries[1]
    assert "Person: message 2" in summaries[1] and "Person: message 3" in summaries[1]
    assert "Person: message 4" not in summaries[1]
    # before a fold the agent saw every unsummarised turn; after it, the last two and the summary
    assert user_prompts(model.requests[3]) == ["message 0", "message 1", "message 2", "message 3"]
    last = model.requests[-1]
    assert user_prompts(last) == ["message 4", "message 5", "message 6"]
    assert "SUMMARY 2: the person counts numbers." in (model.infos[-1].instructions or "")
    stored = await ConversationRepository(world.database).load(world.chat.id, "")
    assert stored is not None and stored.summary == "SUMMARY 2: the person counts numbers."


async def test_a_failing_summary_does_not_break_the_answer_and_is_tried_again(world: ChatWorld) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(status_code=400, model_name="scripted", body="bad request")

    def summariser(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return say("S: " + " | ".join(line for line in texts(messages).splitlines() if line.startswith("Person:")))

    model = ScriptedModel(say("a"), say("b"), say("c"), broken, say("d"), summariser)
    agent = world.agent(model.model, memory_turns=1)
    await world.reply(agent, world.turn("one"))
    await world.reply(agent, world.turn("two"))
    replies = await world.reply(agent, world.turn("three"))
    assert replies[0].text == "c"  # the fold after it failed; the answer was out before
    replies = await world.reply(agent, world.turn("four"))
    assert replies[0].text == "d"
    assert user_prompts(model.requests[4]) == ["one", "two", "three", "four"]  # nothing was dropped
    stored = await ConversationRepository(world.database).load(world.chat.id, "")
    assert stored is not None and stored.summary == "S: Person: one | Person: two | Person: three"
    totals = await UsageRepository(world.database).by_kind(world.chat.id, world.clock().date(), world.clock().date())
    # each answered call counted once (the refused summary got no answer, so it spent nothing)
    assert totals["chat"].requests == 4 and totals["memory"].requests == 1


async def test_a_summary_over_its_token_limit_is_not_used_but_counts() -> None:
    def wordy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert "You keep the memory of a chat" in (info.instructions or "")  # the summariser's instructions went
        return ModelResponse(parts=[TextPart("a very long summary")], usage=RequestUsage(input_tokens=25_000))

    def brief(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(" The person counts. ")], usage=RequestUsage(input_tokens=900))

    turns = [ModelRequest(parts=[UserPromptPart("one")]), ModelResponse(parts=[TextPart("1")])]
    over = await summarise(None, turns, model=ScriptedModel(wordy, repeat_last=True).model)
    fine = await summarise(None, turns, model=ScriptedModel(brief, repeat_last=True).model)
    assert (over.text, over.usage.requests, over.usage.input_tokens) == (None, 1, 25_000)
    assert (fine.text, fine.usage.requests, fine.usage.input_tokens) == ("The person counts.", 1, 900)


async def test_forget_clears_what_the_agent_remembers(world: ChatWorld) -> None:
    model = ScriptedModel(say("Noted."), say("I know nothing about you."))
    agent = world.agent(model.model)
    turn = world.turn("my name is Alice")
    await agent.reply(turn)

    said = await forget(agent_services(agent), turn, ForgetCommand())  # what /forget does
    assert said[0].text.startswith("Done")
    await agent.reply(world.turn("what is my name?"))

    assert user_prompts(model.requests[-1]) == ["what is my name?"]


def agent_services(agent: object) -> Any:
    return agent._services  # type: ignore[attr-defined]


async def test_after_idle_hours_the_next_message_starts_fresh_with_only_the_summary(
    world: ChatWorld, clock: FakeClock
) -> None:
    def summariser(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert "Person: I follow DeepSeek" in texts(messages)
        return say("The person follows DeepSeek.")

    model = ScriptedModel(say("Noted."), say("Welcome back."), summariser)
    agent = world.agent(model.model, memory_idle_hours=24)
    await world.reply(agent, world.turn("I follow DeepSeek"))
    clock.advance(hours=25)

    await world.reply(agent, world.turn("hi again"))

    assert user_prompts(model.requests[1]) == ["hi again"]
    stored = await ConversationRepository(world.database).load(world.chat.id, "")
    assert stored is not None and stored.summary == "The person follows DeepSeek."


async def test_usage_is_recorded_and_a_spent_budget_stops_model_calls(world: ChatWorld, clock: FakeClock) -> None:
    model = ScriptedModel(say("first answer"))
    agent = world.agent(model.model, chat_daily_tokens=1000)
    await agent.reply(world.turn("hello"))
    totals = await UsageRepository(world.database).for_day(world.chat.id, clock.now.date())
    assert totals.requests == 1 and totals.input_tokens > 0 and totals.output_tokens > 0

    await UsageRepository(world.database).add(
        world.chat.id, clock.now.date(), UsageEntry(kind="chat", input_tokens=1000)
    )
    replies = await agent.reply(world.turn("another question"))

    assert "budget" in replies[0].text and "1,000 tokens" in replies[0].text
    assert len(model.requests) == 1  # no model call for the second message
    # the next day the budget is back
    clock.advance(days=1)
    model.steps.append(say("a new day"))
    assert (await agent.reply(world.turn("and now?")))[0].text == "a new day"
    assert clock.now.date() == date(2026, 3, 2)


async def test_the_rest_of_the_daily_budget_caps_the_run(world: ChatWorld, clock: FakeClock) -> None:
    await UsageRepository(world.database).add(
        world.chat.id, clock.now.date(), UsageEntry(kind="chat", input_tokens=995)
    )
    model = ScriptedModel(call("list_monitors"), say("never reached"))

    replies = await world.agent(model.model, chat_daily_tokens=1000).reply(world.turn("a long question " * 20))

    assert "budget" in replies[0].text
    assert len(model.requests) == 1  # the first response already went over what was left
    totals = await UsageRepository(world.database).for_day(world.chat.id, clock.now.date())
    assert totals.input_tokens > 995  # what the run spent is still charged


async def test_a_run_that_outgrows_its_request_limit_says_so(world: ChatWorld) -> None:
    model = ScriptedModel(*[call("list_monitors")] * 5)
    replies = await world.agent(model.model, request_limit=2).reply(world.turn("loop"))
    assert "more steps or tokens" in replies[0].text
    assert len(model.requests) == 2


async def test_a_rate_limited_model_is_retried_then_the_heavy_model_answers(world: ChatWorld) -> None:
    def limited(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError.for_category(ModelRateLimitError, status_code=429, model_name="light")

    light = ScriptedModel(limited, limited, limited, name="light")
    heavy = ScriptedModel(say("heavy answers"), name="heavy")

    replies = await world.agent(light.model, heavy.model).reply(world.turn("hello"))

    assert replies[0].text == "heavy answers"
    assert len(light.requests) == 3  # retried with backoff (no wait in tests), then fell back
    assert len(heavy.requests) == 1


async def test_a_server_error_falls_back_and_memory_keeps_the_exchange(world: ChatWorld) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelHTTPError(status_code=503, model_name="light", body={"error": "unavailable"})

    light = ScriptedModel(broken, broken, broken, say("light is back"), name="light")
    heavy = ScriptedModel(say("from heavy"), name="heavy")
    agent = world.agent(light.model, heavy.model)
    assert (await agent.reply(world.turn("one")))[0].text == "from heavy"
    assert (await agent.reply(world.turn("two")))[0].text == "light is back"
    assert user_prompts(light.requests[-1]) == ["one", "two"]


async def test_a_daily_quota_is_not_retried_and_the_reply_says_so(world: ChatWorld) -> None:
    calls: list[str] = []

    def quota(name: str) -> Step:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            calls.append(name)
            raise ModelHTTPError.for_category(ModelQuotaExceededError, status_code=429, model_name=name)

        return answer

    light = ScriptedModel(quota("light"), name="light")
    heavy = ScriptedModel(quota("heavy"), name="heavy")

    replies = await world.agent(light.model, heavy.model).reply(world.turn("hello"))

    assert calls == ["light", "heavy"]  # each tried once: no retry loop
    assert "daily quota" in replies[0].text
    assert "Traceback" not in replies[0].text


async def test_without_a_model_free_text_explains_once_then_reminds(world: ChatWorld) -> None:
    agent = world.agent(None)
    first = await agent.reply(world.turn("hello"))
    second = await agent.reply(world.turn("hello?"))
    other_thread = await agent.reply(world.turn("hi", thread_key="t2"))

    assert "GEMINI_API_KEY is not set" in first[0].text and "/track" in first[0].text
    assert "GEMINI_API_KEY" not in second[0].text and "/help" in second[0].text
    assert "GEMINI_API_KEY is not set" in other_thread[0].text
    # told once is stored: after a restart (a new agent object) the person gets the reminder, not the speech
    after_restart = await world.agent(None).reply(world.turn("anyone there?"))
    assert "GEMINI_API_KEY" not in after_restart[0].text and "/help" in after_restart[0].text
    stored = await ConversationRepository(world.database).load(world.chat.id, "")
    assert stored is not None and stored.told_no_model and stored.messages == b""


async def test_an_unexpected_error_is_a_short_message_with_an_error_id(world: ChatWorld) -> None:
    def crash(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("boom in our code")

    replies = await world.agent(ScriptedModel(crash).model).reply(world.turn("hello"))
    # the one wording of an error reply, the same sentence the dispatcher's error boundary says
    apology = r"Something went wrong on my side \(error id [0-9a-f]{8}\)\. Try again later\."
    assert re.fullmatch(apology, replies[0].text)
    assert "boom" not in replies[0].text


async def test_requests_carry_the_chat_profile_and_language(world: ChatWorld, database: Database) -> None:
    from storage.repositories import ChatRepository

    updated = await ChatRepository(database).update(world.chat.id, language="de", profile="We are a robotics lab.")
    assert updated is not None
    world.chat = updated
    model = ScriptedModel(say("Hallo"))
    await world.agent(model.model).reply(world.turn("hi"))
    instructions = model.infos[0].instructions or ""
    assert "The chat's language: de" in instructions
    assert "We are a robotics lab." in instructions
