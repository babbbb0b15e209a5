"""One process leads a duty: with file locks (SQLite) the second one says once that another leads, and takes over
when the first lets go."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from app.leadership import Leadership
from storage.locks import FileLocks


class Duty:
    """Records when the duty started and stopped in this "process"."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.standbys = 0

    async def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")

    def standby(self) -> None:
        self.standbys += 1


def _leadership(path: Path, duty: Duty) -> Leadership:
    return Leadership(
        FileLocks(path), "scheduler", start=duty.start, stop=duty.stop, check_seconds=0.05, standby=duty.standby
    )


async def _until(condition: Callable[[], bool], *, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_the_second_process_stands_by_once_then_takes_over(tmp_path: Path) -> None:
    database = tmp_path / "lookout.db"
    first, second = Duty(), Duty()
    first_stop, second_stop = asyncio.Event(), asyncio.Event()
    leading = _leadership(database, first)
    waiting = _leadership(database, second)
    first_task = asyncio.create_task(leading.run(first_stop))
    await _until(lambda: leading.leading)
    second_task = asyncio.create_task(waiting.run(second_stop))
    await _until(lambda: waiting.led_elsewhere)
    await asyncio.sleep(0.3)  # several tries, one word
    assert (second.events, second.standbys) == ([], 1)

    first_stop.set()
    await first_task
    await _until(lambda: waiting.leading)
    second_stop.set()
    await second_task

    assert first.events == ["start", "stop"] and first.standbys == 0
    assert second.events == ["start", "stop"] and second.standbys == 1
