"""The chat agent through the real Gemini client (GoogleModel + google-genai) against the fake generateContent
server: what goes over the wire carries the instructions, the tool declarations and the conversation history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import models
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from storage import ChatRecord, Database
from storage.repositories import UsageRepository
from tests.agent.chat_world import ChatWorld, make_world
from tests.fakes.gemini import FakeGemini, daily_quota_body
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.kit import FakeClock


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path, default_timezone="Asia/Shanghai")
    yield built
    await built.http.aclose()


def gemini_model(gemini: FakeGemini) -> GoogleModel:
    return GoogleModel(gemini.model, provider=GoogleProvider(api_key=gemini.api_key, base_url=gemini.url))


async def test_requests_carry_instructions_tools_and_history(world: ChatWorld, fake_server: FakeHTTPServer) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_function_call("list_monitors", {})
    gemini.reply_text("You have no monitors yet.")
    gemini.reply_text("Try /track DeepSeek.")
    agent = world.agent(gemini_model(gemini))

    with models.override_allow_model_requests(True):
        first = await agent.reply(world.turn("what do I track?"))
        second = await agent.reply(world.turn("how do I start?"))

    assert first[0].text == "You have no monitors yet."
    assert second[0].text == "Try /track DeepSeek."
    assert len(gemini.requests) == 3
    last = gemini.requests[-1]
    assert last.api_key == "test-key"
    # the system instruction: the rules, the untrusted-data fence, the chat's zone and local time
    assert "You are Lookout" in last.system_text
    assert "untrusted_source_data" in last.system_text
    assert "Asia/Shanghai" in last.system_text and "Sunday 01 March 2026, 17:00" in last.system_text
    # every tool is declared with its docstring and parameters
    declared = {d["name"]: d for d in last.function_declarations}
    assert {"search_sources", "read_page", "collect", "list_monitors", "create_monitor", "update_monitor",
            "pause_monitor", "resume_monitor", "delete_monitor", "run_monitor_now", "search_history", "timeline",
            "export_items", "browse_shared_monitors", "subscribe_to_monitor", "unsubscribe_from_monitor",
            "share_monitor", "transfer_monitor", "set_delivery", "set_briefing", "export_monitors", "filter_monitor",
            "create_alert", "remove_alert"} == set(declared)  # fmt: skip
    assert "confirm" in declared["create_monitor"]["description"].lower()
    assert "schedule" in str(declared["create_monitor"].get("parameters") or declared["create_monitor"])
    # the history: the first exchange, with its tool call and result, then the new message
    roles = [content["role"] for content in last.contents]
    assert roles == ["user", "model", "user", "model", "user"]
    assert "what do I track?" in last.user_text and "how do I start?" in last.user_text
    assert [response["name"] for response in last.function_responses] == ["list_monitors"]
    assert "You have no monitors yet." in str(last.contents[3])
    # usage reported by the API is what the chat is charged
    totals = await UsageRepository(world.database).for_day(world.chat.id, world.clock().date())
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (3, 300, 60)


async def test_a_daily_quota_answer_is_not_retried(world: ChatWorld, fake_server: FakeHTTPServer) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_raw(FakeResponse.json(daily_quota_body(gemini.model), status=429))
    agent = world.agent(gemini_model(gemini))

    with models.override_allow_model_requests(True):
        replies = await agent.reply(world.turn("hello"))

    assert "daily quota" in replies[0].text
    assert len(gemini.requests) == 1


async def test_a_per_minute_rate_limit_is_retried(world: ChatWorld, fake_server: FakeHTTPServer) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
    gemini.reply_text("Hello after a retry.")
    agent = world.agent(gemini_model(gemini))

    with models.override_allow_model_requests(True):
        replies = await agent.reply(world.turn("hello"))

    assert replies[0].text == "Hello after a retry."
    assert len(gemini.requests) == 2


async def test_a_memory_fold_goes_to_gemini_after_the_reply_and_is_counted_as_memory(
    world: ChatWorld, fake_server: FakeHTTPServer
) -> None:
    gemini = FakeGemini(fake_server, model="gemini-3.5-flash-lite")  # a listed model: its calls are priced
    for answer in ("one noted", "two noted", "three noted"):
        gemini.reply_text(answer)
    gemini.reply_text("The person counted to three.")  # the summary, asked after the third reply
    gemini.reply_text("four noted")
    agent = world.agent(gemini_model(gemini), memory_turns=1)  # folds once three turns are stored

    with models.override_allow_model_requests(True):
        for said in ("one", "two", "three"):
            await world.reply(agent, world.turn(said))
        await world.reply(agent, world.turn("four"))

    assert len(gemini.requests) == 5
    summary_request = gemini.requests[3]
    assert "You keep the memory of a chat" in summary_request.system_text
    assert "Person: one" in summary_request.user_text and "Person: two" in summary_request.user_text
    assert "Person: three" not in summary_request.user_text  # the window keeps the last turn
    assert "The person counted to three." in gemini.requests[4].system_text  # the next answer sees the summary
    day = world.clock().date()
    kinds = await UsageRepository(world.database).by_kind(world.chat.id, day, day)
    assert (kinds["chat"].requests, kinds["memory"].requests) == (4, 1)
    assert (kinds["memory"].input_tokens, kinds["memory"].output_tokens) == (100, 20)  # what the API reported
    assert kinds["memory"].cost > 0 and kinds["chat"].cost > kinds["memory"].cost  # priced by the model that answered


async def test_the_reason_is_the_real_one_connection_error_or_rate_limit(
    world: ChatWorld, fake_server: FakeHTTPServer
) -> None:
    # Nothing listens on port 9 of this machine: the real client gets a refused connection.
    unreachable = GoogleModel("gemini-test", provider=GoogleProvider(api_key="test-key", base_url="http://127.0.0.1:9"))
    gemini = FakeGemini(fake_server)
    for _ in range(3):
        gemini.reply_error(429, "RESOURCE_EXHAUSTED", "Too many requests, slow down")

    with models.override_allow_model_requests(True):
        offline = await world.agent(unreachable).reply(world.turn("hello"))
        limited = await world.agent(gemini_model(gemini)).reply(world.turn("hello again"))

    assert "(connection error)" in offline[0].text
    assert "rate" not in offline[0].text
    assert "(rate limit, HTTP 429)" in limited[0].text
    assert "connection" not in limited[0].text
