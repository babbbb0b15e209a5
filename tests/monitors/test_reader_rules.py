"""Rules per reader on stored runs: each kind of rule, applied per chat at delivery, recorded on the delivery row;
one subscriber's rules never change another's digest, and the monitor collects once."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, update

from kernel import RetryLater
from monitors.delivery import build_message
from monitors.portability import create_imported, export_monitors, plan_import, read_monitor_file
from monitors.schedule import parse_schedule
from monitors.views import MonitorNotFoundError
from research import ReaderRules, RuleError, RulesDecision
from sources.base import Item, SearchQuery
from storage.models import RunItem
from storage.repositories import DeliveryRepository, ReaderRuleRepository, RunRepository
from tests.monitors.conftest import T0, World
from tests.research.fake_sources import RecordingSource, make_item

STORIES = {
    "chips": ("Nvidia unveils new AI chips for data centres", "https://chips.example.org/nvidia"),
    "chef": ("Celebrity chef opens a robot restaurant", "https://gossip.example.net/chef"),
    "gpt": ("OpenAI ships GPT-5 to every user", "https://news.example.com/gpt5"),
    "cjk": ("华为发布新的中文大模型", "https://tech.example.cn/huawei"),
    "rust": ("Rust 2.0 released with a new borrow checker", "https://blog.example.io/rust"),
}


def _stories(query: SearchQuery) -> list[Item]:
    return [
        make_item("news", key, title=title, text=f"{title}. More about it.", url=url, points=10 * (n + 1))
        for n, (key, (title, url)) in enumerate(STORIES.items())
    ]


@pytest.fixture
def stories_world(world: World) -> World:
    world.sources["news"] = RecordingSource("news", _stories)
    return world


async def _shared_monitor(world: World) -> int:
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "tech", schedule_text="daily at 08:00", sources="news")
    await service.sharing.share(view.id, chat_id=world.chats[0].id)
    await service.sharing.subscribe(world.chats[1].id, view.id)
    return view.id


def _told(text: str) -> list[str]:
    """The stories (keys of `STORIES`) a delivered digest tells, in its order."""
    found = [(text.find(title), key) for key, (title, _url) in STORIES.items() if title in text]
    return [key for _at, key in sorted(found)]


async def _set(world: World, monitor: int, chat: int, rules: ReaderRules) -> None:
    await ReaderRuleRepository(world.database).put(monitor, chat, rules.stored())


ALL = ["rust", "cjk", "gpt", "chef", "chips"]
"""The order the extractive digest tells the stories in (most points first)."""


@pytest.mark.parametrize(
    ("rules", "kept", "rule_words"),
    [
        (ReaderRules(include=("AI",)), ["chips"], "include AI"),
        (ReaderRules(include=("中文",)), ["cjk"], "include 中文"),
        (ReaderRules(exclude=("celebrity",)), ["rust", "cjk", "gpt", "chips"], 'exclude "celebrity"'),
        (ReaderRules(regex=(r"\bGPT-?5\b",)), ["gpt"], r"include /\bGPT-?5\b/"),
        (ReaderRules(exclude_regex=(r"borrow\s+checker",)), ["cjk", "gpt", "chef", "chips"], "exclude-regex"),
        (ReaderRules(allow=("example.org",)), ["chips"], "allow example.org"),
        (ReaderRules(block=("https://www.example.net/",)), ["rust", "cjk", "gpt", "chips"], "block example.net"),
        (ReaderRules(max_stories=2), ["rust", "cjk"], "max 2"),
        (ReaderRules(min_relevance=0.5), ["chips"], "min-relevance 0.5"),
    ],
    ids=["include", "include-cjk", "exclude", "regex", "exclude-regex", "allow", "block", "max", "min-relevance"],
)
async def test_each_kind_of_rule_on_a_stored_run(
    stories_world: World, rules: ReaderRules, kept: list[str], rule_words: str
) -> None:
    world = stories_world
    monitor = await _shared_monitor(world)
    owner, reader = world.chats[0], world.chats[1]
    await _set(world, monitor, reader.id, rules)
    summary = await world.service().runs.run_monitor(monitor, T0)
    assert summary is not None and summary.run_id is not None
    async with world.database.transaction() as session:  # the run's own relevance: only the chips story is high
        await session.execute(update(RunItem).where(RunItem.run_id == summary.run_id).values(relevance=0.1))
        await session.execute(
            update(RunItem)
            .where(RunItem.run_id == summary.run_id, RunItem.item_id == "news:chips")
            .values(relevance=0.9)
        )

    await world.worker().run_once()

    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    assert _told(received[owner.external_id]) == ALL  # the owner set no rules: the whole digest
    filtered = received[reader.external_id]
    assert _told(filtered) == kept
    left = len(ALL) - len(kept)
    assert f"{left} stor{'y' if left == 1 else 'ies'} left out by your filter — /filter {monitor}" in filtered
    sources = filtered[filtered.index("**Sources**") :]
    assert _told(sources) == kept  # the dropped stories' citations are gone from the sources list too
    rows = {row.chat_id: row for row in await DeliveryRepository(world.database).list_for_run(summary.run_id)}
    assert rows[owner.id].left_out is None
    decision = RulesDecision.model_validate(rows[reader.id].left_out)
    assert len(decision.dropped) == left and all(rule_words in d.rule for d in decision.dropped)


async def test_two_subscribers_each_get_their_own_view_of_one_collection(stories_world: World) -> None:
    world = stories_world
    monitor = await _shared_monitor(world)
    owner, reader, other = world.chats
    await world.service().sharing.subscribe(other.id, monitor)
    await _set(world, monitor, reader.id, ReaderRules(exclude=("celebrity",), max_stories=2))
    await _set(world, monitor, other.id, ReaderRules(regex=(r"\bGPT-?5\b",)))

    summary = await world.service().runs.run_monitor(monitor, T0)
    await world.worker().run_once()

    assert summary is not None and summary.run_id is not None and summary.deliveries == 3
    assert len(await RunRepository(world.database).list_for_monitor(monitor)) == 1
    assert len(world.sources["news"].queries) == world.searches() > 0  # one collection for the three chats
    run = await RunRepository(world.database).get(summary.run_id)
    assert run is not None
    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    whole = build_message(run, topic="tech", timezone=owner.timezone).text
    assert received[owner.external_id] == whole  # no rules: exactly the digest as the run stored it
    assert "left out" not in whole
    assert _told(received[reader.external_id]) == ["rust", "cjk"]
    assert "3 stories left out by your filter" in received[reader.external_id]
    assert _told(received[other.external_id]) == ["gpt"]
    assert "4 stories left out by your filter" in received[other.external_id]


async def test_a_runs_items_are_read_once_for_every_chats_rules_and_feedback(stories_world: World) -> None:
    world = stories_world
    monitor = await _shared_monitor(world)
    _owner, reader, other = world.chats
    await world.service().sharing.subscribe(other.id, monitor)
    await _set(world, monitor, reader.id, ReaderRules(exclude=("celebrity",)))
    await _set(world, monitor, other.id, ReaderRules(max_stories=1))
    summary = await world.service().runs.run_monitor(monitor, T0)
    assert summary is not None and summary.deliveries == 3
    reads: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM items JOIN run_items" in statement:
            reads.append(statement)

    event.listen(world.database.engine.sync_engine, "before_cursor_execute", record)
    try:
        report = await world.worker().run_once()
    finally:
        event.remove(world.database.engine.sync_engine, "before_cursor_execute", record)

    assert report.sent == 3
    assert len(reads) == 1  # one read of the run's items serves two chats' rules and three chats' feedback
    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    assert len(_told(received[other.external_id])) == 1
    assert "chef" not in _told(received[reader.external_id])


async def test_a_resend_keeps_the_decision_its_first_part_was_built_with(stories_world: World) -> None:
    world = stories_world
    world.sender.split = True  # text, then the CSV and the chart: three parts
    monitor = await _shared_monitor(world)
    reader = world.chats[1]
    await _set(world, monitor, reader.id, ReaderRules(exclude=("celebrity",)))
    summary = await world.service().runs.run_monitor(monitor, T0)
    assert summary is not None and summary.run_id is not None
    world.sender.fail_part(reader.id, 1, RetryLater("slow down", retry_after=5))

    await world.worker().run_once()
    await _set(world, monitor, reader.id, ReaderRules())  # cleared after the text went out
    world.clock.advance(seconds=60)
    await world.worker().run_once()

    rows = {row.chat_id: row for row in await DeliveryRepository(world.database).list_for_run(summary.run_id)}
    assert rows[reader.id].sent_at is not None and rows[reader.id].attempts == 2
    decision = RulesDecision.model_validate(rows[reader.id].left_out)
    assert [d.title for d in decision.dropped] == [STORIES["chef"][0]]


async def test_export_and_import_keep_the_owner_chats_rules(stories_world: World) -> None:
    world = stories_world
    service = world.service()
    owner, target = world.chats[0], world.chats[2]
    monitor = await _shared_monitor(world)
    rules = ReaderRules(include=("ai", "中文"), regex=(r"\bGPT-?5\b",), block=("example.net",), max_stories=4)
    await service.rules.change(monitor, chat_id=owner.id, kind="include", values=["ai", "中文"])
    await service.rules.change(monitor, chat_id=owner.id, kind="regex", values=[r"\bGPT-?5\b"])
    await service.rules.change(monitor, chat_id=owner.id, kind="block", values=["example.net"])
    await service.rules.change(monitor, chat_id=owner.id, kind="max", values=["4"])
    plain = await service.create_monitor(owner.id, "plain", sources="news")

    exported = await export_monitors(service, owner, now=T0)
    document = json.loads(exported.json)
    plan = await plan_import(service, target, read_monitor_file(exported.json))
    result = await create_imported(service, target.id, plan.entries)

    assert document["monitors"][0]["rules"] == {
        "include": ["ai", "中文"], "regex": [r"\bGPT-?5\b"], "block": ["example.net"], "max_stories": 4
    }  # fmt: skip
    assert "rules" not in document["monitors"][1]  # a monitor without rules exports as before
    assert "your rules: include ai, 中文" in plan.describe()
    (imported, _topic), (imported_plain, _) = result.created
    _view, kept = await service.rules.of(imported, chat_id=target.id)
    assert kept == rules
    assert (await service.rules.of(imported_plain, chat_id=target.id))[1].empty
    assert (await service.rules.of(plain.id, chat_id=owner.id))[1].empty
    # an export made before rules existed still imports
    old = {k: v for k, v in document["monitors"][0].items() if k != "rules"} | {"topic": "old export"}
    old_file = json.dumps({"format": "lookout.monitors", "version": 1, "monitors": [old]}).encode()
    assert (await plan_import(service, target, read_monitor_file(old_file))).entries[0].rules is None


def test_an_imported_hostile_pattern_is_refused_with_its_reason() -> None:
    entry = {"topic": "hostile", "rules": {"regex": [r"(a+)\1"]}}
    file = json.dumps({"format": "lookout.monitors", "version": 1, "monitors": [entry]}).encode()

    plan = read_monitor_file(file)

    assert plan.entries == () and len(plan.refused) == 1
    assert "RE2 refuses the pattern" in plan.refused[0].reason and "back-references" in plan.refused[0].reason


async def test_rules_belong_to_a_chat_that_owns_or_receives_the_monitor(stories_world: World) -> None:
    world = stories_world
    service = world.service()
    monitor = await _shared_monitor(world)
    stranger = world.chats[2]

    with pytest.raises(MonitorNotFoundError):
        await service.rules.change(monitor, chat_id=stranger.id, kind="exclude", values=["x"])
    _view, subscriber_rules = await service.rules.change(monitor, chat_id=world.chats[1].id, kind="max", values=["3"])
    with pytest.raises(RuleError, match="RE2 refuses"):
        await service.rules.change(monitor, chat_id=world.chats[1].id, kind="regex", values=["(?<=x)y"])

    assert subscriber_rules == ReaderRules(max_stories=3)
    assert (await service.rules.of(monitor, chat_id=world.chats[1].id))[1] == ReaderRules(max_stories=3)
    assert (await service.rules.of(monitor, chat_id=world.chats[0].id))[1].empty
    listed = await service.list_monitors(world.chats[1].id, chat=world.chats[1])
    assert [view.rules for view in listed] == ["max 3"]


async def test_a_briefing_section_follows_the_readers_rules_and_the_others_briefing_does_not(
    stories_world: World,
) -> None:
    world = stories_world
    service = world.service()
    monitor = await _shared_monitor(world)
    owner, reader = world.chats[0], world.chats[1]
    for chat in (owner, reader):
        await service.briefings.set_briefing(
            chat.id, parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
        )
    world.clock.advance(minutes=1)
    await _set(world, monitor, reader.id, ReaderRules(exclude=("celebrity",), max_stories=2))

    summary = await service.runs.run_monitor(monitor, T0)
    world.clock.set(datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC))
    queued = await service.briefings.run_due()
    await world.worker().run_once()

    assert summary is not None and summary.deliveries == 0  # both read it in their briefing
    assert sorted(q.chat_id for q in queued) == sorted([owner.id, reader.id])
    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    assert _told(received[owner.external_id]) == ALL and "left out" not in received[owner.external_id]
    assert _told(received[reader.external_id]) == ["rust", "cjk"]
    assert f"3 stories left out by your filter — /filter {monitor}" in received[reader.external_id]


async def test_a_readers_digest_counts_only_the_reports_its_outlet_rules_keep(world: World) -> None:
    """One story told by four reports from three outlets: the owner reads the run's count, a subscriber blocking one
    outlet reads the story counted without it (it was "+3 more reports" for everyone before)."""
    title = "Chip export rules tighten for advanced accelerators"

    def reports(query: SearchQuery) -> list[Item]:
        sites = ["reuters.com", "ft.com", "tabloid.example", "tabloid.example"]
        return [
            make_item("news", f"c{n}", title=title, text=f"{title}. Details {n}.", url=f"https://{site}/chips-{n}",
                      points=40 - n)
            for n, site in enumerate(sites)
        ]  # fmt: skip

    world.sources["news"] = RecordingSource("news", reports)
    monitor = await _shared_monitor(world)
    owner, reader = world.chats[0], world.chats[1]
    await _set(world, monitor, reader.id, ReaderRules(block=("tabloid.example",)))

    await world.service().runs.run_monitor(monitor, T0)
    await world.worker().run_once()

    received = {sent.chat.external_id: sent.text for sent in world.sender.sent}
    assert "(reported by 3 outlets; +3 more reports)" in received[owner.external_id]
    assert "(reported by 2 outlets; +1 more report)" in received[reader.external_id]
    assert "tabloid.example" not in received[reader.external_id]
    # /why counts the reports as each reader got them, and says when that differs from the shared digest and page
    service = world.service()
    owners_why = await service.feedback.why(owner.id, 1)
    readers_why = await service.feedback.why(reader.id, 1)
    assert "4 new reports of it, from ft.com, reuters.com, tabloid.example." in owners_why
    assert "shared digest" not in owners_why
    assert "2 new reports of it, from ft.com, reuters.com reach this chat" in readers_why
    assert (
        "The run has 4 new reports of it, from ft.com, reuters.com, tabloid.example, as the shared digest and its web "
        "page count them: this chat's outlet rules left the others out." in readers_why
    )
