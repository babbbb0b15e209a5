"""The platform-neutral dispatcher: access, de-duplication, one lock per conversation, one error boundary.

Every adapter (Telegram, Slack, terminal) turns a platform update into an `Incoming` and calls
`Dispatcher.dispatch`. The dispatcher

1. checks the access policy. A person outside the allowlists gets one short "this bot is private" reply per
   chat and process in a one-to-one chat, and silence in groups (a group full of strangers should not see
   the bot answer each of them);
2. waits for the conversation's lock, so the messages of one conversation (platform, chat, thread) are
   answered one at a time and in the order they arrived, while other conversations run concurrently. The
   lock is the first thing `dispatch` waits for, so calls started in order are served in order; locks are
   dropped as soon as no message of the conversation is in flight. With `shared_locks` (several processes on
   PostgreSQL) a lock every process sees is taken next, so messages reaching different processes are answered
   one at a time too, in the order they reach the database. Under the lock it first waits for the
   conversation's background work in this process (a memory fold left by the previous turn) if still running;
3. reads the turn in one transaction (`ChatTurns.begin`, the chats service `app` hands in): marks the update
   handled (stored before any work starts, so a restart or a platform retry does not answer twice; a duplicate
   ends here), stores the chat and the person when new or renamed, and reads the conversation's state and the
   chat's tokens today. A chat the bot had been blocked or kicked from is reactivated: someone writes there
   again, so its subscriptions resume.
   Only now is the message *admitted* (`dispatch(admitted=…)`): the adapter acknowledges the update to its
   platform once it is stored. While the database is unreachable (a restart, a failover) the shared lock and
   this read are tried again with `DATABASE_BACKOFF` until it answers, holding the conversation's place: the
   message waits, unacknowledged, instead of failing;
4. hands a `Turn` to the conversation layer, inside the one error boundary: any exception is logged with a
   short error id and the person reads "Something went wrong on my side (error id …)", never internal text;
5. still holding the lock, calls the adapter's `deliver` with the replies, so they reach the chat in order;
6. starts the turn's `after_reply` work in the background (the next turn of the conversation waits for it).

A free-text turn thus costs two transactions: this read (one INSERT, one SELECT; on PostgreSQL one statement doing
both, committed as it runs) and the conversation layer's one write (memory and usage together, committed before
the reply is delivered). A crash after that write and before the delivery loses the reply but not its memory or
usage; a crash before it loses the turn, and the stored de-duplication mark keeps a redelivered update from being
answered twice (at most once, never twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from agent import AccessPolicy, AfterReply, Incoming, Turn, ignore_progress
from kernel import Backoff, Clock, ProgressSink, ProgressUpdate, Reply, Sleep, apology, new_error_id, utc_now
from storage import ChatRecord, TurnOpening, TurnStart, is_unreachable

__all__ = [
    "ChatTurns",
    "Deliver",
    "Dispatcher",
    "Dispatches",
    "Responder",
    "SharedLocks",
    "error_reply",
]

logger = logging.getLogger(__name__)

INBOUND_RETENTION = timedelta(days=7)
"""How long handled update ids are kept: Telegram keeps updates 24 h, Slack retries within the hour."""
_PRUNE_EVERY = timedelta(hours=1)
DATABASE_BACKOFF = Backoff(attempts=None, base=0.5, cap=5.0)
"""How a message waits for an unreachable database (taking its conversation's shared lock, storing its turn):
for ever (it is not acknowledged meanwhile, so nothing is lost), at most 5 s apart, so it goes on within 5 s of
the database's return."""
_DENIED_CHATS_REMEMBERED = 10_000

Deliver = Callable[[list[Reply]], Awaitable[None]]
"""The adapter's way of sending replies to the chat the message came from, called under the conversation's
lock (so replies keep their order). It handles the platform's own errors; what it raises is logged."""


class Dispatches(Protocol):
    """What a frontend needs of `Dispatcher` (tests and benchmarks may hand a frontend their own)."""

    async def dispatch(
        self,
        incoming: Incoming,
        *,
        progress: ProgressSink = ...,
        deliver: Deliver | None = None,
        admitted: Callable[[], None] | None = None,
        mark_first: bool = False,
    ) -> list[Reply]: ...


class SharedLocks(Protocol):
    """Locks every process on one database sees (`storage.AdvisoryLocks` on PostgreSQL): with several web
    processes, one conversation's messages are answered one at a time wherever they arrive."""

    def hold(self, name: str) -> AbstractAsyncContextManager[None]: ...


class ChatTurns(Protocol):
    """What the dispatcher stores and reads about chats (`monitors.ChatService`, built in `app`): the turn's
    de-duplication mark and its one read, a chat back after being gone, and what adapters report about chats."""

    async def seen_before(self, platform: str, event_id: str, *, now: datetime) -> bool: ...

    async def received_at(self, platform: str, event_id: str) -> datetime | None: ...

    async def forget_handled_before(self, cutoff: datetime) -> int: ...

    async def begin(self, opening: TurnOpening) -> TurnStart | None: ...

    async def resume(self, chat: ChatRecord) -> ChatRecord: ...

    async def gone(self, platform: str, external_id: str, *, reason: str, now: datetime) -> None: ...

    async def moved(self, platform: str, old_external_id: str, new_external_id: str) -> None: ...


class Responder(Protocol):
    """The conversation layer (`agent.conversation.Conversation`)."""

    async def respond(self, turn: Turn) -> list[Reply]: ...


def _nothing() -> None:
    """No one waits for the message's admission."""


def error_reply() -> tuple[str, Reply]:
    """A fresh error id and the reply that names it."""
    error_id = new_error_id()
    return error_id, Reply(text=apology(error_id))


@dataclass
class _Slot:
    """A conversation's lock and how many messages hold or wait for it (the slot goes when that is 0)."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Dispatcher:
    """Turns each accepted `Incoming` into replies through the conversation layer; see the module docstring."""

    def __init__(
        self,
        chats: ChatTurns,
        conversation: Responder,
        access: AccessPolicy,
        *,
        clock: Clock = utc_now,
        shared_locks: SharedLocks | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._conversation = conversation
        self._sleep = sleep
        self._access = access
        self._clock = clock
        self._chats = chats
        self._slots: dict[tuple[str, str, str], _Slot] = {}
        self._shared_locks = shared_locks
        self._background: dict[tuple[str, str, str], asyncio.Task[None]] = {}
        self._denied: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._last_prune: datetime | None = None

    @property
    def access(self) -> AccessPolicy:
        return self._access

    @property
    def conversations_in_flight(self) -> int:
        """Conversations with a message being handled or waiting (their locks exist only meanwhile)."""
        return len(self._slots)

    async def dispatch(
        self,
        incoming: Incoming,
        *,
        progress: ProgressSink = ignore_progress,
        deliver: Deliver | None = None,
        admitted: Callable[[], None] | None = None,
        mark_first: bool = False,
    ) -> list[Reply]:
        """The replies to one message (also passed to `deliver`, under the conversation's lock).

        Empty when the message is a duplicate, not for the bot, or from a stranger already told once.
        `admitted` is called once the message is stored (its turn begun, or found a duplicate) and so its place
        in its conversation's order is fixed (with `shared_locks`, the order across processes is the order the
        shared lock is granted in). The adapter acknowledges the update then: a webhook answers, long polling
        confirms it, so the platform sends the conversation's next message (maybe to another process) only after
        this one took its place, and sends this one again if the process stops before.

        With `mark_first` (Slack events: Slack sends nothing in order, but wants an answer within 3 s) the
        de-duplication mark is stored before the conversation's lock is waited for, and `admitted` is called once
        it is: a message behind a long turn of its conversation is acknowledged at once, one that arrives while
        the database is away only once the mark is stored.
        """
        admit = admitted or _nothing
        if not self._access.allows(incoming):
            admit()
            replies = self._denied_replies(incoming)
            if replies and deliver is not None:
                await self._deliver(deliver, replies)
            return replies
        if mark_first and incoming.event_id is not None:
            try:
                fresh = await self._store_mark(incoming)
            except Exception:  # refused for good (not an outage): the person reads the error reply
                admit()
                error_id, reply = error_reply()
                logger.exception("storing %s event %s failed [error id %s]", incoming.platform, incoming.event_id,
                                 error_id)  # fmt: skip
                if deliver is not None:
                    await self._deliver(deliver, [reply])
                return [reply]
            admit()
            if not fresh:
                logger.info("%s event %s was handled before; ignored", incoming.platform, incoming.event_id)
                return []
            incoming = incoming.model_copy(update={"event_id": None})  # its mark is stored: the turn needs none
        key = incoming.conversation_key
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        slot.users += 1
        try:
            # The process's own lock is the first await, so callers started in order are served in order; the
            # shared lock then waits for the conversation's messages being answered by other processes.
            async with slot.lock, self._shared_lock(key):
                earlier = self._background.get(key)
                if earlier is not None:
                    await asyncio.wait([earlier])  # the previous turn's fold: its outcome is its own business
                after_reply: list[AfterReply] = []
                replies = await self._answer(incoming, progress, after_reply, admit)
                if replies and deliver is not None:
                    await self._deliver(deliver, replies)
                if after_reply:
                    self._start_background(key, after_reply)
        finally:
            slot.users -= 1
            if slot.users == 0 and self._slots.get(key) is slot:
                del self._slots[key]
        await self._prune_inbound()
        return replies

    def _shared_lock(self, key: tuple[str, str, str]) -> AbstractAsyncContextManager[None]:
        if self._shared_locks is None:
            return nullcontext()
        return self._held_when_reachable(self._shared_locks, "conversation:" + ":".join(key))

    @asynccontextmanager
    async def _held_when_reachable(self, locks: SharedLocks, name: str) -> AsyncIterator[None]:
        """`locks.hold(name)`, taken again and again while the database is unreachable (see `DATABASE_BACKOFF`)."""
        async with AsyncExitStack() as held:
            retry = 0
            while True:
                try:
                    await held.enter_async_context(locks.hold(name))
                    break
                except Exception as error:
                    if not is_unreachable(error):
                        raise
                    retry += 1
                    await self._wait_for_database(retry, error, what=f"taking the lock {name}")
            yield

    async def _wait_for_database(self, retry: int, error: BaseException, *, what: str) -> None:
        delay = DATABASE_BACKOFF.delay(retry) or DATABASE_BACKOFF.cap
        log = logger.warning if retry == 1 else logger.info
        log("%s: the database is unreachable (%s); retry %d in %.1f s", what, _brief(error), retry, delay)
        await self._sleep(delay)

    async def _store_mark(self, incoming: Incoming) -> bool:
        """Store the message's de-duplication mark (tried again while the database is unreachable): True when it
        is this message's, False when the event was stored before (a duplicate). A try whose connection died after
        storing it knows the mark as its own by the time it was stored with, as in `_begin`."""
        assert incoming.event_id is not None
        retry = 0
        now = self._clock()
        while True:
            try:
                if not await self._chats.seen_before(incoming.platform, incoming.event_id, now=now):
                    return True
                return retry > 0 and await self._chats.received_at(incoming.platform, incoming.event_id) == now
            except Exception as error:
                if not is_unreachable(error):
                    raise
                retry += 1
                await self._wait_for_database(
                    retry, error, what=f"storing {incoming.platform} event {incoming.event_id}"
                )

    async def _begin(self, incoming: Incoming) -> TurnStart | None:
        """The turn's first transaction (`ChatTurns.begin`), tried again while the database is unreachable.

        A try whose connection died may have stored the de-duplication mark before it failed; the next try then
        finds the update "handled before". The mark keeps the time it was stored with: when that is this message's
        own, the mark is ours and the turn begins without it."""
        retry = 0
        now = self._clock()
        event_id = incoming.event_id
        while True:
            try:
                opening = TurnOpening(
                    platform=incoming.platform,
                    chat_external_id=incoming.chat_external_id,
                    user_external_id=incoming.user_external_id,
                    thread_key=incoming.thread_key,
                    day=now.astimezone(UTC).date(),
                    now=now,
                    event_id=event_id,
                    chat_title=incoming.chat_title or (incoming.user_display_name if incoming.is_private else None),
                    user_name=incoming.user_display_name,
                )
                start = await self._chats.begin(opening)
                if start is not None or retry == 0 or event_id is None:
                    return start
                if await self._chats.received_at(incoming.platform, event_id) != now:
                    return None  # someone else's mark: a duplicate indeed
                logger.info("%s event %s: its mark was stored before the connection died", incoming.platform, event_id)
                event_id = None
            except Exception as error:
                if not is_unreachable(error):
                    raise
                retry += 1
                what = f"storing {incoming.platform} event {incoming.event_id}"
                await self._wait_for_database(retry, error, what=what)

    async def _answer(
        self, incoming: Incoming, progress: ProgressSink, after_reply: list[AfterReply], admit: Callable[[], None]
    ) -> list[Reply]:
        """The error boundary around everything that touches storage or the conversation layer."""
        try:
            try:
                start = await self._begin(incoming)
            except Exception:
                admit()  # refused for good (not an outage): the error reply below is the answer
                raise
            admit()  # stored, or a duplicate; a cancelled wait is not admitted (the platform sends it again)
            if start is None:
                logger.info("%s event %s was handled before; ignored", incoming.platform, incoming.event_id)
                return []
            chat = start.chat if start.chat.active else await self._chats.resume(start.chat)
            turn = Turn(
                incoming=incoming,
                chat=chat,
                user=start.user,
                is_admin=self._access.is_admin(incoming),
                progress=_guarded(progress),
                state=start.state,
                after_reply=after_reply,
            )
            return await self._conversation.respond(turn)
        except Exception:
            error_id, reply = error_reply()
            logger.exception(
                "handling a %s message in chat %s failed [error id %s]",
                incoming.platform,
                incoming.chat_external_id,
                error_id,
            )
            return [reply]

    async def _deliver(self, deliver: Deliver, replies: list[Reply]) -> None:
        try:
            await deliver(replies)
        except Exception:
            error_id, reply = error_reply()
            logger.exception("sending replies failed [error id %s]", error_id)
            try:
                await deliver([reply])
            except Exception:  # the platform is unreachable: the log has it all
                logger.warning("could not tell the person about error %s either", error_id)

    def _start_background(self, key: tuple[str, str, str], work: list[AfterReply]) -> None:
        async def run() -> None:
            for job in work:
                try:
                    await job()
                except Exception:  # background work (a memory fold) is best effort: log, never lose the turn
                    logger.exception("background work after a reply failed")

        task = asyncio.create_task(run(), name=f"after reply {key[0]}:{key[1]}")
        self._background[key] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._background.get(key) is done:
                del self._background[key]

        task.add_done_callback(forget)

    async def finish_background(self) -> None:
        """Wait for the background work of every conversation (at shutdown, after the frontends stopped)."""
        while self._background:
            await asyncio.wait(list(self._background.values()))

    def _denied_replies(self, incoming: Incoming) -> list[Reply]:
        platform, user, chat_id = incoming.platform, incoming.user_external_id, incoming.chat_external_id
        logger.info("%s user %s in chat %s is not allowed", platform, user, chat_id)
        if not incoming.is_private:
            return []
        chat = (incoming.platform, incoming.chat_external_id)
        if chat in self._denied:
            return []
        self._denied[chat] = None
        while len(self._denied) > _DENIED_CHATS_REMEMBERED:
            self._denied.popitem(last=False)
        return [Reply(text=self._access.denied_text(incoming))]

    async def _prune_inbound(self) -> None:
        now = self._clock()
        if self._last_prune is not None and now - self._last_prune < _PRUNE_EVERY:
            return
        self._last_prune = now
        try:
            await self._chats.forget_handled_before(now - INBOUND_RETENTION)
        except Exception:  # housekeeping: never the person's problem
            logger.warning("could not prune handled update ids", exc_info=True)

    # ---- what adapters report about chats -------------------------------------------------------------

    async def chat_gone(self, platform: str, external_id: str, *, reason: str) -> None:
        """The bot was blocked, kicked, or the chat deleted: the chat goes inactive, its subscriptions pause and
        its pending digests are given up (the same as the delivery worker does for a digest)."""
        await self._chats.gone(platform, external_id, reason=reason, now=self._clock())

    async def chat_moved(self, platform: str, old_external_id: str, new_external_id: str) -> None:
        """The chat has a new id (a Telegram group became a supergroup): its monitors and memory follow."""
        await self._chats.moved(platform, old_external_id, new_external_id)


def _brief(error: BaseException) -> str:
    """An error in a few words for a log line (no traceback, no connection string)."""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}" if str(error) else type(error).__name__


def _guarded(progress: ProgressSink) -> ProgressSink:
    """A status line that fails to show must not fail the work it reports on."""

    async def report(update: ProgressUpdate) -> None:
        try:
            await progress(update)
        except Exception:
            logger.warning("showing progress failed", exc_info=True)

    return report
