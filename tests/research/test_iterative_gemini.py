"""The iterative planner through the real google-genai client against the fake Gemini server."""

from __future__ import annotations

from collections.abc import Callable

from pydantic_ai import models
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from research.goal import CollectionGoal
from research.iterative import StopReason, run_iterative_collection
from sources.base import Item, SearchQuery
from tests.fakes.gemini import FakeGemini
from tests.fakes.http_server import FakeHTTPServer
from tests.research.fake_sources import RecordingSource, make_item


def per_query(count: int) -> Callable[[SearchQuery], list[Item]]:
    def answer(query: SearchQuery) -> list[Item]:
        return [make_item("hn", f"{query.text}-{i}", title=f"{query.text} story {i}") for i in range(count)]

    return answer


async def test_planner_runs_through_gemini_and_the_collect_tool(fake_server: FakeHTTPServer) -> None:
    gemini = FakeGemini(fake_server)
    gemini.reply_function_call("collect", {"queries": [{"text": "DeepSeek V4"}]})
    gemini.reply_function_call("collect", {"queries": [{"text": "DeepSeek", "language": "zh"}], "sources": ["hn"]})
    gemini.reply_text("Collected 50 items.")
    source = RecordingSource("hn", per_query(25))
    model = GoogleModel(gemini.model, provider=GoogleProvider(api_key=gemini.api_key, base_url=gemini.url))

    with models.override_allow_model_requests(True):
        result = await run_iterative_collection(
            "collect 50 posts about DeepSeek", sources=[source], model=model, goal=CollectionGoal(target=50)
        )

    assert [(q.text, q.language) for q in source.queries] == [("DeepSeek V4", None), ("DeepSeek", "zh")]
    assert result.report.stop_reason is StopReason.TARGET_REACHED
    assert result.report.planner == "model:gemini-test"
    assert result.report.notes == []
    assert len(gemini.requests) == 2, "the run ended in code after the target; no third model turn"
    first, second = gemini.requests
    assert first.api_key == "test-key"
    assert "collect 50 unique items" in first.system_text
    assert first.function_names == ["collect"]
    schema = first.function_declarations[0]
    assert "queries" in str(schema)
    assert "DeepSeek" in first.user_text
    (tool_result,) = second.function_responses
    assert tool_result["name"] == "collect"
    assert '"new": 25' in str(tool_result) or "'new': 25" in str(tool_result)
