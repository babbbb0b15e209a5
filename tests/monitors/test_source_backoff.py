"""A source that fails run after run (while the others answer) is left out with growing gaps, and its owner is
told once; when it answers again it is asked every run, and a new streak is told again."""

from __future__ import annotations

from datetime import timedelta

from sources.base import SourceError, SourceErrorKind
from storage.repositories import SourceFailureRepository
from tests.monitors.conftest import T0, World
from tests.research.fake_sources import FailingSource, RecordingSource

FEED = "rss:https://www.example.org/blog/feed.xml"


class BrokenFeed(FailingSource):
    """A feed answering 500 every time; named by its spec like a real feed source."""

    def __init__(self) -> None:
        error = SourceError(SourceErrorKind.SERVER, "HTTP 500 from https://www.example.org/…", status=500)
        super().__init__("rss", error)
        self.spec = FEED


async def test_a_source_failing_run_after_run_is_backed_off_and_its_owner_told_once(world: World) -> None:
    feed = BrokenFeed()
    world.sources[FEED] = feed
    service = world.service()
    owner, other = world.chats[0], world.chats[1]
    view = await service.create_monitor(owner.id, "DeepSeek", schedule_text="hourly", sources=["hn", FEED])
    await service.subscribe(other.id, view.id)
    worker = world.worker()

    asked: list[int] = []
    for hour in range(9):
        when = T0 + timedelta(hours=hour)
        world.clock.set(when)
        before = len(feed.queries)
        summary = await service.runs.run_monitor(view.id, when)
        assert summary is not None and summary.status in ("ok", "empty"), summary
        if len(feed.queries) > before:
            asked.append(hour)
        if hour == 3:
            left_out = (await service.list_monitors(owner.id))[0].last_result
        await worker.run_once()

    # asked the first three runs; then left out 1 run, then 2, then 4 (hourly: runs 3, 5-6 and 8-11)
    assert asked == [0, 1, 2, 4, 7]
    notices = [sent for sent in world.sender.sent if sent.text.startswith("⚠️")]
    assert [sent.chat.id for sent in notices] == [owner.id], "the owner, once"
    assert notices[0].text == (
        "⚠️ Monitor #1 “DeepSeek”: this source keeps failing, so I'll ask less often (the other sources are "
        "searched as usual):\n- rss example.org/blog/feed.xml: HTTP 500; failed 3 runs in a row, next try "
        "2026-11-20 17:00 UTC\nIf a source is gone for good, ask me to change the monitor's sources."
    )
    # a run that leaves it out says so (in its digest and /monitors), with when it is tried again
    assert left_out == (
        "nothing new; 1 source failed: rss example.org/blog/feed.xml: left out this run after failing 3 runs in a "
        "row (HTTP 500); next try 2026-11-20 17:00 UTC"
    )

    # it answers again: asked every run, the streak forgotten; failing later is a new streak, told again
    working = RecordingSource("rss")
    working.spec = FEED  # type: ignore[attr-defined]
    world.sources[FEED] = working
    await service.runs.run_monitor(view.id, T0 + timedelta(hours=12))
    assert await SourceFailureRepository(world.database).for_monitor(view.id) == []
    world.sources[FEED] = feed
    for hour in (13, 14, 15):
        await service.runs.run_monitor(view.id, T0 + timedelta(hours=hour))
    await worker.run_once()
    assert working.queries
    told = [sent for sent in world.sender.sent if sent.text.startswith("⚠️")]
    assert len(told) == 2 and "failed 3 runs in a row" in told[1].text
