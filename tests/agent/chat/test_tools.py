"""The chat agent's tools through scripted runs: pages, collections, monitors run now, history, timeline, export."""

from __future__ import annotations

import csv
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic_ai import ModelHTTPError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo

from research.export import STORED_ITEMS_CSV_COLUMNS
from sources import HttpClient
from storage import ChatRecord, Database, ItemRecord, ItemScore, RunOutcome
from storage.repositories import ChatRepository, DeliveryRepository, ItemRepository, RunRepository
from tests.agent.chat_world import ChatWorld, hn_hit, make_world
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.kit import Answer, FakeClock, NameLookups, ScriptedModel, call, say, tool_returns

PAYLOADS = Path(__file__).parents[2] / "sources" / "payloads"


@pytest.fixture
async def world(
    database: Database, clock: FakeClock, fake_server: FakeHTTPServer, chat: ChatRecord, tmp_path: Path
) -> AsyncIterator[ChatWorld]:
    built = await make_world(database, clock, fake_server, chat, tmp_path)
    yield built
    await built.http.aclose()


def last_tool_text(model: ScriptedModel, index: int = 1) -> str:
    return str(tool_returns(model.requests[index])[-1].content)


async def test_read_page_returns_the_article_as_delimited_data(world: ChatWorld) -> None:
    world.server.route("GET", "/article", FakeResponse(body=(PAYLOADS / "page_article.html").read_bytes(),
                                                      content_type="text/html"))  # fmt: skip
    model = ScriptedModel(call("read_page", url=f"{world.server.url}/article"), say("It is about DeepSeek."))

    await world.agent(model.model).reply(world.turn("read this"))

    text = last_tool_text(model)
    assert text.startswith('<untrusted_source_data source="web page ')
    assert "DeepSeek releases open-weight reasoning model" in text
    assert text.rstrip().endswith("</untrusted_source_data>")


async def test_read_page_goes_through_the_ssrf_guard(world: ChatWorld) -> None:
    world.server.route("GET", "/secret", FakeResponse(body="internal secret", content_type="text/plain"))
    guarded = HttpClient(user_agent="lookout-tests", max_retries=0)  # private addresses refused, as in production
    world.http = guarded
    try:
        model = ScriptedModel(call("read_page", url=f"{world.server.url}/secret"), say("Could not read it."))
        await world.agent(model.model).reply(world.turn("read my router page"))
    finally:
        await guarded.aclose()

    text = last_tool_text(model)
    assert text.startswith("Could not read") and "internal secret" not in text
    assert world.server.received("/secret") == []


async def test_collect_runs_the_job_and_attaches_the_csv(world: ChatWorld, clock: FakeClock) -> None:
    hits = [hn_hit(str(n), f"DeepSeek story {n}", created=clock.now - timedelta(hours=n + 1)) for n in range(12)]
    world.serve_hn(hits)

    def planner(messages: list[ModelMessage], info: AgentInfo) -> Answer | None:
        """The collection job's planner (an agent without the chat's tools) shares the model, unscripted."""
        if "search_sources" in {tool.name for tool in info.function_tools}:
            return None
        return ModelHTTPError(status_code=400, model_name="scripted", body="the planner is not scripted")

    model = ScriptedModel(
        call("collect", request="DeepSeek", target=10, sources=["hn"]),
        say("Done, the CSV is attached."),
        aside=planner,
    )

    reply = (await world.agent(model.model).reply(world.turn("collect posts about DeepSeek")))[0]

    assert reply.text == "Done, the CSV is attached."
    [attachment] = reply.attachments
    assert attachment.path.suffix == ".csv" and attachment.path.exists()
    # The chat's one folder, the same as its commands use (#9.23).
    assert attachment.path.parent == world.exports / f"{world.chat.platform}-{world.chat.external_id}"
    with attachment.path.open(encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 and {row["source"] for row in rows} == {"hn"}
    assert "Collected 12 unique items" in last_tool_text(model)
    assert any(update.text.startswith("Collected 12 items") and update.done for update in world.progress)
    remembered = await ItemRepository(world.database).search("DeepSeek story", chat_id=world.chat.id, limit=100)
    assert len(remembered) == 12  # search_history will find what was collected


async def test_run_monitor_now_queues_the_digest_and_history_and_export_see_its_items(
    world: ChatWorld, clock: FakeClock
) -> None:
    hits = [hn_hit(str(n), f"DeepSeek news {n}", created=clock.now - timedelta(hours=n + 1)) for n in range(3)]
    world.serve_hn(hits)
    view = await world.monitors.create_monitor(world.chat.id, "DeepSeek", sources=["hn"])
    model = ScriptedModel(
        call("run_monitor_now", monitor_id=view.id),
        call("search_history", text="DeepSeek news"),
        call("export_items", monitor_id=view.id, days=7),
        say("The digest is on its way and the CSV is attached."),
    )

    reply = (await world.agent(model.model).reply(world.turn("run DeepSeek now and export it")))[0]

    [run] = await RunRepository(world.database).list_for_monitor(view.id)
    deliveries = await DeliveryRepository(world.database).list_for_run(run.id)
    assert [delivery.chat_id for delivery in deliveries] == [world.chat.id]
    assert "digest is on its way" in last_tool_text(model, 1)
    progress = [update.text for update in world.progress]
    assert progress[0] == f"Running monitor #{view.id} “DeepSeek”…" and progress[-1].endswith("finished: ok.")
    history = last_tool_text(model, 2)
    assert "<untrusted_source_data" in history and "DeepSeek news 0" in history
    assert "Exported 3 items" in last_tool_text(model, 3)
    [attachment] = reply.attachments
    with attachment.path.open(encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["title"] for row in rows) == ["DeepSeek news 0", "DeepSeek news 1", "DeepSeek news 2"]
    # The same file /export writes (#10: one layout per kind of file; #9.23: one name scheme, the chat's folder).
    assert list(rows[0]) == list(STORED_ITEMS_CSV_COLUMNS)
    assert attachment.filename == attachment.path.name and attachment.path.name.endswith(f"-m{view.id}-last-7d.csv")
    assert attachment.path.parent == world.exports / f"{world.chat.platform}-{world.chat.external_id}"


async def test_export_of_another_chats_monitor_is_refused(world: ChatWorld, database: Database) -> None:
    other = await ChatRepository(database).get_or_create("telegram", "2002")
    theirs = await world.monitors.create_monitor(other.id, "Theirs", sources=["hn"])
    model = ScriptedModel(call("export_items", monitor_id=theirs.id), say("No such monitor here."))
    reply = (await world.agent(model.model).reply(world.turn("export theirs")))[0]
    assert reply.attachments == ()
    assert "no monitor" in last_tool_text(model).lower()


async def test_timeline_counts_per_day_and_attaches_a_chart(world: ChatWorld, clock: FakeClock) -> None:
    def item(n: int, days_ago: int) -> ItemRecord:
        when = clock.now - timedelta(days=days_ago, hours=1)
        return ItemRecord(id=f"t:{n}", source="hn", url=f"https://example.com/{n}", title=f"Rust release {n}",
                          published=when, collected_at=when)  # fmt: skip

    await store_for_search(world, world.chat, [item(0, 0), item(1, 0), item(2, 2), item(3, 40)])
    other = await ChatRepository(world.database).get_or_create("telegram", "2002")
    await store_for_search(world, other, [item(4, 0)])  # another chat's item is not counted here
    model = ScriptedModel(call("timeline", topic="Rust", days=7), say("Two busy days."))

    reply = (await world.agent(model.model).reply(world.turn("how much Rust lately?")))[0]

    timeline = tool_returns(model.requests[1])[-1].content
    assert timeline.per_day == {"2026-02-27": 1, "2026-03-01": 2}  # the item 40 days ago is outside the window
    assert timeline.total == 3 and timeline.busiest_day == "2026-03-01" and timeline.chart_attached
    [chart] = reply.attachments
    assert chart.kind == "image" and chart.path.read_bytes().startswith(b"\x89PNG")


async def store_for_search(world: ChatWorld, chat: ChatRecord, items: list[ItemRecord]) -> None:
    """Store `items` as collected by a finished one-off search `chat` asked for."""
    run = await RunRepository(world.database).open_search_run(chat_id=chat.id, query="test", now=world.clock())
    await DeliveryRepository(world.database).complete_run(
        run.id,
        outcome=RunOutcome(finished_at=world.clock()),
        items=items,
        scores=[ItemScore(item_id=item.id) for item in items],
        deliver=False,
    )


async def test_search_history_sees_only_what_was_collected_for_this_chat(world: ChatWorld, clock: FakeClock) -> None:
    hits = [hn_hit("a1", "DeepSeek secret of team A", created=clock.now - timedelta(hours=2))]
    world.serve_hn(hits)
    team_a = await ChatRepository(world.database).get_or_create("slack", "T1:CA", title="Team A")
    theirs = await world.monitors.create_monitor(team_a.id, "DeepSeek", sources=["hn"])
    await world.monitors.runs.run_now(theirs.id, team_a.id)  # team A's monitor stores its item
    assert [i.id for i in await ItemRepository(world.database).search("DeepSeek secret")] != []
    when = clock.now - timedelta(hours=1)
    mine = ItemRecord(id="hn:b1", source="hn", url="https://example.com/b1", title="DeepSeek note of team B",
                      published=when, collected_at=when)  # fmt: skip
    await store_for_search(world, world.chat, [mine])
    model = ScriptedModel(
        call("search_history", text="DeepSeek"), call("search_history", text="DeepSeek secret"), say("Here.")
    )

    await world.agent(model.model).reply(world.turn("what did we collect about DeepSeek?"))

    found = last_tool_text(model, 1)
    assert "DeepSeek note of team B" in found and "team A" not in found
    assert last_tool_text(model, 2).startswith("No stored items mention “DeepSeek secret”")


async def test_list_monitors_shows_only_this_chats_monitors(world: ChatWorld, database: Database) -> None:
    other = await ChatRepository(database).get_or_create("telegram", "2002")
    await world.monitors.create_monitor(other.id, "Theirs", sources=["hn"])
    mine = await world.monitors.create_monitor(world.chat.id, "Mine", schedule_text="every 6 hours", sources=["hn"])
    model = ScriptedModel(call("list_monitors"), say("You have one."))
    await world.agent(model.model).reply(world.turn("what do I track?"))
    listed = tool_returns(model.requests[1])[-1].content
    assert [entry.id for entry in listed] == [mine.id]  # type: ignore[union-attr]
    assert listed[0].schedule == "every 6 hours"  # type: ignore[index]


async def test_unknown_source_names_go_back_to_the_model(world: ChatWorld) -> None:
    world.serve_hn([])
    model = ScriptedModel(
        call("search_sources", query="Rust", sources=["myspace"]),
        call("search_sources", query="Rust", sources=["hn"]),
        say("Nothing found."),
    )
    await world.agent(model.model).reply(world.turn("rust news"))
    retried = tool_returns(model.requests[1])[-1]
    assert retried.outcome == "retried" and "myspace" in str(retried.content)
    assert "Nothing matched" in last_tool_text(model, 2)


async def test_a_search_with_the_default_sources_asks_the_local_web_source(world: ChatWorld) -> None:
    # The default sources include "web"; the test world answers it locally (the guard in tests/conftest.py fails
    # any test that looks a real host up), so this search runs every default source without the internet.
    world.serve_hn([])
    model = ScriptedModel(call("search_sources", query="Rust"), say("Nothing found."))
    await world.agent(model.model).reply(world.turn("rust news"))
    assert [request.text for request in world.web_searches] == ["Rust"]


def test_a_non_local_name_lookup_is_refused(no_internet_lookups: NameLookups) -> None:
    assert socket.getaddrinfo("localhost", 80)
    assert socket.getaddrinfo("127.0.0.1", 80)
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("startpage.com", 443)
    assert no_internet_lookups.unexpected() == ["startpage.com"], "the guard fails the test at teardown"
    no_internet_lookups.expected.add("startpage.com")  # this test meant to look it up
