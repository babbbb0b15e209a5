"""The shared model resilience: which failures are retried, which fall back to the other model, how a used-up
daily quota is told apart and reported, and which model a fallback chain's usage is charged to."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, ModelHTTPError
from pydantic_ai.exceptions import FallbackExceptionGroup, UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.test import TestModel

from research.critique import llm_critique
from research.digest import llm_digest
from research.llm import (
    DAILY_QUOTA_REASON,
    BoundedModel,
    ModelLimits,
    QuotaMemory,
    RetryingModel,
    RetryPolicy,
    answering_model,
    describe_failure,
    failure_kind,
    resilient_model,
)
from research.plan import plan_queries
from research.rank import RankedItem, rank
from tests.fakes.gemini import daily_quota_body
from tests.kit import ScriptedModel
from tests.research.fake_sources import BASE_TIME, make_item


def daily_quota(model: str) -> ModelHTTPError:
    return ModelHTTPError(status_code=429, model_name=model, body=daily_quota_body(model))


def per_minute(model: str) -> ModelHTTPError:
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Rate limit: requests per minute"}}
    return ModelHTTPError(status_code=429, model_name=model, body=body)


def unavailable(model: str) -> ModelHTTPError:
    return ModelHTTPError(status_code=503, model_name=model, body={"error": {"status": "UNAVAILABLE"}})


class Waits:
    """A sleep that records the delays and returns at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def test_failure_kinds_tell_a_daily_quota_from_a_rate_limit() -> None:
    assert failure_kind(daily_quota("m")) == "quota"
    assert failure_kind(per_minute("m")) == "transient"
    assert failure_kind(unavailable("m")) == "transient"
    assert failure_kind(ModelHTTPError(status_code=401, model_name="m")) == "other"
    assert failure_kind(UnexpectedModelBehavior("garbage")) == "other"


def test_describe_failure_names_the_daily_quota_and_each_model() -> None:
    both = FallbackExceptionGroup("all failed", [daily_quota("heavy"), daily_quota("light")])
    assert describe_failure(both) == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert describe_failure(daily_quota("heavy")) == f"{DAILY_QUOTA_REASON} (heavy)"

    mixed = describe_failure(FallbackExceptionGroup("all failed", [daily_quota("heavy"), unavailable("light")]))
    assert mixed.startswith("every model failed: heavy: daily quota used up; light: ModelHTTPError")
    assert "503" in mixed

    single = describe_failure(unavailable("heavy"))
    assert single.startswith("ModelHTTPError") and "503" in single
    assert describe_failure(UnexpectedModelBehavior("x" * 500)).endswith("…")


async def test_a_transient_failure_is_retried_with_backoff_then_the_secondary_answers() -> None:
    primary = ScriptedModel(unavailable("primary"), name="primary", repeat_last=True)
    secondary = ScriptedModel("from the secondary", name="secondary", repeat_last=True)
    waits = Waits()
    model = resilient_model(
        primary.model,
        secondary.model,
        policy=RetryPolicy(attempts=3, base_delay=1.0, max_delay=8.0, sleep=waits),
    )
    assert model is not None

    result = await Agent(model).run("hi")

    assert result.output == "from the secondary"
    assert (primary.calls, secondary.calls) == (3, 1)
    # Jittered doubling: half to all of 1 s, then of 2 s.
    assert len(waits.seconds) == 2 and 0.5 <= waits.seconds[0] <= 1.0 and 1.0 <= waits.seconds[1] <= 2.0
    assert answering_model(model, result.all_messages()).model_name == "secondary"  # type: ignore[union-attr]


async def test_a_per_minute_rate_limit_is_retried_and_the_primary_answers() -> None:
    primary = ScriptedModel(per_minute("primary"), "from the primary", name="primary", repeat_last=True)
    secondary = ScriptedModel("never", name="secondary", repeat_last=True)
    waits = Waits()
    model = resilient_model(
        primary.model,
        secondary.model,
        policy=RetryPolicy(sleep=waits),
    )
    assert model is not None

    result = await Agent(model).run("hi")

    assert result.output == "from the primary" and (primary.calls, secondary.calls) == (2, 0)
    assert len(waits.seconds) == 1 and 0.5 <= waits.seconds[0] <= 1.0


async def test_a_daily_quota_is_not_retried_and_the_secondary_is_tried_once() -> None:
    primary = ScriptedModel(daily_quota("primary"), name="primary", repeat_last=True)
    secondary = ScriptedModel(daily_quota("secondary"), name="secondary", repeat_last=True)
    waits = Waits()
    model = resilient_model(
        primary.model,
        secondary.model,
        policy=RetryPolicy(attempts=5, sleep=waits),
    )
    assert model is not None

    with pytest.raises(FallbackExceptionGroup) as caught:
        await Agent(model).run("hi")

    assert (primary.calls, secondary.calls) == (1, 1)
    assert waits.seconds == []
    assert describe_failure(caught.value) == f"{DAILY_QUOTA_REASON} (primary, secondary)"


async def test_a_rejected_request_is_not_sent_to_the_secondary() -> None:
    primary = ScriptedModel(ModelHTTPError(status_code=401, model_name="primary"), name="primary", repeat_last=True)
    secondary = ScriptedModel("never", name="secondary", repeat_last=True)
    model = resilient_model(primary.model, secondary.model, policy=RetryPolicy(sleep=Waits()))
    assert model is not None
    with pytest.raises(ModelHTTPError):
        await Agent(model).run("hi")
    assert (primary.calls, secondary.calls) == (1, 0)


def test_resilient_model_shapes() -> None:
    light, heavy = TestModel(), TestModel()
    assert resilient_model(None, heavy) is None, "a step without its own model keeps its no-model path"
    alone = resilient_model(light, None)
    assert isinstance(alone, RetryingModel) and alone.wrapped is light
    same = resilient_model(light, light)
    assert isinstance(same, RetryingModel) and same.wrapped is light


def test_answering_model_matches_versioned_names_and_defaults_to_the_first() -> None:
    flash, lite = TestModel(model_name="gemini-9-flash"), TestModel(model_name="gemini-9-flash-lite")
    chain = resilient_model(flash, lite)
    assert chain is not None

    def answered(name: str) -> list[ModelMessage]:
        return [ModelResponse(parts=[TextPart(content="x")], model_name=name)]

    assert answering_model(chain, answered("gemini-9-flash-lite-001")) is lite
    assert answering_model(chain, answered("gemini-9-flash")) is flash
    assert answering_model(chain, answered("something-else")) is flash
    assert answering_model(chain) is flash
    assert answering_model("google:gemini-9-flash") == "google:gemini-9-flash"


# ---- each pipeline step through a fallback chain ---------------------------------------------------------


def top_items() -> list[RankedItem]:
    items = [
        make_item("news", "a", title="DeepSeek releases V4 weights", url="https://www.reuters.com/a"),
        make_item("hn", "b", title="DeepSeek V4 benchmarks", points=300),
        make_item("news", "c", title="Nvidia shares dip after DeepSeek V4", url="https://www.cnbc.com/c"),
    ]
    return rank(items, topic="DeepSeek", now=BASE_TIME)


def quota_chain(heavy: ScriptedModel, light: ScriptedModel) -> Model:
    model = resilient_model(
        heavy.model,
        light.model,
        policy=RetryPolicy(sleep=Waits()),
    )
    assert model is not None
    return model


async def test_every_step_reports_a_daily_quota_as_such() -> None:
    heavy = ScriptedModel(daily_quota("heavy"), name="heavy", repeat_last=True)
    light = ScriptedModel(daily_quota("light"), name="light", repeat_last=True)
    model = quota_chain(heavy, light)
    ranked = top_items()

    critique = await llm_critique(ranked, topic="DeepSeek", model=model, now=BASE_TIME)
    digest = await llm_digest(ranked, topic="DeepSeek", model=model, now=BASE_TIME)
    plan = await plan_queries("DeepSeek", sources=["hn"], model=model)

    assert critique.path == "heuristic" and critique.fallback_reason == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert digest.path == "extractive" and digest.fallback_reason == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert digest.digest.developments, "the extractive digest still reports the stories"
    assert plan.plan.made_by == "deterministic" and plan.fallback_reason == f"{DAILY_QUOTA_REASON} (heavy, light)"
    assert (heavy.calls, light.calls) == (1, 1), "each model asked once, then left alone for the cooldown"


async def test_after_a_daily_quota_the_model_is_left_alone_for_the_cooldown() -> None:
    now = [0.0]
    primary = ScriptedModel(daily_quota("primary"), "primary is back", name="primary", repeat_last=True)
    secondary = ScriptedModel("secondary answers", name="secondary", repeat_last=True)
    model = resilient_model(
        primary.model,
        secondary.model,
        policy=RetryPolicy(sleep=Waits(), quota=QuotaMemory(cooldown=600, clock=lambda: now[0])),
    )
    assert model is not None

    answers = [(await Agent(model).run("hi")).output for _ in range(3)]
    assert answers == ["secondary answers"] * 3
    assert (primary.calls, secondary.calls) == (1, 3)  # the primary was asked once, not once per message

    now[0] = 601.0
    assert (await Agent(model).run("hi")).output == "primary is back"
    assert primary.calls == 2


def test_a_bounded_models_limits_are_part_of_its_equality_and_repr() -> None:
    # pydantic-ai's `Model.__eq__`/`__repr__` read `_settings`, which `BoundedModel` sets from its limits.
    wrapped = TestModel()
    default, short = BoundedModel(wrapped, ModelLimits()), BoundedModel(wrapped, ModelLimits(chat_max_tokens=64))

    assert default == BoundedModel(wrapped, ModelLimits()) and default != short
    assert "'max_tokens': 64" in repr(short)
