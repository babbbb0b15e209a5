"""Benchmark `research.pipeline.run_pipeline`: 200 items from two real sources over HTTP, instant scripted models.

The real `HackerNewsSource` and `GoogleNewsSource` on the real `HttpClient` talk to a local fake server that
answers in their wire formats (Algolia JSON, Google News RSS) after 50 ms. The items are generated: 40 stories,
each told by several HN posts/comments and news outlets, 100 items per source in all; each planned query
finds a fixed slice, with some overlap. The light and heavy models are pydantic-ai `FunctionModel`s that answer
at once, so the table shows the pipeline's own time, not a model's.

Token comparison: what the pipeline sent to models (plan + critique + digest, every request, retries included)
against one naive digest request listing every collected item in full. Both are measured the same two ways:
characters / 4 over instructions + prompt, and the token estimate `FunctionModel` reports for the request.

Run: uv run python bench/digest.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from research import LlmUsage
from research.digest import DigestDeps, digest_agent
from research.pipeline import STAGES, run_pipeline
from research.pipeline_models import PipelineOptions, PipelineRequest, PipelineResult
from sources.base import Source
from sources.config import SourcesConfig
from sources.hn import HackerNewsSource
from sources.http import HttpClient
from sources.news import GoogleNewsSource
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest

LATENCY = 0.05
TOPIC = "DeepSeek R1"
PER_SOURCE = 100
SUBJECTS = ["DeepSeek", "Moonshot", "Zhipu", "Alibaba Qwen", "Baidu", "Huawei", "Tencent", "ByteDance"]
EVENTS = [
    ("releases R1 distilled models", "R1 distilled checkpoints", "open weights for six sizes"),
    ("cuts API prices for R1", "API token prices", "a 75 percent price cut"),
    ("tops the reasoning leaderboard", "reasoning benchmark results", "first place on math and code"),
    ("trains on Ascend chips", "Ascend training cluster", "domestic accelerators at scale"),
    ("publishes the GRPO paper", "GRPO reinforcement learning", "a technical report on arXiv"),
]
OUTLETS = ["Reuters", "The Verge", "TechCrunch", "Bloomberg", "South China Morning Post", "Wired", "CNBC"]
FILLER = (
    "Engineers who tried the release said the results matched the published numbers on their own workloads, "
    "though several noted that latency under load was higher than on the vendor's demo. The company declined "
    "to say how many accelerators the training run used. Analysts expect rivals to answer within weeks. "
)


def story(number: int) -> tuple[str, str, str]:
    subject = SUBJECTS[number % len(SUBJECTS)]
    event, short, detail = EVENTS[number // len(SUBJECTS) % len(EVENTS)]
    return subject, event, f"{short}: {detail}"


def hn_hits(now: datetime) -> list[dict[str, Any]]:
    hits = []
    for index in range(PER_SOURCE):
        subject, event, detail = story(index % 40)
        created = now - timedelta(minutes=13 * index + 5)
        base = {"objectID": str(47_000_000 + index), "author": f"user{index}", "created_at_i": int(created.timestamp())}
        if index % 3 == 2:  # a comment on the story
            text = f"<p>{escape(detail)}. {FILLER}</p>"
            hits.append(base | {"comment_text": text, "story_title": f"{subject} {event}", "points": None})
        else:
            body = f"<p>{escape(detail)}. {FILLER * (1 + index % 3)}</p>" if index % 2 else None
            hits.append(
                base
                | {
                    "title": f"{subject} {event} ({detail.split(':')[0]})",
                    "url": None if body else f"https://blog.example{index % 7}.com/{index}",
                    "story_text": body,
                    "points": (index * 37) % 500,
                    "num_comments": (index * 11) % 200,
                }
            )
    return hits


def news_items(now: datetime) -> list[str]:
    entries = []
    for index in range(PER_SOURCE):
        subject, event, detail = story((index * 3) % 40)
        outlet = OUTLETS[index % len(OUTLETS)]
        title = f"{subject} {event}, {detail.split(': ')[1]} - {outlet}"
        link = f"https://news.google.com/rss/articles/CBMi{zlib.crc32(title.encode()):08x}{index:04d}?oc=5"
        published = (now - timedelta(minutes=11 * index + 3)).strftime("%a, %d %b %Y %H:%M:%S GMT")
        description = escape(f'<a href="{link}">{escape(title)}</a>&nbsp;&nbsp;<font color="#6f6f6f">{outlet}</font>')
        entries.append(
            f'<item><title>{escape(title)}</title><link>{link}</link><guid isPermaLink="false">{index}</guid>'
            f"<pubDate>{published}</pubDate><description>{description}</description>"
            f'<source url="https://www.{outlet.lower().replace(" ", "")}.com">{escape(outlet)}</source></item>'
        )
    return entries


SLICES = {"deepseek r1": (0, 35), "deepseek r1 benchmark": (30, 65), "deepseek r1 price": (60, 88)}
"""Which items each planned query finds, by position (with some overlap); any other query finds 85-100."""


def slice_for(text: str) -> slice:
    words = " ".join(w for w in text.lower().replace('"', " ").split() if ":" not in w)
    start, end = SLICES.get(words, (85, PER_SOURCE))
    return slice(start, end)


def start_server(now: datetime) -> FakeHTTPServer:
    server = FakeHTTPServer()
    server.start()
    hits, entries = hn_hits(now), news_items(now)

    def algolia(request: RecordedRequest) -> FakeResponse:
        query = request.query.get("query", "")
        chosen = hits[slice_for(query)]
        return FakeResponse.json({"hits": chosen, "nbHits": len(chosen)}, delay=LATENCY)

    def news(request: RecordedRequest) -> FakeResponse:
        query = request.query.get("q", "")
        body = '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel>'
        body += f"<title>{escape(query)} - Google News</title>"
        body += "".join(entries[slice_for(query)]) + "</channel></rss>"
        return FakeResponse(body=body.encode(), content_type="application/rss+xml", delay=LATENCY)

    server.route("GET", "/api/v1/search_by_date", algolia)
    server.route("GET", "/rss/search", news)
    return server


@dataclass
class Recorder:
    """Instant scripted answers for the plan, critique and digest agents; counts what each request carried."""

    chars: int = 0
    requests: int = 0
    prompts: list[str] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests += 1
        self.chars += len(info.instructions or "") + sum(
            len(str(part.content)) for m in messages if isinstance(m, ModelRequest) for part in m.parts
            if hasattr(part, "content")
        )  # fmt: skip
        tool = info.output_tools[0]
        properties = tool.parameters_json_schema.get("properties", {})
        prompt = "\n".join(
            p.content for p in messages[0].parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        ) if isinstance(messages[0], ModelRequest) else ""  # fmt: skip
        self.prompts.append(prompt)
        numbers = sorted({int(line[1 : line.index("]")]) for line in prompt.splitlines() if line[:1] == "["})
        if "source_queries" in properties:
            answer: dict[str, Any] = {"queries": ["DeepSeek R1 benchmark", "DeepSeek R1 price"], "keywords": ["R1"]}
        elif "assessments" in properties:
            answer = {
                "assessments": [{"number": n, "relevance": 0.8, "credibility": 0.7, "reason": "ok"} for n in numbers]
            }
        else:
            answer = {
                "headline": "DeepSeek R1 news [1]",
                "developments": [{"text": f"Story {n}.", "citations": [n]} for n in numbers[:5]],
                "quality": {"completeness": 0.8, "quality": 0.7},
            }
        return ModelResponse(parts=[ToolCallPart(tool.name, answer)])


def naive_prompt(result: PipelineResult) -> str:
    """Every collected item in full, as a prompt that skipped top-K selection and compaction would carry."""
    lines = []
    for number, scored in enumerate(result.items, start=1):
        item = scored.item
        lines.append(
            f"[{number}] {item.title}\nsource: {item.source} · url: {item.url} · author: {item.author} · "
            f"published: {item.published} · engagement: {item.engagement.model_dump_json(exclude_none=True)}\n"
            f"text: {item.text}"
        )
    return f"Write the digest of these {len(lines)} items.\n\n" + "\n".join(lines)


async def naive_usage(prompt: str, items: int) -> tuple[int, LlmUsage]:
    """Send the naive prompt through the same digest agent to the same kind of model: chars and its usage."""
    recorder = Recorder()
    deps = DigestDeps(topic=TOPIC, numbers=frozenset(range(1, items + 1)), min_developments=3)
    result = await digest_agent().run(prompt, model=FunctionModel(recorder, model_name="naive"), deps=deps)
    return recorder.chars, LlmUsage.from_run(result.usage, model="naive")


async def one_run(out_dir: Path) -> tuple[PipelineResult, Recorder, Recorder]:
    now = datetime.now(UTC)
    server = start_server(now)
    try:
        async with HttpClient(user_agent="LookoutBench/0.1", allow_private=True, timeout=10) as client:
            config = SourcesConfig(allow_private_urls=True, hn_api_url=f"{server.url}/api/v1",
                                   news_rss_url=f"{server.url}/rss")  # fmt: skip
            sources: list[Source] = [
                HackerNewsSource(client=client, config=config),
                GoogleNewsSource(client=client, config=config),
            ]
            light, heavy = Recorder(), Recorder()
            result = await run_pipeline(
                PipelineRequest(topic=TOPIC, sources=sources, since=now - timedelta(days=1), until=now),
                light_model=FunctionModel(light, model_name="light"),
                heavy_model=FunctionModel(heavy, model_name="heavy"),
                out_dir=out_dir,
                stem="bench",
                # Expansion on (it would be skipped above 100 items) so its cost shows in the table.
                options=PipelineOptions(expand_below=1000, per_query_limit=50),
            )
    finally:
        server.stop()
    return result, light, heavy


def spread(values: list[float]) -> str:
    low, high = min(values) * 1000, max(values) * 1000
    return f"{statistics.median(values) * 1000:.0f} ms ({low:.0f}–{high:.0f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(max(runs, 1)):
            results.append(await one_run(Path(directory)))
        result, light, heavy = results[-1]
        report = result.report
        assert report is not None
        naive_chars, naive = await naive_usage(naive_prompt(result), len(result.items))
        csv_rows = sum(1 for _ in result.exports.csv.open(encoding="utf-8-sig")) - 1

    print(f"{len(result.items)} unique items ({report.counts.collected} collected over {report.searches} searches),")
    print(f"2 sources (hn, news) on the real HttpClient, {LATENCY * 1000:.0f} ms per response; instant FunctionModels")
    print(f"expansion queries: {report.expansion_queries}; CSV rows: {csv_rows}; critiqued: {report.counts.critiqued}")
    print(f"python {platform.python_version()} on {platform.machine()}; median (min–max) of {len(results)} runs\n")
    print("| stage | time |")
    print("|---|---|")
    for stage in STAGES:
        print(f"| {stage} | {spread([r.report.seconds[stage] for r, _, _ in results if r.report])} |")
    totals = [(r.report.finished_at - r.report.started_at).total_seconds() for r, _, _ in results if r.report]
    print(f"| **total** | {spread(totals)} |")

    sent_chars = light.chars + heavy.chars
    usage = result.usage
    print("\n| input to the model | requests | chars / 4 | FunctionModel estimate |")
    print("|---|---|---|---|")
    for name, part in report.usage.items():
        if name != "total":
            print(f"| pipeline: {name} | {part.requests} | | {part.input_tokens:,} |")
    print(f"| **pipeline, all steps** | {usage.requests} | {sent_chars // 4:,} | {usage.input_tokens:,} |")
    print(f"| naive: every item in one digest request | {naive.requests} | {naive_chars // 4:,} | "
          f"{naive.input_tokens:,} |")  # fmt: skip
    print(f"| **ratio naive / pipeline** | | {naive_chars / max(sent_chars, 1):.1f}× | "
          f"{naive.input_tokens / max(usage.input_tokens, 1):.1f}× |")  # fmt: skip
    print("\nsummary:", json.dumps({"items": len(result.items), "digest": result.digest.headline}))


if __name__ == "__main__":
    asyncio.run(main())
