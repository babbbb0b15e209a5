"""Token usage is priced from the providers' published prices, and unpriced models stay unpriced."""

from __future__ import annotations

import pytest
from pydantic_ai import RunUsage
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from research.critique import LlmUsage, estimate_cost_usd
from research.pipeline import sum_usage


def test_a_listed_gemini_model_is_priced_per_token() -> None:
    million_in = estimate_cost_usd("google:gemini-3.8-flash", input_tokens=1_000_000, output_tokens=0)
    million_out = estimate_cost_usd("google:gemini-3.8-flash", input_tokens=0, output_tokens=1_000_000)
    assert million_in is not None and million_out is not None
    assert 0 < million_in < million_out  # output tokens cost more than input tokens
    double = estimate_cost_usd("google:gemini-3.8-flash", input_tokens=2_000_000, output_tokens=0)
    assert double == pytest.approx(2 * million_in)


def test_unlisted_models_have_no_price() -> None:
    assert estimate_cost_usd("function:scripted", input_tokens=100, output_tokens=100) is None
    assert estimate_cost_usd("google:gemini-that-does-not-exist", input_tokens=100, output_tokens=100) is None


def test_usage_from_a_run_carries_the_price_and_sums_keep_it() -> None:
    gemini = GoogleModel("gemini-3.8-flash", provider=GoogleProvider(api_key="test-key"))
    priced = LlmUsage.from_run(RunUsage(requests=1, input_tokens=10_000, output_tokens=2_000), model=gemini)
    assert priced.model == "google:gemini-3.8-flash" and priced.cost_usd is not None and priced.cost_usd > 0

    def scripted(messages: object, info: AgentInfo) -> object:
        raise AssertionError("not called")

    unpriced = LlmUsage.from_run(RunUsage(requests=1, input_tokens=5, output_tokens=5), model=FunctionModel(scripted))
    assert unpriced.cost_usd is None
    total = sum_usage([priced, unpriced])
    assert total.cost_usd == pytest.approx(priced.cost_usd)
    assert (total.requests, total.input_tokens) == (2, 10_005)
    assert sum_usage([unpriced]).cost_usd is None
