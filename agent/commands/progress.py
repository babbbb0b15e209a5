"""Turns research's synchronous progress events into one readable status line on a chat's async progress sink."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable
from types import TracebackType

from agent.commands.common import count
from kernel import ProgressSink, ProgressUpdate
from research import STAGES, ProgressEvent

__all__ = ["CollectionProgress", "PipelineProgress", "ProgressRelay", "fit_line", "prefixed"]

logger = logging.getLogger(__name__)

MAX_LINE = 500
"""`ProgressUpdate.text`'s limit."""

_ITEMS = re.compile(r": (\d+) items$")
_COUNT = re.compile(r"\d+")

_PLANNING = "planning the searches…"
_STAGE_LINES: dict[str, Callable[[int | None], str]] = {
    "plan": lambda _number: _PLANNING,
    "collect": lambda number: f"collecting {count(number, 'source')}…" if number else "collecting…",
    "expand": lambda _number: "searching related terms…",
    "novelty": lambda _number: "checking what is new…",
    "critique": lambda number: f"critiquing the top {number}…" if number else "critiquing…",
    "digest": lambda _number: "writing the digest…",
    "export": lambda _number: "saving the CSV and chart…",
}
"""What the status line says while a run is in each of research's `STAGES` (the number the stage's event names:
sources to collect, items to critique)."""

Describe = Callable[[ProgressEvent], str | None]
"""Turns one event into the status line to show now (None: the line does not change)."""


class ProgressRelay:
    """A synchronous `research.collect.ProgressCallback` whose lines reach the chat's async `ProgressSink` in order.

    Research calls the callback between its own awaits and must never wait for a chat platform, so a call only
    queues the line; one task sends the lines, skipping those that were already superseded when the platform was
    slow (the adapter shows only the latest line anyway). Use it as an async context manager: leaving it waits for
    the queued lines, then sends the final `ProgressUpdate(done=True)`.
    """

    def __init__(self, sink: ProgressSink, describe: Describe, *, final_text: str = "done") -> None:
        self._sink = sink
        self._describe = describe
        self.final_text = final_text
        """The last line, sent with `done=True` on leaving; set it to say how the work ended."""
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._last: str | None = None
        self.sent: list[str] = []
        """Every line handed to the sink, in order (the final one included)."""

    async def __aenter__(self) -> ProgressRelay:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._task = asyncio.create_task(self._send_lines(), name="progress-relay")
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._task is not None and kind is not None and not issubclass(kind, Exception):
            self._task.cancel()  # cancelled or shutting down: no more status lines, and no waiting for the sink
            return
        self._queue.put_nowait(None)
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                if kind is None:
                    raise
        if kind is None or issubclass(kind, Exception):
            # The status message must not stay on "collecting…" forever, whatever happened to the work.
            await self._deliver(
                ProgressUpdate(text=fit_line(self.final_text if kind is None else "stopped"), done=True)
            )

    def __call__(self, event: ProgressEvent) -> None:
        """Research's callback: describe the event and queue the line; never blocks, never raises."""
        try:
            line = self._describe(event)
        except Exception:  # a formatting slip must not break the work it reports on
            logger.exception("progress description failed for %r", event.kind)
            return
        if line is not None:
            self.say(line)

    def say(self, line: str) -> None:
        """Queue a status line of the caller's own ("starting…")."""
        fitted = fit_line(line)
        if fitted == self._last:
            return
        self._last = fitted
        if self._loop is None or threading.get_ident() == self._thread:
            self._queue.put_nowait(fitted)
        else:  # called from a worker thread: hand the line to the loop's thread
            self._loop.call_soon_threadsafe(self._queue.put_nowait, fitted)

    async def announce(self, line: str) -> None:
        """Show a line of the caller's own now, before the work starts (waits until the sink has it)."""
        if self._task is None:
            raise RuntimeError("announce() needs the relay entered (async with)")
        self.say(line)
        await self._queue.join()

    async def _send_lines(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                # lines that piled up while the sink was busy are superseded by the newest of them
                lines = [line for line in batch if line is not None]
                if lines:
                    await self._deliver(ProgressUpdate(text=lines[-1]))
            finally:
                for _ in batch:
                    self._queue.task_done()
            if None in batch:
                return

    async def _deliver(self, update: ProgressUpdate) -> None:
        try:
            await self._sink(update)
        except Exception:  # a status line that could not be shown must not fail the work
            logger.warning("could not show a progress line", exc_info=True)
            return
        self.sent.append(update.text)


def prefixed(prefix: str) -> Describe:
    """Each event's own message after `prefix`, with its step counter when it has one ("collecting · … (3/8)")."""

    def describe(event: ProgressEvent) -> str:
        counter = f" ({event.done}/{event.total})" if event.total else ""
        return f"{prefix}{event.message}{counter}"

    return describe


class PipelineProgress:
    """Describes a monitor run or search as it goes: `collecting 6 sources… 143 items… checking what is new…
    critiquing the top 20…` (the line grows stage by stage, so a skipped update loses nothing)."""

    def __init__(self) -> None:
        self._closed: list[str] = []
        self._stage = ""
        self._live = ""
        """What the current stage is doing: `12/18 searches, 143 items`."""
        self._kept = ""
        """What stays of it once the next stage starts: `143 items…`."""
        self._items = 0
        self._base = 0
        """Items found before the current stage began."""

    def __call__(self, event: ProgressEvent) -> str | None:
        if event.kind == "search_done":
            if match := _ITEMS.search(event.message):
                self._items += int(match.group(1))
            counter = f"{event.done}/{event.total} searches, " if event.total else ""
            # the first round shows what it found; a later one (related terms) what it added
            found = self._items - self._base
            found_text = count(found, "item") if self._base == 0 else f"{found:,} more"
            self._live = f"{counter}{found_text}"
            self._kept = f"{found_text}…"
            return self._line()
        if event.kind != "stage":
            return None  # "exporting" repeats the export stage; "finished" is followed by the final line
        number = next((int(word) for word in event.message.split() if word.isdigit()), None)
        stage = STAGES[event.done] if event.total == len(STAGES) and event.done < len(STAGES) else ""
        line = _STAGE_LINES.get(stage)
        self._advance(line(number) if line is not None else event.message.rstrip(".…") + "…")
        return self._line()

    def _advance(self, stage: str) -> None:
        # planning is over as soon as anything else happens; it is not worth a place in the line
        if self._stage and self._stage != _PLANNING:
            self._closed.append(f"{self._stage} {self._kept}".strip())
        self._stage, self._live, self._kept = stage, "", ""
        self._base = self._items

    def _line(self) -> str:
        current = f"{self._stage} {self._live}".strip()
        return _fit_tail(" ".join([*self._closed, current]))


class CollectionProgress:
    """Describes the iterative collection job: `attempt 2 of 10: 5/8 searches · so far 240/500 unique`."""

    def __init__(self) -> None:
        self._attempt = ""
        self._so_far = ""

    def __call__(self, event: ProgressEvent) -> str | None:
        if event.kind == "attempt_started":
            self._attempt = f"attempt {event.done + 1} of {event.total}" if event.total else "next attempt"
            return self._line("searching…")
        if event.kind == "search_done":
            return self._line(f"{event.done}/{event.total} searches…" if event.total else "searching…")
        if event.kind == "attempt_done":
            # "attempt 1: 12 new, 3 duplicate, 120/500 unique" → keep the running total
            numbers = _COUNT.findall(event.message.rsplit(",", 1)[-1])
            self._so_far = f"so far {'/'.join(numbers)} unique" if numbers else event.message
            return self._line("done")
        if event.kind == "exporting":
            return f"{event.message}…"
        return event.message

    def _line(self, state: str) -> str:
        head = f"{self._attempt}: {state}" if self._attempt else state
        return fit_line(f"{head} · {self._so_far}" if self._so_far else head)


def fit_line(line: str) -> str:
    """One line within `ProgressUpdate.text`'s limit (whitespace collapsed, "working…" when empty)."""
    flat = " ".join(line.split()) or "working…"
    return flat if len(flat) <= MAX_LINE else flat[: MAX_LINE - 1] + "…"


def _fit_tail(line: str) -> str:
    """Keep the newest part of a long growing line."""
    flat = " ".join(line.split()) or "working…"
    return flat if len(flat) <= MAX_LINE else "…" + flat[-(MAX_LINE - 1) :]
