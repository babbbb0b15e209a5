"""The Slack status message: posted once, edited in place, throttled, never repeating itself, never failing work."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent.messages import ProgressUpdate
from bots.slack.api import SlackPoster, build_web_client
from bots.slack.status import DONE_MARK, WORKING_MARK, SlackStatus
from tests.fakes.slack import BOT_TOKEN, FakeSlack, running_fake_slack

CHANNEL = "C0STATUS"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with running_fake_slack() as fake:
        yield fake


def status_for(slack: FakeSlack, clock: Clock, *, thread_ts: str | None = None) -> SlackStatus:
    poster = SlackPoster(build_web_client(BOT_TOKEN, api_url=slack.api_url))
    return SlackStatus(poster, CHANNEL, thread_ts=thread_ts, interval=2.0, clock=clock)


async def test_updates_edit_one_message_at_most_once_per_interval(slack: FakeSlack) -> None:
    clock = Clock()
    status = status_for(slack, clock, thread_ts="1.5")

    await status(ProgressUpdate(text="collecting 6 sources…"))
    await status(ProgressUpdate(text="143 items"))  # within the interval: held back
    await status(ProgressUpdate(text="52 after dedupe"))
    assert len(slack.calls_to("chat.update")) == 0
    clock.now += 2.5
    await status(ProgressUpdate(text="critiquing…"))
    await status(ProgressUpdate(text="writing"))  # held back again
    await status.finish()

    (message,) = slack.messages_in(CHANNEL)
    assert message.thread_ts == "1.5" and message.ts == status.message_ts
    assert message.edits == [f"{WORKING_MARK} _critiquing…_", f"{WORKING_MARK} _writing_"]


async def test_the_same_line_is_never_sent_twice_and_done_always_shows(slack: FakeSlack) -> None:
    clock = Clock()
    status = status_for(slack, clock)

    await status(ProgressUpdate(text="working"))
    clock.now += 10
    await status(ProgressUpdate(text="working"))
    await status(ProgressUpdate(text="finished <ok> & done", done=True))  # inside the interval, shown anyway
    await status.finish()

    (message,) = slack.messages_in(CHANNEL)
    assert message.edits == [f"{DONE_MARK} _finished &lt;ok&gt; &amp; done_"]


async def test_a_channel_it_cannot_post_in_turns_progress_off_quietly(slack: FakeSlack) -> None:
    slack.not_a_member(CHANNEL)
    clock = Clock()
    status = status_for(slack, clock)

    await status(ProgressUpdate(text="working"))
    clock.now += 10
    await status(ProgressUpdate(text="still working"))
    await status.finish()

    assert len(slack.calls_to("chat.postMessage")) == 1  # tried once, then off
    assert status.message_ts is None
