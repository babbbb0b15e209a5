"""How replies name a monitor: its topic escaped for markdown, so `*` and `_` in a topic show as written, on both
storage backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.telegram.render import markdown_to_telegram_html
from storage import Database
from storage.repositories import MonitorRepository
from tests.agent.commands.router_world import OTHER_CHAT, RouterWorld, open_world
from tests.backends import database as database  # this module runs on SQLite and, with TEST_DATABASE_URL, PostgreSQL
from tests.fakes.http_server import FakeHTTPServer


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


async def test_a_topic_with_markdown_characters_is_named_as_written_in_every_reply(world: RouterWorld) -> None:
    topic = "C++ *and* _Rust_"
    tracked = await world.say(f'/track "{topic}" from hn')
    [monitor] = await MonitorRepository(world.database).list_all()
    n = monitor.id  # the store's id (PostgreSQL's sequences run on across tests)
    shared = await world.say(f"/share {n}")
    paused = await world.say(f"/pause {n}")
    resumed = await world.say(f"/resume {n}")
    ran = await world.say(f"/digest {n}")
    await world.services.monitors.subscribe((await world.chat(OTHER_CHAT)).id, n)
    untracked = await world.say(f"/untrack {n}")
    [told] = [sent for sent in await world.deliver() if sent.chat.external_id == OTHER_CHAT]

    escaped = r"C++ \*and\* \_Rust\_"
    assert tracked.text.startswith(f"Tracking **{escaped}** as monitor #{n}.")
    assert shared.text.startswith(f"**#{n} {escaped}** is shared")
    assert paused.text == f"Monitor #{n} “{escaped}” is paused; `/resume {n}` starts it again."
    assert resumed.text.startswith(f"Monitor #{n} “{escaped}” is running again")
    assert untracked.text.startswith(f"Deleted monitor #{n} “{escaped}”; no more digests from it.")
    assert told.text.startswith(f"Monitor #{n} “{escaped}” was deleted by the chat that owned it")
    for text in (shared.text, paused.text, resumed.text, untracked.text, told.text):  # drawn for Telegram: as written
        html = markdown_to_telegram_html(text)
        assert topic in html and "<i>" not in html, html
    # a status line is plain text on every platform: the topic as written, with no backslashes
    assert ran.progress[0].text == f"running monitor #{n} “{topic}”…"
