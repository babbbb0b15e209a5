"""The delivery worker: sends queued outbox rows through each platform's one `ChatSender`, part by part.

Guarantees: which parts of a delivery were confirmed sent is stored with the row, so after a crash (even
`kill -9`) a resend starts after them and only the one part in flight may arrive twice. A claim names the
worker (host, process id, a token per worker) and is a short lease renewed while the worker sends; a restarted
process takes back at once what a dead process on the same host held, any other worker when the lease ends.
Retries follow the shared `kernel.Backoff` (the platform's Retry-After, else jittered doubling). One log line
per delivery attempt (row, chat, parts sent, result) and one per resend say afterwards what went out.

Stopping: once the `stop` event given to `run_forever` or `keep_claims` is set, a delivery ends after the part
in flight, and its row (like every row claimed and not started) is made due at once for the next process, with
the parts confirmed so far; nothing waits for the rest of a long digest on a slow platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from kernel import (
    THIS_HOST,
    AddressedSender,
    Attachment,
    AttachmentKind,
    Backoff,
    Button,
    ChatGone,
    ChatMoved,
    ChatSender,
    Clock,
    DeliveryError,
    Purpose,
    Reply,
    RetryLater,
    error_reference,
    new_error_id,
    process_runs,
    utc_now,
)
from monitors.feedback import (
    FEEDBACK_PLATFORMS,
    MonitorFeedback,
    briefing_buttons,
    digest_buttons,
    dropped_line,
    reader_digest,
)
from monitors.notices import BRIEFING_KIND, NOTICE_KIND, TEXT_KINDS
from monitors.pages import DigestPages
from monitors.reader_rules import rules_view, run_entries
from monitors.runner import digest_monitor_id
from monitors.sharing import hand_over_monitors
from research import (
    Digest,
    ReaderRules,
    ReaderView,
    RulesDecision,
    RunEntry,
    escape_markdown,
    filter_digest,
    render_digest_markdown,
)
from storage import ChatRecord, Database, DeliveryRecord, DeliveryStatus, ItemWithScores, JSONObject, RunRecord
from storage.repositories import (
    ChatRepository,
    DeliveryRepository,
    ItemRepository,
    MonitorRepository,
    ReaderRuleRepository,
    RunRepository,
    SubscriptionRepository,
)

__all__ = [
    "DELIVERY_LEASE",
    "NOTICE_KIND",
    "OUTBOX_BACKOFF",
    "DeliveryReport",
    "DeliveryWorker",
    "build_message",
    "claimer_is_dead",
    "digest_for",
    "left_out_line",
    "mark_chat_gone",
    "move_chat",
    "worker_identity",
]

logger = logging.getLogger(__name__)

DELIVERY_LEASE = timedelta(seconds=30)
"""How long a claim holds without renewal; the worker renews it every third of that while it sends."""

OUTBOX_BACKOFF = Backoff(attempts=8, base=30.0, cap=3600.0, max_wait=math.inf)
"""When a failed delivery is tried again: after the platform's Retry-After (never too long to wait: the outbox
reschedules, it does not sleep), else after 30 s doubling up to an hour, jittered; dead after 8 attempts."""

_LIVE_WORKERS: set[str] = set()
"""Identities of the workers alive in this process: a claim by this pid under another token is a dead one's."""


def worker_identity() -> str:
    """A new worker's identity, `host:pid:token`, recorded on the rows it claims."""
    return f"{THIS_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claimer_is_dead(claimer: str) -> bool:
    """Whether a claim's worker is known to be dead: it ran on this host, and its process is gone or is this one
    under another token (a restarted container's pid 1). Claims from other hosts wait for their lease to end."""
    host, _, rest = claimer.partition(":")
    pid_text, _, _token = rest.partition(":")
    if host != THIS_HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return claimer not in _LIVE_WORKERS
    return not process_runs(pid)


_RunCache = dict[int, tuple[RunRecord, str | None, str | None] | None]
"""Runs loaded during one pass (with their monitor's topic and language), shared by the rows of every chat."""


@dataclass
class DeliveryReport:
    """What one `run_once` pass did."""

    claimed: int = 0
    sent: int = 0
    retrying: int = 0
    dead: int = 0
    no_sender: int = 0
    errors: list[str] = field(default_factory=list)


def digest_for(run: RunRecord, language: str | None) -> JSONObject | None:
    """The run's stored digest in the reader's language: the one written for it, else the main digest."""
    wanted = language or ""
    if wanted != run.stats.get("digest_language", "") and isinstance(run.language_digests.get(wanted), dict):
        written: JSONObject = run.language_digests[wanted]
        return written
    return run.digest


def valid_digest(run: RunRecord, language: str | None, *, instead: str) -> Digest | None:
    """`digest_for` validated; None when the run stored none, or logged with what happens `instead` when the stored
    digest no longer validates (an older shape)."""
    stored = digest_for(run, language)
    if stored is None:
        return None
    try:
        return Digest.model_validate(stored)
    except ValidationError:
        logger.warning("run %d: stored digest does not validate; %s", run.id, instead)
        return None


def build_message(
    run: RunRecord,
    *,
    topic: str | None,
    timezone: str = "UTC",
    language: str | None = None,
    page_url: str | None = None,
    left_out: RulesDecision | None = None,
    view: ReaderView | None = None,
    buttons: bool = False,
) -> Reply:
    """The message for a finished run: a notice's or briefing's stored text (with a briefing's CSV and chart), or
    the rendered digest (in the reader's `language` when the run wrote one) with its CSV and chart, ending with a
    link to the digest's web page (`page_url`) when it has one. Per reader: `left_out` is what its own rules took
    out (one line says so), `view` what its feedback keeps of the stories left (`MonitorFeedback.view_for`, over
    the digest after the rules), `buttons` a row of feedback buttons per story shown (a briefing's: per story of its
    sections, `briefing_buttons`)."""
    return _message(
        run,
        _stored_digest(run, language),
        topic=topic,
        timezone=timezone,
        language=language,
        page_url=page_url,
        left_out=left_out,
        view=view,
        buttons=buttons,
    )


def _message(
    run: RunRecord,
    digest: Digest | None,
    *,
    topic: str | None,
    timezone: str,
    language: str | None,
    page_url: str | None,
    left_out: RulesDecision | None,
    view: ReaderView | None,
    buttons: bool,
) -> Reply:
    """`build_message` with the run's `digest` already read and validated (`_stored_digest`)."""
    kind = run.stats.get("kind")
    if kind in TEXT_KINDS:
        text = str(run.stats.get("text", "")) or "(empty notice)"
        purpose: Purpose = "briefing" if kind == BRIEFING_KIND else "notice"
        caption = "Briefing" if kind == BRIEFING_KIND else None
        under: tuple[Button, ...] = ()
        if buttons and kind == BRIEFING_KIND:  # a row per story of its sections, as under a digest
            under, capped = briefing_buttons(run.stats.get("feedback_sections"))
            text += f"\n{capped}\n" if capped else ""
        return Reply(text=text, attachments=_attachments(run, caption), buttons=under, purpose=purpose, run_id=run.id)
    monitor_id = run.monitor_id if run.monitor_id is not None else _int_or_none(run.stats.get("monitor_id"))
    named = topic or str(run.stats.get("topic") or run.query or "Digest")
    title = escape_markdown(named)
    when = (run.finished_at or run.scheduled_for).astimezone(_zone(timezone))
    suffix = f" · {when:%Y-%m-%d %H:%M %Z}" + (f" · monitor #{monitor_id}" if monitor_id else "")
    body = "_No digest was stored for this run._"
    note = ""
    rows: tuple[Button, ...] = ()
    if digest is not None:
        digest = after_rules(digest, left_out)
        if left_out is not None and left_out.dropped and monitor_id is not None:
            note = f"_{left_out_line(left_out, monitor_id)}_\n\n"
        shown = reader_digest(digest, view) if view is not None else digest
        body = render_digest_markdown(shown)
        if buttons and view is not None:
            rows = digest_buttons(run.id, len(shown.developments))
        if view is not None and view.dropped:
            body += f"\n{dropped_line(len(view.dropped))}\n"
    attachments = _attachments(run, f"{named}{suffix}")  # a caption is plain text: the topic as written
    stored = digest_for(run, language) is not None
    link = f"\n[Full digest]({page_url})\n" if page_url and stored else ""
    text = f"**{title}**{suffix}\n\n{note}{body}{link}"
    return Reply(text=text, attachments=attachments, buttons=rows, purpose="digest", run_id=run.id)


def after_rules(digest: Digest, left_out: RulesDecision | None) -> Digest:
    """The digest without what the reader's own rules took out, its stories' counts of reports the reader's own
    (feedback then chooses among what is left)."""
    if left_out is None or not (left_out.removed or left_out.recounted):
        return digest
    return filter_digest(digest, left_out.removed, left_out.recounted)


def _stored_digest(run: RunRecord, language: str | None) -> Digest | None:
    """The digest the run stored, in the reader's `language`, validated once for the message, the reader's rules and
    feedback; None for notices and briefings, or a stored digest that no longer validates (sent as a short note)."""
    if run.stats.get("kind") in TEXT_KINDS:
        return None
    return valid_digest(run, language, instead="sending a short note instead")


def _is_monitor_digest(run: RunRecord) -> bool:
    """A monitor's digest, from its own run or a `/digest` preview: what the reader's rules and feedback apply to
    (not notices, briefings, searches)."""
    return digest_monitor_id(run) is not None


def left_out_line(decision: RulesDecision, monitor_id: int) -> str:
    """The one line a filtered digest carries: "4 stories left out by your filter — /filter 3"."""
    count = decision.stories_left_out
    return f"{count} stor{'y' if count == 1 else 'ies'} left out by your filter — /filter {monitor_id}"


def _attachments(run: RunRecord, chart_caption: str | None) -> tuple[Attachment, ...]:
    """The run's CSV (a document) and chart (an image, captioned: the chart says what it counts), named after its
    `file_stem`; a file cleaned up since is simply left out."""
    attachments: list[Attachment] = []
    stem = str(run.stats.get("file_stem") or f"digest-{run.id}")
    files: tuple[tuple[str, AttachmentKind, str], ...] = (("csv", "document", ".csv"), ("chart", "image", ".png"))
    for key, kind, extension in files:
        raw = run.artifacts.get(key)
        if isinstance(raw, str) and raw and Path(raw).is_file():
            caption = chart_caption[:1024] if kind == "image" and chart_caption else None
            attachments.append(Attachment(path=Path(raw), filename=f"{stem}{extension}", kind=kind, caption=caption))
    return tuple(attachments)


_ENTRY_CACHE_RUNS = 8
"""Runs whose items a worker keeps for their chats' rules and feedback (a run is delivered to all its chats within a
pass or two; a few runs' items are a few megabytes at most)."""


@dataclass
class _RunItems:
    """A run's stored items, and (made on first use) the same as the entries rules are applied to."""

    stored: list[ItemWithScores]
    _entries: list[RunEntry] | None = None

    def entries(self) -> list[RunEntry]:
        if self._entries is None:
            self._entries = run_entries(self.stored)
        return self._entries


def _decision_of(stored: JSONObject | None) -> RulesDecision | None:
    """A decision stored on a delivery row (None when none was, or it no longer validates)."""
    if stored is None:
        return None
    try:
        return RulesDecision.model_validate(stored)
    except ValidationError:
        return None


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) else None


class DeliveryWorker:
    """Claims due outbox rows, sends each through the sender of its chat's platform, marks the outcome.

    Rows of one chat go in order, one at a time; different chats are sent concurrently (bounded). `deliver(row)`
    sends one claimed row and is usable on its own (a job queue may call it per row).
    """

    def __init__(
        self,
        database: Database,
        senders: Mapping[str, ChatSender[Any]],
        *,
        clock: Clock = utc_now,
        batch_size: int = 50,
        concurrency: int = 8,
        poll_seconds: float = 5.0,
        lease: timedelta = DELIVERY_LEASE,
        backoff: Backoff = OUTBOX_BACKOFF,
        identity: str | None = None,
        pages: DigestPages | None = None,
        feedback: MonitorFeedback | None = None,
    ) -> None:
        self._database = database
        self._deliveries = DeliveryRepository(database)
        self._runs = RunRepository(database)
        self._chats = ChatRepository(database)
        self._monitors = MonitorRepository(database)
        self._feedback = feedback if feedback is not None else MonitorFeedback(database, clock=clock)
        """Each chat's view of a run (the process's one, `MonitorService.feedback`, when `app` hands it in; its
        embedder gives stories their stored vectors)."""
        self._rules = ReaderRuleRepository(database)
        self._items = ItemRepository(database)
        self._run_items: dict[int, asyncio.Future[_RunItems]] = {}
        """The stored items of runs delivered lately, read once per run for every chat's rules and feedback."""
        self._senders: MutableMapping[str, ChatSender[Any]] = dict(senders)
        self._clock = clock
        self._batch_size = batch_size
        self._concurrency = asyncio.Semaphore(concurrency)
        self._poll_seconds = poll_seconds
        self._lease = lease
        self._pages = pages
        """Where each digest's page link comes from (None, or no PUBLIC_URL: digests go without one)."""
        self._backoff = backoff
        self.identity = identity or worker_identity()
        _LIVE_WORKERS.add(self.identity)
        self._in_flight: set[int] = set()
        self._stop: asyncio.Event | None = None
        """The process's stop signal, once `run_forever` or `keep_claims` was given it."""
        self._wake = asyncio.Event()
        self._warned_platforms: set[str] = set()

    def register(self, platform: str, sender: ChatSender[Any]) -> None:
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
        """Poll until `stop` is set; rows already due (e.g. left pending before a restart) go first. While it
        runs, the claims on rows being sent are renewed every third of the lease. Once `stop` is set, the pass
        under way ends after the parts in flight and leaves the rest for the next process (see the module)."""
        self._stop = stop
        renewing = asyncio.create_task(self._renew_claims(stop), name="delivery claim renewal")
        try:
            while not stop.is_set():
                try:
                    report = await self.run_once()
                except Exception:  # a database hiccup must not end delivery for good
                    logger.exception("delivery pass failed; retrying in %.0f s", self._poll_seconds)
                    report = DeliveryReport()
                if report.claimed >= self._batch_size and not stop.is_set():
                    continue  # more rows are probably due right now
                await self._sleep(stop, self._poll_seconds)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            self._stop = None  # a pass asked for after the loop (the chat's last one) sends whole rows again

    async def _renew_claims(self, stop: asyncio.Event) -> None:
        every = max(self._lease.total_seconds() / 3, 0.05)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):  # a stop ends the wait at once, not a lease-third later
                await asyncio.wait_for(stop.wait(), timeout=every)
            if self._in_flight:
                try:
                    await self._deliveries.renew(
                        set(self._in_flight), worker=self.identity, until=self._clock() + self._lease
                    )
                except Exception:  # the next part's confirmation renews the claim too
                    logger.warning("renewing delivery claims failed", exc_info=True)

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        stop_waiter = asyncio.ensure_future(stop.wait())
        wake_waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({stop_waiter, wake_waiter}, timeout=seconds, return_when="FIRST_COMPLETED")
        finally:
            for waiter in (stop_waiter, wake_waiter):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        self._wake.clear()

    async def run_once(self) -> DeliveryReport:
        """Take back what dead workers held, claim the rows due now and send them; returns what happened."""
        report = DeliveryReport()
        await self._release_dead_claims()
        rows = await self._claim_batch()
        report.claimed = len(rows)
        by_chat: dict[int, list[DeliveryRecord]] = {}
        for row in rows:
            by_chat.setdefault(row.chat_id, []).append(row)
        runs: _RunCache = {}
        await asyncio.gather(*(self._send_chat_rows(chat_rows, runs, report) for chat_rows in by_chat.values()))
        return report

    async def run_chat(self, chat_id: int) -> DeliveryReport:
        """Claim and send the rows of one chat that are due now, in order, batch after batch until none is left
        (what a delivery job does; its lock keeps every other worker off this chat meanwhile). The claims are
        renewed by `keep_claims`, which a process delivering through jobs runs beside them."""
        report = DeliveryReport()
        runs: _RunCache = {}
        while True:
            rows = await self._claim_batch(chat_id)
            report.claimed += len(rows)
            if rows:
                await self._send_chat_rows(rows, runs, report)
            if len(rows) < self._batch_size or report.dead or self._stopping():
                return report

    async def _claim_batch(self, chat_id: int | None = None) -> list[DeliveryRecord]:
        """Claim up to a batch of rows due now on this worker's platforms (of one chat, if given) for its lease."""
        return await self._deliveries.claim_due(
            self._clock(),
            worker=self.identity,
            limit=self._batch_size,
            lease=self._lease,
            platforms=set(self._senders),
            chat_id=chat_id,
        )

    async def keep_claims(self, stop: asyncio.Event) -> None:
        """Renew the claims on rows being sent until `stop` is set (`run_forever` does this by itself); from then on
        deliveries under way end after their part in flight, as under `run_forever`."""
        self._stop = stop
        await self._renew_claims(stop)

    def _stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    async def release_dead_claims(self) -> None:
        """Take back the claims of workers known to be dead (on this host), so their rows are due again now."""
        await self._release_dead_claims()

    @property
    def platforms(self) -> frozenset[str]:
        """The platforms this worker has a sender for."""
        return frozenset(self._senders)

    async def _release_dead_claims(self) -> None:
        now = self._clock()
        dead = {claimer for claimer in await self._deliveries.claimants(now) if claimer_is_dead(claimer)}
        if dead:
            released = await self._deliveries.release_claims(dead, now=now)
            logger.info("took back %d delivery claim(s) of dead worker(s) %s", released, ", ".join(sorted(dead)))

    async def _send_chat_rows(self, rows: list[DeliveryRecord], runs: _RunCache, report: DeliveryReport) -> None:
        async with self._concurrency:
            for row in rows:
                gone = await self.deliver(row, runs=runs, report=report)
                if gone:
                    return  # give_up_for_chat already made the chat's other rows dead

    async def deliver(
        self, row: DeliveryRecord, *, runs: _RunCache | None = None, report: DeliveryReport | None = None
    ) -> bool:
        """Send one row this worker claimed, from the first part not yet confirmed, and record the outcome.
        Never raises for the row's own failures; True when its chat turned out to be gone."""
        report = report if report is not None else DeliveryReport()
        self._in_flight.add(row.id)
        try:
            return await self._deliver(row, runs if runs is not None else {}, report)
        except Exception as error:  # one bad row must never stop the others
            error_id = new_error_id()
            logger.exception("delivery %d failed unexpectedly [error id %s]", row.id, error_id)
            report.errors.append(error_id)
            await self._fail(row, f"{type(error).__name__}: {error}{error_reference(error_id)}", report)
            return False
        finally:
            self._in_flight.discard(row.id)

    async def _deliver(self, row: DeliveryRecord, runs: _RunCache, report: DeliveryReport) -> bool:
        recipient = await self._recipient(row, report)
        if recipient is None:
            return False
        chat, sender = recipient
        if row.run_id not in runs:
            runs[row.run_id] = await self._load_run(row.run_id)
        loaded = runs[row.run_id]
        if loaded is None:
            await self._deliveries.mark_failed(row.id, error="the run no longer exists", retry_at=None)
            report.dead += 1
            return False
        run, topic, monitor_language = loaded
        language, timezone = chat.language or monitor_language, chat.timezone
        if row.parts_sent and row.rendered_language is not None:
            # Parts already went out: go on in their language and timezone, even after a /language change, so the
            # chat never gets half a digest in one language and half in another (the next digest uses the new one).
            language, timezone = row.rendered_language or None, row.rendered_timezone or timezone
        message = await self._message_for(row, chat, run, topic=topic, language=language, timezone=timezone)
        parts = await sender.parts_for(chat, message) if isinstance(sender, AddressedSender) else sender.parts(message)
        return await self._send_parts(row, chat, sender, parts, language=language, timezone=timezone, report=report)

    async def _recipient(
        self, row: DeliveryRecord, report: DeliveryReport
    ) -> tuple[ChatRecord, ChatSender[Any]] | None:
        """The row's chat and the sender of its platform; None (the row recorded as dead, or left pending for a
        platform with no sender here) when there is nobody to send to now."""
        chat = await self._chats.get(row.chat_id)
        if chat is None or not chat.active:
            await self._deliveries.mark_failed(row.id, error="chat is gone or inactive", retry_at=None)
            logger.info("delivery %d to chat %d: not sent — the chat is gone or inactive", row.id, row.chat_id)
            report.dead += 1
            return None
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
            return None
        return chat, sender

    async def _message_for(
        self,
        row: DeliveryRecord,
        chat: ChatRecord,
        run: RunRecord,
        *,
        topic: str | None,
        language: str | None,
        timezone: str,
    ) -> Reply:
        """The run's message as this chat gets it: its digest validated once, then its rules, feedback and page."""
        page_url = await self._pages.url(run) if self._pages is not None else None
        digest = _stored_digest(run, language)
        monitor_digest = digest if _is_monitor_digest(run) else None
        left_out = await self._rules_decision(row, run, monitor_digest)
        view = await self._feedback_view(
            run, chat.id, monitor_digest, topic=topic, language=language, resend=row.parts_sent > 0, left_out=left_out
        )
        return _message(
            run, digest, topic=topic, timezone=timezone, language=language, page_url=page_url, left_out=left_out,
            view=view, buttons=chat.platform in FEEDBACK_PLATFORMS,
        )  # fmt: skip

    async def _send_parts(
        self,
        row: DeliveryRecord,
        chat: ChatRecord,
        sender: ChatSender[Any],
        parts: Sequence[Any],
        *,
        language: str | None,
        timezone: str,
        report: DeliveryReport,
    ) -> bool:
        """Send the parts not yet confirmed, storing after each that it went out, and record the outcome; True when
        the chat turned out to be gone."""
        done = min(row.parts_sent, len(parts))
        where = f"chat {chat.id} ({chat.platform} {chat.external_id})"
        if done or row.attempts > 1:
            logger.info(
                "delivery %d to %s: resending (attempt %d), %d of %d parts confirmed before",
                row.id, where, row.attempts, done, len(parts),
            )  # fmt: skip
        sent_before, moves = done, 0
        try:
            while done < len(parts):
                if self._stopping():
                    await self._leave(row, where, sent_before, done, len(parts))
                    return False
                try:
                    await sender.send_part(chat, parts[done])
                except ChatMoved as moved:
                    moves += 1
                    if moves > 1:  # moved twice in one attempt: let a later attempt sort it out
                        raise DeliveryError(f"chat moved again: {moved}") from moved
                    updated = await move_chat(self._database, chat, moved.new_external_id)
                    if updated is None:
                        raise ChatGone("chat vanished while moving") from moved
                    chat = updated
                    continue  # the same part again, to the new id
                done += 1
                if not await self._deliveries.record_parts_sent(
                    row.id,
                    done,
                    worker=self.identity,
                    until=self._clock() + self._lease,
                    language=language or "",
                    timezone=timezone,
                ):
                    logger.warning(
                        "delivery %d to %s: claim lost after %d of %d parts; another worker goes on",
                        row.id, where, done, len(parts),
                    )  # fmt: skip
                    return False
        except RetryLater as error:
            self._log_attempt(row, where, sent_before, done, len(parts), f"retry later ({error})")
            await self._fail(row, str(error) or "retry later", report, retry_after=error.retry_after)
            return False
        except ChatGone as error:
            self._log_attempt(row, where, sent_before, done, len(parts), f"chat gone ({error})")
            await mark_chat_gone(self._database, chat, reason=str(error) or "chat is gone", now=self._clock())
            report.dead += 1
            return True
        except DeliveryError as error:
            self._log_attempt(row, where, sent_before, done, len(parts), f"refused ({error})")
            await self._fail(row, str(error) or type(error).__name__, report)
            return False
        await self._deliveries.mark_sent(row.id, now=self._clock(), parts_sent=done)
        self._log_attempt(row, where, sent_before, done, len(parts), "sent")
        report.sent += 1
        return False

    async def _feedback_view(
        self,
        run: RunRecord,
        chat_id: int,
        digest: Digest | None,
        *,
        topic: str | None,
        language: str | None,
        resend: bool,
        left_out: RulesDecision | None,
    ) -> ReaderView | None:
        """What this chat's feedback keeps of a monitor `digest`'s stories, after its rules (None without one)."""
        if digest is None:
            return None
        return await self._feedback.view_for(
            run,
            chat_id,
            after_rules(digest, left_out),
            items=(await self._items_of(run.id)).stored,
            topic=topic,
            language=language or "",
            resend=resend,
            recounted=left_out.recounted if left_out is not None else (),
        )

    async def _rules_decision(self, row: DeliveryRecord, run: RunRecord, digest: Digest | None) -> RulesDecision | None:
        """What this chat's own rules take out of a monitor `digest` (`rules_view`; collection ran once, for every
        reader). Decided when the row's first part is built and stored on the row, so a resend shows the same digest;
        a chat without rules gets the digest whole. Never raises: rules that cannot be applied leave the digest whole
        (logged), they never hold a delivery back."""
        monitor_id = digest_monitor_id(run)
        if digest is None or monitor_id is None:
            return None
        if row.parts_sent:
            return _decision_of(row.left_out)
        try:
            rules = ReaderRules.from_stored(await self._rules.get(monitor_id, row.chat_id))
            decision = None
            if rules is not None:
                decision = rules_view(digest, (await self._items_of(run.id)).entries(), rules)
            if decision is not None or row.left_out is not None:
                await self._deliveries.record_left_out(
                    row.id, decision.model_dump(mode="json") if decision is not None else None
                )
        except Exception:
            logger.warning("delivery %d: the chat's rules could not be applied; sending the digest whole", row.id,
                           exc_info=True)  # fmt: skip
            return None
        return decision

    async def _items_of(self, run_id: int) -> _RunItems:
        """The run's stored items, read once for every chat it goes to (its rules and its feedback), also when
        its chats are sent concurrently: they wait on the one read; a failed read is dropped, so the next asks again."""
        if run_id not in self._run_items:
            if len(self._run_items) >= _ENTRY_CACHE_RUNS:
                self._run_items.pop(next(iter(self._run_items)))
            self._run_items[run_id] = asyncio.ensure_future(self._read_items(run_id))
        read = self._run_items[run_id]
        try:
            return await asyncio.shield(read)
        except Exception:
            if self._run_items.get(run_id) is read:
                del self._run_items[run_id]
            raise

    async def _read_items(self, run_id: int) -> _RunItems:
        return _RunItems((await self._items.of_runs([run_id])).get(run_id, []))

    async def _leave(self, row: DeliveryRecord, where: str, before: int, done: int, total: int) -> None:
        """The process is stopping: the row stays open with the parts confirmed so far, due at once for the next
        process (its claim's lease would otherwise hold it for up to `lease`)."""
        self._log_attempt(row, where, before, done, total, "stopping: the rest is left for the next process")
        await self._deliveries.renew({row.id}, worker=self.identity, until=self._clock())

    @staticmethod
    def _log_attempt(row: DeliveryRecord, where: str, before: int, done: int, total: int, result: str) -> None:
        logger.info(
            "delivery %d (run %d) to %s, attempt %d: parts %d→%d of %d sent; %s",
            row.id, row.run_id, where, row.attempts, before, done, total, result,
        )  # fmt: skip

    async def _load_run(self, run_id: int) -> tuple[RunRecord, str | None, str | None] | None:
        """The run with its monitor's topic and language (None for runs without a monitor)."""
        run = await self._runs.get(run_id)
        if run is None:
            return None
        monitor = await self._monitors.get(run.monitor_id) if run.monitor_id is not None else None
        return run, monitor.topic if monitor else None, monitor.language if monitor else None

    async def _fail(
        self, row: DeliveryRecord, error: str, report: DeliveryReport, *, retry_after: float | None = None
    ) -> None:
        wait = self._backoff.delay(row.attempts, retry_after)
        retry_at = self._clock() + timedelta(seconds=wait) if wait is not None else None
        updated = await self._deliveries.mark_failed(row.id, error=error[:500], retry_at=retry_at)
        if updated is not None and updated.status is DeliveryStatus.DEAD:
            logger.warning("delivery %d given up after %d attempts: %s", row.id, updated.attempts, error)
            report.dead += 1
        else:
            report.retrying += 1


async def mark_chat_gone(database: Database, chat: ChatRecord, *, reason: str, now: datetime | None = None) -> None:
    """Blocked, kicked or deleted: the chat goes inactive, its subscriptions pause, its pending digests are
    given up (nothing is retried) and the monitors it owns go to their oldest subscribers. Used by the delivery
    worker and by frontends that hear it first."""
    logger.warning("chat %d on %s is gone (%s): pausing its subscriptions", chat.id, chat.platform, reason)
    await ChatRepository(database).update(chat.id, active=False)
    await SubscriptionRepository(database).set_active_for_chat(chat.id, active=False)
    await DeliveryRepository(database).give_up_for_chat(chat.id, error=reason[:500])
    await hand_over_monitors(database, chat, now=now or datetime.now(UTC))


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
