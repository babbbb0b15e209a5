"""The whole pipeline with fake sources and scripted models: plan, collect, expand, novelty, critique, digest,
exports; the no-model path; novelty across runs; all sources failing; keyword filters; top-K compaction."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo

from research.collect import ProgressEvent
from research.critique import SNIPPET_CHARS
from research.digest import citations_in
from research.export import RUN_CSV_COLUMNS
from research.pipeline import STAGES, keyword_filter, run_pipeline
from research.pipeline_models import PipelineOptions, PipelineRequest, PipelineResult
from research.plan import QueryPlan, deterministic_plan
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

TOPIC = "DeepSeek R1"
SINCE = BASE_TIME - timedelta(hours=24)


def item(source: str, key: str, title: str, url: str, **extra: Any) -> Item:
    return make_item(source, key, title=title, url=url, **extra)


# The first round: three stories (leaderboard, API prices, Huawei chips), a lone Nvidia story, and one item
# published before the window. "API" and "Ascend" are named in several items and in no query.
FIRST_ROUND = {
    "hn": [
        item("hn", "r1", "DeepSeek R1 tops the open model leaderboard", "https://news.ycombinator.com/item?id=1",
             points=420, comments=180),
        item("hn", "api", "Cheaper API: DeepSeek halves token prices", "https://news.ycombinator.com/item?id=2",
             points=150),
        item("hn", "hw", "Huawei Ascend chips run DeepSeek inference", "https://news.ycombinator.com/item?id=3",
             points=40),
    ],
    "news": [
        item("news", "r1", "DeepSeek R1 tops open model leaderboard as rivals scramble",
             "https://www.reuters.com/tech/deepseek-r1-leaderboard", text="The open model ranks first."),
        item("news", "r1b", "Open model leaderboard: DeepSeek R1 takes first place",
             "https://www.theverge.com/deepseek-r1-leaderboard"),
        item("news", "api", "DeepSeek halves API token prices for developers", "https://techcrunch.com/deepseek-api"),
        item("news", "nv", "Nvidia shares fall as investors weigh cheaper Chinese models",
             "https://www.cnbc.com/nvidia-shares"),
        item("news", "hw", "Huawei Ascend chips power DeepSeek inference cluster", "https://www.scmp.com/huawei-ascend"),
        item("news", "old", "DeepSeek R1 preview leaks", "https://example.org/old-leak", hours_ago=80),
    ],
}  # fmt: skip
EXPANSION_ITEM = item(
    "news", "outage", "DeepSeek API outage follows the price cut", "https://www.theregister.com/deepseek-api-outage"
)


def catalogue(rounds: dict[str, dict[str, list[Item]]]) -> Callable[[str], Callable[[SearchQuery], list[Item]]]:
    """Sources answering from `rounds[query text][source name]`; unknown queries find nothing."""

    def for_source(name: str) -> Callable[[SearchQuery], list[Item]]:
        return lambda query: list(rounds.get(query.text, {}).get(name, []))

    return for_source


def world_sources(rounds: dict[str, dict[str, list[Item]]] | None = None) -> list[RecordingSource]:
    answer = catalogue(
        rounds
        or {
            TOPIC: FIRST_ROUND,
            "DeepSeek API": {"news": [EXPANSION_ITEM, FIRST_ROUND["news"][2]]},
        }
    )
    return [RecordingSource("hn", answer("hn")), RecordingSource("news", answer("news"))]


def request_for(sources: Sequence[RecordingSource | FailingSource], **extra: Any) -> PipelineRequest:
    window: dict[str, Any] = {"since": SINCE, "until": BASE_TIME}
    return PipelineRequest(topic=TOPIC, sources=sources, **(window | extra))


def prompt_of(messages: list[ModelMessage]) -> str:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    return "\n".join(p.content for p in first.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str))


ITEM_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


@dataclass
class HeavyScript:
    """The heavy model: critiques every listed item, then writes a digest (the first digest answer may cite a
    missing item, to see the retry). Records each agent's prompts."""

    bad_citation_first: bool = False
    critique_prompts: list[str] = field(default_factory=list)
    digest_prompts: list[str] = field(default_factory=list)
    digest_calls: int = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        properties = tool.parameters_json_schema.get("properties", {})
        prompt = prompt_of(messages)
        numbers = [int(n) for n, _ in ITEM_LINE.findall(prompt)]
        if "assessments" in properties:
            self.critique_prompts.append(prompt)
            answer: dict[str, Any] = {
                "assessments": [
                    {"number": n, "relevance": 0.9, "credibility": 0.8, "reason": "model: corroborated"}
                    for n in numbers
                ],
                "contradictions": [],
            }
        else:
            assert "headline" in properties
            if self.digest_calls == 0:
                self.digest_prompts.append(prompt)
            self.digest_calls += 1
            cited = [numbers[0], numbers[min(1, len(numbers) - 1)], numbers[-1]]
            if self.bad_citation_first and self.digest_calls == 1:
                cited[0] = max(numbers) + 5
            answer = {
                "headline": f"DeepSeek R1 leads the open leaderboard [{cited[0]}]",
                "developments": [{"text": f"Development {i}.", "citations": [n]} for i, n in enumerate(cited, 1)],
                "changes_since_last": None,
                "disputed": [],
                "quality": {"completeness": 0.8, "quality": 0.7, "missing_angles": []},
            }
        return ModelResponse(parts=[ToolCallPart(tool.name, answer)])


PLAN_ANSWER: dict[str, Any] = {
    "queries": ["DeepSeek R1 release", "DeepSeek R1"],
    "source_queries": [{"source": "hn", "queries": ["DeepSeek R1"]}, {"source": "nope", "queries": ["x"]}],
    "keywords": ["R1", "DeepSeek"],
}
"""The light model's plan: fixed queries (the topic among them), one per-source list and an unknown source."""


def light_script() -> ScriptedModel:
    """The light model: answers every plan request with `PLAN_ANSWER`."""
    return ScriptedModel(PLAN_ANSWER, name="light", repeat_last=True)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def texts_sent(source: RecordingSource) -> list[str]:
    return [query.text for query in source.queries]


async def test_the_whole_pipeline_with_models(tmp_path: Path) -> None:
    sources = world_sources()
    light, heavy = light_script(), HeavyScript(bad_citation_first=True)
    events: list[ProgressEvent] = []

    result = await run_pipeline(
        request_for(sources, extra_queries=["DeepSeek R1"], profile="ML engineer"),
        light_model=light.model,
        heavy_model=ScriptedModel(heavy, name="heavy", repeat_last=True).model,
        out_dir=tmp_path,
        stem="deepseek-r1",
        progress=events.append,
        now=lambda: BASE_TIME,
    )

    # Plan: the model's queries (the topic first), the per-source list for hn, the unknown source ignored.
    assert result.plan_refreshed and result.plan.made_by == "model"
    assert result.plan.queries == ["DeepSeek R1", "DeepSeek R1 release"]
    assert result.plan.per_source == {"hn": ["DeepSeek R1"]}
    assert "<monitor_topic>DeepSeek R1</monitor_topic>" in light.user_prompt(0)
    hn, news = sources
    # Collect, then one expansion round with the terms the top items share ("API", "Ascend"), anchored.
    assert texts_sent(hn) == ["DeepSeek R1", "DeepSeek API", "DeepSeek Ascend"]
    assert texts_sent(news) == ["DeepSeek R1", "DeepSeek R1 release", "DeepSeek API", "DeepSeek Ascend"]
    assert all(q.since == SINCE and q.until == BASE_TIME for q in hn.queries + news.queries)
    assert result.report is not None
    assert result.report.expansion_queries == ["DeepSeek API", "DeepSeek Ascend"]
    ids = [scored.item.id for scored in result.items]
    assert "news:outage" in ids, "the expansion round's new item was kept"
    assert "news:old" not in ids and result.report.counts.out_of_window == 1
    assert len(ids) == len(set(ids)) == 9
    # Critique by the model over the compact top-K; digest retried for the bad citation, then valid.
    assert len(heavy.critique_prompts) == 1 and heavy.digest_calls == 2
    assert result.report.critique_path == "model" and result.report.digest_path == "model"
    listed = len(ITEM_LINE.findall(heavy.critique_prompts[0]))
    cited = {c.number for c in result.digest.cited}
    assert cited and all(1 <= n <= listed for n in cited)
    assert all(set(d.citations) <= cited for d in result.digest.developments)
    assert citations_in(result.digest.headline)[0] in cited
    critiqued = [s for s in result.items if s.credibility is not None]
    assert len(critiqued) == listed and all(s.credibility == 0.8 and s.relevance == 0.9 for s in critiqued)
    # Usage: plan + critique + digest (two requests), summed.
    usage = result.report.usage
    assert set(usage) == {"plan", "critique", "digest", "total"}
    assert usage["digest"].requests == 2
    assert result.usage.requests == 4
    assert result.usage.input_tokens == sum(usage[k].input_tokens for k in ("plan", "critique", "digest")) > 0
    assert result.usage.output_tokens > 0
    # Exports: one CSV row per item, the JSON summary, a PNG.
    assert result.exports is not None
    rows = read_csv(result.exports.csv)
    assert list(rows[0]) == list(RUN_CSV_COLUMNS)
    assert [row["url"] for row in rows] == [s.item.url for s in result.items]
    assert all(row["cluster_id"] for row in rows)
    assert {row["status"] for row in rows} == {"new"}
    assert sum(1 for row in rows if row["credibility"]) == listed
    summary = json.loads(result.exports.json.read_text(encoding="utf-8"))
    assert summary["counts"]["unique"] == 10 and summary["usage"]["total"]["requests"] == 4
    assert set(summary["seconds"]) == set(STAGES)
    assert result.exports.chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.new_item_ids == ids and not result.nothing_new and not result.all_sources_failed
    stages = [e for e in events if e.kind == "stage"]
    assert [e.done for e in stages] == list(range(len(STAGES))) and stages[
        0
    ].message == "planning searches for DeepSeek R1"
    searches = [e for e in events if e.kind == "search_done"]
    assert [e.done for e in searches] == [1, 2, 3, 1, 2, 3, 4], "numbered per round across collect calls"
    assert {e.total for e in searches[:3]} == {3} and {e.total for e in searches[3:]} == {4}
    assert [e.kind for e in events][-1] == "finished"


async def test_without_models_every_step_has_its_deterministic_path(tmp_path: Path) -> None:
    sources = world_sources()

    result = await run_pipeline(
        request_for(sources),
        light_model=None,
        heavy_model=None,
        out_dir=tmp_path,
        stem="run",
        now=lambda: BASE_TIME,
    )

    assert result.plan == deterministic_plan(TOPIC) and result.plan.made_by == "deterministic"
    assert result.report is not None
    assert result.report.critique_path == "heuristic" and result.report.digest_path == "extractive"
    assert result.usage.requests == 0 and result.usage.input_tokens == 0
    assert texts_sent(sources[0]) == ["DeepSeek R1", "DeepSeek API", "DeepSeek Ascend"]
    # The extractive digest: the leaderboard story (four outlets, an established one among them) leads.
    assert "leaderboard" in result.digest.headline
    assert len(result.digest.developments) >= 3
    assert {c.url for c in result.digest.cited} <= {s.item.url for s in result.items}
    assert all(s.credibility is not None for s in result.items), "every item fits in the top-K here"
    assert len(read_csv(result.exports.csv)) == len(result.items)
    assert result.exports.chart.exists() and result.exports.json.exists()
    # Led by a report, not by the HN thread that ranks first on engagement; the other reports counted, and the
    # CSV names the same lead.
    first = result.digest.developments[0].text
    rows = read_csv(result.exports.csv)
    leaderboard = [row for row in rows if "leaderboard" in row["title"] and row["source"] in ("hn", "news")]
    lead = [row for row in leaderboard if row["story_role"] == "lead"]
    assert len(lead) == 1 and lead[0]["source"] == "news", lead
    assert first.startswith(lead[0]["title"]) and "+2 more reports" in first, first
    assert {row["story_lead"] for row in leaderboard} == {lead[0]["index"]}
    assert {row["story_reports"] for row in leaderboard} == {"3"}


async def test_a_fresh_stored_plan_is_reused_and_a_stale_or_foreign_one_is_remade(tmp_path: Path) -> None:
    stored = QueryPlan(topic=TOPIC, queries=["DeepSeek R1 stored"], made_by="model", model="light")
    light = light_script()
    model = light.model
    options = PipelineOptions(max_expansion_queries=0)

    async def run(**extra: Any) -> PipelineResult:
        return await run_pipeline(
            request_for(world_sources(), **({"plan": stored} | extra)), light_model=model, heavy_model=None,
            out_dir=tmp_path, stem="plan", now=lambda: BASE_TIME, options=options,
        )  # fmt: skip

    fresh = await run(plan_updated_at=BASE_TIME - timedelta(days=6))
    assert not fresh.plan_refreshed and fresh.plan == stored and light.calls == 0
    stale = await run(plan_updated_at=BASE_TIME - timedelta(days=8))
    assert stale.plan_refreshed and stale.plan.made_by == "model" and light.calls == 1
    foreign = await run(plan_updated_at=BASE_TIME, plan=stored.model_copy(update={"topic": "Kimi K2"}))
    assert foreign.plan_refreshed and light.calls == 2
    # A rule-made plan (the model was off or failing when it was made) is retried while a model is there.
    fallback = await run(plan_updated_at=BASE_TIME, plan=deterministic_plan(TOPIC))
    assert fallback.plan_refreshed and fallback.plan.made_by == "model" and light.calls == 3


async def test_the_expansion_round_is_bounded_and_skipped_when_the_first_round_has_plenty(tmp_path: Path) -> None:
    bounded_sources = world_sources()
    bounded = await run_pipeline(
        request_for(bounded_sources), light_model=None, heavy_model=None, out_dir=tmp_path, stem="a",
        now=lambda: BASE_TIME, options=PipelineOptions(max_expansion_queries=1),
    )  # fmt: skip
    assert texts_sent(bounded_sources[1]) == ["DeepSeek R1", "DeepSeek API"]
    assert bounded.report is not None and bounded.report.expansion_queries == ["DeepSeek API"]

    plenty_sources = world_sources()
    plenty = await run_pipeline(
        request_for(plenty_sources), light_model=None, heavy_model=None, out_dir=tmp_path, stem="b",
        now=lambda: BASE_TIME, options=PipelineOptions(expand_below=5),
    )  # fmt: skip
    assert texts_sent(plenty_sources[1]) == ["DeepSeek R1"]
    assert plenty.report is not None
    assert plenty.report.expansion_queries == [] and "found 8 items" in (plenty.report.expansion_skipped or "")


async def test_novelty_across_two_runs(tmp_path: Path) -> None:
    first_sources = world_sources()
    first = await run_pipeline(
        request_for(first_sources), light_model=None, heavy_model=None, out_dir=tmp_path, stem="run1",
        now=lambda: BASE_TIME, options=PipelineOptions(max_expansion_queries=0),
    )  # fmt: skip
    delivered = set(first.new_item_ids)
    assert "hn:r1" in delivered and "news:api" in delivered

    # The next day: the leaderboard story's old items are gone from the sources, but a new outlet (AP) now
    # carries it (a copy: a repeat) and another reports what happened since (a development: an update); the API
    # story comes back from an outlet that already carried it (a new URL, nothing new: a repeat); the Huawei items
    # come back unchanged; one new story appears.
    later = BASE_TIME + timedelta(days=1)
    second_round = {
        "hn": [FIRST_ROUND["hn"][2]],
        "news": [
            item("news", "r1-ap", "DeepSeek R1 tops open model leaderboard, AP confirms",
                 "https://apnews.com/deepseek-r1-leaderboard", hours_ago=-10),
            item("news", "r1-qwen", "DeepSeek R1 loses leaderboard top spot to Qwen 3 after a week",
                 "https://www.reuters.com/tech/qwen-leaderboard", hours_ago=-11),
            item("news", "api-2", "DeepSeek halves API token prices for developers worldwide",
                 "https://techcrunch.com/deepseek-api-update", hours_ago=-12),
            FIRST_ROUND["news"][4],
            item("news", "kimi", "Moonshot releases Kimi K2 weights", "https://www.scmp.com/kimi-k2",
                 hours_ago=-20),
        ],
    }  # fmt: skip
    second_sources = world_sources({TOPIC: second_round})
    second = await run_pipeline(
        request_for(
            second_sources,
            since=BASE_TIME - timedelta(days=2),
            until=later,
            already_delivered=frozenset(delivered),
            delivered_items=[s.item for s in first.items if s.item.id in delivered],
            previous_digest=first.digest,
        ),
        light_model=None, heavy_model=None, out_dir=tmp_path, stem="run2", now=lambda: later,
        options=PipelineOptions(max_expansion_queries=0),
    )  # fmt: skip

    status = {s.item.id: s.status for s in second.items}
    assert status == {
        "hn:hw": "delivered",
        "news:hw": "delivered",
        "news:r1-ap": "repeat",
        "news:r1-qwen": "update",
        "news:api-2": "repeat",
        "news:kimi": "new",
    }
    story = {s.item.id: s.cluster_id for s in second.items}
    assert story["news:r1-ap"] == story["news:r1-qwen"], "one story, told again and moved on"
    assert sorted(second.new_item_ids) == ["news:kimi", "news:r1-qwen"]
    assert second.update_item_ids == ["news:r1-qwen"]
    assert not second.nothing_new
    cited_urls = {c.url for c in second.digest.cited}
    assert cited_urls == {"https://www.reuters.com/tech/qwen-leaderboard", "https://www.scmp.com/kimi-k2"}
    assert any(d.text.startswith("Update: DeepSeek R1 loses") for d in second.digest.developments)
    assert second.digest.changes_since_last is not None

    # A third run that finds only what was delivered (and the repeat): nothing new, a quiet digest.
    delivered |= set(second.new_item_ids)
    third = await run_pipeline(
        request_for(
            world_sources({TOPIC: second_round}),
            already_delivered=frozenset(delivered),
            delivered_items=[s.item for s in [*first.items, *second.items] if s.item.id in delivered],
        ),
        light_model=None, heavy_model=None, out_dir=tmp_path, stem="run3", now=lambda: later,
        options=PipelineOptions(max_expansion_queries=0),
    )  # fmt: skip
    assert third.nothing_new and third.new_item_ids == []
    assert third.digest.headline == "Nothing new about DeepSeek R1" and third.digest.developments == []
    assert third.exports is None and not list(tmp_path.glob("run3.*"))  # nothing to send, so no files (#9.22)


async def test_a_delivered_story_told_again_by_a_new_outlet_is_a_repeat_and_its_development_an_update(
    tmp_path: Path,
) -> None:
    # Only ids are known (no delivered items, no previous digest): the story is recognised through the
    # delivered item the sources return again. Another outlet's copy of it says nothing new and is not sent
    # (a new outlet alone is no development, so it is not sent again as an "Update").
    development = item(
        "news", "hw-price", "Huawei Ascend DeepSeek inference now costs half of Nvidia H100 rental, SemiAnalysis finds",
        "https://www.semianalysis.com/ascend-cost",
    )  # fmt: skip
    huawei = {"hn": [FIRST_ROUND["hn"][2]], "news": [FIRST_ROUND["news"][4], development, FIRST_ROUND["news"][3]]}
    result = await run_pipeline(
        request_for(world_sources({TOPIC: huawei}), already_delivered=frozenset({"hn:hw"})),
        light_model=None, heavy_model=None, out_dir=tmp_path, stem="update", now=lambda: BASE_TIME,
        options=PipelineOptions(max_expansion_queries=0),
    )  # fmt: skip

    status = {s.item.id: s.status for s in result.items}
    assert status == {"hn:hw": "delivered", "news:hw": "repeat", "news:hw-price": "update", "news:nv": "new"}
    assert sorted(result.new_item_ids) == ["news:hw-price", "news:nv"] and result.update_item_ids == ["news:hw-price"]


async def test_all_sources_failing_gives_a_digest_that_says_so(tmp_path: Path) -> None:
    heavy = HeavyScript()
    failing = [
        rate_limited("hn"),
        FailingSource("news", SourceError(SourceErrorKind.SERVER, "502 Bad Gateway", status=502)),
        UnavailableSource("x"),
    ]

    result = await run_pipeline(
        request_for(failing),
        light_model=None,
        heavy_model=ScriptedModel(heavy, name="heavy", repeat_last=True).model,
        out_dir=tmp_path,
        stem="failed",
        now=lambda: BASE_TIME,
    )

    assert result.all_sources_failed and not result.nothing_new
    assert {(e.source, e.error_kind) for e in result.source_errors} == {
        ("hn", SourceErrorKind.RATE_LIMITED),
        ("news", SourceErrorKind.SERVER),
    }
    assert "every source failed" in result.digest.headline
    assert result.digest.failed_sources == [
        "hn: rate-limited (HTTP 429)",
        "news: HTTP 502",
        "x: off (X_BEARER_TOKEN is not set)",
    ]
    assert heavy.critique_prompts == [] and heavy.digest_calls == 0, "no model call for nothing"
    assert result.items == []
    # Nothing is delivered from a failed run, so it writes no files (#9.22): no header-only CSV, no empty chart.
    assert result.exports is None and list(tmp_path.iterdir()) == []
    assert result.report is not None and result.report.all_sources_failed
    assert len(result.report.source_errors) == 2 and result.report.skipped_sources == {"x": "X_BEARER_TOKEN is not set"}
    # the run's JSON (the report) lists every failed source once, with why
    assert [(f.spec, f.kind, f.reason) for f in result.report.failed_sources] == [
        ("hn", "rate_limited", "rate-limited (HTTP 429)"),
        ("news", "server_error", "HTTP 502"),
    ]


async def test_a_search_cut_short_by_a_later_page_is_named_in_the_runs_json(tmp_path: Path) -> None:
    answer = catalogue({TOPIC: FIRST_ROUND})
    cut_short = "stopped after page 1: page 2 failed: 502 Bad Gateway"
    sources = [RecordingSource("hn", answer("hn")), RecordingSource("news", answer("news"), stopped=cut_short)]

    result = await run_pipeline(
        request_for(sources), light_model=None, heavy_model=None, out_dir=tmp_path, stem="cut", now=lambda: BASE_TIME
    )

    assert result.report is not None and result.exports is not None
    assert result.report.source_errors == [] and not result.report.all_sources_failed
    assert {(o.source, o.message) for o in result.report.partial_searches} == {("news", cut_short)}
    written = json.loads(result.exports.json.read_text())
    assert {(o["source"], o["message"]) for o in written["partial_searches"]} == {("news", cut_short)}


def test_keyword_filter_matches_words_and_scripts() -> None:
    items = [
        make_item("news", "a", title="DeepSeek R1 price war", text="Analysts said prices fell."),
        make_item("news", "b", title="DeepSeek R1 crypto token scam"),
        make_item("news", "c", title="AI labs react to DeepSeek"),
        make_item("news", "d", title="深度求索发布 R1 模型"),
    ]

    def ids(kept: list[Item]) -> list[str]:
        return [i.id for i in kept]

    assert ids(keyword_filter(items, include=["AI"], exclude=[])) == ["news:c"], "'said' does not contain AI"
    assert ids(keyword_filter(items, include=[], exclude=["CRYPTO"])) == ["news:a", "news:c", "news:d"]
    assert ids(keyword_filter(items, include=["发布", "price"], exclude=["scam"])) == ["news:a", "news:d"]


async def test_include_and_exclude_keywords_filter_the_run(tmp_path: Path) -> None:
    result = await run_pipeline(
        request_for(world_sources(), include_keywords=["leaderboard", "API"], exclude_keywords=["Scramble"]),
        light_model=None, heavy_model=None, out_dir=tmp_path, stem="kw", now=lambda: BASE_TIME,
        options=PipelineOptions(max_expansion_queries=0),
    )  # fmt: skip

    assert sorted(s.item.id for s in result.items) == ["hn:api", "hn:r1", "news:api", "news:r1b"]
    assert result.report is not None and result.report.counts.excluded_by_keywords == 4
    assert len(read_csv(result.exports.csv)) == 4


async def test_only_the_compact_top_k_reach_the_heavy_model(tmp_path: Path) -> None:
    words = ["alpha", "bravo", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "iris", "jasper"]
    # 2,800 characters of the commonest words: long, but telling no story apart (the same rare words in every text
    # would make them one story)
    long_text = "It is what it is, and that is all there is to it. " * 56
    many = [
        make_item("news", f"s{i}", title=f"DeepSeek R1 {words[i % 10]} {words[i // 10]}x{i} story", text=long_text,
                  url=f"https://site{i}.example.com/story", points=i)
        for i in range(60)
    ]  # fmt: skip
    heavy = HeavyScript()

    result = await run_pipeline(
        request_for([RecordingSource("news", lambda q: many if q.text == TOPIC else [])]),
        light_model=None,
        heavy_model=ScriptedModel(heavy, name="heavy", repeat_last=True).model,
        out_dir=tmp_path,
        stem="topk",
        now=lambda: BASE_TIME,
        options=PipelineOptions(top_k=20, per_query_limit=100, max_expansion_queries=0),
    )

    assert len(result.items) == 60 and len(read_csv(result.exports.csv)) == 60
    for prompt in (heavy.critique_prompts[0], heavy.digest_prompts[0]):
        numbers = [int(n) for n, _ in ITEM_LINE.findall(prompt)]
        assert numbers == list(range(1, 21))
        snippets = [line for line in prompt.splitlines() if line.strip().startswith("snippet:")]
        assert len(snippets) == 20
        assert all(len(line.strip()) <= len("snippet: ") + SNIPPET_CHARS for line in snippets)
        assert long_text not in prompt and len(prompt) < 20 * 800
    top_ids = [s.item.id for s in result.items[:20]]
    assert all(s.credibility is not None for s in result.items[:20])
    assert all(s.credibility is None for s in result.items[20:])
    assert {s.item.id for s in result.items if s.credibility is not None} == set(top_ids)


async def test_model_failures_fall_back_without_raising(tmp_path: Path) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"garbage": True})])

    result = await run_pipeline(
        request_for(world_sources()),
        light_model=ScriptedModel(broken, name="light", repeat_last=True).model,
        heavy_model=ScriptedModel(broken, name="heavy", repeat_last=True).model,
        out_dir=tmp_path,
        stem="broken",
        now=lambda: BASE_TIME,
    )

    assert result.report is not None
    assert result.plan.made_by == "deterministic" and result.report.plan_fallback_reason
    assert result.report.critique_path == "heuristic" and result.report.critique_fallback_reason
    assert result.report.digest_path == "extractive" and result.report.digest_fallback_reason
    assert result.usage.requests >= 3, "tokens spent on failed attempts are still counted"
    assert result.digest.developments


@pytest.mark.parametrize("stem", ["", "../escape", ".hidden", "a/b"])
async def test_an_unsafe_stem_is_refused(tmp_path: Path, stem: str) -> None:
    with pytest.raises(ValueError, match="unsafe file stem"):
        await run_pipeline(
            request_for([]), light_model=None, heavy_model=None, out_dir=tmp_path, stem=stem, now=lambda: BASE_TIME
        )
