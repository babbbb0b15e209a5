"""The feedback commands typed in a chat (as in the terminal) through `Conversation.respond`: /less, /why, /mute,
/unmute, /unmark on the last digest the chat received; another chat's typing changes nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from aiohttp import web
from openai import AsyncOpenAI
from pydantic_ai import models
from pydantic_ai.embeddings import Embedder
from pydantic_ai.embeddings.openai import OpenAIEmbeddingModel
from pydantic_ai.providers.openai import OpenAIProvider

from agent.messages import IncomingFile
from research import ItemEmbedder
from storage import Database
from storage.repositories import (
    ChatRepository,
    EmbeddingRepository,
    FeedbackRepository,
    MonitorRepository,
    RunRepository,
)
from tests.agent.commands.router_world import CHAT, OTHER_CHAT, RouterWorld, open_world
from tests.backends import database as database  # on SQLite and, with TEST_DATABASE_URL, PostgreSQL
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import FakeOpenAI
from tests.kit import eventually

__all__ = ["database"]


async def track(world: RouterWorld, line: str, *, chat: str = CHAT) -> int:
    """Say `line` (a /track) in `chat`; the new monitor's id, as the store handed it out (not 1 on PostgreSQL, whose
    sequences the tests' databases share)."""
    await world.say(line, chat=chat)
    owner = await world.chat(chat)
    return max(monitor.id for monitor in await MonitorRepository(world.database).list_for_chat(owner.id))


@pytest.fixture
async def world(database: Database, fake_server: FakeHTTPServer, tmp_path: Path) -> AsyncIterator[RouterWorld]:
    async with open_world(database, fake_server, tmp_path) as opened:
        yield opened


async def test_typed_feedback_on_the_last_digest_and_why(world: RouterWorld) -> None:
    before = await world.say("/less 1")
    monitor = await track(world, "/track DeepSeek daily at 08:30 from hn,news")
    await world.say(f"/digest {monitor}")
    [sent] = await world.deliver()
    less = await world.say("/less 1")
    why = await world.say("/why 1")
    dropped = await world.say("/why dropped")
    elsewhere = await world.say("/more 1", chat=OTHER_CHAT)
    mute = await world.say("/mute news.example.com")
    unmute = await world.say("/unmute news.example.com")
    unmark = await world.say("/unmark 1")
    chat = await world.chat()
    marks = await FeedbackRepository(world.database).marks(monitor, chat.id)

    assert "No digest or briefing has reached this chat yet" in before.text
    assert sent.message.buttons[0].callback_data == f"/more 1 run {sent.message.run_id}"  # a telegram chat
    assert less.text.startswith("Recorded 👎 less like this on story 1 ") and "/unmark 1 run" in less.text
    assert "story 1:" in why.text and "new story for this monitor" in why.text and "Scores:" in why.text
    assert "nothing was left out" in dropped.text
    assert "No digest or briefing has reached this chat yet" in elsewhere.text
    assert mute.text.startswith(f"Muted news.example.com on monitor #{monitor}")
    assert unmute.text.startswith("Unmuted news.example.com")
    assert unmark.text.startswith("Removed this chat's mark on story 1")
    assert marks == []


async def test_why_counts_the_reports_a_readers_outlet_rules_left_it(world: RouterWorld) -> None:
    """Story 1 of the recorded news has two reports (handelsblatt, theverge.com): a subscriber blocking theverge.com
    reads it counted as one, in its digest and in /why, which also says the shared digest and page count two."""
    monitor = await track(world, "/track DeepSeek daily at 08:30 from news")
    await world.say(f"/share {monitor}")
    await world.say(f"/subscribe {monitor}", chat=OTHER_CHAT)
    await world.say(f"/filter {monitor} block theverge.com", chat=OTHER_CHAT)
    await world.services.monitors.runs.run_monitor(monitor, world.clock())  # the monitor's run, for both chats
    sent = {one.chat.external_id: one.message.text for one in await world.deliver()}
    why = await world.say("/why 1", chat=OTHER_CHAT)
    owners = await world.say("/why 1")

    assert "(reported by 2 outlets; +1 more report)" in sent[CHAT]
    assert "Nvidia-Aktie" in sent[OTHER_CHAT] and "(reported by 2 outlets" not in sent[OTHER_CHAT]
    assert "1 new report of it, from handelsblatt reach this chat" in why.text
    assert "The run has 2 new reports of it, from handelsblatt, theverge.com, as the shared digest and its web" in (
        why.text
    )
    assert "2 new reports of it, from handelsblatt, theverge.com." in owners.text and "shared" not in owners.text


class HeldEmbeddings(FakeHTTPServer):
    """An OpenAI-compatible embedding server (`FakeOpenAI`'s answers) that, while `holding` is set, accepts every
    embedding request and answers none, as a server that hangs; clearing it answers the held ones 503."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = threading.Event()
        self.held = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.holding.is_set() and request.path.endswith("/embeddings"):
            self.held += 1
            while self.holding.is_set():
                await asyncio.sleep(0.01)
            return web.Response(status=503, text="unavailable")
        return await super()._handle(request)


def openai_embedder(fake: FakeOpenAI, *, cache: EmbeddingRepository | None) -> ItemEmbedder:
    """The real OpenAI client's embeddings against the fake, without retries (a failure is one request)."""
    client = AsyncOpenAI(base_url=fake.base_url, api_key=fake.api_key, max_retries=0)
    model = OpenAIEmbeddingModel("embed", provider=OpenAIProvider(openai_client=client))
    return ItemEmbedder(embedder=Embedder(model), model_name="openai:embed", cache=cache)


async def test_a_press_is_answered_while_the_embedding_server_hangs_and_the_next_run_gives_the_vectors(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """With an embedding model configured, a mark made on a story without a stored vector is given its title's
    vector off the press path: the press is answered and stored while the embedding server holds the request; once
    that request fails, the next run of the monitor gives the vector (and counts its tokens as the chat's)."""
    server = HeldEmbeddings()
    server.start()
    fake = FakeOpenAI(server)
    embedder = openai_embedder(fake, cache=EmbeddingRepository(database))
    try:
        with models.override_allow_model_requests(True):
            async with open_world(database, fake_server, tmp_path, embedder=embedder) as world:
                marks = FeedbackRepository(world.database)
                monitor = await track(world, "/track DeepSeek daily at 08:30 from hn,news")
                await world.say(f"/digest {monitor}")
                await world.deliver()
                chat = await world.chat()
                server.holding.set()

                less = await asyncio.wait_for(world.say("/less 1"), timeout=20)  # before: waited on the server
                [held] = await marks.marks(monitor, chat.id)
                await eventually(lambda: server.held == 1, what="the mark's embedding request")
                server.holding.clear()  # the held request fails
                await world.services.monitors.feedback.vectors_settled()
                [failed] = await marks.marks(monitor, chat.id)
                usage_before = await world.say("/usage")
                await world.say(f"/digest {monitor}")  # the next run
                [given] = await marks.marks(monitor, chat.id)
                usage_after = await world.say("/usage")
    finally:
        server.stop()

    assert less.text.startswith("Recorded 👎 less like this on story 1 ")
    assert held.kind == "less" and held.vector is None
    assert failed.vector is None  # the server failed: the words decide meanwhile
    assert given.vector is not None and given.vector["model"] == "openai:embed@768"
    assert fake.embedding_requests[-1]["input"] == [given.title]
    assert "embeddings" not in usage_before.text and "embeddings" in usage_after.text


async def test_embedding_imported_marks_counts_as_the_importing_chats_usage(
    database: Database, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    """`/import` of a monitor with marks embeds their titles (files hold no vectors): the tokens are the importing
    chat's "embeddings" in /usage, as every other embedding is counted."""
    fake = FakeOpenAI(fake_server)
    embedder = openai_embedder(fake, cache=None)  # no cache: the importer's titles are embedded again
    with models.override_allow_model_requests(True):
        async with open_world(database, fake_server, tmp_path, embedder=embedder, real_chat_agent=True) as world:
            monitor = await track(world, "/track DeepSeek daily at 08:30 from hn,news")
            await world.say(f"/digest {monitor}")
            await world.deliver()
            await world.say("/less 1")
            await world.services.monitors.feedback.vectors_settled()
            (reply,) = (await world.say("/export monitors")).replies
            document = reply.attachments[0].path.read_bytes()
            before = await world.say("/usage", chat=OTHER_CHAT)
            requests_before = len(fake.embedding_requests)
            await world.say(
                "/import",
                chat=OTHER_CHAT,
                file=IncomingFile(filename="monitors.json", size=len(document), content=document),
            )
            created = await world.say("yes", chat=OTHER_CHAT)
            importer = await world.chat(OTHER_CHAT)
            [copy] = await MonitorRepository(world.database).list_for_chat(importer.id)
            [imported] = await FeedbackRepository(world.database).marks(copy.id, importer.id)
            after = await world.say("/usage", chat=OTHER_CHAT)

    assert created.text.startswith("Created 1 monitor")
    assert imported.vector is not None and len(fake.embedding_requests) == requests_before + 1
    assert "Today (2026-11-20, UTC): nothing yet" in before.text
    assert "By kind today: embeddings " in after.text


async def test_a_subscribers_digest_preview_is_its_own_view(world: RouterWorld) -> None:
    """`/digest <id>` by a subscriber of a shared monitor is a preview (the monitor's own runs are left alone), and it
    is that reader's view: its `/filter` leaves the Nvidia story out, `/why 1` explains the preview's story 1, its 👎
    pressed under the preview counts on the monitor and leaves that story out of its next preview; the owner's
    preview is the whole digest."""
    monitor = await track(world, "/track DeepSeek daily at 08:30 from news")
    await world.say(f"/share {monitor}")
    await world.say(f"/subscribe {monitor}", chat=OTHER_CHAT)
    await world.say(f"/filter {monitor} exclude nvidia", chat=OTHER_CHAT)

    await world.say(f"/digest {monitor}", chat=OTHER_CHAT)
    [theirs] = [one.message for one in await world.deliver()]
    why = await world.say("/why 1", chat=OTHER_CHAT)  # typed: story 1 of the last digest it got, the preview
    [down] = [button for button in theirs.buttons if button.callback_data.startswith("/less 1 ")]
    pressed = await world.say(down.label, chat=OTHER_CHAT, callback_data=down.callback_data)
    await world.say(f"/digest {monitor}", chat=OTHER_CHAT)
    [again] = [one.message for one in await world.deliver()]
    await world.say(f"/digest {monitor}")
    [owners] = [one.message for one in await world.deliver()]
    marks = await FeedbackRepository(world.database).marks(monitor, (await world.chat(OTHER_CHAT)).id)

    assert f"_1 story left out by your filter — /filter {monitor}_" in theirs.text
    assert "Nvidia-Aktie" not in theirs.text and "1. DeepSeek unveils V4 model" in theirs.text
    assert "story 1: “DeepSeek unveils V4 model" in why.text
    assert "Recorded 👎 less like this on story 1 “DeepSeek unveils V4 model" in pressed.text
    assert [(mark.kind, mark.monitor_id) for mark in marks] == [("less", monitor)]
    assert "1. DeepSeek unveils V4 model" not in again.text and "Nvidia-Aktie" not in again.text
    assert "_1 story left out by your feedback — /why dropped_" in again.text
    assert "1. Nvidia-Aktie" in owners.text and "2. DeepSeek unveils V4 model" in owners.text
    assert "left out by your" not in owners.text


async def test_typed_feedback_and_presses_on_a_briefings_sections(world: RouterWorld) -> None:
    """A chat reading two monitors in its briefing: before the briefing went out nothing can be marked; then a bare
    `/more 2` asks which monitor, `/less 1 #<hn>` marks story 1 of that monitor's section as shown, `/why 1 #<news>`
    explains a briefing story, a press on a section's row is acknowledged there with its "#<news>·1" label and
    undone; another chat's press changes nothing."""
    await world.say("/briefing daily at 09:00")
    news = await track(world, "/track DeepSeek daily at 08:30 from news")
    hn = await track(world, "/track DeepSeek daily at 08:30 from hn")
    chat = await world.chat()
    # the briefing came due at 09:00 of this day and covers it
    await ChatRepository(world.database).update(
        chat.id, briefing_next_at=world.clock() - timedelta(hours=1), briefing_since=world.clock() - timedelta(days=1)
    )
    for monitor in (news, hn):
        await world.services.monitors.runs.run_monitor(monitor, world.clock())
    [queued] = await world.services.monitors.briefings.run_due()
    stored = await RunRepository(world.database).get(queued.run_id)
    assert stored is not None
    section_run = stored.stats["feedback_sections"][0]["run_id"]
    early = await world.say(f"/less 1 #{hn}")
    early_why = await world.say(f"/why 1 #{hn}")
    early_press = await world.say(f"#{news}·1 👍", callback_data=f"/more 1 run {section_run}")  # queued, not sent yet
    [sent] = await world.deliver()
    buttons = sent.message.buttons
    first = next(b for b in buttons if b.label == f"#{news}·1 👍")
    elsewhere = await world.say(first.label, callback_data=first.callback_data, chat=OTHER_CHAT)
    bare = await world.say("/more 2")
    less = await world.say(f"/less 1 #{hn}")
    why = await world.say(f"/why 1 #{news}")
    pressed = await world.say(first.label, callback_data=first.callback_data)
    undo = await world.say("undo", callback_data=pressed.replies[0].pressed_row[1].callback_data)  # type: ignore[index]
    marks = await FeedbackRepository(world.database).marks(hn, chat.id)
    marks_one = await FeedbackRepository(world.database).marks(news, chat.id)

    assert queued.topics == 2 and sent.message.run_id == queued.run_id
    assert f"No digest or briefing of monitor #{hn} has reached this chat yet, so there is no story to mark." in (
        early.text
    )
    assert f"No digest or briefing of monitor #{hn} has reached this chat yet, so there is no story to explain." in (
        early_why.text
    )
    assert first.callback_data == f"/more 1 run {section_run}"
    assert "never reached this chat" in early_press.text and early_press.replies[0].pressed_row == ()
    assert "never reached this chat" in elsewhere.text and elsewhere.replies[0].pressed_row == ()
    assert await FeedbackRepository(world.database).marks(news, (await world.chat(OTHER_CHAT)).id) == []
    assert (
        f"Your last briefing had stories of 2 monitors (#{news} DeepSeek, #{hn} DeepSeek): say which, e.g. "
        f"/more 2 #{news}."
    ) in bare.text
    assert less.text.startswith("Recorded 👎 less like this on story 1 ") and f"of monitor #{hn}" in less.text
    assert [(m.kind, m.story) for m in marks] == [("less", 1)]
    assert why.text.startswith(f"Briefing section of monitor #{news} (run ") and "story 1: “" in why.text
    assert [b.label for b in pressed.replies[0].pressed_row or ()] == [f"#{news}·1 ✓ 👍 recorded", "undo"]
    assert [b.label for b in undo.replies[0].pressed_row or ()][:1] == [f"#{news}·1 👍"]
    assert marks_one == []  # pressed, then undone
