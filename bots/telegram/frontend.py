"""The Telegram frontend: python-telegram-bot's Application on the shared event loop, feeding the dispatcher.

Long polling by default (`bots.telegram.polling`: retries through Bot API outages with backoff and confirms an
update to Telegram only once it is stored); webhook mode when `webhook_url` is set: `setWebhook` with the secret at
start, and the shared HTTP server mounts `webhook_route()` at `/telegram/webhook`, which refuses requests without
the secret (403).

Updates are read one at a time, in order: each becomes an `Incoming` (`bots.telegram.updates`) and a task
that calls `Dispatcher.dispatch` at once, so the dispatcher's per-conversation lock sees them in arrival order
while different chats are answered concurrently. At most `max_in_flight` messages are handled at a time;
beyond that, reading updates waits (back-pressure instead of an unbounded pile of tasks).

A webhook request is answered (200), and a polled update confirmed, only once its message is stored and has taken
its place in the conversation's order (`Dispatcher.dispatch`'s `admitted`: with several web processes, once it
holds the conversation's shared lock). While the database is unreachable the message waits for it, unacknowledged.
Telegram sends a chat's next update only after the previous one was answered, so a chat's consecutive messages
reaching different processes behind a load balancer are still answered in the order they were written. A request
whose message could not take its place (the process is stopping) gets 503, and Telegram sends the update again;
an update about the chat itself (blocked, migrated) that could not be stored because the database was away is
refused the same way.

A button pressed again under the same message within `REPEAT_PRESS_SECONDS` (a double tap) only has its spinner
stopped: the first press is the one acted on.

While a message is handled the chat shows "typing…" (not for an instant command such as /help); progress goes to
one status line edited in place; replies go out under the conversation's lock through the process's one
`TelegramSender`, whose `Bot` (with the rate limiter) is also the Application's: answers, status edits and digests
share one Bot and one limiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from telegram import BotCommand, Document, Update
from telegram.constants import ChatMemberStatus
from telegram.error import Conflict, TelegramError
from telegram.ext import Application, ContextTypes, TypeHandler

from agent import MAX_INCOMING_FILE_BYTES, IncomingFile, bot_commands, is_instant_command
from bots.dispatcher import Dispatcher
from bots.telegram.polling import ConfirmingPoller
from bots.telegram.request import AiohttpRequest
from bots.telegram.sender import TelegramSender, acknowledged
from bots.telegram.typing_indicators import TypingIndicators
from bots.telegram.updates import BotIdentity, Received, migration, received_from_update
from kernel import Reply
from storage import is_unreachable

__all__ = ["WEBHOOK_PATH", "WEBHOOK_SECRET_HEADER", "TelegramFrontend", "TelegramOptions"]

logger = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name, not a secret
ALLOWED_UPDATES = ("message", "callback_query", "my_chat_member")
WEBHOOK_MAX_CONNECTIONS = 100
"""setWebhook's `max_connections` (Telegram's most; its default is 40): a request waits for its message's place in
line, i.e. for the chat's previous message to be answered, and holds one of these connections meanwhile."""
REPEAT_PRESS_SECONDS = 10.0
"""A press of the same button under the same message this soon after the last one is a double tap (or a slow network's
second try): its spinner is stopped, and it is not acted on again, which would only answer "no longer open"."""
_GONE_STATUSES = frozenset({ChatMemberStatus.BANNED, ChatMemberStatus.LEFT})
"""The bot's own membership after being blocked (private chats) or removed (groups)."""


@dataclass(frozen=True, kw_only=True)
class TelegramOptions:
    """How to reach Telegram (built by `app` from TELEGRAM_* settings)."""

    token: str
    """TELEGRAM_BOT_TOKEN."""
    api_url: str = "https://api.telegram.org"
    """TELEGRAM_API_URL: the Bot API server (a self-hosted one, or a fake in tests)."""
    webhook_url: str | None = None
    """TELEGRAM_WEBHOOK_URL: the public https URL that reaches `/telegram/webhook`; None means long polling."""
    webhook_secret: str | None = None
    """TELEGRAM_WEBHOOK_SECRET: required with a webhook; Telegram sends it in a header with every update."""
    poll_timeout: float = 30.0
    """Seconds one getUpdates long poll waits for updates."""
    max_in_flight: int = 256
    """Messages handled at the same time (across chats); reading updates waits beyond that."""
    progress_interval: float = 1.0
    """At most one edit of a status message per this many seconds."""
    stop_timeout: float = 30.0
    """On stop, how long messages being handled may take to finish before they are cancelled."""
    poll_on_start: bool = True
    """Long-poll as soon as started; False when several processes share the token and the one that leads polls
    (`start_polling`/`stop_polling`), since Telegram allows one getUpdates consumer per token."""


class TelegramFrontend:
    """Connects Telegram to the dispatcher. `await start()`, serve, `await stop()`; see the module docstring."""

    def __init__(
        self,
        options: TelegramOptions,
        dispatcher: Dispatcher,
        sender: TelegramSender,
        *,
        commands: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        self._options = options
        self._dispatcher = dispatcher
        self._sender = sender
        self._commands = list(commands) if commands is not None else bot_commands()
        self._application: Application | None = None  # type: ignore[type-arg]
        self._identity: BotIdentity | None = None
        self._typing: TypingIndicators | None = None
        self._in_flight = asyncio.Semaphore(options.max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()
        self._admissions: dict[int, asyncio.Future[None]] = {}
        """id(update) → what its webhook request (or the poller) waits for before acknowledging it."""
        self._poller: ConfirmingPoller | None = None
        self._unadmitted: dict[asyncio.Task[None], asyncio.Future[None]] = {}
        """Messages being handled and not yet stored (waiting for their turn or for the database)."""
        self._running = False
        self._presses: dict[tuple[str, int | None, str | None], float] = {}
        """(chat, message, button data) → when it was last pressed (`time.monotonic()`), within REPEAT_PRESS_SECONDS."""

    @property
    def identity(self) -> BotIdentity | None:
        """The bot's id and username once started."""
        return self._identity

    @property
    def mode(self) -> str:
        return "webhook" if self._options.webhook_url else "polling"

    async def start(self) -> None:
        """Connect (getMe), register the commands, then poll or set the webhook. Raises if Telegram refuses the
        token or cannot be reached at all."""
        # The process's one Bot (built by app with its rate limiter); the Application polls and reads with it.
        application = Application.builder().bot(self._sender.bot).job_queue(None).updater(None).build()
        application.add_handler(TypeHandler(Update, self._on_update))
        application.add_error_handler(self._on_error)
        await application.initialize()
        self._application = application
        try:
            await self._connect(application)
        except BaseException:
            await self.stop()  # leave nothing half-started (connections, a poller) behind
            raise
        self._running = True
        logger.info("telegram: @%s connected (%s)", application.bot.username, self.mode)

    async def _connect(self, application: Application) -> None:  # type: ignore[type-arg]
        options = self._options
        bot = application.bot
        self._identity = BotIdentity(id=bot.id, username=bot.username)
        self._typing = TypingIndicators(bot)
        await self._register_commands()
        if options.webhook_url:
            await bot.set_webhook(
                options.webhook_url,
                secret_token=options.webhook_secret,
                allowed_updates=list(ALLOWED_UPDATES),
                max_connections=WEBHOOK_MAX_CONNECTIONS,
            )
            await application.start()
        else:
            await application.start()
            if options.poll_on_start:
                await self.start_polling()

    async def start_polling(self) -> None:
        """Start reading updates with getUpdates (raises when not started, or in webhook mode)."""
        application = self._application
        if application is None or not application.running:
            raise RuntimeError("telegram is not connected yet")
        if self._options.webhook_url:
            raise RuntimeError("telegram runs in webhook mode")
        if self._poller is None:  # one per frontend: what was read and stored outlives a leadership's term
            self._poller = ConfirmingPoller(
                application.bot,
                self._take,
                timeout=self._options.poll_timeout,
                allowed_updates=ALLOWED_UPDATES,
                on_error=self._polling_failed,
            )
        if self._poller.running:
            return
        self._poller.start()
        logger.info("telegram: polling for updates")

    async def _take(self, update: Update) -> asyncio.Future[None]:
        """Hand a polled update to the Application; the future ends when it is stored (or refused)."""
        assert self._application is not None
        admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._admissions[id(update)] = admitted
        await self._application.update_queue.put(update)
        return admitted

    async def stop_polling(self) -> None:
        """Stop reading updates (those stored so far are confirmed to Telegram); messages being handled go on."""
        if self._poller is not None and self._poller.running:
            await self._poller.stop()
            logger.info("telegram: stopped polling")

    @property
    def polling(self) -> bool:
        return self._poller is not None and self._poller.running

    async def stop(self) -> None:
        """Stop reading updates, let messages being handled finish (up to `stop_timeout`), disconnect."""
        application, self._application = self._application, None
        self._running = False
        if application is None:
            return
        if self._poller is not None:
            await self._poller.stop()
        if application.running:
            await application.stop()
        for task, admission in list(self._unadmitted.items()):
            if not admission.done():  # not stored, not acknowledged: Telegram sends it again; no need to wait
                task.cancel()
        if self._tasks:
            _done, pending = await asyncio.wait(set(self._tasks), timeout=self._options.stop_timeout)
            for task in pending:
                task.cancel()
            if pending:
                logger.warning("telegram: %d message(s) were still being handled at stop; cancelled", len(pending))
                await asyncio.gather(*pending, return_exceptions=True)
        for admission in self._admissions.values():  # updates never handed over: Telegram sends them again
            _refuse(admission)
        self._admissions.clear()
        await application.shutdown()

    async def healthy(self) -> bool:
        """For /healthz: started and (in polling mode, unless another process leads the polling) polling."""
        application = self._application
        if not self._running or application is None or not application.running:
            return False
        return bool(self._options.webhook_url) or not self._options.poll_on_start or self.polling

    def webhook_route(self) -> Route:
        """The Starlette route for `/telegram/webhook` (mount it on the shared HTTP server)."""
        return Route(WEBHOOK_PATH, self._webhook, methods=["POST"])

    # ---- receiving --------------------------------------------------------------------------------------

    async def _webhook(self, request: Request) -> Response:
        secret = self._options.webhook_secret
        given = request.headers.get(WEBHOOK_SECRET_HEADER, "")
        if not secret or not hmac.compare_digest(given.encode(), secret.encode()):
            logger.warning("telegram webhook: request without the right secret refused")
            return Response(status_code=403)
        application = self._application
        if application is None or not application.running:
            return Response(status_code=503)  # Telegram retries later
        try:
            update = Update.de_json(await request.json(), application.bot)
        except Exception as error:  # malformed JSON or not an update: nothing Telegram should resend
            logger.warning("telegram webhook: unreadable update (%s)", type(error).__name__)
            return Response(status_code=400)
        admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._admissions[id(update)] = admitted
        try:
            await application.update_queue.put(update)
            await admitted  # the message took its place in its conversation's order (see the module docstring)
        except _NotAdmittedError:
            return Response(status_code=503)  # Telegram sends it again, maybe to another process
        finally:
            self._admissions.pop(id(update), None)
            if not admitted.done():  # this request was given up (the connection closed): nobody waits any more
                admitted.cancel()
        return Response(status_code=200)

    async def _on_update(self, update: Update, _context: ContextTypes.DEFAULT_TYPE) -> None:
        """Called by the Application for each update, one at a time and in order."""
        assert self._identity is not None
        admitted = self._admissions.pop(id(update), None)
        handed_over = False
        try:
            moved = migration(update)
            if moved is not None:
                await self._dispatcher.chat_moved("telegram", *moved)
                return
            membership = update.my_chat_member
            if membership is not None:
                if membership.new_chat_member.status in _GONE_STATUSES:
                    chat_id = str(membership.chat.id)
                    await self._dispatcher.chat_gone("telegram", chat_id, reason="the bot was blocked or removed")
                return
            received = received_from_update(update, self._identity)
            if received is None:
                return
            if received.callback_query_id is not None and self._repeated_press(received):
                self._spawn_answer(received.callback_query_id)
                return
            await self._in_flight.acquire()
            task = asyncio.create_task(
                self._handle(received, lambda: _admit(admitted)), name=f"telegram update {update.update_id}"
            )
            self._tasks.add(task)
            if admitted is not None:
                self._unadmitted[task] = admitted
            task.add_done_callback(lambda done: self._finished(done, admitted))
            handed_over = True
        except Exception as error:
            if is_unreachable(error):  # not stored: Telegram sends it again (the poller reads it again)
                logger.warning("telegram: update %d could not be stored (%s); left for later", update.update_id, error)
                _refuse(admitted)
                handed_over = True
            else:
                raise
        finally:
            if not handed_over:  # handled here (or failed here): nothing to wait for
                _admit(admitted)

    def _finished(self, task: asyncio.Task[None], admitted: asyncio.Future[None] | None) -> None:
        self._tasks.discard(task)
        self._unadmitted.pop(task, None)
        self._in_flight.release()
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            _refuse(admitted)  # stopped or failed before its turn (no lock, no database): Telegram sends it again
        else:
            _admit(admitted)
        if error is not None:
            logger.error("telegram: handling an update failed", exc_info=error)

    async def _handle(self, received: Received, admitted: Callable[[], None]) -> None:
        assert self._application is not None and self._typing is not None
        bot, sender = self._application.bot, self._sender
        incoming = received.incoming
        chat_id = incoming.chat_external_id
        if received.callback_query_id is not None:
            self._spawn_answer(received.callback_query_id)
        status = sender.status_line(chat_id, thread_id=received.thread_id, interval=self._options.progress_interval)

        async def deliver(answer: list[Reply]) -> None:
            await status.close()
            if received.callback_query_id is not None and received.message_id is not None:
                # The buttons were pressed: they did their job, or (a digest's feedback) the row shows what was done.
                row = next((reply.pressed_row for reply in answer if reply.pressed_row is not None), None)
                markup = acknowledged(received.keyboard, incoming.callback_data, row) if row is not None else None
                with contextlib.suppress(TelegramError):
                    await bot.edit_message_reply_markup(chat_id, received.message_id, reply_markup=markup)
            await sender.send_replies(chat_id, answer, events=self._dispatcher, thread_id=received.thread_id)

        # An instant command (/help, /monitors) is answered before "typing…" would show: no timer, no call.
        typing = (
            contextlib.nullcontext()
            if is_instant_command(incoming.text)
            else self._typing.in_chat(chat_id, thread_id=received.thread_id)
        )
        async with typing:
            if received.document is not None:
                incoming = incoming.model_copy(update={"file": await self._download(received.document)})
            await self._dispatcher.dispatch(incoming, progress=status, deliver=deliver, admitted=admitted)
        await status.close()

    async def _download(self, document: Document) -> IncomingFile:
        """The document's bytes (up to `MAX_INCOMING_FILE_BYTES`), or why there are none."""
        assert self._application is not None
        name = (document.file_name or "file")[:255]
        size = document.file_size or 0
        if size > MAX_INCOMING_FILE_BYTES:
            limit = MAX_INCOMING_FILE_BYTES // 1_000_000
            return IncomingFile(filename=name, size=size, problem=f"{name} is over the {limit} MB limit for files.")
        bot = self._application.bot
        request = bot.request
        if not isinstance(request, AiohttpRequest):  # `build_bot` gives the process's one Bot this transport
            raise TypeError("the Telegram frontend's Bot must use AiohttpRequest")
        try:
            file = await bot.get_file(document.file_id)
            # the size Telegram reported is its word: what bounds memory is the bytes read
            content = await request.download_at_most(file.file_path or "", MAX_INCOMING_FILE_BYTES)
        except TelegramError as error:
            logger.warning("telegram: could not download a document (%s)", error)
            return IncomingFile(
                filename=name, size=size, problem="Telegram would not hand me that file; send it again."
            )
        if len(content) > MAX_INCOMING_FILE_BYTES:
            limit = MAX_INCOMING_FILE_BYTES // 1_000_000
            return IncomingFile(
                filename=name, size=len(content), problem=f"{name} is over the {limit} MB limit for files."
            )
        return IncomingFile(filename=name, size=len(content), content=content)

    def _repeated_press(self, received: Received) -> bool:
        """Whether this button press repeats one made under the same message within REPEAT_PRESS_SECONDS."""
        now = time.monotonic()
        self._presses = {key: at for key, at in self._presses.items() if now - at < REPEAT_PRESS_SECONDS}
        incoming = received.incoming
        key = (incoming.chat_external_id, received.message_id, incoming.callback_data)
        repeated = key in self._presses
        self._presses[key] = now
        return repeated

    def _spawn_answer(self, query_id: str) -> None:
        """Answer the button press at once (stops its spinner), without holding up the message's turn."""
        assert self._application is not None
        bot = self._application.bot

        async def answer() -> None:
            try:
                await bot.answer_callback_query(query_id)
            except TelegramError as error:  # an old query (over 15 minutes) cannot be answered; harmless
                logger.info("telegram: could not answer a button press (%s)", error)

        task = asyncio.create_task(answer(), name="telegram answer callback")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- housekeeping -----------------------------------------------------------------------------------

    async def _register_commands(self) -> None:
        assert self._application is not None
        commands = [BotCommand(name, description[:256]) for name, description in self._commands]
        try:
            await self._application.bot.set_my_commands(commands)
        except TelegramError as error:  # the menu is a convenience; the commands work without it
            logger.warning("telegram: setMyCommands failed (%s)", error)

    def _polling_failed(self, error: TelegramError) -> None:
        if isinstance(error, Conflict):  # Telegram allows one getUpdates poller per token
            logger.warning("telegram: another process is polling with this token (%s); retrying", error)
        else:
            logger.warning("telegram: polling failed (%s); retrying with backoff", error)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        logger.error("telegram: error while reading an update", exc_info=context.error)


class _NotAdmittedError(Exception):
    """The update's message never took its place (the process stopped first)."""


def _admit(admitted: asyncio.Future[None] | None) -> None:
    if admitted is not None and not admitted.done():
        admitted.set_result(None)


def _refuse(admitted: asyncio.Future[None] | None) -> None:
    if admitted is not None and not admitted.done():
        admitted.set_exception(_NotAdmittedError())
        # Marked as seen: whoever still waits on it gets the refusal all the same, but at stop the poller has already
        # gone, and asyncio would log each unread refusal as a traceback ("Future exception was never retrieved").
        admitted.exception()
