"""SlackSender against the fake Slack Web API: digests as Block Kit plus files, and Slack's errors mapped."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bots.slack import build_web_client
from bots.slack.render import BLOCKS_PER_MESSAGE
from bots.slack.sender import SlackSender
from kernel import Attachment, ChatGone, DeliveryError, Reply, RetryLater
from monitors import DeliveryWorker
from storage import ChatRecord, Database, DeliveryStatus
from storage.repositories import ChatRepository, DeliveryRepository
from tests.bots.slack_world import (
    T0,
    copy_database,
    hn_resolver,
    http_client,
    migrated_template,
    monitor_service,
    serve_hacker_news,
)
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.slack import BOT_TOKEN, FakeSlack, running_fake_slack

CHANNEL = "C0DIGESTS"


@pytest.fixture(scope="session")
def slack_sender_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("slack-sender-template"))


@pytest.fixture
async def database(tmp_path: Path, slack_sender_template: Path) -> AsyncIterator[Database]:
    db = Database(copy_database(slack_sender_template, tmp_path))
    yield db
    await db.dispose()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with running_fake_slack() as fake:
        yield fake


@pytest.fixture
async def chat(database: Database) -> ChatRecord:
    return await ChatRepository(database).get_or_create("slack", CHANNEL, title="#research")


def sender_for(slack: FakeSlack, *, max_rate_limit_wait: float = 30.0) -> SlackSender:
    return SlackSender(build_web_client(BOT_TOKEN, api_url=slack.api_url, max_rate_limit_wait=max_rate_limit_wait))


async def send_all(sender: SlackSender, to: ChatRecord, message: Reply) -> None:
    """Every part in order, as the delivery worker sends them."""
    for part in sender.parts(message):
        await sender.send_part(to, part)


async def test_a_scheduled_digest_arrives_as_blocks_then_csv_through_the_worker(
    database: Database, chat: ChatRecord, slack: FakeSlack, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    serve_hacker_news(fake_server)
    client = http_client()
    try:
        service = monitor_service(database, hn_resolver(fake_server, client), tmp_path / "exports")
        view = await service.create_monitor(chat.id, "DeepSeek", sources="hn")
        summary = await service.runs.run_monitor(view.id, T0)
        assert summary is not None and summary.run_id is not None
    finally:
        await client.aclose()

    report = await DeliveryWorker(database, {"slack": sender_for(slack)}, clock=lambda: T0).run_once()

    assert (report.sent, report.retrying, report.dead) == (1, 0, 0)
    (message,) = slack.messages_in(CHANNEL)
    assert message.block_types()[0] == "header"
    assert message.blocks is not None and "DeepSeek" in message.blocks[0]["text"]["text"]
    body = "\n".join(message.section_texts())
    assert "DeepSeek-V4: open weights" in body
    assert "<https://" in body  # citations and story links are Slack links
    assert "DeepSeek" in message.text  # the plain fallback for notifications
    csv_files = [file for file in slack.shared_files(CHANNEL) if file.filename.endswith(".csv")]
    assert len(csv_files) == 1
    assert b"DeepSeek-V4: open weights" in csv_files[0].content
    methods = [call.method for call in slack.calls]
    upload = methods.index("files.getUploadURLExternal")
    assert methods[upload:].count("files.completeUploadExternal") >= 1
    assert methods.index("chat.postMessage") < upload  # the text first, then the files
    rows = await DeliveryRepository(database).list_for_run(summary.run_id)
    assert [row.status for row in rows] == [DeliveryStatus.SENT]


async def test_a_long_digest_is_split_into_several_messages_within_slack_limits(
    chat: ChatRecord, slack: FakeSlack
) -> None:
    paragraphs = "\n\n---\n\n".join(f"Paragraph {n}: " + "word " * 700 for n in range(60))
    text = f"**Long topic** · 2026-11-20 13:00 UTC\n\n{paragraphs}"

    await send_all(sender_for(slack), chat, Reply(text=text, purpose="digest"))

    messages = slack.messages_in(CHANNEL)
    assert len(messages) >= 3  # 60 sections and 59 dividers do not fit in 50 blocks
    assert all(len(m.blocks or []) <= BLOCKS_PER_MESSAGE for m in messages)
    assert all(len(section) <= 3000 for m in messages for section in m.section_texts())
    assert messages[0].block_types()[0] == "header"
    shown = " ".join(section for m in messages for section in m.section_texts())
    assert all(f"Paragraph {n}:" in shown for n in range(60))
    assert not slack.rejected


async def test_a_ratelimited_post_is_retried_by_the_sdk_after_retry_after(chat: ChatRecord, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", "ratelimited", retry_after=0, times=1)

    await send_all(sender_for(slack), chat, Reply(text="**Topic** · today\n\nOne story.", purpose="digest"))

    posts = slack.calls_to("chat.postMessage")
    assert len(posts) == 2  # refused once with 429, then accepted
    assert slack.rejected == [("chat.postMessage", "ratelimited")]
    assert len(slack.messages_in(CHANNEL)) == 1


async def test_a_long_retry_after_becomes_retry_later_for_the_worker(chat: ChatRecord, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", "ratelimited", retry_after=120, times=1)

    with pytest.raises(RetryLater) as caught:
        await send_all(sender_for(slack, max_rate_limit_wait=30), chat, Reply(text="Hello", purpose="digest"))

    assert caught.value.retry_after == 120
    assert len(slack.calls_to("chat.postMessage")) == 1  # no task slept two minutes


@pytest.mark.parametrize("error", ["channel_not_found", "not_in_channel", "is_archived", "account_inactive"])
async def test_a_channel_the_bot_cannot_reach_is_gone(chat: ChatRecord, slack: FakeSlack, error: str) -> None:
    slack.fail("chat.postMessage", error)

    with pytest.raises(ChatGone):
        await send_all(sender_for(slack), chat, Reply(text="Hello", purpose="digest"))


async def test_other_slack_errors_are_retried_with_backoff(chat: ChatRecord, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", "msg_too_long")

    with pytest.raises(DeliveryError) as caught:
        await send_all(sender_for(slack), chat, Reply(text="Hello", purpose="digest"))

    assert not isinstance(caught.value, ChatGone | RetryLater)
    assert "msg_too_long" in str(caught.value)


async def test_a_retried_delivery_does_not_repost_what_already_arrived(
    chat: ChatRecord, slack: FakeSlack, tmp_path: Path
) -> None:
    csv = tmp_path / "digest.csv"
    csv.write_text("title,url\nA,https://example.org/a\n")
    message = Reply(
        text="**Topic** · today\n\nBody.",
        attachments=(Attachment(path=csv, filename="topic-2026-11-20.csv", kind="document"),),
        purpose="digest",
    )
    slack.fail("files.getUploadURLExternal", "internal_error", times=1)
    sender = sender_for(slack)
    text, upload = sender.parts(message)

    # The worker stores each confirmed part and resends from the first unconfirmed one.
    await sender.send_part(chat, text)
    with pytest.raises(DeliveryError):
        await sender.send_part(chat, upload)
    await sender.send_part(chat, upload)

    assert len(slack.messages_in(CHANNEL)) == 1
    (shared,) = slack.shared_files(CHANNEL)
    assert shared.filename == "topic-2026-11-20.csv" and shared.content == csv.read_bytes()
