"""The research commands through `Conversation.respond`: /search, /collect and /export, with real files."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from research.export import STORED_ITEMS_CSV_COLUMNS
from storage import Database
from storage.repositories import ChatRepository, DeliveryRepository, ItemRepository, MonitorRepository, RunRepository
from tests.agent.commands.router_world import OTHER_CHAT, PAYLOADS, RouterWorld, open_world
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.kit import ScriptedModel
from tests.research.test_pipeline import HeavyScript, light_script


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


def read_csv(path: Path) -> list[dict[str, str]]:
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 with BOM, for spreadsheets
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))


# ---- /search -------------------------------------------------------------------------------------------


async def test_search_queues_a_digest_with_files_for_this_chat(world: RouterWorld) -> None:
    other = await world.chat(OTHER_CHAT)

    said = await world.say("/search DeepSeek V4")

    [reply] = said.replies
    assert reply.text.startswith("The search for “DeepSeek V4” ran: ")
    assert reply.text.endswith("new — the digest follows.")
    lines = [update.text for update in said.progress]
    assert lines[0] == "searching for “DeepSeek V4”…"
    assert any(line.startswith("collecting 6 sources…") for line in lines), lines
    assert any("critiquing the top" in line for line in lines), lines
    assert said.progress[-1].done and not any(update.done for update in said.progress[:-1])
    assert world.web.queries and world.server.received("/arxiv/query")
    assert await MonitorRepository(world.database).list_all() == []  # a search creates no monitor

    [sent] = await world.deliver()
    assert sent.chat.external_id == "1001" and sent.chat.id != other.id
    assert sent.text.startswith("**DeepSeek V4**") and "monitor #" not in sent.text
    assert "[1]" in sent.text
    assert [attachment.kind for attachment in sent.message.attachments] == ["document", "image"]
    rows = read_csv(sent.message.attachments[0].path)
    assert {row["source"] for row in rows} >= {"hn", "news", "arxiv", "github", "wikipedia", "web"}
    assert "DeepSeek-V4: open weights, 1M context" in {row["title"] for row in rows}
    assert await world.deliver() == []  # exactly one message, for the asking chat


async def test_search_refusals_say_why_with_the_usage(world: RouterWorld) -> None:
    empty = await world.say("/search")
    too_long = await world.say("/search " + "word " * 50)

    assert empty.text == "Say what to search for.\nUsage: /search <query>"
    assert too_long.text.startswith("I could not search that: That topic is too long")
    assert too_long.text.endswith("characters.\nUsage: /search <query>")  # a full stop before the usage (#9.25)
    assert too_long.progress[-1].done and too_long.progress[-1].text == "stopped"
    assert world.server.requests == [] and world.web.queries == []
    assert await DeliveryRepository(world.database).claim_due(world.clock()) == []


async def test_a_search_whose_sources_all_fail_says_so_and_sends_nothing(world: RouterWorld) -> None:
    for path in ("/hn/search", "/hn/search_by_date", "/news/search", "/arxiv/query", "/github/search/repositories",
                 "/wikipedia/en/w/api.php"):  # fmt: skip
        world.server.route("GET", path, FakeResponse(status=503, body="maintenance"))

    world.web.error = RuntimeError("no web today")

    said = await world.say("/search DeepSeek")

    # every source named, once, with why (none of them dropped as "and N more")
    assert said.text == (
        "The search for “DeepSeek” failed: every source failed. Nothing was sent.\n"
        "- hn: HTTP 503\n- news: HTTP 503\n- arxiv: HTTP 503\n- github: HTTP 503\n- wikipedia: HTTP 503\n"
        "- web: unexpected error, see the log"
    )
    assert await world.deliver() == []
    # ... and nothing was written either (#9.22): no header-only CSV, no JSON, no "No items" chart.
    assert not world.exports_dir.exists() or list(world.exports_dir.rglob("*.*")) == []


# ---- /collect ------------------------------------------------------------------------------------------


async def test_collect_attaches_the_csv_and_metadata(world: RouterWorld) -> None:
    said = await world.say("/collect DeepSeek V4 reactions target 12")

    [reply] = said.replies
    assert reply.text.startswith("Collected ")
    assert " unique items for “DeepSeek V4 reactions” (" in reply.text and "stopped: " in reply.text
    csv_file, metadata = reply.attachments
    assert csv_file.kind == metadata.kind == "document"
    assert csv_file.filename.endswith(".csv") and metadata.filename.endswith(".json")
    chat = await world.chat()
    assert csv_file.path.parent == metadata.path.parent == world.exports_dir / f"{chat.platform}-{chat.external_id}"
    assert csv_file.filename == csv_file.path.name and csv_file.path.stem.endswith("-collect")
    rows = read_csv(csv_file.path)
    report = json.loads(metadata.path.read_text(encoding="utf-8"))
    assert report["request"] == "DeepSeek V4 reactions" and report["target"] == 12
    assert len(rows) == report["total_unique"] >= 12
    assert f"Collected {report['total_unique']} unique items" in reply.text
    assert {row["source"] for row in rows} >= {"hn", "news"}
    assert said.progress[0].text == "collecting up to 12 items about “DeepSeek V4 reactions”…"
    assert any(update.text.startswith("attempt 1 of 10: ") for update in said.progress), said.progress
    assert said.progress[-1].done and said.progress[-1].text == f"done: {report['total_unique']} unique items"
    # the items are Lookout's memory now: this chat's history finds them, another chat's does not
    kept = await ItemRepository(world.database).search("", chat_id=chat.id, limit=1000)
    assert {item.url for item in kept} == {row["url"] for row in rows}
    other = await ChatRepository(world.database).get_or_create("telegram", "elsewhere")
    assert await ItemRepository(world.database).search("", chat_id=other.id) == []
    assert await world.deliver() == []  # stored, not sent


async def test_collect_refusals(world: RouterWorld) -> None:
    empty = await world.say("/collect target 50")
    zero = await world.say("/collect DeepSeek target 0")

    assert empty.text == "Say what to collect.\nUsage: /collect <request> [from <sources>] [target N]"
    assert zero.text.startswith("The target must be a whole number from 1 to 100000")
    assert world.server.requests == []


# ---- /export -------------------------------------------------------------------------------------------


async def test_export_attaches_everything_the_monitor_collected_with_formulas_defused(world: RouterWorld) -> None:
    hn = json.loads((PAYLOADS / "hn_search_by_date.json").read_text(encoding="utf-8"))
    hn["hits"][0]["title"] = '=HYPERLINK("https://evil.example","DeepSeek")'
    for path in ("/hn/search", "/hn/search_by_date"):
        world.server.route("GET", path, FakeResponse.json(hn))
    await world.say("/track DeepSeek daily at 08:30 from hn,news")
    await world.say("/digest 1")

    said = await world.say("/export 1 7")

    [reply] = said.replies
    [attachment] = reply.attachments
    [run] = await RunRepository(world.database).list_for_monitor(1)
    rows = read_csv(attachment.path)
    # One folder per chat and one naming scheme for every file (#9.23): the run's files sit next to the export.
    chat = await world.chat()
    assert attachment.filename == attachment.path.name == "deepseek-20261120-1300-m1-last-7d.csv"
    folder = world.exports_dir / f"{chat.platform}-{chat.external_id}"
    assert attachment.path.parent == folder
    assert sorted(path.name for path in folder.iterdir() if "-m1-r" in path.name) == [
        f"deepseek-20261120-1300-m1-r{run.id}.{suffix}" for suffix in ("csv", "json", "png")
    ]
    assert list(rows[0]) == list(STORED_ITEMS_CSV_COLUMNS)
    stored = await RunRepository(world.database).items_of_run(run.id)
    assert len(rows) == len(stored) > 0
    assert reply.text == f"Monitor #1 “DeepSeek”: {len(rows)} items from the last 7 days ({len(rows)} in digests)."
    titles = {row["title"] for row in rows}
    assert '\'=HYPERLINK("https://evil.example","DeepSeek")' in titles  # a text cell, not a formula
    assert not any(value.startswith(("=", "+", "-", "@")) for row in rows for value in row.values())
    assert {row["source"] for row in rows} == {"hn", "news"}
    assert all(row["in_digest"] in ("yes", "no") and row["url"].startswith("http") for row in rows)
    assert [row["index"] for row in rows] == [str(n) for n in range(1, len(rows) + 1)]


async def test_export_counts_items_in_an_earlier_digest_after_a_later_run_found_nothing_new(
    world: RouterWorld,
) -> None:
    await world.say("/track DeepSeek daily at 08:30 from hn,news")
    await world.say("/digest 1")
    world.clock.advance(hours=2)
    await world.say("/digest 1")  # the same items again: nothing new, so this run's digest uses none of them

    said = await world.say("/export 1 7")

    [reply] = said.replies
    rows = read_csv(reply.attachments[0].path)
    runs = await RunRepository(world.database).list_for_monitor(1)
    assert len(runs) == 2 and len(rows) > 0
    assert reply.text == f"Monitor #1 “DeepSeek”: {len(rows)} items from the last 7 days ({len(rows)} in digests)."
    assert {row["in_digest"] for row in rows} == {"yes"}


async def test_export_of_an_empty_window(world: RouterWorld) -> None:
    await world.say("/track DeepSeek from hn")
    nothing_yet = await world.say("/export 1")
    await world.say("/digest 1")
    world.clock.advance(days=40)

    later = await world.say("/export 1")
    wide = await world.say("/export 1 60d")

    assert nothing_yet.text == "Monitor #1 “DeepSeek” collected nothing in the last 30 days."
    assert later.text == "Monitor #1 “DeepSeek” collected nothing in the last 30 days."
    assert later.replies[0].attachments == ()
    assert wide.text.startswith("Monitor #1 “DeepSeek”: ") and "from the last 60 days" in wide.text
    assert len(wide.replies[0].attachments) == 1


async def test_export_bad_arguments(world: RouterWorld) -> None:
    missing = await world.say("/export")
    bad_days = await world.say("/export 1 forever")

    assert missing.text.endswith("Usage: /export <id> [days] | monitors")
    assert bad_days.text.startswith("The number of days must be a whole number")
    assert bad_days.text.endswith("Usage: /export <id> [days] | monitors")


async def test_search_with_scripted_models_writes_their_digest_and_counts_the_tokens(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    heavy, light = HeavyScript(), light_script()
    instructions: list[str] = []

    def heavy_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        instructions.extend(m.instructions or "" for m in messages if isinstance(m, ModelRequest))
        return heavy(messages, info)

    async with open_world(
        database,
        fake_server,
        tmp_path,
        heavy_model=ScriptedModel(heavy_model, repeat_last=True).model,
        light_model=light.model,
    ) as world:
        await world.say("/profile We build open-weight model tooling")
        said = await world.say("/search DeepSeek")
        [sent] = await world.deliver()
        usage = await world.say("/usage")

    assert said.text.startswith("The search for “DeepSeek” ran: ")
    assert "**DeepSeek R1 leads the open leaderboard" in sent.text  # the heavy model's digest
    assert light.calls and heavy.critique_prompts and heavy.digest_prompts
    assert any("Reader profile: We build open-weight model tooling" in text for text in instructions)
    today = next(line for line in usage.text.splitlines() if line.startswith("Today (2026-11-20, UTC): "))
    assert "nothing yet" not in today and " in 3 requests" in today


async def test_a_spent_budget_makes_search_run_without_the_model(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    heavy, light = HeavyScript(), light_script()
    async with open_world(
        database,
        fake_server,
        tmp_path,
        heavy_model=ScriptedModel(heavy, repeat_last=True).model,
        light_model=light.model,
        chat_daily_tokens=1,
    ) as world:
        first = await world.say("/search DeepSeek")  # spends more than the 1-token budget
        requests_after_first = light.calls + len(heavy.critique_prompts) + len(heavy.digest_prompts)
        second = await world.say("/search DeepSeek")
        sent = await world.deliver()

    assert requests_after_first > 0 and "budget" not in first.text
    assert light.calls + len(heavy.critique_prompts) + len(heavy.digest_prompts) == requests_after_first
    assert second.text.startswith("The search for “DeepSeek” ran: ")
    assert "model budget for this chat is spent" in second.text
    assert len(sent) == 2  # both digests still reach the chat


async def test_collect_counts_the_planning_models_tokens_against_the_chat(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    def planner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(content="I leave the searching to you.")])

    async with open_world(
        database, fake_server, tmp_path, light_model=ScriptedModel(planner, repeat_last=True).model
    ) as world:
        said = await world.say("/collect DeepSeek V4 reactions target 12")
        usage = await world.say("/usage")

    assert said.text.startswith("Collected ")
    today = next(line for line in usage.text.splitlines() if line.startswith("Today (2026-11-20, UTC): "))
    assert "nothing yet" not in today and " in 1 request" in today


async def test_collects_planner_is_retried_then_answered_by_the_heavy_model(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    asked: list[str] = []

    def light(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("light")
        raise ModelHTTPError(status_code=503, model_name="light", body={"error": {"status": "UNAVAILABLE"}})

    def heavy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("heavy")
        return ModelResponse(parts=[TextPart(content="I leave the searching to you.")])

    light_model, heavy_model = (
        ScriptedModel(light, name="light", repeat_last=True).model,
        ScriptedModel(heavy, name="heavy", repeat_last=True).model,
    )
    async with open_world(database, fake_server, tmp_path, light_model=light_model, heavy_model=heavy_model) as world:
        said = await world.say("/collect DeepSeek V4 reactions target 12")
        usage = await world.say("/usage")

    assert said.text.startswith("Collected ")
    assert asked[:4] == ["light", "light", "light", "heavy"]  # the process's resilient model, not the bare one
    assert "By kind today: collections " in usage.text


async def test_collect_from_named_sources_asks_only_those(world: RouterWorld) -> None:
    feed = f"{world.server.url}/feeds/tech.xml"

    said = await world.say(f"/collect DeepSeek from rss:{feed} target 3")

    [reply] = said.replies
    report = json.loads(reply.attachments[1].path.read_text(encoding="utf-8"))
    assert {row["source"] for row in read_csv(reply.attachments[0].path)} == {"rss"}
    assert report["request"] == "DeepSeek", "the sources are not part of the request"
    # only the feed was asked, and only once however many queries the job tried
    assert {request.path for request in world.server.requests} == {"/feeds/tech.xml"}
    assert len(world.server.received("/feeds/tech.xml")) == 1


async def test_collect_stops_when_every_source_fails_and_names_each_once(world: RouterWorld) -> None:
    world.server.route("GET", "/hn/search", FakeResponse(status=503, body="maintenance"))
    world.server.route("GET", "/hn/search_by_date", FakeResponse(status=503, body="maintenance"))
    world.server.route("GET", "/feeds/broken.xml", FakeResponse(body="<html><body>Not a feed</body></html>"))
    feed = f"{world.server.url}/feeds/broken.xml"

    said = await world.say(f"/collect DeepSeek R2 from hn,rss:{feed}")

    [reply] = said.replies
    assert "stopped: every source failed, so there was nothing left to ask" in reply.text
    assert reply.text.endswith(
        f"Sources that failed:\n- hn: HTTP 503\n- rss {feed.removeprefix('http://')}: not a feed"
    )
    hn_asked = len(world.server.received("/hn/search")) + len(world.server.received("/hn/search_by_date"))
    assert hn_asked == 1 and len(world.server.received("/feeds/broken.xml")) == 1
