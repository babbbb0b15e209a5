"""Every chat digest ends with a link to its web page when PUBLIC_URL is set: one page (one token) per run whatever
the number of chats, none without PUBLIC_URL, none on a "nothing new" note."""

from __future__ import annotations

import re
from datetime import timedelta

from monitors import DigestPages
from monitors.delivery import DeliveryWorker
from tests.monitors.conftest import T0, World
from tests.monitors.test_delivery import queue_digest

PUBLIC = "https://lookout.example.org/"
LINK = re.compile(r"\n\[Full digest\]\((https://lookout\.example\.org/digests/([A-Za-z0-9_-]{32}))\)\n$")


def worker(world: World, pages: DigestPages) -> DeliveryWorker:
    return DeliveryWorker(world.database, {"telegram": world.sender}, clock=world.clock, pages=pages)


async def test_each_chats_digest_ends_with_the_same_page_link(world: World) -> None:
    _, _, run_id = await queue_digest(world, chats=3)
    pages = DigestPages(world.database, public_url=PUBLIC)
    report = await worker(world, pages).run_once()
    assert report.sent == 3

    texts = [sent.message.text for sent in world.sender.sent]
    links = [LINK.search(text) for text in texts]
    assert all(links), texts[0][-300:]
    urls = {link.group(1) for link in links if link}
    tokens = {link.group(2) for link in links if link}
    assert len(urls) == len(tokens) == 1
    run = await pages.find(tokens.pop())
    assert run is not None and run.id == run_id
    document = await pages.document(run)  # what a webhook destination sends names the same page
    assert document is not None and document.page_url == urls.pop()


async def test_without_public_url_no_link_and_a_nothing_new_note_has_none(world: World) -> None:
    service, monitor_id, _ = await queue_digest(world)
    assert (await worker(world, DigestPages(world.database)).run_once()).sent == 1
    assert "Full digest" not in world.sender.pop_message().message.text

    world.clock.advance(days=1)
    again = await service.runs.run_monitor(monitor_id, T0 + timedelta(days=1))  # the same stories: nothing new
    assert again is not None and again.status == "empty"
    assert (await worker(world, DigestPages(world.database, public_url=PUBLIC)).run_once()).sent == 1
    note = world.sender.pop_message().message
    assert note.purpose == "notice" and "Full digest" not in note.text
