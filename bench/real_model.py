"""Benchmark Lookout against a real model server: prompt and output tokens and seconds per stage for digests of 20,
100 and 200 items, and per turn for a 10-turn chat.

The server is llama.cpp's OpenAI-compatible server with Gemma 3 270M (`.ci/model_server.sh`, which this bench runs
unless `--url` or LOOKOUT_TEST_MODEL_URL names a server). Lookout is configured as a self-hoster configures it
(`openai-chat:` model strings, OPENAI_BASE_URL) and talks to the server through the recording proxy of the tests
(`tests/realmodel/proxy.py`), which reads each request's usage and time, and notes a request sent without an output
limit (it then caps it at 256 tokens, so an endless answer costs minutes, not the context).

- Digests: `research.pipeline.run_pipeline` with the process's models built by `app.wiring.language_models` and one
  local source answering every query with the same N generated items (N distinct stories' reports, in window). A
  request belongs to the stage (plan, collect, expand, novelty, critique, digest, export) the pipeline had last
  announced when it was sent.
- Chat: `lookout chat` (the CLI, in this process) once per turn on one data directory, so memory carries over.

Run: uv run python bench/real_model.py [--url http://127.0.0.1:PORT/v1] [--sizes 20,100,200] [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from app.cli import cli
from app.settings import Settings
from app.wiring import language_models
from research.collect import ProgressEvent
from research.pipeline import STAGES, run_pipeline
from research.pipeline_models import PipelineRequest
from sources.base import Item
from tests.realmodel.proxy import Exchange, ModelProxy, running_proxy
from tests.research.fake_sources import BASE_TIME, RecordingSource, make_item

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "DeepSeek"
SUBJECTS = ("DeepSeek", "DeepSeek R1", "DeepSeek V3", "DeepSeek API", "DeepSeek app")
EVENTS = (
    ("releases distilled models", "open weights in six sizes, from 1.5 to 70 billion parameters"),
    ("cuts API prices", "input tokens now cost a quarter of what they did in January"),
    ("tops the reasoning leaderboard", "first place on the math and code tables of the public board"),
    ("trains on Ascend chips", "a cluster of domestic accelerators ran the last training stage"),
    ("publishes its reinforcement learning paper", "a technical report describing the GRPO recipe"),
    ("faces an outage", "the chat service was down for three hours on Tuesday"),
    ("is probed by regulators", "data protection authorities asked where user data is stored"),
    ("opens an office in Singapore", "a hundred engineers will work on the company's first office abroad"),
)
OUTLETS = ("Reuters", "The Verge", "TechCrunch", "Bloomberg", "SCMP", "Wired", "CNBC", "Ars Technica")
CHAT_TURNS = (
    "Hello! My name is Ada and I follow open-source AI models.",
    "Which topics could you keep an eye on for me?",
    "What happened with DeepSeek this week?",
    "Are their models free to use?",
    "How would a daily digest about them look?",
    "Could it also cover Mistral?",
    "What sources do you search?",
    "Which of them need a key?",
    "Summarise what we talked about.",
    "What is my name?",
)


def generated_items(count: int) -> list[Item]:
    """`count` reports of distinct events (subject × event), each told by a few outlets, all in the window."""
    items: list[Item] = []
    stories = [(s, e) for e in EVENTS for s in SUBJECTS]
    for index in range(count):
        subject, (event, detail) = stories[index % len(stories)]
        outlet = OUTLETS[(index // len(stories)) % len(OUTLETS)]
        items.append(
            make_item(
                "news",
                f"n{index}",
                title=f"{subject} {event} ({outlet})",
                text=f"{outlet} reports that {subject} {event}: {detail}.",
                url=f"https://{outlet.lower().replace(' ', '')}.example/{index}",
                hours_ago=1 + index % 20,
            )
        )
    return items


@dataclass
class Row:
    label: str
    stage: str
    requests: int
    prompt_tokens: int
    output_tokens: int
    model_seconds: float
    wall_seconds: float
    unlimited: int
    max_prompt: int


@dataclass(frozen=True)
class Speeds:
    """The server's own speeds just measured, in tokens per second: the floor of any request is its prompt tokens
    at `prompt` plus its output tokens at `output`."""

    prompt: float
    output: float

    def floor(self, prompt_tokens: int, output_tokens: int) -> float:
        return prompt_tokens / self.prompt + output_tokens / self.output


CALIBRATION_WORDS = 600
"""Words of the prompt-speed probe: long enough that the request's fixed costs are small beside the reading."""


def _timed_completion(url: str, model: str, content: str, max_tokens: int) -> tuple[dict[str, Any], float]:
    body = json.dumps(
        {
            "model": model,
            "max_tokens": max_tokens,
            "temperature": 0,
            "messages": [{"role": "user", "content": content}],
        }
    ).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=600) as answer:
        payload: dict[str, Any] = json.loads(answer.read())
    return payload["usage"], time.monotonic() - started


def measure_speeds(url: str, model: str) -> Speeds:
    """The server's prompt speed (a long prompt, one output token) and output speed (a short prompt, free text
    without a response format: what the model writes at its fastest), each a fresh prompt so no cache helps, once
    the server has finished what it was doing."""
    # The server answers one request at a time, and one Lookout gave up on may still be running: wait it out first.
    _timed_completion(url, model, "ok", 1)
    stamp = f"{time.time():.6f}"
    words = " ".join(f"{word}{index % 7}" for index, word in enumerate(["news", "model", "price"] * 200))
    usage, seconds = _timed_completion(url, model, f"{stamp} {words[: CALIBRATION_WORDS * 7]}", 1)
    prompt_speed = usage["prompt_tokens"] / seconds
    counting = f"{stamp} Continue counting to 100: " + ", ".join(str(n) for n in range(1, 11)) + ","
    usage, seconds = _timed_completion(url, model, counting, 96)
    reading = usage["prompt_tokens"] / prompt_speed
    return Speeds(prompt=prompt_speed, output=usage["completion_tokens"] / max(seconds / 2, seconds - reading))


def row(label: str, stage: str, exchanges: Sequence[Exchange], wall: float) -> Row:
    return Row(
        label=label,
        stage=stage,
        requests=len(exchanges),
        prompt_tokens=sum(e.prompt_tokens for e in exchanges),
        output_tokens=sum(e.output_tokens for e in exchanges),
        model_seconds=sum(e.seconds for e in exchanges),
        wall_seconds=wall,
        unlimited=sum(not e.had_output_limit for e in exchanges),
        max_prompt=max((e.prompt_tokens for e in exchanges), default=0),
    )


def print_table(title: str, first: str, rows: Sequence[Row], speeds: Speeds) -> None:
    print(f"\n{title}\n")
    print(
        f"| {first} | stage | requests | prompt tokens | output tokens | model s | stage s | no limit | max prompt "
        "| floor s | × floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        floor = speeds.floor(r.prompt_tokens, r.output_tokens)
        ratio = f"{r.model_seconds / floor:.1f}" if floor > 0 else "–"
        print(
            f"| {r.label} | {r.stage} | {r.requests} | {r.prompt_tokens} | {r.output_tokens} | "
            f"{r.model_seconds:.1f} | {r.wall_seconds:.1f} | {r.unlimited} | {r.max_prompt} | {floor:.1f} | {ratio} |"
        )


def configure(model: str, proxy: ModelProxy, data_dir: Path, mode: str) -> Settings:
    """The environment a self-hoster writes for this server; Settings read from it (no .env)."""
    for name in Settings.model_fields:
        os.environ.pop(name.upper(), None)
    os.environ.update(
        {
            "DATA_DIR": str(data_dir),
            "LLM_MODEL": f"openai-chat:{model}",
            "LLM_HEAVY_MODEL": f"openai-chat:{model}",
            "EMBEDDING_MODEL": "",
            "LLM_OUTPUT_MODE": mode,
            "OPENAI_BASE_URL": proxy.base_url,
            "OPENAI_API_KEY": "sk-local-not-checked",
        }
    )
    return Settings(_env_file=None)


async def digest_rows(size: int, model: str, proxy: ModelProxy, workdir: Path, mode: str) -> list[Row]:
    settings = configure(model, proxy, workdir / f"digest-{size}", mode)
    models = language_models(settings)
    items = generated_items(size)
    source = RecordingSource("news", lambda query: list(items))
    marks: list[tuple[float, str]] = []

    def progress(event: ProgressEvent) -> None:
        if event.kind == "stage":
            marks.append((time.monotonic(), STAGES[event.done]))

    request = PipelineRequest(topic=TOPIC, sources=[source], since=BASE_TIME - timedelta(hours=24), until=BASE_TIME)
    first = len(proxy.exchanges)
    started = time.monotonic()
    result = await run_pipeline(
        request,
        light_model=models.light,
        heavy_model=models.heavy,
        out_dir=workdir / f"digest-{size}",
        stem=f"digest-{size}",
        progress=progress,
        now=lambda: BASE_TIME,
    )
    ended = time.monotonic()
    exchanges = [e for e in proxy.exchanges[first:] if e.is_chat]
    report = result.report
    paths = f"critique {report.critique_path}, digest {report.digest_path}" if report is not None else "no report"
    print(f"{size} items: {len(result.items)} kept, {len(result.digest.cited)} cited; {paths}", file=sys.stderr)
    rows: list[Row] = []
    bounds = [*marks, (ended, "end")]
    for (start, stage), (stop, _) in itertools.pairwise(bounds):
        mine = [e for e in exchanges if start <= e.started < stop]
        if mine or stage in ("plan", "critique", "digest"):
            rows.append(row(str(size), stage, mine, stop - start))
    rows.append(row(str(size), "whole run", exchanges, ended - started))
    return rows


def chat_rows(turns: int, model: str, proxy: ModelProxy, workdir: Path, mode: str) -> list[Row]:
    configure(model, proxy, workdir / "chat", mode)
    os.chdir(workdir)
    runner = CliRunner()
    rows: list[Row] = []
    for number, line in enumerate(CHAT_TURNS[:turns], start=1):
        first = len(proxy.exchanges)
        started = time.monotonic()
        result = runner.invoke(cli, ["chat"], input=f"{line}\n")
        wall = time.monotonic() - started
        if result.exit_code != 0 or "Traceback" in result.output:
            print(f"turn {number} failed:\n{result.output}", file=sys.stderr)
        rows.append(row(str(number), "chat turn", [e for e in proxy.exchanges[first:] if e.is_chat], wall))
    everything = list(rows)
    rows.append(
        Row(
            label="all",
            stage="10-turn chat" if turns == 10 else f"{turns}-turn chat",
            requests=sum(r.requests for r in everything),
            prompt_tokens=sum(r.prompt_tokens for r in everything),
            output_tokens=sum(r.output_tokens for r in everything),
            model_seconds=sum(r.model_seconds for r in everything),
            wall_seconds=sum(r.wall_seconds for r in everything),
            unlimited=sum(r.unlimited for r in everything),
            max_prompt=max((r.max_prompt for r in everything), default=0),
        )
    )
    return rows


def server_url(given: str | None) -> tuple[str, bool]:
    """The server's base URL, and whether this bench started it (and so stops it)."""
    if given:
        return given.rstrip("/"), False
    line = subprocess.run(
        ["bash", str(ROOT / ".ci" / "model_server.sh")], check=True, capture_output=True, text=True
    ).stdout
    match = re.search(r"LOOKOUT_TEST_MODEL_URL=(\S+)", line)
    if match is None:
        raise SystemExit(f".ci/model_server.sh printed no URL: {line!r}")
    return match.group(1), True


def model_id(url: str) -> str:
    with urllib.request.urlopen(f"{url}/models", timeout=10) as answer:
        listing: dict[str, Any] = json.loads(answer.read())
    return str(listing["data"][0]["id"])


def calibrated(url: str, model: str) -> Speeds:
    """The server's speeds right after a table's runs (the machine's load changes them), printed with the load."""
    speeds = measure_speeds(url, model)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"\nserver speeds now: prompt {speeds.prompt:.0f} tokens/s, output {speeds.output:.1f} tokens/s; "
        f"load average {load}; floor s = prompt tokens and output tokens at those speeds"
    )
    return speeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("LOOKOUT_TEST_MODEL_URL"), help="the server's /v1 URL")
    parser.add_argument("--sizes", default="20,100,200", help="digest sizes (items), comma-separated")
    parser.add_argument("--turns", type=int, default=10, help="chat turns (at most 10)")
    parser.add_argument("--dump", type=Path, help="write every exchange (request, answer, status, seconds) here")
    parser.add_argument("--output-mode", default="json_object", help="LLM_OUTPUT_MODE (what the server takes)")
    args = parser.parse_args()
    url, started = server_url(args.url)
    model = model_id(url)
    sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, model {model}")
    print(f"output mode {args.output_mode}; load average {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    try:
        with tempfile.TemporaryDirectory() as tmp, running_proxy(url) as proxy:
            workdir = Path(tmp)
            for size in sizes:  # a table per size, printed as soon as it is measured
                rows = asyncio.run(digest_rows(size, model, proxy, workdir, args.output_mode))
                print_table(
                    f"Digest of {size} items (requests sent while the pipeline was in each stage)",
                    "items",
                    rows,
                    calibrated(url, model),
                )
            if args.turns:
                rows = chat_rows(args.turns, model, proxy, workdir, args.output_mode)
                print_table("Chat (one `lookout chat` per turn, memory kept)", "turn", rows, calibrated(url, model))
            if args.dump:
                exchanges = [
                    {"request": e.request, "status": e.status, "response": e.response, "seconds": e.seconds}
                    for e in proxy.exchanges
                ]
                args.dump.write_text(json.dumps(exchanges, indent=1), encoding="utf-8")
    finally:
        if started:
            subprocess.run(["bash", str(ROOT / ".ci" / "model_server.sh"), "stop"], check=False)


if __name__ == "__main__":
    main()
