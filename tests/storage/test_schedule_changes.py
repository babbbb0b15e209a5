"""Schedule changes across processes: a NOTIFY from one database handle reaches a LISTENing one (PostgreSQL); on
SQLite nothing is pushed and announcing is harmless."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import Database, ScheduleChanges
from tests.backends import sqlite_url


@pytest.mark.postgres
async def test_an_announcement_reaches_a_listener_on_another_connection(postgres_session_url: str) -> None:
    listening_side, announcing_side = Database(postgres_session_url), Database(postgres_session_url)
    heard: list[float] = []
    stop = asyncio.Event()
    changes = ScheduleChanges(listening_side, postgres_session_url)
    assert changes.pushes
    listener = asyncio.create_task(changes.listen(lambda: heard.append(asyncio.get_running_loop().time()), stop))
    try:
        await _until(lambda: len(heard) == 1)  # the call made once listening (a change may have been missed)
        await ScheduleChanges(announcing_side, postgres_session_url).announce()
        await _until(lambda: len(heard) == 2)
    finally:
        stop.set()
        await asyncio.wait_for(listener, timeout=10)
        await listening_side.dispose()
        await announcing_side.dispose()


async def test_sqlite_pushes_nothing_and_announcing_does_no_harm(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "lookout.db")
    database = Database(url)
    changes = ScheduleChanges(database, url)
    try:
        assert not changes.pushes
        await changes.announce()
        await asyncio.wait_for(changes.listen(lambda: None, asyncio.Event()), timeout=1)  # returns at once
    finally:
        await database.dispose()


async def _until(condition: Callable[[], bool], *, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)
