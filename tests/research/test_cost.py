"""Token usage is priced from the providers' published prices (one pricing function, per response by the model that
wrote it), and unpriced models stay unpriced."""

from __future__ import annotations

import pytest
from pydantic_ai import RunUsage
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.usage import RequestUsage

from research import ModelSet, RetryPolicy
from research.usage import LlmUsage, estimate_cost_usd, sum_usage
from tests.kit import ScriptedModel


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

    never_asked = ScriptedModel(name="scripted").model  # an empty script: asking it fails the test
    unpriced = LlmUsage.from_run(RunUsage(requests=1, input_tokens=5, output_tokens=5), model=never_asked)
    assert unpriced.cost_usd is None
    total = sum_usage([priced, unpriced])
    assert total.cost_usd == pytest.approx(priced.cost_usd)
    assert (total.requests, total.input_tokens) == (2, 10_005)
    assert sum_usage([unpriced]).cost_usd is None


def _response(model_name: str, input_tokens: int, *, provider: str | None = "google") -> ModelResponse:
    return ModelResponse(
        parts=[TextPart(content="x")],
        model_name=model_name,
        provider_name=provider,
        usage=RequestUsage(input_tokens=input_tokens, output_tokens=0),
    )


def test_a_run_is_priced_per_response_by_the_model_that_answered() -> None:
    light = GoogleModel("gemini-3.5-flash-lite", provider=GoogleProvider(api_key="test-key"))
    heavy = GoogleModel("gemini-3.8-flash", provider=GoogleProvider(api_key="test-key"))
    chain = ModelSet.of(light, heavy, policy=RetryPolicy(attempts=1)).light
    assert chain is not None
    light_price = estimate_cost_usd("google:gemini-3.5-flash-lite", input_tokens=1_000_000, output_tokens=0)
    heavy_price = estimate_cost_usd("google:gemini-3.8-flash", input_tokens=1_000_000, output_tokens=0)
    assert light_price is not None and heavy_price is not None and light_price != heavy_price
    prompt = ModelRequest(parts=[UserPromptPart(content="hi")])
    # the light model failed; the heavy one (its fallback) answered: priced at the heavy model's price
    by_heavy = LlmUsage.from_run(
        RunUsage(requests=1, input_tokens=1_000_000),
        model=chain,
        messages=[prompt, _response("gemini-3.8-flash-001", 1_000_000)],  # a versioned name
    )
    assert by_heavy.model == "google:gemini-3.8-flash"
    assert by_heavy.cost_usd == pytest.approx(heavy_price)
    # a run that mixed both models is priced per response
    mixed = LlmUsage.from_run(
        RunUsage(requests=2, input_tokens=2_000_000),
        model=chain,
        messages=[prompt, _response("gemini-3.5-flash-lite", 1_000_000), _response("gemini-3.8-flash", 1_000_000)],
    )
    assert mixed.cost_usd == pytest.approx(light_price + heavy_price)
    # without any response (failed before an answer) the chain's first model names and prices it
    failed = LlmUsage.from_run(RunUsage(requests=1, input_tokens=1_000_000), model=chain)
    assert failed.model == "google:gemini-3.5-flash-lite" and failed.cost_usd == pytest.approx(light_price)


def test_responses_of_unknown_models_count_as_unpriced() -> None:
    usage = LlmUsage.from_run(
        RunUsage(requests=1, input_tokens=5),
        model=ScriptedModel(name="scripted").model,  # an empty script: asking it fails the test
        messages=[_response("scripted", 5, provider=None)],
    )
    assert usage.cost_usd is None and usage.model == "function:scripted"
