"""The delivery worker: sends queued outbox rows through each platform's `ChatSender`, retrying politely."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from research import Digest, render_digest_markdown
from storage import (
    ChatRecord,
    ChatRepository,
    Database,
    DeliveryRecord,
    DeliveryRepository,
    DeliveryStatus,
    MonitorRepository,
    RunRecord,
    RunRepository,
    SubscriptionRepository,
)

logger = logging.getLogger(__name__)

NOTICE_KIND = "notice"
"""`RunRecord.stats["kind"]` of a run that only carries a text notice for one chat (no digest)."""


class DeliveryError(Exception):
    """A platform refused or failed to take a message; the subclass says what to do about it."""


class RetryLater(DeliveryError):
    """A transient failure (429, 5xx, network): try again, not before `retry_after` seconds if given."""

    def __init__(self, message: str = "try again later", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChatGone(DeliveryError):
    """A permanent failure: the bot was blocked, kicked, or the chat was deleted. Never retried."""


class ChatMoved(DeliveryError):
    """The chat has a new id on its platform (a Telegram group became a supergroup): resend there."""

    def __init__(self, new_external_id: str, message: str = "chat moved") -> None:
        super().__init__(message)
        self.new_external_id = new_external_id


AttachmentKind = Literal["document", "image"]


@dataclass(frozen=True, kw_only=True)
class Attachment:
    """A file sent after the text: the CSV as a document, the chart as an image."""

    path: Path
    filename: str
    """The name the person sees (topic and date), not the name on disk."""
    kind: AttachmentKind


@dataclass(frozen=True, kw_only=True)
class OutgoingDigest:
    """One platform-neutral message: markdown text, then its attachments in order."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    run_id: int | None = None
    monitor_id: int | None = None


class ChatSender(Protocol):
    """Sends a message to one chat of one platform (implemented in bots/, registered by app)."""

    async def send(self, chat: ChatRecord, message: OutgoingDigest) -> None:
        """Deliver text then attachments; raise `RetryLater`, `ChatGone` or `ChatMoved` on failure."""
        ...


_RunCache = dict[int, tuple[RunRecord, str | None] | None]
"""Runs loaded during one pass (with their monitor's topic), shared by the rows of every chat."""


@dataclass
class DeliveryReport:
    """What one `run_once` pass did."""

    claimed: int = 0
    sent: int = 0
    retrying: int = 0
    dead: int = 0
    no_sender: int = 0
    errors: list[str] = field(default_factory=list)


def build_message(run: RunRecord, *, topic: str | None, timezone: str = "UTC") -> OutgoingDigest:
    """The message for a finished run: a notice's text, or the rendered digest with its CSV and chart."""
    if run.stats.get("kind") == NOTICE_KIND:
        monitor_id = _int_or_none(run.stats.get("monitor_id"))
        return OutgoingDigest(text=str(run.stats.get("text", "")), run_id=run.id, monitor_id=monitor_id)
    monitor_id = run.monitor_id if run.monitor_id is not None else _int_or_none(run.stats.get("monitor_id"))
    title = topic or str(run.stats.get("topic") or run.query or "Digest")
    when = (run.finished_at or run.scheduled_for).astimezone(_zone(timezone))
    header = f"**{title}** · {when:%Y-%m-%d %H:%M %Z}" + (f" · monitor #{monitor_id}" if monitor_id else "")
    body = "_No digest was stored for this run._"
    if run.digest is not None:
        try:
            body = render_digest_markdown(Digest.model_validate(run.digest))
        except ValidationError:
            logger.warning("run %d: stored digest does not validate; sending a short note instead", run.id)
    attachments: list[Attachment] = []
    stem = str(run.stats.get("file_stem") or f"digest-{run.id}")
    files: tuple[tuple[str, AttachmentKind, str], ...] = (("csv", "document", ".csv"), ("chart", "image", ".png"))
    for key, kind, suffix in files:
        raw = run.artifacts.get(key)
        if isinstance(raw, str) and raw and Path(raw).is_file():  # a file cleaned up since is simply left out
            attachments.append(Attachment(path=Path(raw), filename=f"{stem}{suffix}", kind=kind))
    return OutgoingDigest(
        text=f"{header}\n\n{body}", attachments=tuple(attachments), run_id=run.id, monitor_id=monitor_id
    )


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None


class DeliveryWorker:
    """Claims due outbox rows, sends each through the sender of its chat's platform, marks the outcome.

    Rows of one chat go in order, one at a time; different chats are sent concurrently (bounded).
    """

    def __init__(
        self,
        database: Database,
        senders: Mapping[str, ChatSender],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        batch_size: int = 50,
        concurrency: int = 8,
        poll_seconds: float = 5.0,
        lease: timedelta = timedelta(minutes=5),
        max_attempts: int = 8,
        base_delay: timedelta = timedelta(seconds=30),
        max_delay: timedelta = timedelta(hours=1),
    ) -> None:
        self._database = database
        self._deliveries = DeliveryRepository(database)
        self._runs = RunRepository(database)
        self._chats = ChatRepository(database)
        self._monitors = MonitorRepository(database)
        self._senders: MutableMapping[str, ChatSender] = dict(senders)
        self._clock = clock
        self._batch_size = batch_size
        self._concurrency = asyncio.Semaphore(concurrency)
        self._poll_seconds = poll_seconds
        self._lease = lease
        self._max_attempts = max_attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._wake = asyncio.Event()
        self._warned_platforms: set[str] = set()

    def register(self, platform: str, sender: ChatSender) -> None:
        """Send this platform's rows through `sender` from now on (e.g. the terminal chat while it runs)."""
        self._senders[platform] = sender
        self._warned_platforms.discard(platform)
        self.wake()

    def unregister(self, platform: str) -> None:
        self._senders.pop(platform, None)

    def wake(self) -> None:
        """Poll now instead of at the next interval (called when a run queued rows)."""
        self._wake.set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set; rows already due (e.g. left pending before a restart) go first."""
        while not stop.is_set():
            try:
                report = await self.run_once()
            except Exception:  # a database hiccup must not end delivery for good
                logger.exception("delivery pass failed; retrying in %.0f s", self._poll_seconds)
                report = DeliveryReport()
            if report.claimed >= self._batch_size and not stop.is_set():
                continue  # more rows are probably due right now
            await self._sleep(stop)

    async def _sleep(self, stop: asyncio.Event) -> None:
        stop_waiter = asyncio.ensure_future(stop.wait())
        wake_waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({stop_waiter, wake_waiter}, timeout=self._poll_seconds, return_when="FIRST_COMPLETED")
        finally:
            for waiter in (stop_waiter, wake_waiter):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        self._wake.clear()

    async def run_once(self) -> DeliveryReport:
        """Claim the rows due now and send them; returns what happened."""
        report = DeliveryReport()
        rows = await self._deliveries.claim_due(
            self._clock(), limit=self._batch_size, lease=self._lease, platforms=set(self._senders)
        )
        report.claimed = len(rows)
        by_chat: dict[int, list[DeliveryRecord]] = {}
        for row in rows:
            by_chat.setdefault(row.chat_id, []).append(row)
        runs: dict[int, tuple[RunRecord, str | None] | None] = {}
        await asyncio.gather(*(self._send_chat_rows(chat_rows, runs, report) for chat_rows in by_chat.values()))
        return report

    async def run_chat(self, chat_id: int) -> DeliveryReport:
        """Claim and send the rows of one chat that are due now, in order, batch after batch until none is left
        (what a delivery job does; its lock keeps every other worker off this chat meanwhile)."""
        report = DeliveryReport()
        runs: _RunCache = {}
        while True:
            rows = await self._deliveries.claim_due(
                self._clock(), limit=self._batch_size, lease=self._lease, platforms=set(self._senders), chat_id=chat_id
            )
            report.claimed += len(rows)
            if rows:
                await self._send_chat_rows(rows, runs, report)
            if len(rows) < self._batch_size or report.dead:
                return report

    @property
    def platforms(self) -> frozenset[str]:
        """The platforms this worker has a sender for."""
        return frozenset(self._senders)

    async def _send_chat_rows(self, rows: Sequence[DeliveryRecord], runs: _RunCache, report: DeliveryReport) -> None:
        async with self._concurrency:
            for row in rows:
                try:
                    gone = await self._send_row(row, runs, report)
                except Exception as error:  # one bad row must never stop the others
                    error_id = uuid.uuid4().hex[:8]
                    logger.exception("delivery %d failed unexpectedly [error id %s]", row.id, error_id)
                    report.errors.append(error_id)
                    await self._fail(row, f"{type(error).__name__}: {error} (error id {error_id})", report)
                    gone = False
                if gone:
                    return  # give_up_for_chat already made the chat's other rows dead

    async def _send_row(self, row: DeliveryRecord, runs: _RunCache, report: DeliveryReport) -> bool:
        """Send one row; True when the chat turned out to be gone."""
        chat = await self._chats.get(row.chat_id)
        if chat is None or not chat.active:
            await self._deliveries.mark_failed(row.id, error="chat is gone or inactive", permanent=True)
            report.dead += 1
            return False
        sender = self._senders.get(chat.platform)
        if sender is None:
            # The row stays open; the claim's lease brings it back (e.g. once the terminal chat runs again).
            if chat.platform not in self._warned_platforms:
                logger.warning(
                    "no sender registered for platform %r: delivery %d to chat %d stays pending",
                    chat.platform, row.id, chat.id,
                )  # fmt: skip
                self._warned_platforms.add(chat.platform)
            report.no_sender += 1
            return False
        if row.run_id not in runs:
            runs[row.run_id] = await self._load_run(row.run_id)
        loaded = runs[row.run_id]
        if loaded is None:
            await self._deliveries.mark_failed(row.id, error="the run no longer exists", permanent=True)
            report.dead += 1
            return False
        message = build_message(loaded[0], topic=loaded[1], timezone=chat.timezone)
        try:
            try:
                await sender.send(chat, message)
            except ChatMoved as moved:
                updated = await move_chat(self._database, chat, moved.new_external_id)
                if updated is None:
                    raise ChatGone("chat vanished while moving") from moved
                await sender.send(updated, message)
        except RetryLater as error:
            await self._fail(row, str(error) or "retry later", report, retry_after=error.retry_after)
            return False
        except ChatGone as error:
            await mark_chat_gone(self._database, chat, reason=str(error) or "chat is gone")
            report.dead += 1
            return True
        except ChatMoved as error:  # moved twice in a row: let the next pass try again
            await self._fail(row, f"chat moved again: {error}", report)
            return False
        except DeliveryError as error:
            await self._fail(row, str(error) or type(error).__name__, report)
            return False
        await self._deliveries.mark_sent(row.id, now=self._clock())
        report.sent += 1
        return False

    async def _load_run(self, run_id: int) -> tuple[RunRecord, str | None] | None:
        """The run and its monitor's topic (None for runs without a monitor)."""
        run = await self._runs.get(run_id)
        if run is None:
            return None
        topic = None
        if run.monitor_id is not None:
            monitor = await self._monitors.get(run.monitor_id)
            topic = monitor.topic if monitor else None
        return run, topic

    async def _fail(
        self, row: DeliveryRecord, error: str, report: DeliveryReport, *, retry_after: float | None = None
    ) -> None:
        wait = timedelta(seconds=retry_after) if retry_after is not None and retry_after >= 0 else None
        updated = await self._deliveries.mark_failed(
            row.id,
            error=error[:500],
            now=self._clock(),
            retry_after=wait,
            max_attempts=self._max_attempts,
            # The platform's own wait, when it gives one, is the delay; otherwise exponential backoff.
            base_delay=timedelta(0) if wait is not None else self._base_delay,
            max_delay=self._max_delay,
        )
        if updated is not None and updated.status is DeliveryStatus.DEAD:
            logger.warning("delivery %d given up after %d attempts: %s", row.id, updated.attempts, error)
            report.dead += 1
        else:
            report.retrying += 1


async def mark_chat_gone(database: Database, chat: ChatRecord, *, reason: str) -> None:
    """Blocked, kicked or deleted: the chat goes inactive, its subscriptions pause and its pending digests are
    given up (nothing is retried). Used by the delivery worker and by frontends that hear it first."""
    logger.warning("chat %d on %s is gone (%s): pausing its subscriptions", chat.id, chat.platform, reason)
    await ChatRepository(database).update(chat.id, active=False)
    await SubscriptionRepository(database).set_active_for_chat(chat.id, active=False)
    await DeliveryRepository(database).give_up_for_chat(chat.id, error=reason[:500])


async def move_chat(database: Database, chat: ChatRecord, new_external_id: str) -> ChatRecord | None:
    """The chat has a new id (a Telegram group became a supergroup): its monitors and memory follow. Returns the
    chat to talk to now: the renamed one, the one already stored under the new id (someone wrote there first;
    both rows are kept), or None when the chat vanished meanwhile."""
    chats = ChatRepository(database)
    existing = await chats.find(chat.platform, new_external_id)
    if existing is not None:
        if existing.id != chat.id:
            logger.warning("chat %d moved to %s, which is already stored; keeping both", chat.id, new_external_id)
        return existing
    logger.info("chat %d on %s moved to %s", chat.id, chat.platform, new_external_id)
    return await chats.update(chat.id, external_id=new_external_id)
