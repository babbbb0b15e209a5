"""The senders of the two destination platforms, which the delivery worker uses like a chat platform's:

- `AppriseSender` (platform `apprise`): email gets one part — an HTML digest readable on a phone (the markdown every
  chat gets, rendered by the feeds' markdown-it), Apprise's plain-text alternative, the CSV and chart attached, the
  subject naming the topic and the lead story; chat-like services get the markdown cut at the service's own
  `body_maxlen`, one part per piece, then one part per file where the service takes attachments.
- `WebhookSender` (platform `webhook`): one POST of the run's JSON document, signed like Slack's requests:
  `X-Lookout-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>">` with the destination's key and
  `X-Lookout-Timestamp`; `X-Lookout-Delivery` names the delivery so a receiver can drop a repeat; `X-Lookout-Event`
  says what the body is: `digest` — the run's `DigestDocument` (docs/schemas/digest-document.schema.json) — or
  `briefing`, `notice`, `test` — a message document (docs/schemas/webhook-message.schema.json). 410 or 404 means
  gone; 429, 5xx and network failures are retried by the outbox.

A failing destination's streak is stored: the chat that added it is told once per streak, and after
`pause_after` without a success it is paused (its chat goes inactive like a blocked chat) and the adder told.
Messages and errors name the destination by its masked label, never its URL.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import mimetypes
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from html import escape
from typing import Any, Final

from kernel import Attachment, ChatGone, Clock, Recipient, Reply, RetryLater, utc_now
from monitors.destinations import (
    APPRISE_PLATFORM,
    PAUSE_AFTER,
    WEBHOOK_PLATFORM,
    DestinationError,
    apprise_plugin,
    check_hosts,
    read_destination_url,
)
from monitors.document import run_document, stored_digest
from monitors.feeds import markdown_html
from monitors.notices import queue_notice
from monitors.pages import DigestPages
from research import split_text
from sources import HttpClient, SourceError, SourceErrorKind
from storage import Database, DestinationRecord
from storage.repositories import DestinationRepository, MonitorRepository, RunRepository, SubscriptionRepository

__all__ = [
    "EVENT_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ApprisePart",
    "AppriseSender",
    "DestinationSenders",
    "WebhookPart",
    "WebhookSender",
    "message_document",
    "sign",
]

logger = logging.getLogger(__name__)

SIGNATURE_HEADER: Final = "X-Lookout-Signature"
TIMESTAMP_HEADER: Final = "X-Lookout-Timestamp"
DELIVERY_HEADER: Final = "X-Lookout-Delivery"
EVENT_HEADER: Final = "X-Lookout-Event"
"""What the body is: `digest` (a `DigestDocument`), `briefing`, `notice` or `test` (a message document)."""
SIGNATURE_VERSION: Final = "v1"
"""The signature scheme's name in the header (`v1=<hex>`), so a later scheme can be told apart."""
SEND_TIMEOUT_SECONDS: Final = 60.0
"""Apprise's whole call is cut here: a hung SMTP server must not hold a delivery's claim for ever."""
TEST_TEXT: Final = (
    "**Lookout test**\n\nThis destination works: the digests of the monitors it follows will arrive here."
)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp` (seconds since the epoch, as text)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


@dataclass(frozen=True, slots=True)
class ApprisePart:
    """One Apprise call: a body (markdown, or HTML for an email) with a title and files."""

    body: str
    title: str = ""
    attachments: tuple[Attachment, ...] = ()
    html: bool = False


@dataclass(frozen=True, slots=True)
class WebhookPart:
    """One POST: the document of `run_id` (or, for a test, the text alone)."""

    run_id: int | None
    text: str


class _Failed(Exception):
    """A send failed; `gone` when the destination says it no longer exists (the message names no URL)."""

    def __init__(self, message: str, *, gone: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.gone = gone
        self.retry_after = retry_after


class _DestinationSender:
    """What both senders share: finding the destination of a chat, the failure streak and its notices."""

    def __init__(self, database: Database, *, clock: Clock, pause_after: timedelta) -> None:
        self._database = database
        self._destinations = DestinationRepository(database)
        self._clock = clock
        self._pause_after = pause_after

    async def _destination(self, chat: Recipient) -> DestinationRecord:
        record = await self._destinations.of_chat(chat.id)
        if record is None:
            raise ChatGone("the destination was removed")
        return record

    async def _outcome(self, record: DestinationRecord, error: _Failed | None) -> None:
        """Store the attempt's outcome; tell the adding chat of a new streak; pause after `pause_after`."""
        if error is None:
            if record.failing_since is not None:
                await self._destinations.record_success(record.chat_id)
                logger.info("destination %d (%s) works again", record.id, record.label)
            return
        now = self._clock()
        noted = await self._destinations.record_failure(record.chat_id, error=str(error), now=now)
        if noted is None:
            raise ChatGone("the destination was removed") from error
        current, tell = noted
        since = current.failing_since or now
        if error.gone or now - since >= self._pause_after:
            why = "says it no longer exists" if error.gone else f"has failed since {since:%Y-%m-%d %H:%M} UTC"
            await self._tell(
                current,
                f"The destination #{current.id} `{current.label}` {why} ({error}), so it is paused: nothing more is "
                f"sent there. `/destination test {current.id}` resumes it once it works; `/destination remove "
                f"{current.id}` deletes it.",
            )
            raise ChatGone(f"destination paused: {error}") from error
        if tell:
            await self._tell(
                current,
                f"Delivering to the destination #{current.id} `{current.label}` failed ({error}). Lookout keeps "
                f"trying; after {self._pause_after.days or 1} day(s) of failures it is paused. `/destination test "
                f"{current.id}` tries it now.",
            )
        raise RetryLater(str(error), retry_after=error.retry_after) from error

    async def _tell(self, record: DestinationRecord, text: str) -> None:
        """Tell the chat that added the destination; one the operator added (CLI) is told to the owners of the
        monitors it receives, and logged."""
        chats = [record.added_by_chat_id] if record.added_by_chat_id is not None else await self._owners(record)
        if record.added_by_chat_id is None:
            logger.warning("destination %d (%s): %s", record.id, record.label, text)
        if chats:
            await queue_notice(
                self._database, chat_id=chats[0], text=text, monitor_id=None, now=self._clock(), also=chats[1:]
            )

    async def _owners(self, record: DestinationRecord) -> list[int]:
        owners: list[int] = []
        for subscription in await SubscriptionRepository(self._database).for_chat(record.chat_id):
            monitor = await MonitorRepository(self._database).get(subscription.monitor_id)
            if monitor is not None and monitor.owner_chat_id not in owners:
                owners.append(monitor.owner_chat_id)
        return owners


class AppriseSender(_DestinationSender):
    """The `apprise` platform's one sender (email and chat-like services)."""

    def __init__(self, database: Database, *, http: HttpClient, clock: Clock, pause_after: timedelta) -> None:
        super().__init__(database, clock=clock, pause_after=pause_after)
        self._http = http
        self._runs = RunRepository(database)
        self._monitors = MonitorRepository(database)

    def parts(self, message: Reply) -> Sequence[ApprisePart]:
        """Without knowing the service: the whole message in one call (the worker asks `parts_for`)."""
        return [ApprisePart(body=message.text, attachments=message.attachments)]

    async def parts_for(self, chat: Recipient, message: Reply) -> Sequence[ApprisePart]:
        """The message as this destination's service takes it (see the module's docstring)."""
        record = await self._destination(chat)
        if record.kind == "email":
            subject = await self._subject(message)
            return [ApprisePart(body=_email_html(message.text, subject), title=subject,
                                attachments=message.attachments, html=True)]  # fmt: skip
        plugin = apprise_plugin(record.url)
        limit = int(getattr(plugin, "body_maxlen", 0) or 2000) if plugin is not None else 2000
        pieces: list[ApprisePart] = [ApprisePart(body=piece) for piece in split_text(message.text, limit)]
        takes_files = plugin is not None and bool(getattr(plugin, "attachment_support", False))
        if takes_files:
            pieces += [ApprisePart(body=a.caption or a.filename, attachments=(a,)) for a in message.attachments]
        elif message.attachments:
            names = ", ".join(a.filename for a in message.attachments)
            pieces.append(ApprisePart(body=f"(Files not sent: this service takes none — {names}.)"))
        return pieces

    async def _subject(self, message: Reply) -> str:
        """The topic and the lead story ("DeepSeek: R2 ships with open weights"), else the message's first line."""
        first = message.text.strip().splitlines()[0] if message.text.strip() else "Lookout"
        fallback = first.strip("*_ ")[:200] or "Lookout"
        if message.run_id is None or message.purpose != "digest":
            return fallback
        run = await self._runs.get(message.run_id)
        digest = stored_digest(run) if run is not None else None
        if run is None or digest is None:
            return fallback
        monitor = await self._monitors.get(run.monitor_id) if run.monitor_id is not None else None
        topic = monitor.topic if monitor else str(run.stats.get("topic") or run.query or "Digest")
        return f"{topic}: {digest.headline}"[:250] if digest.headline else topic[:250]

    async def send_part(self, chat: Recipient, part: ApprisePart) -> None:
        record = await self._destination(chat)
        try:
            await self.send(record, part)
        except _Failed as error:
            await self._outcome(record, error)  # raises RetryLater or ChatGone
        else:
            await self._outcome(record, None)

    async def send(self, record: DestinationRecord, part: ApprisePart) -> None:
        """One Apprise call; raises `_Failed` (a sentence without the URL)."""
        import apprise
        from apprise.attachment.memory import AttachMemory

        try:
            await check_hosts(self._http, read_destination_url(record.url))
        except DestinationError as error:
            raise _Failed(str(error)) from None
        notifier = apprise.Apprise()
        if not notifier.add(record.url):
            raise _Failed("Apprise can no longer read this URL")
        attach = apprise.AppriseAttachment()
        for attachment in part.attachments:
            try:
                content = attachment.path.read_bytes()
            except OSError:
                continue  # a file cleaned up since: the rest still goes
            mimetype = mimetypes.guess_type(attachment.filename)[0] or "application/octet-stream"
            attach.add(AttachMemory(content=content, name=attachment.filename, mimetype=mimetype))  # type: ignore[no-untyped-call]
        body_format = apprise.NotifyFormat.HTML if part.html else apprise.NotifyFormat.MARKDOWN
        result = await notifier.async_notify(
            body=part.body,
            title=part.title,
            body_format=body_format,
            attach=attach if len(attach) else None,
            timeout=SEND_TIMEOUT_SECONDS,
        )
        if not result:
            raise _Failed(_reason(result, record))


def _reason(result: Any, record: DestinationRecord) -> str:
    """Apprise's last warning about the failed call, with every part of the URL that its masked label does not show
    removed (a password, a token), so the reason may be stored, logged and told."""
    messages = [str(entry.message) for entry in result.logs() if str(getattr(entry, "level", "")).upper() != "DEBUG"]
    text = messages[-1] if messages else "the service did not accept the message"
    pieces = {piece for piece in re.split(r"[:/@?&=#]+", record.url.split("://", 1)[-1]) if len(piece) >= 4}
    for piece in sorted(pieces - set(re.split(r"[:/@?&=#]+", record.label)), key=len, reverse=True):
        text = text.replace(piece, "…")
    return text[:300]


_EMAIL_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>{title}</title></head>
<body style="margin:0;padding:0">
<div style="max-width:640px;margin:0 auto;padding:16px;font:16px/1.5 -apple-system,Segoe UI,Roboto,Helvetica,\
Arial,sans-serif;overflow-wrap:anywhere">
{body}
<p style="color:#777;font-size:13px;margin-top:24px">Sent by Lookout.</p>
</div></body></html>"""


_LINK = re.compile(r'<a href="([^"]+)">(.*?)</a>', re.S)


def _email_html(markdown: str, subject: str) -> str:
    """The digest's markdown as a whole HTML email: one narrow column, large type, links kept. Apprise writes the
    plain-text part from this HTML and drops link targets, so the links are listed once more in a block HTML readers
    do not show (the way email preheaders are hidden): the text part keeps every source's address."""
    body = markdown_html(markdown)
    targets = list(dict.fromkeys(href for href, _text in _LINK.findall(body)))
    hidden = ""
    if targets:
        lines = "<br>".join(f"{href}" for href in targets)
        hidden = f'<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">Links:<br>{lines}</div>'
    return _EMAIL_PAGE.format(title=escape(subject), body=body + hidden)


class WebhookSender(_DestinationSender):
    """The `webhook` platform's one sender: a signed POST of the run's JSON document."""

    def __init__(
        self,
        database: Database,
        *,
        http: HttpClient,
        clock: Clock,
        pause_after: timedelta,
        pages: DigestPages | None = None,
    ) -> None:
        super().__init__(database, clock=clock, pause_after=pause_after)
        self._http = http
        self._pages = pages
        self._runs = RunRepository(database)
        self._monitors = MonitorRepository(database)

    def parts(self, message: Reply) -> Sequence[WebhookPart]:
        return [WebhookPart(run_id=message.run_id, text=message.text)]

    async def send_part(self, chat: Recipient, part: WebhookPart) -> None:
        record = await self._destination(chat)
        try:
            event, body = await self._document(part)
            await self.post(record, body, delivery=f"{part.run_id}-{chat.id}", event=event)
        except _Failed as error:
            await self._outcome(record, error)  # raises RetryLater or ChatGone
        else:
            await self._outcome(record, None)

    async def _document(self, part: WebhookPart) -> tuple[str, bytes]:
        """The event and the body: a digest's `DigestDocument` (docs/schemas/digest-document.schema.json), else a
        message document (docs/schemas/webhook-message.schema.json) for a briefing or notice."""
        run = await self._runs.get(part.run_id) if part.run_id is not None else None
        if run is not None:
            if self._pages is not None:
                document = await self._pages.document(run)
            else:
                document = await run_document(self._database, run)
            if document is not None:
                return "digest", document.model_dump_json().encode()
        kind = str(run.stats.get("kind")) if run is not None else "notice"
        event = kind if kind in ("briefing", "notice") else "notice"
        return event, message_document(event, part.text, run_id=part.run_id)

    async def post(self, record: DestinationRecord, body: bytes, *, delivery: str, event: str) -> None:
        """POST `body` signed; raises `_Failed` (gone on 404/410)."""
        if record.secret is None:
            raise _Failed("the webhook has no signing key")
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(record.secret, timestamp, body),
            DELIVERY_HEADER: delivery,
            EVENT_HEADER: event,
        }
        try:
            await self._http.post(record.url, content=body, headers=headers, untrusted=True, retries=0)
        except SourceError as error:
            status = error.status
            if status in (404, 410):
                raise _Failed(f"the receiver answered HTTP {status}", gone=True) from None
            if error.kind is SourceErrorKind.BLOCKED:
                raise _Failed("its host is a private or loopback address (ALLOW_PRIVATE_URLS is off)") from None
            what = f"HTTP {status}" if status else error.kind.value
            raise _Failed(f"the receiver failed: {what}", retry_after=error.retry_after) from None


def message_document(event: str, text: str, *, run_id: int | None) -> bytes:
    """The body of a webhook event that is not a digest: a briefing, a notice or a test (its markdown text)."""
    document = {"schema_version": 1, "event": event, "run_id": run_id, "markdown": text}
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


class DestinationSenders:
    """The two destination senders of a process, by platform, and the test message."""

    def __init__(
        self,
        database: Database,
        *,
        http: HttpClient,
        clock: Clock = utc_now,
        pause_after: timedelta = PAUSE_AFTER,
        pages: DigestPages | None = None,
    ) -> None:
        """`pages` gives a digest's page URL (with PUBLIC_URL) for the webhook's document."""
        self.apprise = AppriseSender(database, http=http, clock=clock, pause_after=pause_after)
        self.webhook = WebhookSender(database, http=http, clock=clock, pause_after=pause_after, pages=pages)
        self._destinations = DestinationRepository(database)

    def by_platform(self) -> dict[str, Any]:
        return {APPRISE_PLATFORM: self.apprise, WEBHOOK_PLATFORM: self.webhook}

    async def send_test(self, record: DestinationRecord) -> None:
        """Send the short test message now; raises `DestinationError` saying why it failed. A success ends the
        destination's failure streak."""
        try:
            if record.kind == "webhook":
                body = message_document("test", TEST_TEXT, run_id=None)
                await self.webhook.post(record, body, delivery=f"test-{record.id}-{int(time.time())}", event="test")
            else:
                title = "Lookout test"
                text = _email_html(TEST_TEXT, title) if record.kind == "email" else TEST_TEXT
                await self.apprise.send(record, ApprisePart(body=text, title=title, html=record.kind == "email"))
        except _Failed as error:
            raise DestinationError(f"The test to #{record.id} `{record.label}` failed: {error}.") from None
        await self._destinations.record_success(record.chat_id)
