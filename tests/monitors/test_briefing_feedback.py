"""Feedback on briefings: a reader who gets its monitors only in a briefing marks, mutes and asks /why on the stories
of a section as numbered there (`#<monitor>` names the section); the next briefing's section follows the marks; a
section read from two runs is numbered once, as shown; nothing can be marked before the briefing went out or from
another chat; the briefing's buttons, one row per story, are capped within one message."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from monitors import FeedbackError
from monitors.feedback import BRIEFING_BUTTON_STORIES, briefing_buttons
from monitors.schedule import parse_schedule
from monitors.service import MonitorService
from storage import FeedbackMarkRecord
from storage.repositories import FeedbackRepository, RunRepository
from tests.backends import database as database  # on SQLite and, with TEST_DATABASE_URL, PostgreSQL
from tests.monitors.conftest import T0, World
from tests.monitors.test_feedback import DAY_ONE, DAY_TWO, Feed, _items
from tests.research.fake_sources import RecordingSource

__all__ = ["database", "feed"]

BRIEFING_AT = datetime(2026, 11, 20, 14, 0, 30, tzinfo=UTC)


@pytest.fixture
def feed(world: World) -> Feed:
    feed = Feed()
    world.sources["news"] = RecordingSource("news", feed.answer)
    return feed


def section(text: str, monitor_id: int) -> list[str]:
    """The numbered stories of monitor `monitor_id`'s section of a briefing, in order (their text, citations cut)."""
    lines = text.split(f"· monitor #{monitor_id}\n", 1)[1].split("\n\n", 1)[0].splitlines()
    found = [re.sub(r"\s*\[\d+\].*$", "", m[2]) for line in lines if (m := re.match(r"^(\d+)\. (.*)$", line))]
    numbers = [int(re.match(r"^(\d+)\.", line)[1]) for line in lines if re.match(r"^\d+\. ", line)]  # type: ignore[index]
    assert numbers == list(range(1, len(found) + 1))
    return found


async def _briefing_reader(world: World, service: MonitorService) -> tuple[int, int, int]:
    """Chat 1 reads two monitors of its own in a daily briefing at 14:00: "news" (the feed) and "hn"."""
    reader = world.chats[1].id
    await service.briefings.set_briefing(
        reader, parse_schedule("daily at 14:00", timezone="UTC", min_interval_seconds=900)
    )
    world.clock.advance(minutes=1)
    news = await service.create_monitor(reader, "news", schedule_text="daily at 08:00", sources="news")
    hn = await service.create_monitor(reader, "DeepSeek", schedule_text="daily at 08:00", sources="hn")
    return reader, news.id, hn.id


async def _briefing(world: World, service: MonitorService, when: datetime) -> tuple[str, int, list]:  # type: ignore[type-arg]
    """Assemble the briefings due at `when`, then deliver: the reader's briefing text, its run and its buttons."""
    world.clock.set(when)
    before = len(world.sender.sent)
    [queued] = await service.briefings.run_due()
    await world.worker().run_once()
    [sent] = [one for one in world.sender.sent[before:] if one.chat.id == queued.chat_id]
    return sent.text, queued.run_id, list(sent.message.buttons)


async def test_a_briefing_only_reader_marks_a_sections_story_and_the_next_briefing_follows(
    world: World, feed: Feed
) -> None:
    service = world.service()
    reader, news, hn = await _briefing_reader(world, service)
    stranger = world.chats[2].id
    for monitor in (news, hn):
        await service.runs.run_monitor(monitor, T0)
    world.clock.set(BRIEFING_AT)
    [queued] = await service.briefings.run_due()
    # queued, not sent yet: there is nothing to mark
    with pytest.raises(FeedbackError, match=f"No digest or briefing of monitor #{news} has reached this chat yet"):
        await service.feedback.mark(reader, "less", 2, monitor_id=news)
    await world.worker().run_once()
    [sent] = [one for one in world.sender.sent if one.chat.id == reader]
    text, buttons = sent.text, sent.message.buttons
    shown = section(text, news)
    press = next(b for b in buttons if b.label == f"#{news}·2 👍")
    anchor = int(press.callback_data.rsplit(" ", 1)[1])

    with pytest.raises(FeedbackError, match=rf"stories of 2 monitors \(#{news} news, #{hn} DeepSeek\): say which"):
        await service.feedback.mark(reader, "less", 2)
    with pytest.raises(FeedbackError, match="never reached this chat"):
        await service.feedback.mark(stranger, "less", 2, run_id=anchor)  # another chat's briefing
    down = await service.feedback.mark(reader, "less", 2, monitor_id=news)
    up = await service.feedback.mark(reader, "more", 1, run_id=anchor)  # what the button sends
    why = await service.feedback.why(reader, 1, monitor_id=news)
    marks = await FeedbackRepository(world.database).marks(news, reader)

    assert len(shown) == 3
    assert [b.callback_data for b in buttons if b.label.startswith(f"#{news}·")] == [
        f"/more {n} run {anchor}" for n in range(1, 4)
    ]
    assert shown[1].startswith(marks[0].title)  # story 2 as the reader saw it
    assert f"on story 2 “{marks[0].title}” of monitor #{news}" in down.text and down.label == f"#{news}·2"
    assert [(m.kind, m.run_id, m.story) for m in marks] == [("less", anchor, 2), ("more", anchor, 1)]
    assert up.label == f"#{news}·1"
    assert why.startswith(f"Briefing section of monitor #{news} (run {anchor}), story 1: “{marks[1].title}")
    assert f"story 1 of run {anchor}'s shared digest" in why or "order is the monitor's own" in why
    assert await FeedbackRepository(world.database).marks(news, stranger) == []
    assert queued.chat_id == reader

    # the next day's briefing: the story like the one marked 👎 (its outlet) is left out of the section
    feed.today = _items(DAY_TWO, -23.0)
    world.clock.set(T0 + timedelta(days=1))
    for monitor in (news, hn):
        await service.runs.run_monitor(monitor, T0 + timedelta(days=1))
    again, _run, _buttons = await _briefing(world, service, BRIEFING_AT + timedelta(days=1))
    counterpart = {day_one[1]: day_two[1] for day_one, day_two in zip(DAY_ONE, DAY_TWO, strict=True)}
    marked_down = next(title for title in counterpart if title.startswith(marks[0].title))
    left = section(again, news)
    dropped = await service.feedback.why(reader, None, monitor_id=news)

    assert len(left) == 2 and not any(counterpart[marked_down] in line for line in left)
    assert f"_1 story left out by your feedback — /why dropped #{news}_" in again
    assert counterpart[marked_down] in dropped and dropped.startswith(f"Briefing section of monitor #{news}")


async def test_a_section_read_from_two_runs_is_numbered_once_as_shown(world: World, feed: Feed) -> None:
    service = world.service()
    reader, news, hn = await _briefing_reader(world, service)
    await FeedbackRepository(world.database).add(  # a muted outlet leaves one story of each run out
        FeedbackMarkRecord(monitor_id=news, chat_id=reader, kind="mute", title="moneydaily.org",
                           outlets=("moneydaily.org",))
    )  # fmt: skip
    await service.runs.run_monitor(news, T0)
    feed.today = _items(DAY_TWO, -1.5)
    await service.runs.run_monitor(news, T0 + timedelta(minutes=30))
    runs = sorted(run.id for run in await RunRepository(world.database).list_for_monitor(news))

    text, _briefing_run, buttons = await _briefing(world, service, BRIEFING_AT)
    shown = section(text, news)
    explained = [await service.feedback.why(reader, n, monitor_id=news) for n in range(1, len(shown) + 1)]
    marked = await service.feedback.mark(reader, "fewer", 4, monitor_id=news)
    [mark] = [m for m in await FeedbackRepository(world.database).marks(news, reader) if m.kind == "fewer"]
    dropped = await service.feedback.why(reader, None, monitor_id=news)

    assert len(runs) == 2 and len(shown) == 4  # both runs' stories, the muted outlet's left out of each
    assert not any("bank" in line or "Bond" in line for line in shown)
    for n, (line, why) in enumerate(zip(shown, explained, strict=True), 1):
        title = re.search(r"story \d+: “([^”]*)”", why)
        assert title is not None and line.startswith(title[1]), (n, line, why)
        assert why.startswith(f"Briefing section of monitor #{news} (runs {runs[1]}, {runs[0]}), story {n}:")
    # stories 1-2 come from the newer run, 3-4 from the older: each names the shared digest it is from
    assert all(f"of run {runs[1]}'s shared digest" in why for why in explained[:2])
    assert all(f"of run {runs[0]}'s shared digest" in why for why in explained[2:])
    assert shown[3].startswith(mark.title) and mark.run_id == runs[1] and mark.story == 4
    assert marked.label == f"#{news}·4"
    assert "2 left out by this chat's feedback" in dropped
    assert [b.label for b in buttons if b.label.startswith(f"#{news}·")] == [f"#{news}·{n} 👍" for n in range(1, 5)]
    assert {b.callback_data.rsplit(" ", 1)[1] for b in buttons if b.label.startswith(f"#{news}·")} == {str(runs[1])}
    assert hn != news


def test_a_briefings_buttons_are_one_row_per_story_and_capped_with_one_line() -> None:
    few, none = briefing_buttons([{"monitor_id": 3, "run_id": 41, "stories": 2}])
    many, capped = briefing_buttons(
        [{"monitor_id": 3, "run_id": 41, "stories": 5}, {"monitor_id": 4, "run_id": 52, "stories": 6}, "junk"]
    )

    assert [b.label for b in few if b.label.startswith("#")] == ["#3·1 👍", "#3·2 👍"] and none == ""
    assert [b.callback_data for b in few[:2]] == ["/more 1 run 41", "/less 1 run 41"]
    assert len({b.row for b in many}) == BRIEFING_BUTTON_STORIES == 8
    assert [b.label for b in many if b.label.startswith("#")][-1] == "#4·3 👍"
    assert capped == "_Buttons for the first 8 of 11 stories; mark the others by typing, e.g. /less 2 #4_"


UNWEIGHABLE = {"chips": 1e308, "nvidia": 1e308}
"""Term weights whose sum overflows the words' model: /import refuses them now (`monitors.portability.TermWeight`), so
they are stored directly here, standing for any mark the model cannot weigh."""


async def test_marks_that_cannot_be_weighed_give_the_section_a_plain_view_with_buttons(
    world: World, feed: Feed
) -> None:
    """A reader whose marks cannot be weighed (a 👎 with out-of-range term weights) gets each section whole,
    in the monitor's order, with a row of buttons per story; a typed mark and /why name the story as it was shown."""
    service = world.service()
    reader, news, hn = await _briefing_reader(world, service)
    await FeedbackRepository(world.database).add(
        FeedbackMarkRecord(monitor_id=news, chat_id=reader, kind="less", title="Nvidia chips", terms=UNWEIGHABLE)
    )
    for monitor in (news, hn):
        await service.runs.run_monitor(monitor, T0)

    text, _briefing_run, buttons = await _briefing(world, service, BRIEFING_AT)
    shown = section(text, news)
    down = await service.feedback.mark(reader, "less", 2, monitor_id=news)
    why = await service.feedback.why(reader, 2, monitor_id=news)
    marks = await FeedbackRepository(world.database).marks(news, reader)

    assert len(shown) == 3 and "left out by your feedback" not in text
    assert [b.label for b in buttons if b.label.startswith(f"#{news}·")] == [f"#{news}·{n} 👍" for n in range(1, 4)]
    assert down.label == f"#{news}·2" and shown[1].startswith(marks[-1].title)
    assert f"story 2: “{marks[-1].title}" in why and "could not be weighed against this digest" in why


async def test_marks_that_cannot_be_weighed_leave_a_digest_whole_with_buttons(world: World, feed: Feed) -> None:
    """The same reader's digest of the monitor is delivered whole, its stories markable, instead of failing."""
    service = world.service()
    reader = world.chats[1].id
    monitor = await service.create_monitor(reader, "news", schedule_text="daily at 08:00", sources="news")
    await FeedbackRepository(world.database).add(
        FeedbackMarkRecord(monitor_id=monitor.id, chat_id=reader, kind="less", title="Nvidia chips", terms=UNWEIGHABLE)
    )
    before = len(world.sender.sent)
    await service.runs.run_monitor(monitor.id, T0)
    await world.worker().run_once()
    [sent] = [one for one in world.sender.sent[before:] if one.chat.id == reader]
    more = await service.feedback.mark(reader, "more", 1)

    assert len(re.findall(r"^\d+\. ", sent.text, re.M)) == 3
    assert [b.callback_data for b in sent.message.buttons][:1] == [f"/more 1 run {more.run_id}"]
    assert more.text.startswith("Recorded 👍 more like this on story 1 ")
