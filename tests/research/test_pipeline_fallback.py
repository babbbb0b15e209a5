"""A monitor run whose models fail: rate limits and server errors are retried, then the other model writes the
critique and the digest; a used-up daily quota is not retried, the other model is tried once, and when it is out
too the run ends with the extractive digest and a reason naming the quota. Scripted models, and once the real
Gemini client against the fake generateContent server, built by `app.wiring.language_models`."""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import ModelHTTPError, models
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo

from app.settings import Settings
from app.wiring import language_models
from research.llm import BUDGET_SPENT_REASON, DAILY_QUOTA_REASON, ModelLimits, ModelSet, RetryPolicy, StageBudget
from research.pipeline import run_pipeline
from research.pipeline_models import PipelineRequest, PipelineResult
from tests.fakes.gemini import FakeGemini, GeminiRequest, daily_quota_body, function_call_response
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.kit import ScriptedModel
from tests.research.fake_sources import BASE_TIME, RecordingSource, make_item

TOPIC = "DeepSeek V4"
ITEMS = {
    "hn": [
        make_item("hn", "w", title="DeepSeek V4 weights released", points=400),
        make_item("hn", "b", title="DeepSeek V4 benchmarks against GPT", points=120),
    ],
    "news": [
        make_item("news", "w", title="DeepSeek V4 weights are out", url="https://www.reuters.com/deepseek-v4"),
        make_item("news", "p", title="DeepSeek V4 API prices halved", url="https://techcrunch.com/deepseek-v4-api"),
        make_item("news", "n", title="Nvidia shares slip after DeepSeek V4", url="https://www.cnbc.com/nvidia-v4"),
    ],
}
ITEM_LINE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


def sources() -> list[RecordingSource]:
    return [RecordingSource(name, lambda query, name=name: list(ITEMS[name])) for name in ITEMS]  # type: ignore[misc]


def request() -> PipelineRequest:
    return PipelineRequest(topic=TOPIC, sources=sources(), since=BASE_TIME - timedelta(hours=24), until=BASE_TIME)


def answer_for(schema: str, prompt: str) -> dict[str, Any]:
    """What a good model answers each step, told apart by the output tool's schema."""
    numbers = [int(n) for n in ITEM_LINE.findall(prompt)]
    if "assessments" in schema:
        assessments = [{"number": n, "relevance": 0.9, "credibility": 0.8, "reason": "model: checked"} for n in numbers]
        return {"assessments": assessments, "contradictions": []}
    if "headline" in schema:
        return {
            "headline": f"DeepSeek V4 weights are out [{numbers[0]}]",
            "developments": [{"text": f"Development {n}.", "citations": [n]} for n in numbers[:7]],
            "changes_since_last": None,
            "disputed": [],
            "quality": {"completeness": 0.9, "quality": 0.8, "missing_angles": []},
        }
    return {"queries": ["DeepSeek V4"], "source_queries": [], "keywords": ["DeepSeek", "V4"]}


def answering_well(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A script step answering every pipeline step (plan, critique, digest) well, from its output tool's schema."""
    first = messages[0]
    assert isinstance(first, ModelRequest)
    prompt = "\n".join(p.content for p in first.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))
    tool = info.output_tools[0]
    return ModelResponse(parts=[ToolCallPart(tool.name, answer_for(json.dumps(tool.parameters_json_schema), prompt))])


class Waits:
    """The retry policy's sleep: records the delays and returns at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def daily_quota(model: str) -> ModelHTTPError:
    return ModelHTTPError(status_code=429, model_name=model, body=daily_quota_body(model))


async def run(light: Model | None, heavy: Model | None, tmp_path: Path) -> PipelineResult:
    return await run_pipeline(
        request(), light_model=light, heavy_model=heavy, out_dir=tmp_path, stem="run", now=lambda: BASE_TIME
    )


def chains(light: ScriptedModel, heavy: ScriptedModel, waits: Waits) -> tuple[Model | None, Model | None]:
    """What `language_models` builds: light then heavy for planning, heavy then light for critique and digest."""
    policy = RetryPolicy(attempts=3, base_delay=1.0, max_delay=8.0, sleep=waits)
    models = ModelSet.of(light.model, heavy.model, policy=policy)
    return models.light, models.heavy


@pytest.mark.parametrize(
    "error",
    [
        ModelHTTPError(status_code=503, model_name="heavy", body={"error": {"status": "UNAVAILABLE"}}),
        ModelHTTPError(status_code=429, model_name="heavy", body={"error": {"message": "requests per minute"}}),
    ],
    ids=["503", "429-per-minute"],
)
async def test_a_failing_heavy_model_is_retried_then_the_light_one_writes_the_digest(
    tmp_path: Path, error: ModelHTTPError
) -> None:
    light = ScriptedModel(answering_well, name="light", repeat_last=True)
    heavy = ScriptedModel(error, name="heavy", repeat_last=True)
    waits = Waits()

    result = await run(*chains(light, heavy, waits), tmp_path)

    report = result.report
    assert report is not None
    assert (report.critique_path, report.critique_fallback_reason) == ("model", None)
    assert (report.digest_path, report.digest_fallback_reason) == ("model", None)
    assert result.digest.headline.startswith("DeepSeek V4 weights are out")
    assert heavy.calls == 6, "three tries for the critique, three for the digest"
    ceilings = [1.0, 2.0, 1.0, 2.0]  # jittered: between half and all of each doubling
    assert len(waits.seconds) == 4 and all(c / 2 <= w <= c for w, c in zip(waits.seconds, ceilings, strict=True))
    assert light.calls == 3, "plan, critique, digest"
    assert report.usage["critique"].model == "function:light" and report.usage["digest"].model == "function:light"


async def test_a_heavy_model_that_recovers_on_a_retry_writes_the_digest_itself(tmp_path: Path) -> None:
    limited = ModelHTTPError(status_code=429, model_name="heavy", body={"error": {"message": "requests per minute"}})
    light = ScriptedModel(answering_well, name="light", repeat_last=True)
    heavy = ScriptedModel(limited, answering_well, name="heavy", repeat_last=True)
    waits = Waits()

    result = await run(*chains(light, heavy, waits), tmp_path)

    assert result.report is not None and result.report.digest_path == "model"
    assert (heavy.calls, light.calls) == (3, 1), "one retry, then the heavy model answers critique and digest"
    assert len(waits.seconds) == 1 and 0.5 <= waits.seconds[0] <= 1.0
    assert result.report.usage["digest"].model == "function:heavy"


async def test_a_daily_quota_on_the_heavy_model_goes_to_the_light_one_without_retrying(tmp_path: Path) -> None:
    light = ScriptedModel(answering_well, name="light", repeat_last=True)
    heavy = ScriptedModel(daily_quota("heavy"), name="heavy", repeat_last=True)
    waits = Waits()

    result = await run(*chains(light, heavy, waits), tmp_path)

    assert result.report is not None
    assert (result.report.critique_path, result.report.digest_path) == ("model", "model")
    assert heavy.calls == 1 and waits.seconds == [], "asked once, then left alone for the cooldown"
    assert result.report.usage["digest"].model == "function:light"


async def test_a_daily_quota_on_both_models_ends_in_the_extractive_digest_saying_so(tmp_path: Path) -> None:
    light = ScriptedModel(daily_quota("light"), name="light", repeat_last=True)
    heavy = ScriptedModel(daily_quota("heavy"), name="heavy", repeat_last=True)
    waits = Waits()

    result = await run(*chains(light, heavy, waits), tmp_path)

    report = result.report
    assert report is not None
    assert result.plan.made_by == "deterministic"
    assert report.plan_fallback_reason == f"{DAILY_QUOTA_REASON} (light, heavy)"
    assert report.critique_path == "heuristic"
    assert report.critique_fallback_reason == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert report.digest_path == "extractive"
    assert report.digest_fallback_reason == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert result.digest.developments and result.digest.cited, "the stories still reach the chat"
    assert (heavy.calls, light.calls) == (1, 1), "each model asked once, then left alone for the cooldown"
    assert waits.seconds == []
    summary = json.loads(result.exports.json.read_text(encoding="utf-8"))
    assert summary["digest_fallback_reason"].startswith(DAILY_QUOTA_REASON)


# ---- through the real Gemini client, built from settings -------------------------------------------------


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No variable or `.env` of the machine leaks into the settings."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)


def answer_gemini(request: GeminiRequest) -> dict[str, Any]:
    (declaration,) = request.function_declarations
    answer = answer_for(json.dumps(declaration), request.user_text)
    return function_call_response([(declaration["name"], answer)], model=request.model)


@pytest.mark.usefixtures("settings_env")
async def test_language_models_from_settings_fall_back_on_a_gemini_daily_quota(
    fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    heavy = FakeGemini(fake_server, model="gemini-heavy")
    heavy.reply_raw(FakeResponse.json(daily_quota_body(heavy.model), status=429))
    light = FakeGemini(fake_server, model="gemini-light")
    light.reply_with(answer_gemini)
    settings = Settings(
        llm_model="google:gemini-light",
        llm_heavy_model="google:gemini-heavy",
        gemini_api_key="test-key",  # type: ignore[arg-type]
        gemini_base_url=fake_server.url,
        data_dir=tmp_path / "data",
    )
    waits = Waits()

    with models.override_allow_model_requests(True):
        built = language_models(settings, policy=RetryPolicy(sleep=waits))
        result = await run(built.light, built.heavy, tmp_path)

    report = result.report
    assert report is not None
    assert result.plan.made_by == "model" and (report.critique_path, report.digest_path) == ("model", "model")
    assert len(heavy.requests) == 1, "the quota answer is neither retried nor asked again by the digest step"
    assert waits.seconds == []
    assert len(light.requests) == 3 and "synthesis step" in light.requests[-1].system_text
    assert report.usage["digest"].model == "google:gemini-light"


@pytest.mark.usefixtures("settings_env")
def test_language_models_without_a_model_configured_are_none(tmp_path: Path) -> None:
    settings = Settings(llm_model="", data_dir=tmp_path / "data")
    models = language_models(settings)
    assert (models.light, models.heavy) == (None, None)


class SlowPlanner:
    """Answers every step well, but takes `seconds` over the plan; records the steps it was asked for."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.steps: list[str] = []
        self.model = ScriptedModel(self.answer, name="slow", repeat_last=True).model

    async def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        schema = json.dumps(info.output_tools[0].parameters_json_schema)
        self.steps.append("critique" if "assessments" in schema else "digest" if "headline" in schema else "plan")
        if self.steps[-1] == "plan":
            await asyncio.sleep(self.seconds)
        return answering_well(messages, info)


async def test_a_run_past_its_model_time_finishes_the_later_stages_without_the_model(tmp_path: Path) -> None:
    slow = SlowPlanner(seconds=30.0)
    limits = ModelLimits(run_seconds=60.0, pipeline_seconds=1.0)
    models = ModelSet.of(slow.model, slow.model, limits=limits)

    started = time.monotonic()
    result = await run(models.light, models.heavy, tmp_path)
    took = time.monotonic() - started

    assert took < 15, "the plan was cut at the run's model time, not at its own 60 s"
    assert slow.steps == ["plan"], "neither critique nor digest was asked for: no time was left"
    report = result.report
    assert report is not None
    assert (report.critique_path, report.critique_fallback_reason) == ("heuristic", BUDGET_SPENT_REASON)
    assert (report.digest_path, report.digest_fallback_reason) == ("extractive", BUDGET_SPENT_REASON)
    assert result.digest.without_model is not None and "LLM_PIPELINE_SECONDS" in result.digest.without_model
    assert result.digest.developments, "the extractive digest still reports the stories"


async def test_each_stage_runs_with_the_time_the_run_has_left() -> None:
    ticks = iter([0.0, 4.0, 10.0, 13.0])
    budget = StageBudget(10.0, clock=lambda: next(ticks))
    model = ModelSet.of(
        ScriptedModel(ModelResponse(parts=[]), repeat_last=True).model, None, limits=ModelLimits()
    ).light
    with budget.spending():
        pass
    assert budget.left() == 6.0 and budget.timeout(model) == 6.0, "below the stage's own 300 s"
    with budget.spending():
        pass
    assert budget.left() == 3.0, "time between stages (collection) does not count"
