"""Socket Mode: the frontend connects over a WebSocket to the fake Slack, acknowledges envelopes and answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from bots.slack import SlackSender, build_web_client
from bots.slack.frontend import ACK_TEXT, STORE_PATIENCE_SECONDS, SlackFrontend
from storage import Database, upgrade_database
from tests.bots.slack_world import (
    copy_database,
    migrated_template,
    slack_process,
)
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER_ID,
    FakeSlack,
    command_payload,
    event_payload,
    running_fake_slack,
)
from tests.kit import ScriptedModel, eventually
from tests.private_postgres import postgres_binaries, private_postgres

CHANNEL = "C0SOCKET"


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("Hello from Socket Mode.")])


@pytest.fixture(scope="session")
def slack_socket_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("slack-socket-template"))


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with running_fake_slack() as fake:
        yield fake


@pytest.fixture
async def frontend(
    slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path, slack_socket_template: Path
) -> AsyncIterator[SlackFrontend]:
    database = Database(copy_database(slack_socket_template, tmp_path))
    async with slack_process(
        database,
        slack_api_url=slack.api_url,
        sources=fake_server,
        out_dir=tmp_path,
        model=ScriptedModel(answer, repeat_last=True).model,
        app_token=APP_TOKEN,
    ) as process:
        slack_frontend = process.frontends.running["slack"]
        assert isinstance(slack_frontend, SlackFrontend)
        try:
            yield slack_frontend
        finally:
            await slack_frontend.stop()
    await database.dispose()


async def test_socket_mode_connects_acks_a_command_and_answers_a_mention(
    frontend: SlackFrontend, slack: FakeSlack
) -> None:
    assert frontend.mode == "socket" and frontend.routes() == []  # no public URL is served

    await frontend.start()
    await eventually(lambda: slack.socket_connections == 1)
    await eventually(lambda: bool(slack.calls_to("apps.connections.open")))
    assert slack.calls_to("apps.connections.open")[0].headers["authorization"] == f"Bearer {APP_TOKEN}"
    assert await frontend.healthy()

    command = command_payload("/lookout", "help", channel=CHANNEL, user="U0ANN", response_url=slack.response_url())
    envelope = slack.push_envelope("slash_commands", command)
    await eventually(lambda: envelope in slack.acks)
    assert slack.acks[envelope] == {"text": ACK_TEXT}
    await eventually(lambda: len(slack.messages_in(CHANNEL)) == 1)
    assert "/track" in " ".join(slack.messages_in(CHANNEL)[0].section_texts())

    event = {
        "type": "app_mention",
        "user": "U0ANN",
        "text": f"<@{BOT_USER_ID}> hi",
        "ts": "10.0001",
        "channel": CHANNEL,
    }
    mention = slack.push_envelope("events_api", event_payload(event, event_id="EvSocket"))
    await eventually(lambda: len(slack.messages_in(CHANNEL, thread_ts="10.0001")) == 1)
    assert mention in slack.acks
    assert slack.messages_in(CHANNEL, thread_ts="10.0001")[0].section_texts() == ["Hello from Socket Mode."]

    await frontend.stop()
    await eventually(lambda: slack.socket_connections == 0)


def test_a_frontend_needs_an_app_token_or_a_signing_secret() -> None:
    with pytest.raises(ValueError, match="SLACK_APP_TOKEN"):
        SlackFrontend(SlackSender(build_web_client(BOT_TOKEN, api_url="http://127.0.0.1:9/api/")), dispatcher=_Unused())


class _Unused:
    async def dispatch(self, *args: object, **kwargs: object) -> list[object]:
        raise AssertionError("never called")


async def test_an_envelope_is_acknowledged_only_once_its_event_is_stored(
    slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    # A real PostgreSQL server of the test's own, stopped when the mention arrives: its envelope is not acknowledged
    # (Slack delivers it again), nor is a redelivery while the server is down; once it is back the event is answered
    # once, and the next redelivery is acknowledged (its stored mark makes it a duplicate).
    if postgres_binaries() is None:
        pytest.skip("no PostgreSQL server binaries under /usr/lib/postgresql")
    event = {
        "type": "app_mention",
        "user": "U0ANN",
        "text": f"<@{BOT_USER_ID}> hi",
        "ts": "30.0001",
        "channel": CHANNEL,
    }
    with private_postgres() as server:
        await upgrade_database(server.url)
        database = Database(server.url)
        try:
            async with slack_process(
                database,
                slack_api_url=slack.api_url,
                sources=fake_server,
                out_dir=tmp_path,
                model=ScriptedModel(answer, repeat_last=True).model,
                app_token=APP_TOKEN,
            ) as process:
                frontend = process.frontends.running["slack"]
                assert isinstance(frontend, SlackFrontend)
                await frontend.start()
                try:
                    await eventually(lambda: slack.socket_connections == 1)
                    await asyncio.to_thread(server.stop)
                    first = slack.push_envelope("events_api", event_payload(event, event_id="EvSocketAway"))
                    await asyncio.sleep(STORE_PATIENCE_SECONDS + 0.5)
                    again = slack.push_envelope("events_api", event_payload(event, event_id="EvSocketAway"))
                    await asyncio.sleep(STORE_PATIENCE_SECONDS + 0.5)
                    unacknowledged = first not in slack.acks and again not in slack.acks
                    unanswered = slack.messages_in(CHANNEL) == []
                    await asyncio.to_thread(server.start)
                    await eventually(lambda: len(slack.messages_in(CHANNEL, thread_ts="30.0001")) == 1)
                    later = slack.push_envelope("events_api", event_payload(event, event_id="EvSocketAway"))
                    await eventually(lambda: later in slack.acks)
                    await eventually(lambda: frontend.in_flight == 0)
                finally:
                    await frontend.stop()
        finally:
            await database.dispose()
    assert unacknowledged and unanswered
    assert [m.section_texts() for m in slack.messages_in(CHANNEL)] == [["Hello from Socket Mode."]]
