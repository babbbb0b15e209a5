"""Destinations against real servers on 127.0.0.1: an aiosmtpd SMTP server receiving the email, an ntfy-shaped
HTTP receiver, and a webhook receiver checking the signature, the timestamp and the JSON Schema; through the real
delivery worker and outbox, with Apprise and the HTTP client unmocked."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from aiosmtpd.controller import Controller

from app.logging_setup import NOISY_LOGGERS
from app.monitor_service import build_monitor_service
from monitors import DeliveryWorker, DestinationError, DestinationSenders, DigestPages, MonitorService
from monitors.destination_send import SIGNATURE_HEADER, TIMESTAMP_HEADER
from monitors.views import MonitorSettings
from research import split_text
from research.pipeline import run_pipeline
from sources import HttpClient
from storage.repositories import ChatRepository, DeliveryRepository, DestinationRepository
from tests.fakes.http_server import FakeHTTPServer, FakeResponse, RecordedRequest, running_fake_server
from tests.monitors.conftest import T0, World
from tests.monitors.fakes import resolver

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Inbox:
    """An aiosmtpd handler keeping every message it accepts."""

    messages: list[EmailMessage] = field(default_factory=list)
    recipients: list[list[str]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))  # type: ignore[arg-type]
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"


@dataclass
class Smtp:
    inbox: Inbox
    port: int

    def url(self, *, user: str = "") -> str:
        login = f"{user}@" if user else ""
        return f"mailto://{login}127.0.0.1:{self.port}?to=reader@example.com&from=lookout@example.com"


@pytest.fixture
def smtp() -> Iterator[Smtp]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield Smtp(inbox, controller.port)
    finally:
        controller.stop()


@pytest.fixture
def receiver() -> Iterator[FakeHTTPServer]:
    with running_fake_server() as server:
        yield server


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    # The servers are on 127.0.0.1: as with ALLOW_PRIVATE_URLS=true.
    async with HttpClient(user_agent="LookoutTest/1", allow_private=True, max_retries=0) as client:
        yield client


@dataclass
class Stack:
    service: MonitorService
    senders: DestinationSenders
    worker: DeliveryWorker


def stack(
    world: World, http: HttpClient, *, pause_after: timedelta = timedelta(days=3), public_url: str | None = None
) -> Stack:
    pages = DigestPages(world.database, public_url=public_url)
    senders = DestinationSenders(world.database, http=http, clock=world.clock, pause_after=pause_after, pages=pages)
    service = build_monitor_service(
        world.database,
        resolve_sources=resolver(world.sources),
        light_model=None,
        heavy_model=None,
        out_dir=world.out_dir,
        settings=MonitorSettings(min_interval_seconds=900),
        clock=world.clock,
        pipeline=run_pipeline,
        destinations=senders,
        http=http,
    )
    worker = DeliveryWorker(world.database, {"telegram": world.sender, **senders.by_platform()}, clock=world.clock)
    return Stack(service, senders, worker)


async def monitor_with(world: World, stack: Stack, *urls: str) -> tuple[int, list[str | None]]:
    """A monitor of chat 0 with the destinations subscribed; their new webhook secrets."""
    view = await stack.service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn", quiet=False)
    assert stack.service.destinations is not None
    secrets = []
    for url in urls:
        _, _, secret, fresh = await stack.service.destinations.subscribe(
            view.id, url, added_by_chat_id=world.chats[0].id
        )
        assert fresh
        secrets.append(secret)
    return view.id, secrets


def verify(request: RecordedRequest, secret: str, *, now: float) -> dict[str, Any]:
    """What a receiver does: check the timestamp is recent and the signature matches, then read the body."""
    timestamp = request.headers[TIMESTAMP_HEADER.lower()]
    assert abs(now - int(timestamp)) < 300
    expected = "v1=" + hmac.new(secret.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(request.headers[SIGNATURE_HEADER.lower()], expected)
    document: dict[str, Any] = json.loads(request.body)
    return document


async def test_an_email_gets_the_digest_as_html_with_a_text_part_the_csv_and_the_chart(
    world: World, http: HttpClient, smtp: Smtp
) -> None:
    lookout = stack(world, http)
    monitor_id, _ = await monitor_with(world, lookout, smtp.url())
    summary = await lookout.service.runs.run_monitor(monitor_id, T0)
    assert summary is not None and summary.deliveries == 2  # the owner chat and the email

    report = await lookout.worker.run_once()

    assert report.sent == 2 and report.retrying == 0
    [message] = smtp.inbox.messages
    assert smtp.inbox.recipients == [["reader@example.com"]]
    assert message["Subject"].startswith("DeepSeek: ")
    html_part = message.get_body(preferencelist=("html",))
    text_part = message.get_body(preferencelist=("plain",))
    assert html_part is not None and text_part is not None
    html = html_part.get_content()
    assert 'name="viewport"' in html and "<strong>DeepSeek</strong>" in html
    assert '<a href="https://' in html  # citations stay links
    text = text_part.get_content()
    assert "DeepSeek" in text and "<a " not in text
    assert "https://example.com/hn/hn-0" in text  # the sources' addresses, which Apprise's conversion drops
    files = {part.get_filename(): part for part in message.iter_attachments()}
    assert {Path(name).suffix for name in files} == {".csv", ".png"}
    csv_name = next(name for name in files if name.endswith(".csv"))
    assert b"DeepSeek" in files[csv_name].get_payload(decode=True)
    png_name = next(name for name in files if name.endswith(".png"))
    assert files[png_name].get_payload(decode=True).startswith(b"\x89PNG")
    world.sender.pop_message()  # the chat got its digest too
    assert world.sender.is_quiet()


async def test_a_chat_like_service_gets_text_cut_at_its_limit_then_its_files(
    world: World, http: HttpClient, receiver: FakeHTTPServer
) -> None:
    receiver.route("POST", "/", FakeResponse.json({"id": "x"}))
    receiver.route("POST", "/lookout", FakeResponse.json({"id": "y"}))
    lookout = stack(world, http)
    url = f"ntfy://127.0.0.1:{receiver.port}/lookout"
    monitor_id, _ = await monitor_with(world, lookout, url)
    assert (await lookout.service.runs.run_monitor(monitor_id, T0)) is not None
    assert (await lookout.worker.run_once()).sent == 2

    texts = [r.json() for r in receiver.received("/", "POST")]
    files = receiver.received("/lookout", "POST")
    assert len(texts) == 1 and texts[0]["topic"] == "lookout" and "DeepSeek" in texts[0]["message"]
    assert sorted(Path(r.query["filename"]).suffix for r in files) == [".csv", ".png"]

    # A notice longer than ntfy's 7,800 characters arrives in pieces, none over the limit, nothing lost.
    from monitors.notices import queue_notice

    destination = (await DestinationRepository(world.database).all())[0]
    words = " ".join(f"word{n}" for n in range(3000))
    await queue_notice(world.database, chat_id=destination.chat_id, text=words, monitor_id=None, now=world.clock())
    assert (await lookout.worker.run_once()).sent == 1
    pieces = [r.json()["message"] for r in receiver.received("/", "POST")[1:]]
    assert len(pieces) >= 4 and all(len(piece) <= 7800 for piece in pieces)  # ~27,000 characters
    assert " ".join(pieces).split() == words.split()


async def test_a_webhook_gets_the_signed_document_and_a_500_is_retried_and_delivered_once(
    world: World, http: HttpClient, receiver: FakeHTTPServer
) -> None:
    receiver.route("POST", "/hook", [FakeResponse(status=500, body="down"), FakeResponse(status=204)])
    lookout = stack(world, http, public_url="https://lookout.example.org")
    monitor_id, [secret] = await monitor_with(world, lookout, f"webhook+{receiver.url}/hook")
    assert secret is not None and len(secret) >= 32
    summary = await lookout.service.runs.run_monitor(monitor_id, T0)
    assert summary is not None and summary.run_id is not None

    first = await lookout.worker.run_once()
    assert (first.sent, first.retrying) == (1, 1)  # the chat got it; the webhook answered 500
    assert (await lookout.worker.run_once()).sent == 1  # the notice to the chat that added the webhook
    notice = world.sender.sent[-1].message.text
    assert "failed" in notice and "HTTP 500" in notice and str(receiver.port) in notice  # the masked label
    assert "/hook" not in notice
    world.clock.advance(hours=2)
    second = await lookout.worker.run_once()
    assert second.sent == 1
    world.clock.advance(hours=2)
    assert (await lookout.worker.run_once()).claimed == 0

    posts = receiver.received("/hook", "POST")
    assert len(posts) == 2
    documents = [verify(post, secret, now=time.time()) for post in posts]
    assert documents[0] == documents[1]
    assert posts[0].headers["x-lookout-delivery"] == posts[1].headers["x-lookout-delivery"]
    jsonschema.validate(documents[1], json.loads((SCHEMAS / "digest-document.schema.json").read_text()))
    assert documents[1]["run"]["id"] == summary.run_id and documents[1]["monitor"]["topic"] == "DeepSeek"
    assert documents[1]["stories"] and documents[1]["cited"][0]["url"].startswith("https://")
    assert posts[1].headers["x-lookout-event"] == "digest"
    assert documents[1]["page_url"].startswith("https://lookout.example.org/digests/")
    destination = (await DestinationRepository(world.database).all())[0]
    assert destination.failing_since is None  # the streak ended with the success


async def test_a_webhook_answering_410_is_gone_and_its_adder_told_once(
    world: World, http: HttpClient, receiver: FakeHTTPServer
) -> None:
    receiver.route("POST", "/hook", FakeResponse(status=410, body="gone"))
    lookout = stack(world, http)
    monitor_id, _ = await monitor_with(world, lookout, f"webhook+{receiver.url}/hook")
    await lookout.service.runs.run_monitor(monitor_id, T0)

    report = await lookout.worker.run_once()

    assert report.dead == 1 and len(receiver.received("/hook")) == 1
    destination = (await DestinationRepository(world.database).all())[0]
    assert not destination.active
    await lookout.worker.run_once()  # the notice to the adder
    texts = [sent.message.text for sent in world.sender.sent]
    assert sum("paused" in text and "HTTP 410" in text for text in texts) == 1
    # The next run queues nothing for it.
    world.clock.advance(days=1)
    summary = await lookout.service.runs.run_monitor(monitor_id, world.clock())
    assert summary is not None and summary.deliveries == 1


async def test_an_unreachable_smtp_server_is_retried_told_once_and_paused_after_days(
    world: World, http: HttpClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # Apprise's own debug lines included
    for name in NOISY_LOGGERS:  # as `configure_logging` sets them, whatever LOG_LEVEL says
        if name != "apprise":
            caplog.set_level(logging.WARNING, logger=name)
    lookout = stack(world, http, pause_after=timedelta(days=3))
    closed = f"mailto://alice:hunter2secret@127.0.0.1:{free_port()}?to=reader@example.com&from=lookout@example.com"
    monitor_id, _ = await monitor_with(world, lookout, closed)
    first_run = await lookout.service.runs.run_monitor(monitor_id, T0)
    assert first_run is not None and first_run.run_id is not None

    assert (await lookout.worker.run_once()).retrying == 1
    world.clock.advance(hours=1)
    assert (await lookout.worker.run_once()).retrying == 1  # the second failure: no second notice
    told = [sent.message.text for sent in world.sender.sent if "failed" in sent.message.text]
    assert len(told) == 1 and "alice:****@127.0.0.1" in told[0]

    world.clock.advance(days=3)
    later_run = await lookout.service.runs.run_monitor(monitor_id, world.clock())
    assert later_run is not None and later_run.run_id is not None
    report = await lookout.worker.run_once()
    assert report.dead >= 1
    destination = (await DestinationRepository(world.database).all())[0]
    assert not destination.active
    await lookout.worker.run_once()
    assert any("paused" in sent.message.text for sent in world.sender.sent)

    deliveries = DeliveryRepository(world.database)
    rows = [*await deliveries.list_for_run(first_run.run_id), *await deliveries.list_for_run(later_run.run_id)]
    stored = " ".join(row.last_error or "" for row in rows)
    assert "Connection error" in stored and "127.0.0.1" in stored  # the errors were stored, masked
    everything = caplog.text + stored + " ".join(sent.message.text for sent in world.sender.sent)
    assert "hunter2secret" not in everything


async def test_a_test_message_goes_out_now_and_resumes_a_paused_destination(
    world: World, http: HttpClient, smtp: Smtp
) -> None:
    lookout = stack(world, http)
    service = lookout.service.destinations
    assert service is not None
    record, secret = await service.add(smtp.url(), added_by_chat_id=world.chats[0].id)
    assert secret is None
    await ChatRepository(world.database).update(record.chat_id, active=False)

    await service.test(record.id, chat_id=world.chats[0].id)

    [message] = smtp.inbox.messages
    assert message["Subject"] == "Lookout test"
    assert (await service.get(record.id, chat_id=None)).active
    with pytest.raises(DestinationError, match="no destination #"):
        await service.test(record.id, chat_id=world.chats[1].id)  # another chat's


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mailto://", "Apprise cannot read"),
        ("notaservice://whatever", "Apprise cannot read"),
        ("just some words", "not a destination URL"),
        ("example.com/hook", "needs a scheme"),
        ("webhook+ftp://example.com/x", r"webhook\+https://host/path"),
    ],
)
async def test_a_malformed_url_gets_one_sentence_and_nothing_is_stored(
    world: World, http: HttpClient, url: str, words: str
) -> None:
    service = stack(world, http).service.destinations
    assert service is not None
    with pytest.raises(DestinationError, match=words) as caught:
        await service.add(url, added_by_chat_id=world.chats[0].id)
    assert str(caught.value).count(". ") <= 1
    assert await DestinationRepository(world.database).all() == []


@pytest.mark.parametrize(
    "url",
    [
        "mailto://127.0.0.1:2525?to=reader@example.com&from=lookout@example.com",
        "ntfy://10.1.2.3/topic",
        "webhook+http://192.168.1.20/hook",
        "webhook+https://[::1]:8443/hook",
        "json://169.254.169.254/latest",
    ],
)
async def test_private_and_loopback_hosts_are_refused_unless_allowed(world: World, url: str) -> None:
    async with HttpClient(user_agent="LookoutTest/1", allow_private=False) as guarded:
        service = stack(world, guarded).service.destinations
        assert service is not None
        with pytest.raises(DestinationError, match="ALLOW_PRIVATE_URLS=true"):
            await service.add(url, added_by_chat_id=world.chats[0].id)
        # A service whose host is fixed (here Discord's webhook id in host position) is not a host to check.
        record, _ = await service.add("discord://123456789/abcdefghijkl", added_by_chat_id=world.chats[0].id)
        assert record.label.startswith("discord://") and "abcdefghijkl" not in record.label


def test_split_text_keeps_every_word_and_respects_the_limit() -> None:
    text = "\n\n".join(f"Paragraph {n}: " + "word " * (n * 40) for n in range(1, 12))
    pieces = split_text(text, 500)
    assert all(len(piece) <= 500 for piece in pieces)
    assert " ".join(pieces).split() == text.split()


async def test_one_run_reaches_a_telegram_chat_an_email_and_a_webhook_once_each(
    world: World, http: HttpClient, smtp: Smtp, receiver: FakeHTTPServer
) -> None:
    from bots.telegram import TelegramLimits, TelegramSender, build_bot
    from tests.fakes.telegram import running_fake_telegram

    receiver.route("POST", "/hook", FakeResponse(status=200))
    with running_fake_telegram() as telegram_api:
        bot = build_bot(telegram_api.token, api_url=telegram_api.url, limits=TelegramLimits(max_retries=0))
        async with TelegramSender(bot) as telegram:
            lookout = stack(world, http)
            worker = DeliveryWorker(
                world.database, {"telegram": telegram, **lookout.senders.by_platform()}, clock=world.clock
            )
            monitor_id, [_, secret] = await monitor_with(world, lookout, smtp.url(), f"webhook+{receiver.url}/hook")
            assert secret is not None

            summary = await lookout.service.runs.run_monitor(monitor_id, T0)
            first = await worker.run_once()
            world.clock.advance(hours=1)
            second = await worker.run_once()

            assert summary is not None and summary.deliveries == 3
            assert world.searches() == len(world.sources["hn"].queries) > 0  # collected once, for all three
            assert (first.sent, first.retrying, second.claimed) == (3, 0, 0)
            chat = world.chats[0].external_id
            assert len(telegram_api.texts(chat)) >= 1 and len(telegram_api.documents(chat)) == 1
            assert len(telegram_api.photos(chat)) == 1
            assert len(smtp.inbox.messages) == 1
            [post] = receiver.received("/hook", "POST")
            assert verify(post, secret, now=time.time())["run"]["id"] == summary.run_id


async def test_a_destination_never_takes_over_a_monitor_whose_owner_is_gone(
    world: World, http: HttpClient, smtp: Smtp
) -> None:
    from monitors.delivery import mark_chat_gone
    from storage.repositories import MonitorRepository

    lookout = stack(world, http)
    monitor_id, _ = await monitor_with(world, lookout, smtp.url())

    await mark_chat_gone(world.database, world.chats[0], reason="blocked", now=world.clock())

    monitor = await MonitorRepository(world.database).get(monitor_id)
    assert monitor is not None and monitor.owner_chat_id == world.chats[0].id


async def test_a_resend_after_a_failed_piece_starts_after_the_pieces_confirmed_sent(
    world: World, http: HttpClient, receiver: FakeHTTPServer
) -> None:
    from monitors.notices import queue_notice

    ok = FakeResponse.json({"id": "x"})
    receiver.route("POST", "/", [ok, FakeResponse(status=500, body="busy"), ok])
    lookout = stack(world, http)
    service = lookout.service.destinations
    assert service is not None
    record, _ = await service.add(f"ntfy://127.0.0.1:{receiver.port}/lookout", added_by_chat_id=world.chats[0].id)
    words = " ".join(f"word{n}" for n in range(2500))  # about 22,000 characters: three pieces
    await queue_notice(world.database, chat_id=record.chat_id, text=words, monitor_id=None, now=world.clock())

    assert (await lookout.worker.run_once()).retrying == 1  # piece 1 went, piece 2 failed
    world.clock.advance(hours=1)
    await lookout.worker.run_once()

    pieces = [r.json()["message"] for r in receiver.received("/", "POST")]
    assert len(pieces) == 4  # 1, 2 (failed), 2 again, 3: the first piece was not sent twice
    assert pieces[1] == pieces[2]
    assert " ".join([pieces[0], *pieces[2:]]).split() == words.split()


async def test_a_failing_destination_the_operator_added_is_told_to_the_monitors_owner(
    world: World, http: HttpClient, receiver: FakeHTTPServer
) -> None:
    receiver.route("POST", "/hook", FakeResponse(status=503, body="later"))
    lookout = stack(world, http)
    assert lookout.service.destinations is not None
    view = await lookout.service.create_monitor(world.chats[0].id, "DeepSeek", sources="hn", quiet=False)
    await lookout.service.destinations.subscribe(view.id, f"webhook+{receiver.url}/hook", added_by_chat_id=None)
    await lookout.service.runs.run_monitor(view.id, T0)

    assert (await lookout.worker.run_once()).retrying == 1
    await lookout.worker.run_once()  # the notice

    [told] = [sent for sent in world.sender.sent if "failed" in sent.message.text]
    assert told.chat.id == world.chats[0].id and "HTTP 503" in told.message.text


@pytest.mark.parametrize(
    ("url", "label", "secret"),
    [
        ("mailtos://me:app-password@gmail.com", "mailtos://me:****@gmail.com", "app-password"),
        ("discord://1234567890/AbCdEfToken", "discord://1...0/A...n", "AbCdEfToken"),
        ("ntfys://ntfy.sh/my-lookout-topic", "ntfys://ntfy.sh/my…", "lookout-topic"),
        ("ntfy://my-private-topic", "ntfys://my…", "private-topic"),
        ("webhook+https://n8n.example.org/webhook/abc123", "webhook+https://n8n.example.org/…", "abc123"),
    ],
)
def test_labels_mask_passwords_tokens_and_topics(url: str, label: str, secret: str) -> None:
    from monitors.destinations import read_destination_url

    read = read_destination_url(url)
    assert read.label == label and secret not in read.label
