"""Slack's status line (the shared `bots.status.StatusLine` on Slack's surface): posted once, edited in place,
throttled with a trailing flush so it never lags a stage, never repeating itself, never failing the work."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from bots.slack.api import SlackPoster, build_web_client
from bots.slack.sender import SlackStatusMessage
from bots.status import DONE_MARK, WORKING_MARK, StatusLine
from kernel import ProgressUpdate
from tests.fakes.slack import BOT_TOKEN, FakeSlack, running_fake_slack

CHANNEL = "C0STATUS"
INTERVAL = 2.0


class FakeTime:
    """A clock that moves only when told to, and a sleep that wakes when the clock passes its deadline."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        waker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.now + seconds, waker))
        await waker

    async def advance(self, seconds: float) -> None:
        """Move the clock, wake every sleeper that is due, and let what they do finish (calls to the fake)."""
        for _ in range(5):  # tasks just created register their sleep first
            await asyncio.sleep(0)
        self.now += seconds
        for deadline, waker in list(self._sleepers):
            if deadline <= self.now and not waker.done():
                waker.set_result(None)
                self._sleepers.remove((deadline, waker))
        for _ in range(50):  # the flush is an HTTP call to the fake on its own thread
            await asyncio.sleep(0.01)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with running_fake_slack() as fake:
        yield fake


def status_for(slack: FakeSlack, time: FakeTime, *, thread_ts: str | None = None) -> StatusLine:
    surface = SlackStatusMessage(SlackPoster(build_web_client(BOT_TOKEN, api_url=slack.api_url)), CHANNEL, thread_ts)
    return StatusLine(surface, interval=INTERVAL, clock=time, sleep=time.sleep)


def shown(slack: FakeSlack) -> str:
    (message,) = slack.messages_in(CHANNEL)
    return message.edits[-1] if message.edits else message.text


async def test_the_status_never_lags_a_stage_by_more_than_one_interval(slack: FakeSlack) -> None:
    time = FakeTime()
    status = status_for(slack, time)
    stages = ["collecting 3 sources…", "143 items", "52 after dedupe", "critiquing…", "writing the digest…"]

    await status(ProgressUpdate(text=stages[0]))
    assert shown(slack) == f"{WORKING_MARK} _{stages[0]}_"
    for stage in stages[1:]:
        await time.advance(0.3)
        await status(ProgressUpdate(text=stage))  # within the interval: held back…
        await time.advance(INTERVAL)  # …but shown when the interval ends, with no further update needed
        assert shown(slack) == f"{WORKING_MARK} _{stage}_", stage

    # The work then goes quiet for 40 s (a slow source): the last stage is on screen all along.
    await time.advance(40)
    (message,) = slack.messages_in(CHANNEL)
    assert message.edits[-1] == f"{WORKING_MARK} _{stages[-1]}_"
    assert len(message.edits) == len(stages) - 1  # one edit per stage, none repeated


async def test_updates_edit_one_message_at_most_once_per_interval(slack: FakeSlack) -> None:
    time = FakeTime()
    status = status_for(slack, time, thread_ts="1.5")

    await status(ProgressUpdate(text="collecting 6 sources…"))
    await status(ProgressUpdate(text="143 items"))  # within the interval: held back
    await status(ProgressUpdate(text="52 after dedupe"))  # replaces the held line
    await time.advance(0.5)
    assert len(slack.calls_to("chat.update")) == 0
    await time.advance(INTERVAL)  # the trailing flush shows the latest held line, once
    await status(ProgressUpdate(text="writing"))
    await status.close()

    (message,) = slack.messages_in(CHANNEL)
    assert message.thread_ts == "1.5"
    assert message.edits == [f"{WORKING_MARK} _52 after dedupe_", f"{WORKING_MARK} _writing_"]


async def test_the_same_line_is_never_sent_twice_and_done_always_shows(slack: FakeSlack) -> None:
    time = FakeTime()
    status = status_for(slack, time)

    await status(ProgressUpdate(text="working"))
    await time.advance(10)
    await status(ProgressUpdate(text="working"))
    await status(ProgressUpdate(text="finished <ok> & done", done=True))  # inside the interval, shown anyway
    await status.close()

    (message,) = slack.messages_in(CHANNEL)
    assert message.edits == [f"{DONE_MARK} _finished &lt;ok&gt; &amp; done_"]


async def test_a_failed_edit_is_tried_again_not_the_end_of_the_status(slack: FakeSlack) -> None:
    time = FakeTime()
    status = status_for(slack, time)
    await status(ProgressUpdate(text="one"))
    slack.fail("chat.update", "ratelimited", status=429, retry_after=120)
    await time.advance(10)
    await status(ProgressUpdate(text="two"))  # refused (a long rate limit): kept for the next try
    await time.advance(INTERVAL)  # the trailing flush tries it again
    assert shown(slack) == f"{WORKING_MARK} _two_"
    await status(ProgressUpdate(text="done", done=True))
    assert shown(slack) == f"{DONE_MARK} _done_"


async def test_a_channel_it_cannot_post_in_turns_progress_off_quietly(slack: FakeSlack) -> None:
    slack.not_a_member(CHANNEL)
    time = FakeTime()
    status = status_for(slack, time)

    await status(ProgressUpdate(text="working"))
    await time.advance(10)
    await status(ProgressUpdate(text="still working"))
    await status.close()

    assert len(slack.calls_to("chat.postMessage")) == 1  # tried once, then off
    assert status.shown is None
