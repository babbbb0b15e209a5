"""The iterative "collect N items" job: each stop rule, duplicates removed across calls, fallbacks, no-model planner."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo

from research.collect import ProgressEvent
from research.goal import CollectionGoal
from research.iterative import AttemptSummary, StopReason, run_iterative_collection
from research.llm import ModelLimits, ModelSet
from research.query_variants import key_terms, planned_attempts, topic_of
from sources.base import Item, SearchQuery, SourceError, SourceErrorKind
from tests.kit import ScriptedModel
from tests.research.fake_sources import (
    BASE_TIME,
    FailingSource,
    RecordingSource,
    UnavailableSource,
    make_item,
    rate_limited,
)


def per_query_items(count: int) -> Callable[[SearchQuery], list[Item]]:
    """`count` items unique to each query text (and language)."""

    def answer(query: SearchQuery) -> list[Item]:
        key = f"{query.text}-{query.language}"
        return [make_item("hn", f"{key}-{i}", title=f"{query.text} story {i}") for i in range(count)]

    return answer


def shared_pool_plus_one(pool: int) -> Callable[[SearchQuery], list[Item]]:
    """The same `pool` items for every query, plus one item unique to the query."""

    def answer(query: SearchQuery) -> list[Item]:
        shared = [make_item("hn", f"pool-{i}", title=f"Pool story {i}") for i in range(pool)]
        return [*shared, make_item("hn", f"only-{query.text}", title=f"Only {query.text}")]

    return answer


class ScriptedPlanner:
    """A script step for `tests.kit.ScriptedModel`: calls `collect` with the next query from `queries` every turn,
    forever (or answers with text once `finish_after` calls were made). Records what the tool told it."""

    def __init__(self, queries: list[str], *, finish_after: int | None = None) -> None:
        self.queries = queries
        self.finish_after = finish_after
        self.calls = 0
        self.summaries: list[AttemptSummary] = []
        self.infos: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    content: Any = part.content
                    self.summaries.append(AttemptSummary.model_validate(content, from_attributes=True))
        if self.finish_after is not None and self.calls >= self.finish_after:
            return ModelResponse(parts=[TextPart("done")])
        text = self.queries[min(self.calls, len(self.queries) - 1)]
        self.calls += 1
        return ModelResponse(parts=[ToolCallPart("collect", {"queries": [{"text": text}]})])


async def test_target_reached_ends_the_run_even_if_the_model_wants_more() -> None:
    source = RecordingSource("hn", per_query_items(20))
    script = ScriptedPlanner(["alpha", "beta", "gamma", "delta"])
    events: list[ProgressEvent] = []

    result = await run_iterative_collection(
        "collect 30 posts about alpha",
        sources=[source],
        model=ScriptedModel(script, name="planner", repeat_last=True).model,
        goal=CollectionGoal(target=30),
        progress=events.append,
    )

    report = result.report
    assert (report.stop_reason, report.reached_target, report.attempts) == (StopReason.TARGET_REACHED, True, 2)
    assert report.total_unique == len(result.items) == 40
    assert [q.text for q in source.queries] == ["alpha", "beta"]
    assert script.calls == 2, "the run ends in code right after the attempt that reached the target"
    assert report.planner == "model:planner"  # the model that planned, by name
    assert [(q.text, q.new, q.duplicate) for q in report.queries] == [("alpha", 20, 0), ("beta", 20, 0)]
    assert set(result.cluster_of) == {i.id for i in result.items}
    assert {"collect"} == {t.name for t in script.infos[0].function_tools}
    assert "30 unique items" in (script.infos[0].instructions or "")
    assert [e.kind for e in events if e.kind != "search_done"] == [
        "attempt_started",
        "attempt_done",
        "attempt_started",
        "attempt_done",
        "finished",
    ]


async def test_three_low_yield_attempts_stop_and_duplicates_are_removed_in_the_tool() -> None:
    source = RecordingSource("hn", shared_pool_plus_one(50))
    script = ScriptedPlanner(["a", "b", "c", "d", "e", "f"])

    result = await run_iterative_collection(
        "posts about a",
        sources=[source],
        model=ScriptedModel(script, repeat_last=True).model,
        goal=CollectionGoal(target=1000),
    )

    report = result.report
    assert report.stop_reason is StopReason.LOW_YIELD
    assert report.attempts == 4, "51 new, then 1, 1, 1: three in a row under 10"
    assert report.total_unique == 54
    assert report.total_duplicates == 150
    assert [(q.text, q.new, q.duplicate) for q in report.queries] == [
        ("a", 51, 0),
        ("b", 1, 50),
        ("c", 1, 50),
        ("d", 1, 50),
    ]
    # What the model saw after each call: counts and, at the end, the order to stop.
    assert [(s.new, s.duplicate, s.total_unique, s.stop) for s in script.summaries] == [
        (51, 0, 51, False),
        (1, 50, 52, False),
        (1, 50, 53, False),
    ]
    assert report.per_source["hn"].duplicate == 150
    assert not report.reached_target


async def test_attempt_limit_ends_the_run_with_a_report() -> None:
    source = RecordingSource("hn", per_query_items(20))
    failing = rate_limited("github")
    off = UnavailableSource("x")
    script = ScriptedPlanner([f"q{i}" for i in range(10)])

    result = await run_iterative_collection(
        "anything",
        sources=[source, failing, off],
        model=ScriptedModel(script, repeat_last=True).model,
        goal=CollectionGoal(target=10_000, max_attempts=3),
    )

    report = result.report
    assert (report.stop_reason, report.attempts, report.total_unique) == (StopReason.ATTEMPT_LIMIT, 3, 60)
    assert "limit of 3 attempts" in report.stop_detail
    # The rate-limited source is asked once in the whole job, and its failure reported once.
    assert [(e.source, e.query, e.kind) for e in report.source_errors] == [("github", "q0", "rate_limited")]
    assert len(failing.queries) == 1
    assert [f.line for f in report.failed_sources] == ["github: rate-limited (HTTP 429)"]
    assert report.skipped_sources == {"x": "X_BEARER_TOKEN is not set"}
    assert report.per_source["github"].errors == 1
    assert report.finished_at >= report.started_at
    assert report.duration_seconds >= 0


async def test_the_tool_refuses_work_after_a_stop_rule() -> None:
    """Even when a model calls collect twice in one turn past the target, only the first runs."""
    source = RecordingSource("hn", per_query_items(20))

    def two_calls_at_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(
            parts=[
                ToolCallPart("collect", {"queries": [{"text": "one"}]}, tool_call_id="1"),
                ToolCallPart("collect", {"queries": [{"text": "two"}]}, tool_call_id="2"),
            ]
        )

    result = await run_iterative_collection(
        "x",
        sources=[source],
        model=ScriptedModel(two_calls_at_once, repeat_last=True).model,
        goal=CollectionGoal(target=10),
    )
    assert result.report.attempts == 1
    assert len(source.queries) == 1


async def test_a_model_that_finishes_early_is_continued_by_the_planner() -> None:
    source = RecordingSource("hn", per_query_items(5))
    script = ScriptedPlanner(["first"], finish_after=1)

    result = await run_iterative_collection(
        "collect 100 posts about Rust",
        sources=[source],
        model=ScriptedModel(script, repeat_last=True).model,
        goal=CollectionGoal(target=100, max_attempts=4),
    )

    report = result.report
    assert report.planner.endswith("+deterministic")
    assert report.stop_reason in {StopReason.LOW_YIELD, StopReason.ATTEMPT_LIMIT}
    assert report.queries[0].text == "first"
    assert report.queries[1].text == "Rust", "the planner starts from the request's topic"
    assert "stopped before a stop rule" in report.notes[0]


async def test_a_failing_model_degrades_to_the_planner() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("quota exhausted")

    source = RecordingSource("hn", per_query_items(30))
    result = await run_iterative_collection(
        "DeepSeek",
        sources=[source],
        model=ScriptedModel(broken, repeat_last=True).model,
        goal=CollectionGoal(target=50),
    )
    assert result.report.stop_reason is StopReason.TARGET_REACHED
    assert "quota exhausted" in result.report.notes[0]
    assert result.report.planner.endswith("+deterministic")


async def test_no_model_planner_tries_request_terms_and_wider_ranges_never_a_query_twice() -> None:
    source = RecordingSource("hn", per_query_items(2))
    result = await run_iterative_collection(
        "collect 2000 posts about DeepSeek R2 model",
        sources=[source],
        model=None,
        goal=CollectionGoal(target=2000, max_attempts=10),
    )
    report = result.report
    assert report.planner == "deterministic"
    assert report.stop_reason is StopReason.LOW_YIELD
    texts = [(q.text, q.language) for q in source.queries]
    assert texts[0] == ("DeepSeek R2 model", None)
    assert ("DeepSeek", None) in texts and ("R2", None) in texts
    # Without a model nothing translates the words: the same English query tagged [zh] would be a repeat.
    assert {q.language for q in source.queries} == {None}
    sent = [(q.text.casefold(), q.since, q.until) for q in source.queries]
    assert len(set(sent)) == len(sent), "no query is sent twice"
    started = report.started_at
    first = source.queries[0]
    assert first.since is not None and started - first.since == timedelta(days=30)


async def test_no_model_planner_reports_when_it_runs_out_of_variants() -> None:
    source = RecordingSource("hn", per_query_items(40))
    result = await run_iterative_collection(
        "Rust", sources=[source], goal=CollectionGoal(target=100_000, max_attempts=50)
    )
    assert result.report.stop_reason is StopReason.PLANNER_EXHAUSTED
    assert not result.report.reached_target
    assert len({(q.text, q.language, q.since) for q in source.queries}) == len(source.queries), "no repeats"


async def test_when_every_source_fails_the_job_stops_and_names_each_once() -> None:
    down = FailingSource("hn", SourceError(SourceErrorKind.NETWORK, "cannot connect to hn.example: refused"))
    broken = FailingSource("news", SourceError(SourceErrorKind.SERVER, "HTTP 503 from news.example", status=503))
    off = UnavailableSource("x")
    events: list[ProgressEvent] = []

    result = await run_iterative_collection(
        "DeepSeek R2", sources=[down, broken, off], model=None, goal=CollectionGoal(target=500), progress=events.append
    )

    report = result.report
    assert (report.stop_reason, report.attempts) == (StopReason.ALL_SOURCES_FAILED, 1)
    assert report.stop_detail == "every source failed, so there was nothing left to ask"
    assert len(down.queries) == len(broken.queries) == 1
    assert [f.line for f in report.failed_sources] == ["hn: cannot connect", "news: HTTP 503"]
    # Each failure is told once as it happens.
    failures = sorted(e.message for e in events if e.kind == "search_done")
    assert failures == ['hn · "DeepSeek R2": cannot connect', 'news · "DeepSeek R2": HTTP 503']


def test_topic_and_key_terms() -> None:
    assert topic_of("collect 2000 posts about DeepSeek R2") == "DeepSeek R2"
    assert topic_of('Find the latest 50 articles on "Rust in the kernel"') == "Rust in the kernel"
    assert topic_of("DeepSeek") == "DeepSeek"
    assert key_terms("Rust in the Linux kernel") == ["Rust", "Linux", "kernel"]
    attempts = list(planned_attempts("DeepSeek", now=BASE_TIME))
    assert attempts[0][0].text == "DeepSeek"
    assert all(spec.text for attempt in attempts for spec in attempt)


async def test_same_text_in_two_languages_is_counted_per_query() -> None:
    source = RecordingSource("hn", per_query_items(3))
    script = ScriptedPlanner(["unused"])

    def both_languages(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        script.calls += 1
        queries = [{"text": "DeepSeek"}, {"text": "DeepSeek", "language": "zh"}]
        return ModelResponse(parts=[ToolCallPart("collect", {"queries": queries})])

    result = await run_iterative_collection(
        "DeepSeek",
        sources=[source],
        model=ScriptedModel(both_languages, repeat_last=True).model,
        goal=CollectionGoal(target=1000, max_attempts=1),
    )
    assert [(q.text, q.language, q.new, q.returned) for q in result.report.queries] == [
        ("DeepSeek", None, 3, 3),
        ("DeepSeek", "zh", 3, 3),
    ]


async def test_collect_calls_beyond_a_few_per_response_are_refused_not_run() -> None:
    """A small model once asked for 39 collect calls at once: only the first few of a response run."""
    source = RecordingSource("hn", per_query_items(50))  # high yield: no stop rule ends the run early
    seen: list[str] = []

    def many_at_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(part, ToolReturnPart) for part in last.parts):
            seen.extend(str(part.content) for part in last.parts if isinstance(part, ToolReturnPart))
            return ModelResponse(parts=[TextPart("done")])
        calls = [ToolCallPart("collect", {"queries": [{"text": f"q{n}"}]}, tool_call_id=str(n)) for n in range(12)]
        return ModelResponse(parts=calls)

    limits = ModelLimits(max_tool_calls_per_response=3)
    model = ModelSet.of(ScriptedModel(many_at_once, repeat_last=True).model, None, limits=limits).light
    assert model is not None
    await run_iterative_collection(
        "x", sources=[source], model=model, goal=CollectionGoal(target=100_000, max_attempts=20)
    )

    assert len(seen) == 12 and sum(text.startswith("Not run: at most 3 tool calls") for text in seen) == 9
    assert len({query.text for query in source.queries} & {f"q{n}" for n in range(12)}) == 3


def test_a_collection_goal_refuses_a_value_below_one() -> None:
    assert CollectionGoal() == CollectionGoal(target=2000, max_attempts=10, items_per_attempt=500)
    for field in ("target", "max_attempts", "items_per_attempt"):
        with pytest.raises(ValueError, match=f"{field} must be at least 1"):
            CollectionGoal(**{field: 0})
