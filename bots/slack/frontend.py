"""The Slack frontend (slack-bolt, async): slash commands, mentions, DMs and buttons in; Block Kit and files out.

Socket Mode when an app-level token is given (no public URL needed); otherwise HTTP mode, where `routes()`
gives the `/slack/events` route for the shared Starlette app and Bolt verifies every request's signature
with the signing secret (a bad or stale signature gets 401).

Nothing is acknowledged to Slack before it is stored (Bolt runs with `process_before_response`, so the listener
decides the answer). An event (a mention, a DM) is answered 2xx, or its Socket Mode envelope acknowledged, only
once its de-duplication mark is stored; if that takes longer than `STORE_PATIENCE_SECONDS` (the database is away)
the request gets 503 and the envelope no acknowledgement, so Slack sends the event again, while this process
goes on waiting for the database: a retry of an event still waiting here joins it, and the stored mark keeps an
event from being answered twice. Slash commands and button presses cannot be sent again that way: they are
acknowledged at once as before, and when one is not stored within `STORE_PATIENCE_SECONDS` the person reads
`UNSTORED_TEXT` (it is answered when the database is back, unless the process stops first).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Coroutine, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent import MAX_INCOMING_FILE_BYTES, Incoming, IncomingFile
from bots.dispatcher import Dispatches
from bots.downloads import read_at_most
from bots.slack.api import TRANSIENT_ERRORS, error_code
from bots.slack.events import (
    SLASH_COMMANDS,
    AnsweredButtons,
    SharedFile,
    answered_buttons,
    file_to_import,
    incoming_from_action,
    incoming_from_command,
    incoming_from_event,
    pressed_in_rows,
    row_answered,
)
from bots.slack.render import BUTTON_ACTION_PREFIX
from bots.slack.sender import SlackSender, SlackTarget
from kernel import Button, Reply

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
ACK_TEXT = "on it…"
"""What a slash command answers at once (Slack wants an answer within 3 seconds); the result follows."""
STORE_PATIENCE_SECONDS = 2.5
"""How long a request waits for its message to be stored before Slack is told otherwise: Slack's limit is 3 s."""
UNSTORED_TEXT = (
    "I can't reach my database right now, so I'll answer this once it is back. If no answer comes, send it again."
)
"""What a person reads when their command or button press was acknowledged but could not be stored in time."""


class CredentialsRefusedError(RuntimeError):
    """Slack refused the bot token at start: retrying will not help until the token is fixed."""


class SlackFrontend:
    """Lookout on Slack. Build it, mount `routes()` in HTTP mode, `await start()`, and `await stop()` at the end.

    Slash commands (`/lookout …` and the top-level ones in `SLASH_COMMANDS`) are acknowledged at once with
    "on it…" and answered in the background; mentions and direct messages are free text with memory per
    thread; button presses come back with their callback data. Everything goes through the dispatcher (access,
    de-duplication on Slack's `event_id`, ordering); replies are posted as Block Kit with chat.postMessage into
    the channel (the thread for mentions), falling back to the command's `response_url` where the bot is not a
    member; files go through files_upload_v2; long work shows one status message edited in place.
    """

    def __init__(
        self,
        sender: SlackSender,
        *,
        dispatcher: Dispatches,
        app_token: str | None = None,
        signing_secret: str | None = None,
        progress_interval: float = 2.0,
        shutdown_grace: float = 30.0,
    ) -> None:
        if not app_token and not signing_secret:
            raise ValueError("Slack needs SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP mode)")
        self.mode: Literal["socket", "http"] = "socket" if app_token else "http"
        # The process's one web client, shared with the sender that delivers digests.
        self._sender = sender
        self.client = sender.client
        self.app = AsyncApp(
            # Bolt's own client (it makes one per request from it) carries no token: `_authorize` gives the bot's.
            client=AsyncWebClient(
                base_url=self.client.base_url,
                timeout=self.client.timeout,
                logger=self.client.logger,
                retry_handlers=list(self.client.retry_handlers or []),
            ),
            authorize=lambda enterprise_id, team_id: self._authorize(enterprise_id, team_id),  # Bolt passes by name
            signing_secret=signing_secret or "",
            name="lookout",
            logger=logging.getLogger("slack_bolt"),
            process_before_response=True,  # the listeners decide the answer: 2xx only once stored
        )
        self._dispatcher = dispatcher
        self._app_token = app_token
        self._progress_interval = progress_interval
        self._shutdown_grace = shutdown_grace
        self._tasks: set[asyncio.Task[None]] = set()
        self._admissions: dict[str, asyncio.Future[None]] = {}
        """Events being handled here by `event_id` until stored: Slack's retry of one joins the first try."""
        self._socket: AsyncSocketModeHandler | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._http_handler = AsyncSlackRequestHandler(self.app)
        self._started = False
        self.bot_user_id: str | None = None
        self._bot_id: str | None = None
        self._file_hosts = {"files.slack.com", urlsplit(self.client.base_url).hostname}
        """Where shared files may be downloaded from with the bot token."""
        self._register()

    # ---- lifecycle ----------------------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """`POST /slack/events` for the shared HTTP app in HTTP mode (nothing in Socket Mode)."""
        if self.mode != "http":
            return []
        return [Route(EVENTS_PATH, self._http_endpoint, methods=["POST"])]

    def sender(self) -> SlackSender:
        """The process's one Slack sender (answers and digests), sharing this frontend's web client."""
        return self._sender

    async def start(self) -> None:
        """Check the token (auth.test), then connect Socket Mode (retrying in the background if Slack is down)."""
        try:
            await self._identify()
        except SlackApiError as error:
            raise CredentialsRefusedError(f"Slack refused SLACK_BOT_TOKEN: {error_code(error)}") from error
        except TRANSIENT_ERRORS as error:  # `_authorize` asks again on the next request
            logger.warning("slack: auth.test failed (%s); carrying on", type(error).__name__)
        if self.mode == "socket":
            self._socket = AsyncSocketModeHandler(self.app, self._app_token)
            self._connecting = asyncio.create_task(self._connect(self._socket), name="slack socket mode")
        self._started = True

    async def _identify(self) -> None:
        """Who the bot is (auth.test), kept for every request after."""
        identity = await self.client.auth_test()
        self.bot_user_id = str(identity.get("user_id") or "") or None
        self._bot_id = str(identity.get("bot_id") or "") or None
        logger.info("slack: signed in as %s in team %s", identity.get("user"), identity.get("team"))

    async def _authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        """Bolt's authorization of each request: the bot token and who the bot is, as learnt at start (asked again
        only while unknown). Bolt's own way calls auth.test on the first request and, if Slack has a passing
        failure then, answers the person "reinstall this app" and drops the event; here a request always goes on."""
        if self.bot_user_id is None:
            try:
                await self._identify()
            except SlackApiError as error:  # the request goes on, the bot's id unknown
                logger.warning("slack: auth.test failed again (%s); carrying on", error_code(error))
            except TRANSIENT_ERRORS as error:
                logger.warning("slack: auth.test failed again (%s); carrying on", type(error).__name__)
        return AuthorizeResult(
            enterprise_id=enterprise_id, team_id=team_id, bot_token=self.client.token, bot_user_id=self.bot_user_id,
            bot_id=self._bot_id,
        )  # fmt: skip

    async def _connect(self, handler: AsyncSocketModeHandler) -> None:
        # The SDK's connect keeps retrying by itself (logging each failure) until it is connected or closed.
        await handler.connect_async()  # type: ignore[no-untyped-call]
        logger.info("slack: Socket Mode connected")

    @property
    def in_flight(self) -> int:
        """Messages being answered in the background right now."""
        return len(self._tasks)

    async def healthy(self) -> bool:
        """For /healthz: started, and in Socket Mode connected."""
        if not self._started:
            return False
        if self._socket is None:
            return True
        connected = await self._socket.client.is_connected()
        return bool(connected)

    async def stop(self) -> None:
        """Disconnect, let in-flight answers finish (up to the grace period), then cancel what is left."""
        self._started = False
        if self._connecting is not None:
            self._connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connecting
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await self._socket.close_async()  # type: ignore[no-untyped-call]
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=self._shutdown_grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)

    async def _http_endpoint(self, request: Request) -> Response:
        return await self._http_handler.handle(request)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- Bolt listeners -----------------------------------------------------------------------------------

    def _register(self) -> None:
        for name in SLASH_COMMANDS:
            self.app.command(name)(self._on_command)
        self.app.event("app_mention")(self._on_event)
        self.app.event("message")(self._on_event)
        self.app.action(re.compile(f"^{BUTTON_ACTION_PREFIX}"))(self._on_action)

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        await ack(text=ACK_TEXT)
        try:
            incoming = incoming_from_command(body)
        except ValueError as error:
            logger.warning("slack: ignoring a slash command: %s", error)
            return
        target = SlackTarget(channel=incoming.chat_external_id, response_url=_url(body.get("response_url")))
        admission: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._spawn(self._handle(incoming, target, admission=admission))
        self._spawn(self._tell_if_unstored(admission, target))

    async def _on_event(self, body: dict[str, Any], context: AsyncBoltContext) -> BoltResponse | None:
        """None (Bolt answers 200) once the event is stored or ignored; 503 when it was not stored in time."""
        bot_user_id = context.bot_user_id or self.bot_user_id
        try:
            incoming = incoming_from_event(body, bot_user_id=bot_user_id)
        except ValueError as error:
            logger.warning("slack: ignoring an event: %s", error)
            return None
        if incoming is None:
            return None
        event_id = incoming.event_id
        admission = self._admissions.get(event_id) if event_id else None
        if admission is None:  # not a retry of an event still waiting here
            admission = asyncio.get_running_loop().create_future()
            if event_id:
                self._admissions[event_id] = admission
            target = SlackTarget(channel=incoming.chat_external_id, thread_ts=incoming.thread_key or None)
            shared = file_to_import(body, bot_user_id=bot_user_id)
            self._spawn(self._handle(incoming, target, shared=shared, admission=admission, mark_first=True))
        if await _stored_in_time(admission):
            return None
        logger.warning("slack: event %s not stored within %.1f s; Slack will send it again", event_id,
                       STORE_PATIENCE_SECONDS)  # fmt: skip
        return BoltResponse(status=503, body="")

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        try:
            incoming = incoming_from_action(body)
        except ValueError as error:
            logger.warning("slack: ignoring a button press: %s", error)
            return
        if incoming is None:
            return
        target = SlackTarget(
            channel=incoming.chat_external_id,
            thread_ts=incoming.thread_key or None,
            response_url=_url(body.get("response_url")),
        )
        admission: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._spawn(self._press(body, incoming, target, admission))
        self._spawn(self._tell_if_unstored(admission, target))

    async def _tell_if_unstored(self, admission: asyncio.Future[None], target: SlackTarget) -> None:
        """One line to the person whose acknowledged command or button press was not stored in time."""
        if await _stored_in_time(admission):
            return
        try:
            await self._sender.send_replies(target, [Reply(text=UNSTORED_TEXT)])
        except Exception as error:  # Slack is unreachable too: the log has it
            logger.warning("slack: could not say a message is not stored yet (%s)", type(error).__name__)

    async def _press(
        self, body: dict[str, Any], incoming: Incoming, target: SlackTarget, admission: asyncio.Future[None]
    ) -> None:
        """Take the buttons off the pressed message (a choice is made once), then answer the choice; a press in a
        digest's feedback rows instead changes its own row once answered (`Reply.pressed_row`)."""
        if pressed_in_rows(body):
            await self._handle(incoming, target, admission=admission, pressed=body)
            return
        answered = answered_buttons(body)
        if answered is not None:
            await self._show_answered(answered, "mark the pressed buttons as answered")
        await self._handle(incoming, target, admission=admission)

    # ---- answering ----------------------------------------------------------------------------------------

    async def _handle(
        self,
        incoming: Incoming,
        target: SlackTarget,
        *,
        shared: SharedFile | None = None,
        admission: asyncio.Future[None],
        mark_first: bool = False,
        pressed: Mapping[str, Any] | None = None,
    ) -> None:
        """Answer one message; `admission` is resolved once it is stored, cancelled if handling ends before."""
        try:
            await self._answer(
                incoming, target, shared=shared, admission=admission, mark_first=mark_first, pressed=pressed
            )
        finally:
            if not admission.done():
                admission.cancel()  # stopped or failed before it was stored: Slack sends an event again
            if incoming.event_id and self._admissions.get(incoming.event_id) is admission:
                del self._admissions[incoming.event_id]

    async def _answer(
        self,
        incoming: Incoming,
        target: SlackTarget,
        *,
        shared: SharedFile | None,
        admission: asyncio.Future[None],
        mark_first: bool,
        pressed: Mapping[str, Any] | None = None,
    ) -> None:
        status = self._sender.status_line(target.channel, thread_ts=target.thread_ts, interval=self._progress_interval)
        if shared is not None:
            incoming = incoming.model_copy(update={"file": await self._download(shared)})

        async def deliver(replies: list[Reply]) -> None:
            await status.close()
            row = next((reply.pressed_row for reply in replies if reply.pressed_row is not None), None)
            if pressed is not None and row is not None:
                await self._update_row(pressed, row)
            await self._sender.send_replies(target, replies)

        try:
            await self._dispatcher.dispatch(
                incoming, progress=status, deliver=deliver, admitted=lambda: _admit(admission), mark_first=mark_first
            )
        except Exception:  # the dispatcher has its own boundary; this one keeps a background task from dying loudly
            logger.exception("slack: handling a message in %s failed", incoming.chat_external_id)
        await status.close()

    async def _update_row(self, pressed: Mapping[str, Any], row: tuple[Button, ...]) -> None:
        """The pressed row of a digest's feedback shows what the press did."""
        answered = row_answered(pressed, row)
        if answered is not None:
            await self._show_answered(answered, "update the pressed row")

    async def _show_answered(self, answered: AnsweredButtons, what: str) -> None:
        """Replace the pressed message by its answered form; a failure is logged, never raised (the press was
        handled; only its display stays as it was)."""
        try:
            await self.client.chat_update(
                channel=answered.channel, ts=answered.ts, text=answered.text, blocks=answered.blocks
            )
        except SlackApiError as error:
            logger.info("slack: could not %s: %s", what, error_code(error))
        except TRANSIENT_ERRORS as error:
            logger.info("slack: could not %s: %s", what, type(error).__name__)

    async def _download(self, shared: SharedFile) -> IncomingFile:
        """A shared file's bytes (up to `MAX_INCOMING_FILE_BYTES`), fetched with the bot token, which goes only to
        Slack's file host (or the configured API host): a forged event cannot make it leak elsewhere."""
        name = shared.name[:255]
        limit = MAX_INCOMING_FILE_BYTES
        if shared.size > limit:
            return IncomingFile(filename=name, size=shared.size, problem=f"{name} is over the {limit // 1_000_000} MB "
                                "limit for files.")  # fmt: skip
        if urlsplit(shared.url).hostname not in self._file_hosts:
            logger.warning("slack: a shared file is not on Slack's file host; not downloaded")
            return IncomingFile(filename=name, size=shared.size, problem="That file is not on Slack; share it again.")
        headers = {"Authorization": f"Bearer {self.client.token}"}
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
                session.get(shared.url, headers=headers, allow_redirects=False) as response,
            ):
                if response.status != 200:
                    raise aiohttp.ClientError(f"HTTP {response.status}")
                content = await read_at_most(response.content, limit)  # whatever size the event claimed
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.warning("slack: could not download a shared file (%s)", error)
            return IncomingFile(filename=name, size=shared.size, problem="Slack would not hand me that file; share "
                                "it again (and check the app has the files:read scope).")  # fmt: skip
        if len(content) > limit:
            return IncomingFile(filename=name, size=len(content), problem=f"{name} is over the {limit // 1_000_000} "
                                "MB limit for files.")  # fmt: skip
        return IncomingFile(filename=name, size=len(content), content=content)


async def _stored_in_time(admission: asyncio.Future[None]) -> bool:
    """Whether the message was stored within `STORE_PATIENCE_SECONDS` (it may still be, later)."""
    await asyncio.wait({admission}, timeout=STORE_PATIENCE_SECONDS)
    return admission.done() and not admission.cancelled()


def _admit(admission: asyncio.Future[None]) -> None:
    if not admission.done():
        admission.set_result(None)


def _url(value: object) -> str | None:
    return value if isinstance(value, str) and value.startswith(("https://", "http://")) else None


__all__ = [
    "ACK_TEXT",
    "EVENTS_PATH",
    "STORE_PATIENCE_SECONDS",
    "UNSTORED_TEXT",
    "CredentialsRefusedError",
    "SlackFrontend",
]
