"""The monitor steps with any model: each request carries its stage's output limit and one system message, the
output mode setting reaches the server, and what a model says is checked before it is used (a plan must look like
queries; a contradiction must quote both items; a cut, looping or reciting answer is refused)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

from app.settings import Settings
from app.wiring import LOCAL_API_KEY, language_models
from research import ModelLimits, ModelSet, RetryPolicy, failure_in_words, failure_kind, unusable_answer
from research.critique import ModelCritique, critique_of, llm_critique
from research.digest import QualityCheck, draft_citing
from research.llm import SMALL_MODEL_CRITIQUE_ITEMS, leading_system_text
from research.plan import PlanDraft, plan_problem, plan_queries
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import (
    CONTEXT_EXCEEDED,
    RESPONSE_FORMAT_REFUSED,
    TEMPLATE_ERROR,
    ChatRequest,
    FakeOpenAI,
    completion,
)
from tests.research.test_critique import load_collection
from tests.research.test_pipeline_fallback import answer_for, run


async def _no_sleep(_seconds: float) -> None:
    return None


def light_model(fake: FakeOpenAI, limits: ModelLimits) -> ModelSet:
    """The model as the process builds it from settings (its profile included), held to `limits`."""
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_model=f"openai-chat:{fake.model}",
        openai_base_url=fake.base_url,
        openai_api_key=fake.api_key,
    )
    built = language_models(settings, policy=RetryPolicy(sleep=_no_sleep)).plain_models()
    return ModelSet.of(built[0], None, policy=RetryPolicy(sleep=_no_sleep), limits=limits)


def test_plan_problems() -> None:
    topic = "DeepSeek releases"
    good = PlanDraft(queries=["DeepSeek R2", "DeepSeek API pricing", "Liang Wenfeng"], keywords=["DeepSeek"])
    assert plan_problem(good, topic=topic) is None
    schema = PlanDraft(queries=["$ref: #/$defs/SourceQueryKey", "DeepSeek"])
    assert plan_problem(schema, topic=topic) == "the plan held fragments of its schema, not queries"
    rambling = PlanDraft(queries=["DeepSeek is a company that makes large language models in China today"])
    assert plan_problem(rambling, topic=topic) is not None
    off = PlanDraft(queries=["weather Paris", "football scores", "DeepSeek"])
    assert plan_problem(off, topic=topic) == "the plan's queries were mostly not about the topic"
    assert plan_problem(PlanDraft(queries=["深度求索 发布"]), topic="深度求索") is None
    assert plan_problem(PlanDraft(queries=['"DeepSeek V4" launch']), topic=topic) is None, "phrase quotes are fine"


@pytest.mark.parametrize("mode", ["native", "prompted"])
async def test_a_plan_of_schema_fragments_is_not_used(fake_server: FakeHTTPServer, mode: str) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    garbage = {"queries": ["$ref: #/$defs/SourceQueryKey", "#/$defs/QueryPlan"], "keywords": ["$defs"]}
    fake.reply_json(completion(content=json.dumps(garbage), model=fake.model))
    chosen = light_model(fake, ModelLimits(plan_max_tokens=222, output_mode=mode))  # type: ignore[arg-type]

    with models.override_allow_model_requests(True):
        result = await plan_queries("DeepSeek", sources=["hn", "news"], model=chosen.light)

    assert result.plan.made_by == "deterministic" and "$" not in " ".join(result.plan.queries)
    assert result.fallback_reason == "the plan held fragments of its schema, not queries"
    (request,) = fake.requests
    assert request.max_tokens == 222 and request.roles.count("system") == 1
    if mode == "native":
        assert request.body["response_format"]["type"] == "json_schema", "the server is asked for the schema"
    else:
        assert request.body.get("response_format", {}).get("type") != "json_schema" and "tools" not in request.body


async def test_a_good_plan_through_tool_output_is_used(fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    fake.reply_tool_calls([("final_result", {"queries": ["DeepSeek R2", "DeepSeek pricing"], "keywords": ["R2"]})])
    chosen = light_model(fake, ModelLimits())
    with models.override_allow_model_requests(True):
        result = await plan_queries("DeepSeek", sources=["hn"], model=chosen.light)
    assert result.plan.made_by == "model" and "DeepSeek R2" in result.plan.queries
    assert fake.requests[0].max_tokens == ModelLimits().plan_max_tokens


def test_unusable_answers() -> None:
    assert unusable_answer("fine", finish_reason="length") == "cut at its length limit"
    assert unusable_answer("  ") == "empty"
    assert unusable_answer(" ".join(["I will search for it now."] * 12)) == "repeating itself"
    rules = "You are Lookout, a chat assistant that keeps watch over public sources for the people in this chat."
    assert unusable_answer(f"Sure. {rules}", instructions=[rules]) == "reciting its instructions"
    normal = "DeepSeek released R2 on Monday [1]; prices fell by half [2]. Analysts expect more open models soon."
    assert unusable_answer(normal, instructions=[rules]) is None
    for past_its_turn in (
        "Sure! <|im_end|>\n<|im_start|>user\nand then?",
        "Here it is.<end_of_turn>\n<start_of_turn>user",
        "Done.<|eot_id|><|start_header_id|>user<|end_header_id|>",
        "好的<｜end▁of▁sentence｜>",
    ):
        reason = unusable_answer(past_its_turn)
        assert reason is not None and reason.startswith("mixed with chat-template markup"), past_its_turn
    assert unusable_answer("Use <b>bold</b> and a <|pipe|> like this; turns start at <start>.") is None
    asked = "what can you do for me?"
    assert unusable_answer("What can you do for me", asked=asked) == "only your message said back"
    assert unusable_answer("I can track topics for you: what can you do for me?", asked=asked) is None


def test_server_errors_named_for_what_they_are() -> None:
    context = ModelHTTPError(status_code=400, model_name="m", body=CONTEXT_EXCEEDED)
    assert failure_in_words(context) == "the prompt is longer than the model's context (LLM_CONTEXT_TOKENS)"
    assert failure_kind(context) == "other", "the same prompt fails again: not retried"
    template = ModelHTTPError(status_code=500, model_name="m", body=TEMPLATE_ERROR)
    assert failure_in_words(template).startswith("the server's chat template refused the conversation")
    assert failure_kind(template) == "other", "a 500 from the template is not a passing server error"


async def test_a_refused_response_format_is_named_and_not_sent_again(fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    for _ in range(3):
        fake.reply_error(500, RESPONSE_FORMAT_REFUSED)
    chosen = light_model(fake, ModelLimits(output_mode="native"))

    with models.override_allow_model_requests(True):
        result = await plan_queries("DeepSeek", sources=["hn"], model=chosen.light)

    assert len(fake.requests) == 1, "a request the server refuses as invalid is not retried like a passing 5xx"
    assert result.plan.made_by == "deterministic"
    refused = ModelHTTPError(status_code=500, model_name="m", body=RESPONSE_FORMAT_REFUSED)
    assert failure_kind(refused) == "other"
    assert failure_in_words(refused) == "the server does not take this output mode (LLM_OUTPUT_MODE), HTTP 500"
    plain = ModelHTTPError(status_code=500, model_name="m", body={"error": {"message": "CUDA out of memory"}})
    assert failure_kind(plain) == "transient" and failure_in_words(plain) == "server error, HTTP 500"


async def test_json_object_mode_sends_the_schema_in_the_response_format(fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    answer = {"queries": ["DeepSeek R2", "DeepSeek pricing"], "keywords": ["R2"]}
    fake.reply_json(completion(content=json.dumps(answer), model=fake.model))
    chosen = light_model(fake, ModelLimits(output_mode="json_object"))

    with models.override_allow_model_requests(True):
        result = await plan_queries("DeepSeek", sources=["hn"], model=chosen.light)

    assert result.plan.made_by == "model" and "DeepSeek pricing" in result.plan.queries
    (request,) = fake.requests
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_object", "llama-cpp-python's server refuses `json_schema`"
    assert "queries" in response_format["schema"]["properties"], "the schema the answer is constrained to"
    assert "tools" not in request.body and "queries" in json.dumps(request.body["messages"]), "and in the prompt"


@pytest.mark.parametrize("mode", ["tool", "native", "json_object"])
async def test_a_monitor_run_through_an_openai_compatible_server(
    fake_server: FakeHTTPServer, tmp_path: Path, mode: str
) -> None:
    fake = FakeOpenAI(fake_server, model="gemma-3-270m", api_key=LOCAL_API_KEY)  # a server given by URL alone

    def answer(request: ChatRequest) -> dict[str, Any]:
        if mode == "tool":
            (tool,) = request.body["tools"]
            schema = json.dumps(tool["function"]["parameters"])
            reply = answer_for(schema, request.user_text)
            return completion(tool_calls=[(tool["function"]["name"], reply)], model=fake.model)
        response_format = request.body["response_format"]
        schema = json.dumps(response_format.get("schema") or response_format["json_schema"]["schema"])
        return completion(content=json.dumps(answer_for(schema, request.user_text)), model=fake.model)

    fake.reply_with(answer)
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        llm_model=f"openai-chat:{fake.model}",
        openai_base_url=fake.base_url,
        llm_output_mode=mode,  # type: ignore[arg-type]
        llm_plan_max_tokens=301,
        llm_critique_max_tokens=302,
        llm_synthesis_max_tokens=303,
        data_dir=tmp_path / "data",
    )
    built = language_models(settings, policy=RetryPolicy(sleep=_no_sleep))
    with models.override_allow_model_requests(True):
        result = await run(built.light, built.heavy, tmp_path)

    report = result.report
    assert report is not None
    assert result.plan.made_by == "model" and (report.critique_path, report.digest_path) == ("model", "model")
    assert [request.max_tokens for request in fake.requests] == [301, 302, 303], "one request per stage, each limited"
    for request in fake.requests:
        assert request.roles[0] == "system" and request.roles.count("system") == 1
    if mode == "json_object":  # a grammar keeps `enum`: the draft can cite only the items it was shown
        schema = fake.requests[2].body["response_format"]["schema"]
        cited = schema["$defs"]["Development"]["properties"]["citations"]["items"]["enum"]
        assert schema["properties"]["developments"]["minItems"] >= 1
        assert (
            cited
            and cited == list(range(1, len(cited) + 1))
            and f"these {len(cited)} items" in fake.requests[2].user_text
        )
    assert draft_citing(5, 3).model_json_schema()["properties"]["developments"]["minItems"] == 3, "as the check asks"


def test_a_system_part_later_in_a_run_is_moved_into_the_first_request() -> None:
    # A chat template that allows one leading system message refuses any other; the bounded model sends one.
    first = ModelRequest(parts=[SystemPromptPart("rules"), UserPromptPart("hello")])
    answer = ModelResponse(parts=[TextPart("hi")])
    later = ModelRequest(parts=[UserPromptPart("again"), SystemPromptPart("reminder")])

    sent = leading_system_text([first, answer, later])

    assert [type(part).__name__ for part in sent[0].parts] == ["SystemPromptPart", "SystemPromptPart", "UserPromptPart"]
    assert [part.content for part in sent[0].parts] == ["rules", "reminder", "hello"]
    assert sent[1] is answer
    assert [part.content for part in sent[2].parts] == ["again"]
    assert leading_system_text([first, answer]) == [first, answer]


async def test_a_small_model_assesses_a_few_items_and_is_asked_again_once(fake_server: FakeHTTPServer) -> None:
    collection = load_collection()
    fake = FakeOpenAI(fake_server, model="gemma-3-270m")
    for _ in range(3):
        fake.reply_text("Here are my assessments: item 1 is good.")
    small = ModelLimits(context_tokens=8192, output_mode="json_object")
    assert len(collection.ranked) > SMALL_MODEL_CRITIQUE_ITEMS

    with models.override_allow_model_requests(True):
        failed = await llm_critique(
            collection.ranked, topic=collection.topic, model=light_model(fake, small).light or "",
            clusters=collection.clusters, now=collection.now,
        )  # fmt: skip

    assert failed.path == "heuristic" and "output retries (1)" in (failed.fallback_reason or "")
    assert len(fake.requests) == 2, "one request and one retry: a small model seldom mends its answer"
    first = fake.requests[0]
    assert f"Assess these {SMALL_MODEL_CRITIQUE_ITEMS} items" in first.user_text
    schema = first.body["response_format"]["schema"]
    assert schema["properties"]["assessments"]["maxItems"] == SMALL_MODEL_CRITIQUE_ITEMS, "the list is closed there"
    numbers = schema["$defs"]["ModelItemAssessment"]["properties"]["number"]["enum"]
    assert numbers == list(range(1, SMALL_MODEL_CRITIQUE_ITEMS + 1)), "only the numbers of the items shown"

    shown = range(1, SMALL_MODEL_CRITIQUE_ITEMS + 1)
    answer = {"assessments": [{"number": n, "relevance": 0.9, "credibility": 0.8, "reason": "ok"} for n in shown]}
    fake.reply_json(completion(content=json.dumps(answer), model=fake.model))
    with models.override_allow_model_requests(True):
        written = await llm_critique(
            collection.ranked, topic=collection.topic, model=light_model(fake, small).light or "",
            clusters=collection.clusters, now=collection.now,
        )  # fmt: skip
    assert written.path == "model" and len(written.items) == len(collection.ranked)
    assert [item.assessed_by for item in written.items].count("model") == SMALL_MODEL_CRITIQUE_ITEMS


def test_an_assessment_out_of_bounds_loses_that_entry_not_the_answer() -> None:
    good = {"number": 2, "relevance": 0.7, "credibility": 0.6, "reason": "two outlets"}
    answer = {
        "assessments": [{"number": 1, "relevance": 30452976, "credibility": 0.5, "reason": "x"}, good],
        "contradictions": [{"numbers": [1], "claim": "one side only"}],
    }
    parsed = critique_of(6).model_validate(answer)  # what a grammar keeps: the shape, not `maximum`
    assert [a.number for a in parsed.assessments] == [2] and parsed.contradictions == []
    assert ModelCritique.model_validate(answer).assessments == parsed.assessments
    assert QualityCheck.model_validate({"completeness": -0.95, "quality": 1.4}).model_dump()["completeness"] == 0.0
