"""Progress in Slack: one status message per piece of work, posted once and edited with chat.update."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from slack_sdk.errors import SlackApiError

from agent import ProgressUpdate
from bots.slack.api import TRANSIENT_ERRORS, SlackPoster, error_code
from bots.slack.render import escape_mrkdwn

logger = logging.getLogger(__name__)

WORKING_MARK = "⏳"
DONE_MARK = "✅"


class SlackStatus:
    """A `ProgressSink` that shows the latest progress line in one message of the channel (or thread).

    The first update posts the message; later ones edit it, at most once per `interval` seconds: an update
    arriving sooner is kept and shown by the next edit or by `finish()`, and a text already shown is never sent
    again. A status that cannot be shown (no access to the channel, Slack down) turns itself off and never
    fails the work it reports on.
    """

    def __init__(
        self,
        poster: SlackPoster,
        channel: str,
        *,
        thread_ts: str | None = None,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._poster = poster
        self._channel = channel
        self._thread_ts = thread_ts
        self._interval = interval
        self._clock = clock
        self._ts: str | None = None
        self._shown: str | None = None
        self._pending: str | None = None
        self._last_edit = float("-inf")
        self._off = False

    @property
    def message_ts(self) -> str | None:
        """The status message's ts once posted."""
        return self._ts

    async def __call__(self, update: ProgressUpdate) -> None:
        mark = DONE_MARK if update.done else WORKING_MARK
        text = f"{mark} _{escape_mrkdwn(update.text)}_"
        if update.done or self._ts is None or self._clock() - self._last_edit >= self._interval:
            await self._show(text)
        else:
            self._pending = text

    async def finish(self) -> None:
        """Show the last update held back by the throttle (called before the replies go out)."""
        if self._pending is not None:
            await self._show(self._pending)

    async def _show(self, text: str) -> None:
        self._pending = None
        if self._off or text == self._shown:
            return
        try:
            if self._ts is None:
                self._ts = await self._poster.post_text(self._channel, text, thread_ts=self._thread_ts)
            else:
                await self._poster.update_text(self._channel, self._ts, text)
        except SlackApiError as error:
            self._off = True
            logger.info("progress in %s is off: Slack said %s", self._channel, error_code(error))
            return
        except TRANSIENT_ERRORS as error:
            self._off = True
            logger.info("progress in %s is off: %s", self._channel, type(error).__name__)
            return
        self._shown = text
        self._last_edit = self._clock()


__all__ = ["DONE_MARK", "WORKING_MARK", "SlackStatus"]
