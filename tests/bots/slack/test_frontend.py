"""The Slack frontend end to end: signed requests over HTTP into the real Bolt app on a real uvicorn server,
the real dispatcher and conversation, replies arriving at the fake Slack Web API."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from pydantic_ai.messages import ModelRequest, TextPart, UserPromptPart

from agent.chat.agent import EXPIRED_MESSAGE
from agent.confirmations import CONFIRM_PREFIX
from agent.context import Services
from app.http_server import build_http_app
from bots.slack.api import SlackPoster
from bots.slack.frontend import ACK_TEXT, EVENTS_PATH, UNSTORED_TEXT, SlackFrontend
from bots.slack.render import reply_messages
from bots.status import DONE_MARK, WORKING_MARK
from kernel import Button
from monitors.delivery import DeliveryWorker
from storage import ChatRecord, Database, MonitorRecord, upgrade_database
from storage.repositories import ChatRepository, FeedbackRepository, MonitorRepository, RunRepository
from tests.bots.slack_world import (
    SIGNING_SECRET,
    T0,
    copy_database,
    migrated_template,
    slack_process,
)
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.slack import (
    BOT_USER_ID,
    FakeSlack,
    PostedMessage,
    SlackSigner,
    action_body,
    command_body,
    event_body,
    running_fake_slack,
)
from tests.kit import NameLookups, ScriptedModel, eventually
from tests.private_postgres import postgres_binaries, private_postgres

MANIFEST = Path(__file__).parents[3] / "slack_app_manifest.yaml"
CHANNEL = "C0RESEARCH"
USER = "U0ANN"
FORM = "application/x-www-form-urlencoded"


def numbered_answers() -> ScriptedModel:
    """A scripted model answering every request with a numbered line ("Answer number 1.", ...)."""
    numbers = itertools.count(1)
    return ScriptedModel(lambda _messages, _info: f"Answer number {next(numbers)}.", repeat_last=True)


def conversation(model: ScriptedModel, index: int) -> list[str]:
    """The user prompts and model texts the `index`-th request carried, oldest first."""
    seen: list[str] = []
    for message in model.requests[index]:
        parts = message.parts
        if isinstance(message, ModelRequest):
            seen.extend(str(p.content) for p in parts if isinstance(p, UserPromptPart))
        else:
            seen.extend(p.content for p in parts if isinstance(p, TextPart))
    return seen


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # signals stay with pytest
        yield


@dataclass
class World:
    slack: FakeSlack
    frontend: SlackFrontend
    database: Database
    model: ScriptedModel
    url: str
    client: httpx.AsyncClient
    signer: SlackSigner = field(default_factory=lambda: SlackSigner(SIGNING_SECRET))
    services: Services | None = None
    """The process's services (its monitors: runs and briefings)."""

    async def post(self, body: bytes, *, content_type: str, extra: dict[str, str] | None = None) -> httpx.Response:
        headers = {**self.signer.headers(body, content_type=content_type), **(extra or {})}
        return await self.client.post(self.url + EVENTS_PATH, content=body, headers=headers)

    async def command(self, name: str, text: str, *, channel: str = CHANNEL) -> httpx.Response:
        body = command_body(name, text, channel=channel, user=USER, response_url=self.slack.response_url())
        return await self.post(body, content_type=FORM)

    async def event(self, event: dict[str, Any], *, event_id: str, retry: int | None = None) -> httpx.Response:
        extra = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"} if retry else None
        return await self.post(event_body(event, event_id=event_id), content_type="application/json", extra=extra)

    async def settled(self) -> None:
        """Wait until every message handed to the frontend has been answered."""
        await eventually(lambda: self.frontend.in_flight == 0)

    def replies(self, channel: str = CHANNEL, *, thread_ts: str | None = None) -> list[PostedMessage]:
        """What the bot posted there, without its progress status messages."""
        return [
            m
            for m in self.slack.messages_in(channel, thread_ts=thread_ts)
            if not m.text.startswith((WORKING_MARK, DONE_MARK))
        ]


@pytest.fixture(scope="session")
def slack_frontend_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("slack-frontend-template"))


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with running_fake_slack() as fake:
        yield fake


@pytest.fixture
async def world(
    slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path, slack_frontend_template: Path
) -> AsyncIterator[World]:
    database = Database(copy_database(slack_frontend_template, tmp_path))
    async with _process_world(database, slack, fake_server, tmp_path) as world:
        yield world
    await database.dispose()


@pytest.fixture
async def world_on_both(
    database: Database, slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path
) -> AsyncIterator[World]:
    """`world` on SQLite and (with TEST_DATABASE_URL) PostgreSQL, where the ids the store hands out are not 1."""
    async with _process_world(database, slack, fake_server, tmp_path) as world:
        yield world


@asynccontextmanager
async def _process_world(
    database: Database, slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path
) -> AsyncIterator[World]:
    model = numbered_answers()
    async with slack_process(
        database, slack_api_url=slack.api_url, sources=fake_server, out_dir=tmp_path, model=model.model
    ) as process:
        frontend = process.frontends.running["slack"]
        assert isinstance(frontend, SlackFrontend)
        async with _serving(slack, frontend, database, model) as world:
            world.services = process.services
            yield world


@asynccontextmanager
async def _serving(
    slack: FakeSlack, frontend: SlackFrontend, database: Database, model: ScriptedModel
) -> AsyncIterator[World]:
    await frontend.start()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = _Server(
        uvicorn.Config(build_http_app(checks={}, routes=frontend.routes()), log_config=None, lifespan="off")
    )
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    await eventually(lambda: server.started)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            yield World(slack, frontend, database, model, f"http://127.0.0.1:{port}", client)
    finally:
        await frontend.stop()
        server.should_exit = True
        await serving
        listener.close()


def mention(text: str, *, ts: str, thread_ts: str | None = None, channel: str = CHANNEL) -> dict[str, Any]:
    event = {"type": "app_mention", "user": USER, "text": f"<@{BOT_USER_ID}> {text}", "ts": ts, "channel": channel}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


# --- slash commands ------------------------------------------------------------------------------------------


async def test_a_slash_command_is_acked_at_once_and_answered_later_in_the_channel(world: World) -> None:
    response = await world.command("/lookout", "track DeepSeek daily at 9 from hn")

    assert response.status_code == 200
    assert response.text == ACK_TEXT
    await eventually(lambda: any("DeepSeek" in m.text for m in world.replies()))
    (created,) = world.replies()
    assert created.thread_ts is None and created.blocks  # Block Kit, in the channel itself

    response = await world.command("/monitors", "")

    assert response.text == ACK_TEXT
    await eventually(lambda: len(world.replies()) == 2)
    assert "DeepSeek" in " ".join(world.replies()[1].section_texts())


@pytest.mark.parametrize(
    "command", [c["command"] for c in yaml.safe_load(MANIFEST.read_text())["features"]["slash_commands"]]
)
async def test_every_command_of_the_manifest_is_registered(world: World, command: str) -> None:
    response = await world.command(command, "")

    assert response.status_code == 200 and response.text == ACK_TEXT
    await eventually(lambda: len(world.replies()) >= 1)  # an answer (usage, list or help), never silence


async def test_an_empty_lookout_command_shows_help(world: World) -> None:
    await world.command("/lookout", "")

    await eventually(lambda: len(world.replies()) == 1)
    shown = " ".join(world.replies()[0].section_texts())
    assert "/track" in shown and "/digest" in shown


async def test_a_channel_the_bot_is_not_in_is_answered_through_response_url(world: World) -> None:
    world.slack.not_a_member("C0ELSEWHERE")

    await world.command("/lookout", "help", channel="C0ELSEWHERE")

    await eventually(lambda: len(world.slack.responses) == 2)
    answer, note = world.slack.responses
    assert answer.payload["response_type"] == "in_channel"
    assert "/track" in json.dumps(answer.payload["blocks"])
    assert note.payload["response_type"] == "ephemeral" and "/invite @Lookout" in note.payload["text"]
    assert world.replies("C0ELSEWHERE") == []


async def test_a_digest_asked_for_where_the_bot_is_no_member_says_it_cannot_arrive(world: World) -> None:
    world.slack.not_a_member("C0ELSEWHERE")
    await world.command("/track", "DeepSeek daily at 9 from hn", channel="C0ELSEWHERE")
    await world.settled()

    await world.command("/digest", "1", channel="C0ELSEWHERE")
    await world.settled()
    report = await DeliveryWorker(world.database, {"slack": world.frontend.sender()}).run_once()

    assert report.sent == 0  # Slack refuses the digest in a channel the bot is not in
    texts = [response.payload["text"] for response in world.slack.responses]
    assert any("the digest follows" in text for text in texts)
    told = [
        r for r in world.slack.responses if "digests" in r.payload["text"] and "/invite @Lookout" in r.payload["text"]
    ]
    assert len(told) == 2 and all(r.payload["response_type"] == "ephemeral" for r in told)  # once per command


# --- a digest ------------------------------------------------------------------------------------------------


async def test_digest_posts_blocks_and_the_csv_with_progress_in_one_status_message(world: World) -> None:
    await world.command("/track", "DeepSeek daily at 9 from hn")
    await eventually(lambda: len(world.replies()) == 1)

    await world.command("/digest", "1")
    await world.settled()
    sender = world.frontend.sender()
    report = await DeliveryWorker(world.database, {"slack": sender}).run_once()

    assert report.sent == 1
    digest = next(m for m in world.replies() if m.block_types()[:1] == ["header"])
    assert "DeepSeek" in digest.blocks[0]["text"]["text"]  # type: ignore[index]
    assert "DeepSeek-V4: open weights" in " ".join(digest.section_texts())
    (csv,) = [f for f in world.slack.shared_files(CHANNEL) if f.filename.endswith(".csv")]
    assert b"DeepSeek-V4: open weights" in csv.content
    statuses = [m for m in world.slack.messages_in(CHANNEL) if m.text.startswith((WORKING_MARK, DONE_MARK))]
    (status,) = statuses  # progress edits one message instead of posting many
    assert len(status.edits) >= 2 and status.text.startswith(DONE_MARK)
    assert len(set(status.edits)) == len(status.edits)  # an unchanged line is never sent again


async def test_a_reply_with_an_attachment_uploads_it_into_the_channel(world: World) -> None:
    await world.command("/track", "DeepSeek daily at 9 from hn")
    await world.command("/digest", "1")
    await world.settled()
    before = len(world.slack.shared_files(CHANNEL))

    await world.command("/lookout", "export 1")
    await world.settled()

    exports = world.slack.shared_files(CHANNEL)[before:]
    assert [file.filename for file in exports] == ["deepseek-20261120-1300-m1-last-30d.csv"]  # the one name scheme
    assert b"DeepSeek-V4: open weights" in exports[0].content
    assert exports[0].initial_comment is not None and "Monitor #1" in exports[0].initial_comment
    assert any("Monitor #1" in m.text and "items" in m.text for m in world.replies())


# --- mentions and direct messages ----------------------------------------------------------------------------


async def test_a_mention_is_answered_in_its_thread_with_the_thread_remembered(world: World) -> None:
    await world.event(mention("my favourite source is arXiv", ts="100.000100"), event_id="Ev100")
    await eventually(lambda: len(world.replies(thread_ts="100.000100")) == 1)

    await world.event(mention("which source do I like?", ts="100.000200", thread_ts="100.000100"), event_id="Ev101")
    await eventually(lambda: len(world.replies(thread_ts="100.000100")) == 2)

    assert world.replies(thread_ts="100.000100")[0].section_texts() == ["Answer number 1."]
    second = conversation(world.model, 1)
    assert any("my favourite source is arXiv" in text for text in second)
    assert "Answer number 1." in second
    assert not any(BOT_USER_ID in text for text in second)  # the bot's own mention was stripped

    await world.event(mention("a new topic", ts="200.000100"), event_id="Ev200")
    await eventually(lambda: len(world.replies(thread_ts="200.000100")) == 1)
    assert not any("arXiv" in text for text in conversation(world.model, 2))  # another thread, another memory


async def test_a_direct_message_is_answered_in_the_dm(world: World) -> None:
    event = {"type": "message", "channel_type": "im", "channel": "D0ANN", "user": USER, "text": "hello", "ts": "7.1"}

    await world.event(event, event_id="EvDM")

    await eventually(lambda: len(world.replies("D0ANN")) == 1)
    assert world.replies("D0ANN")[0].thread_ts is None


async def test_a_retried_event_is_handled_once(world: World) -> None:
    event = mention("hello once", ts="300.000100")

    first = await world.event(event, event_id="EvRetry")
    again = await world.event(event, event_id="EvRetry", retry=1)
    await eventually(lambda: len(world.replies(thread_ts="300.000100")) >= 1)
    await world.settled()

    assert (first.status_code, again.status_code) == (200, 200)
    assert len(world.replies(thread_ts="300.000100")) == 1
    assert len(world.model.requests) == 1


async def test_a_ratelimited_reply_is_posted_after_retry_after(world: World) -> None:
    world.slack.fail("chat.postMessage", "ratelimited", retry_after=1, times=1)

    await world.event(mention("hello", ts="400.000100"), event_id="EvLimited")
    await eventually(lambda: len(world.replies(thread_ts="400.000100")) == 1)

    assert ("chat.postMessage", "ratelimited") in world.slack.rejected
    (reply,) = world.replies(thread_ts="400.000100")
    assert reply.text == "Answer number 1."  # the answer itself, not an error notice after a failed post


async def test_a_button_press_reaches_the_conversation_and_takes_the_buttons_off(world: World) -> None:
    yes = Button(label="Yes", callback_data=f"{CONFIRM_PREFIX}0000")
    question = reply_messages("Create monitor **DeepSeek**?", buttons=(yes,))
    poster = SlackPoster(world.frontend.client)
    asked_ts = await poster.post(CHANNEL, question[0], thread_ts="500.000100")
    asked_blocks = world.slack.messages[-1].blocks or []
    payload = action_body(
        value=yes.callback_data, label="Yes", channel=CHANNEL, user=USER, message_ts=asked_ts,
        thread_ts="500.000100", response_url=world.slack.response_url(), blocks=asked_blocks,
    )  # fmt: skip

    response = await world.post(payload, content_type=FORM)

    assert response.status_code == 200
    await eventually(lambda: len(world.replies(thread_ts="500.000100")) == 2)
    asked, answer = world.replies(thread_ts="500.000100")
    assert EXPIRED_MESSAGE.split("(")[0].strip() in answer.text  # the conversation read the callback data
    assert asked.block_types() == ["section", "context"]  # the buttons are gone: a choice is made once
    assert asked.blocks is not None and f"<@{USER}> chose *Yes*" in json.dumps(asked.blocks)


async def _tracked(world: World) -> tuple[ChatRecord, MonitorRecord]:
    """The channel's monitor of DeepSeek (the ids as the store handed them out), tracked by a slash command."""
    await world.command("/track", "DeepSeek daily at 9 from hn")
    await eventually(lambda: len(world.replies()) == 1)
    await world.settled()
    chat = await ChatRepository(world.database).find("slack", CHANNEL)
    assert chat is not None
    [monitor] = await MonitorRepository(world.database).list_for_chat(chat.id)
    return chat, monitor


async def test_a_feedback_press_under_a_digest_changes_only_its_own_row_and_is_stored(world_on_both: World) -> None:
    world = world_on_both
    chat, monitor = await _tracked(world)
    await world.command("/digest", str(monitor.id))
    await world.settled()
    await DeliveryWorker(world.database, {"slack": world.frontend.sender()}).run_once()
    digest = next(m for m in world.slack.messages_in(CHANNEL) if "actions" in m.block_types())
    before = [b for b in digest.blocks or [] if b["type"] == "actions"]
    [run] = await RunRepository(world.database).list_for_monitor(monitor.id)
    first_row = before[0]
    payload = action_body(
        value=f"/less 1 run {run.id}", label="👎", channel=CHANNEL, user=USER, message_ts=digest.ts,
        thread_ts=None, response_url=world.slack.response_url(), blocks=digest.blocks,
    )  # fmt: skip
    payload = payload.replace(b"%22b1%22", f"%22{first_row['block_id']}%22".encode())  # the pressed row's id

    response = await world.post(payload, content_type=FORM)
    await eventually(lambda: any("Recorded 👎" in m.text for m in world.slack.messages_in(CHANNEL)))
    await world.settled()
    marks = await FeedbackRepository(world.database).marks(monitor.id, chat.id)

    assert response.status_code == 200
    assert [e["value"] for e in first_row["elements"]][:2] == [f"/more 1 run {run.id}", f"/less 1 run {run.id}"]
    after = [b for b in digest.blocks or [] if b["type"] == "actions"]
    assert [e["text"]["text"] for e in after[0]["elements"]] == ["1. ✓ 👎 recorded", "undo"]
    assert after[1:] == before[1:]
    assert [(m.kind, m.story) for m in marks] == [("less", 1)]


async def test_a_feedback_press_under_a_briefing_changes_its_own_row_and_marks_its_sections_story(
    world_on_both: World,
) -> None:
    world = world_on_both
    chat, monitor = await _tracked(world)
    await world.command("/lookout", "briefing daily at 07:00")
    await eventually(lambda: len(world.replies()) == 2)
    await world.settled()
    assert world.services is not None
    chats = ChatRepository(world.database)
    # the briefing came due at 07:00 and covers the day (the world's clock stands at T0, 13:00)
    await chats.update(chat.id, briefing_next_at=T0 - timedelta(hours=6), briefing_since=T0 - timedelta(days=1))
    await world.services.monitors.runs.run_monitor(monitor.id, T0)
    await world.services.monitors.briefings.run_due()
    await DeliveryWorker(world.database, {"slack": world.frontend.sender()}).run_once()
    briefing = next(m for m in world.slack.messages_in(CHANNEL) if "actions" in m.block_types())
    before = [b for b in briefing.blocks or [] if b["type"] == "actions"]
    first_row = before[0]
    value = first_row["elements"][1]["value"]  # 👎 on story 1 of the monitor's section
    payload = action_body(
        value=value, label="👎", channel=CHANNEL, user=USER, message_ts=briefing.ts,
        thread_ts=None, response_url=world.slack.response_url(), blocks=briefing.blocks,
    )  # fmt: skip
    payload = payload.replace(b"%22b1%22", f"%22{first_row['block_id']}%22".encode())  # the pressed row's id

    response = await world.post(payload, content_type=FORM)
    await eventually(lambda: any("Recorded 👎" in m.text for m in world.slack.messages_in(CHANNEL)))
    await world.settled()
    marks = await FeedbackRepository(world.database).marks(monitor.id, chat.id)

    assert response.status_code == 200
    first = [row["elements"][0]["text"]["text"] for row in before][:1]
    assert first == [f"#{monitor.id}·1 👍"]  # a briefing's, not a digest's
    assert value.startswith("/less 1 run ")
    after = [b for b in briefing.blocks or [] if b["type"] == "actions"]
    assert [e["text"]["text"] for e in after[0]["elements"]] == [f"#{monitor.id}·1 ✓ 👎 recorded", "undo"]
    assert after[1:] == before[1:]
    assert [(m.kind, m.story, m.run_id) for m in marks] == [("less", 1, int(value.rsplit(" ", 1)[1]))]


# --- signatures ----------------------------------------------------------------------------------------------


async def test_bad_and_stale_signatures_are_refused(world: World) -> None:
    body = command_body("/lookout", "help", channel=CHANNEL, user=USER, response_url=world.slack.response_url())
    headers = world.signer.headers(body, content_type=FORM)
    forged = {**headers, "X-Slack-Signature": "v0=" + "0" * 64}
    stale = SlackSigner(SIGNING_SECRET).headers(body, content_type=FORM, timestamp=int(time.time()) - 600)
    other_secret = SlackSigner("not-the-secret").headers(body, content_type=FORM)
    unsigned = {"Content-Type": FORM}

    for refused in (forged, stale, other_secret, unsigned):
        response = await world.client.post(world.url + EVENTS_PATH, content=body, headers=refused)
        assert response.status_code == 401

    await world.settled()
    assert world.slack.messages == [] and world.slack.responses == []
    accepted = await world.client.post(world.url + EVENTS_PATH, content=body, headers=headers)
    assert accepted.status_code == 200  # the same body, rightly signed, goes through


async def test_slack_verifying_the_request_url_gets_its_challenge_back(world: World) -> None:
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps({"token": "unused", "challenge": challenge, "type": "url_verification"})

    response = await world.post(body.encode(), content_type="application/json")

    assert response.status_code == 200
    assert response.json() == {"challenge": challenge}


# --- files shared to import ----------------------------------------------------------------------------------


OPML = Path(__file__).parents[2] / "monitors" / "payloads" / "inoreader.xml"


def file_share(shared: dict[str, Any], *, ts: str) -> dict[str, Any]:
    """A direct message sharing `shared` with the text asking to import it."""
    return {"type": "message", "subtype": "file_share", "channel_type": "im", "channel": "D0ANN", "user": USER,
            "text": "import as design", "ts": ts, "files": [shared]}  # fmt: skip


async def test_a_shared_file_streamed_in_many_chunks_is_read_whole(
    world: World, no_internet_lookups: NameLookups
) -> None:
    # the import checks each feed's host before offering it; here, as on a machine without a network, none resolves
    no_internet_lookups.expected.update({"blog.guyskk.com", "cdc.tencent.com", "www.rologo.com"})
    opml = OPML.read_bytes()
    padded = opml.replace(b"<head>", b"<head>" + b" " * 400_000)  # 400 KB, the feeds at the end: many chunks
    shared = world.slack.host_file("feeds.opml", padded, chunk_size=16_384)

    await world.event(file_share(shared, ts="8.1"), event_id="EvBigImport")
    await eventually(lambda: any("feeds.opml" in m.text for m in world.replies("D0ANN")))

    (offer,) = [m for m in world.replies("D0ANN") if "feeds.opml" in m.text]
    assert offer.text.startswith("From feeds.opml:\n\n*1 monitor to create:*\n• “design”"), offer.text
    assert world.slack.served_bytes[shared["id"]] == len(padded)


async def test_a_shared_file_over_the_limit_is_refused_after_reading_only_the_limit(world: World) -> None:
    # The event claims 600 bytes (a forged or stale size); the file host streams 30 MB.
    huge = b"<opml>" + b" " * 30_000_000
    shared = world.slack.host_file("huge.opml", huge, chunk_size=65_536, reported_size=600)

    await world.event(file_share(shared, ts="8.2"), event_id="EvHugeImport")
    await eventually(lambda: any("huge.opml" in m.text for m in world.replies("D0ANN")))

    (answer,) = [m for m in world.replies("D0ANN") if "huge.opml" in m.text]
    assert "huge.opml is over the 1 MB limit for files" in answer.text, answer.text
    await eventually(lambda: shared["id"] in world.slack.served_bytes)  # the host saw the download end
    assert world.slack.served_bytes[shared["id"]] < 12_000_000  # the limit plus what socket buffers hold


# --- the database away -----------------------------------------------------------------------------------------


async def test_an_event_sent_while_the_database_is_away_is_refused_then_answered_once_when_it_is_back(
    slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # A real PostgreSQL server of the test's own, stopped before the mention arrives. Slack's request and its retry
    # get 503 (not stored within Slack's 3 s: Slack sends it again), the process keeps waiting for the database;
    # once it is back the event is answered, and a later retry finds its stored mark: answered exactly once. A slash
    # command sent meanwhile is acknowledged as always, and its person is told it is not stored yet.
    if postgres_binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    model = numbered_answers()
    thread = "20.0001"
    event = mention("are you there?", ts=thread)
    with private_postgres() as server:
        await upgrade_database(server.url)
        database = Database(server.url)
        try:
            async with slack_process(
                database, slack_api_url=slack.api_url, sources=fake_server, out_dir=tmp_path, model=model.model
            ) as process:
                frontend = process.frontends.running["slack"]
                assert isinstance(frontend, SlackFrontend)
                async with _serving(slack, frontend, database, model) as world:
                    await asyncio.to_thread(server.stop)
                    started = time.monotonic()
                    first = await world.event(event, event_id="EvAway")
                    first_took = time.monotonic() - started
                    retried = await world.event(event, event_id="EvAway", retry=1)
                    command = await world.command("/monitors", "")
                    await eventually(lambda: any(UNSTORED_TEXT in m.text for m in world.replies()))
                    unanswered = world.replies(thread_ts=thread) == []
                    await asyncio.to_thread(server.start)
                    await eventually(lambda: len(world.replies(thread_ts=thread)) == 1)
                    later = await world.event(event, event_id="EvAway", retry=2)
                    await eventually(lambda: len(world.replies()) == 3)  # and the command's answer
                    await world.settled()
                    answers = [m.text for m in world.replies(thread_ts=thread)]
                    told = [m.text for m in world.replies() if m.thread_ts is None]
        finally:
            await database.dispose()
    assert first.status_code == 503 and retried.status_code == 503
    assert first_took < 3  # within Slack's window
    assert command.status_code == 200 and command.text == ACK_TEXT
    assert unanswered
    assert later.status_code == 200
    assert answers == ["Answer number 1."] and len(model.requests) == 1
    assert told[0] == UNSTORED_TEXT and len(told) == 2 and UNSTORED_TEXT not in told[1]


# --- never a mass mention ------------------------------------------------------------------------------------


async def test_a_topic_typed_as_slack_markup_never_pings_the_channel_from_a_files_comment(world: World) -> None:
    await world.command("/track", "&lt;!channel&gt; daily from hn")  # what Slack sends for a typed "<!channel>"
    await world.settled()
    await world.command("/digest", "1")
    await world.settled()

    await world.command("/lookout", "export 1")
    await world.settled()

    (export,) = world.slack.shared_files(CHANNEL)
    assert export.initial_comment is not None and "!channel" in export.initial_comment  # the topic is shown
    assert export.mass_mentions() == []
    assert all(m.mass_mentions() == [] for m in world.slack.messages)


async def test_an_answer_saying_at_here_or_at_channel_notifies_no_one(world: World) -> None:
    world.model.steps[:] = ["Tell @here and @channel (and @everyone) about it; write to support@here.example."]

    await world.event(mention("who should know?", ts="600.000100"), event_id="EvPing")
    await eventually(lambda: len(world.replies(thread_ts="600.000100")) == 1)

    (answer,) = world.replies(thread_ts="600.000100")
    assert "here" in answer.section_texts()[0] and "support@here.example" in answer.section_texts()[0]
    assert answer.mass_mentions() == []


async def test_a_thread_reply_also_sent_to_the_dm_is_answered_in_its_thread(world: World) -> None:
    """Slack sends a thread reply with "Also send to direct message" ticked as a `thread_broadcast` message."""
    event = {
        "type": "message", "subtype": "thread_broadcast", "channel_type": "im", "channel": "D0ANN", "user": USER,
        "text": "and what about arXiv?", "ts": "8.2", "thread_ts": "8.1",
    }  # fmt: skip

    await world.event(event, event_id="EvBroadcast")

    await eventually(lambda: len(world.replies("D0ANN", thread_ts="8.1")) == 1)
    assert "and what about arXiv?" in world.model.user_prompt(0)


async def test_slack_failing_auth_test_on_the_first_request_loses_no_message(world: World) -> None:
    """Bolt's own authorization calls auth.test on the first request; Slack's passing 5xx there must not become
    "reinstall this app" for the person, nor a dropped event."""
    world.slack.fail("auth.test", "internal_error", status=500, times=10)

    event = await world.event(mention("are you there?", ts="700.000100"), event_id="EvAuth")
    command = await world.command("/lookout", "help")

    assert (event.status_code, command.status_code) == (200, 200)
    assert command.text == ACK_TEXT
    await eventually(lambda: len(world.replies(thread_ts="700.000100")) == 1)
    await eventually(lambda: any("/track" in " ".join(m.section_texts()) for m in world.replies()))
    assert not any("reinstall" in m.text for m in world.slack.messages)


async def test_a_mention_with_nothing_else_says_what_lookout_does(world: World) -> None:
    event = {"type": "app_mention", "user": USER, "text": f"<@{BOT_USER_ID}> ", "ts": "800.000100", "channel": CHANNEL}

    await world.event(event, event_id="EvBare")

    await eventually(lambda: len(world.replies(thread_ts="800.000100")) == 1)
    (answer,) = world.replies(thread_ts="800.000100")
    assert "/track" in " ".join(answer.section_texts()) and world.model.calls == 0  # no model needed
