"""A reader's rules on the Telegram path: /filter through the fake Bot API, then /digest delivers the digest with
the filtered story left out and one line saying so, as Telegram HTML."""

from __future__ import annotations

from pathlib import Path

from storage.repositories import ChatRepository, DeliveryRepository, MonitorRepository, RunRepository
from tests.bots.telegram_world import telegram_world
from tests.fakes.http_server import FakeHTTPServer

ALICE = 4202


async def test_a_filtered_digest_through_the_bot_api(db_url: str, fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    async with telegram_world(db_url=db_url, sources=fake_server, out_dir=tmp_path) as world:
        world.fake.push_text(ALICE, "/track DeepSeek daily at 08:30 from hn")
        await world.replies(ALICE, 1)
        chat = await ChatRepository(world.database).find("telegram", str(ALICE))
        assert chat is not None
        [monitor] = await MonitorRepository(world.database).list_for_chat(chat.id)
        world.fake.push_text(ALICE, f"/filter {monitor.id} block deepseek.com")
        world.fake.push_text(ALICE, f'/filter {monitor.id} exclude "tokenization"')
        _created, blocked, excluded = await world.replies(ALICE, 3)
        world.fake.push_text(ALICE, f"/digest {monitor.id}")
        await world.replies(ALICE, 1, kind="document")

    assert blocked.text is not None and "• block deepseek.com\n" in blocked.text
    assert excluded.text is not None and "• exclude tokenization\n" in excluded.text
    texts = [m.text or "" for m in world.fake.texts(ALICE)]
    [digest] = [text for text in texts if text.startswith("<b>DeepSeek</b> · ")]
    lines = digest.splitlines()
    assert lines[2] == f"<i>1 story left out by your filter — /filter {monitor.id}</i>"
    assert lines[4] == "<b>DeepSeek-V4: open weights, 1M context</b>"  # no longer "— and 1 more story"
    assert "Ask HN" not in digest and "tokenization" not in digest  # neither the story nor its source
    assert "api-docs.deepseek.com" not in digest and "news.ycombinator.com/item?id=46012399" in digest
    [run] = await RunRepository(world.database).list_for_monitor(monitor.id)
    [row] = await DeliveryRepository(world.database).list_for_run(run.id)
    assert row.left_out is not None and row.left_out["dropped"][0]["rule"] == 'exclude "tokenization"'
