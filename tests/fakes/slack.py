"""A fake Slack on 127.0.0.1: the Web API the bot calls, and a signer for the requests Slack sends to the bot.

Point slack_sdk at it with `AsyncWebClient(token, base_url=fake.api_url)` (SLACK_API_URL). It runs on its own
thread and event loop (like `tests.fakes.http_server`), so sync and async tests can use it.

Web API: `POST /api/<method>` with the token in `Authorization: Bearer …` (a wrong token gets `invalid_auth`),
parameters in the query string, a form or a JSON body. Answers are HTTP 200 with `{"ok": true, ...}` or
`{"ok": false, "error": "..."}`; a rate limit is HTTP 429 with `Retry-After` and `{"ok": false, "error":
"ratelimited"}`, as Slack does. The fake enforces Block Kit's limits (50 blocks, 3,000 characters per section,
150 per header): a message over them gets `invalid_blocks`, like Slack.

Methods: auth.test, chat.postMessage, chat.update, files.getUploadURLExternal, the upload URL it hands out
(`POST /upload/<file id>`, raw bytes, answered in text/plain like files.slack.com), files.completeUploadExternal.
`fake.response_url()` makes a slash command's `response_url` (`POST /response/<n>`, JSON body) whose posts are
recorded in `fake.responses`. `fake.host_file(name, bytes)` is a file a person shared: the Slack file object to put
in a `file_share` event, its bytes served at `url_private_download` to the bot token only (`fake.downloads`);
`chunk_size=` streams them in chunks, as files.slack.com streams a large file (`fake.served_bytes`).

Reading what arrived: `fake.calls` (every `ApiCall(method, params)`), `fake.calls_to("chat.postMessage")`,
`fake.messages` / `fake.messages_in(channel)` (`PostedMessage`: channel, ts, text, blocks, thread_ts, and the
edits it went through), `fake.files` (`UploadedFile`: filename, title, content, channel, thread_ts, shared),
`fake.responses` (`ResponsePost`). `message.mass_mentions()` / `file.mass_mentions()`: the @here/@channel/@everyone
notifications Slack would send for what arrived (`<!here>` anywhere; typed `@here` unless the text is verbatim).

Scripting: `fake.fail("chat.postMessage", "ratelimited", retry_after=1, times=1)`, `fake.fail(...,
"channel_not_found", channel="C1")`; `fake.not_a_member("C9")` makes posting there answer `not_in_channel`.

Socket Mode: `apps.connections.open` (with the app-level token) hands out `ws://…/link`; the bot connects there
and gets a `hello`. `fake.push_envelope("events_api", body)` (or "slash_commands", "interactive") sends an
envelope to the connected bot and returns its id; the bot's acknowledgements land in `fake.acks`
(envelope id → the response payload, {} for a bare ack).

Requests into the bot: `SlackSigner(secret)` signs a body the way Slack does (`v0=` HMAC-SHA256 of
`v0:{timestamp}:{body}`); `event_body`, `command_body` and `action_body` build the payloads.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import WSMsgType, web

from tests.fakes.http_server import ThreadedFakeServer, serve_in_chunks

BOT_TOKEN = "xoxb-test-fake-token"
APP_TOKEN = "xapp-test-fake-app-token"
BOT_USER_ID = "U0LOOKOUT"
BOT_ID = "B0LOOKOUT"
TEAM_ID = "T0TEAM"
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
_SPECIAL_MENTION = re.compile(r"<!(?:here|channel|everyone)(?:\|[^<>]*)?>", re.IGNORECASE)
"""Slack's manual syntax for notifying a whole channel or workspace: it notifies wherever mrkdwn is read."""
_TYPED_SPECIAL_MENTION = re.compile(r"(?<![\w@])@(?:here|channel|everyone)\b", re.IGNORECASE)
"""The same typed as words: Slack's automatic parsing turns them into notifications unless a text is verbatim."""


def mass_mentions(text: str, *, verbatim: bool = False) -> list[str]:
    """The @here/@channel/@everyone notifications Slack would send for this mrkdwn (its manual `<!here>` syntax
    anywhere; the typed words too unless the text object is `verbatim`)."""
    found = _SPECIAL_MENTION.findall(text)
    return found if verbatim else found + _TYPED_SPECIAL_MENTION.findall(text)


def _block_mass_mentions(value: Any) -> list[str]:
    """`mass_mentions` of every mrkdwn text object inside a block (sections, context elements, fields, …)."""
    if isinstance(value, list):
        return [found for item in value for found in _block_mass_mentions(item)]
    if not isinstance(value, dict):
        return []
    if value.get("type") == "mrkdwn" and isinstance(value.get("text"), str):
        return mass_mentions(value["text"], verbatim=value.get("verbatim") is True)
    return [found for item in value.values() for found in _block_mass_mentions(item)]


@dataclass(frozen=True)
class ApiCall:
    """One Web API call as it arrived: its parameters (nested values still JSON text) and headers."""

    method: str
    params: dict[str, str]
    headers: dict[str, str]

    def json_param(self, name: str) -> Any:
        value = self.params.get(name)
        return None if value is None else json.loads(value)


@dataclass
class PostedMessage:
    """A message the bot posted with chat.postMessage (updated in place by chat.update)."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    edits: list[str] = field(default_factory=list)
    """Every text chat.update set, in order (the current text is `text`)."""

    def section_texts(self) -> list[str]:
        return [block["text"]["text"] for block in self.blocks or [] if block.get("type") == "section"]

    def block_types(self) -> list[str]:
        return [str(block.get("type")) for block in self.blocks or []]

    def mass_mentions(self) -> list[str]:
        """The channel-wide notifications this message would send (its `text` and its blocks' mrkdwn)."""
        return mass_mentions(self.text) + _block_mass_mentions(self.blocks or [])


@dataclass
class UploadedFile:
    """A file uploaded through files.getUploadURLExternal → upload URL → files.completeUploadExternal."""

    file_id: str
    filename: str
    length: int
    content: bytes = b""
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    shared: bool = False

    def mass_mentions(self) -> list[str]:
        """The channel-wide notifications its comment would send (a file's comment is mrkdwn)."""
        return mass_mentions(self.initial_comment or "")


@dataclass
class ResponsePost:
    """A message posted to a slash command's response_url."""

    url: str
    payload: dict[str, Any]


@dataclass
class _Scripted:
    method: str
    error: str
    status: int
    retry_after: int | None
    channel: str | None
    remaining: int


class FakeSlack(ThreadedFakeServer):
    """The fake Slack Web API; see the module docstring."""

    def __init__(self, *, token: str = BOT_TOKEN, app_token: str = APP_TOKEN) -> None:
        super().__init__(thread_name="fake-slack")
        self.token = token
        self.app_token = app_token
        self.acks: dict[str, dict[str, Any]] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._envelope_ids = itertools.count(1)
        self.calls: list[ApiCall] = []
        self.messages: list[PostedMessage] = []
        self.files: list[UploadedFile] = []
        self.responses: list[ResponsePost] = []
        self.rejected: list[tuple[str, str]] = []
        """(method, error) of every call answered with an error."""
        self._script: list[_Scripted] = []
        self._not_member: set[str] = set()
        self._ts = itertools.count(1)
        self._file_ids = itertools.count(1)
        self._response_ids = itertools.count(1)
        self.hosted: dict[str, bytes] = {}
        """Files people shared (`host_file`), by file id."""
        self.downloads: list[tuple[str, str]] = []
        """(path, Authorization header) of every request for a hosted file."""
        self._chunk_sizes: dict[str, int] = {}
        self.served_bytes: dict[str, int] = {}
        """file id → bytes written of a file served in chunks before the download ended or was cut off."""

    # ---- addresses and scripting -------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """SLACK_API_URL for the bot (slack_sdk appends the method name)."""
        return f"{self.url}/api/"

    def response_url(self) -> str:
        """A fresh response_url, as Slack puts in each slash command and button payload."""
        return f"{self.url}/response/{next(self._response_ids)}"

    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int | None = None,
        retry_after: int | None = None,
        channel: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` calls of `method` (in `channel`, if given) with `error`; "ratelimited" is a
        429 with `Retry-After: retry_after` unless `status` says otherwise."""
        code = status if status is not None else (429 if error == "ratelimited" else 200)
        self._script.append(_Scripted(method, error, code, retry_after, channel, times))

    def host_file(
        self, name: str, content: bytes, *, chunk_size: int | None = None, reported_size: int | None = None
    ) -> dict[str, Any]:
        """A file a person shared, as Slack describes it in a `file_share` message event: its bytes are served at
        `url_private_download` to requests carrying the bot token (`Authorization: Bearer …`), like files.slack.com.
        `chunk_size`: streamed that many bytes at a time (`fake.served_bytes` says how many went out);
        `reported_size`: the size the event claims instead of the true one (a forged event)."""
        file_id = f"FSHARED{next(self._file_ids)}"
        self.hosted[file_id] = content
        if chunk_size is not None:
            self._chunk_sizes[file_id] = chunk_size
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "size": len(content) if reported_size is None else reported_size,
            "mimetype": "application/octet-stream",
            "url_private": f"{self.url}/files-pri/{TEAM_ID}-{file_id}/{name}",
            "url_private_download": f"{self.url}/files-pri/{TEAM_ID}-{file_id}/download/{name}",
        }

    def not_a_member(self, channel: str) -> None:
        """The bot is not in `channel`: posting and sharing files there answer `not_in_channel`."""
        self._not_member.add(channel)

    def push_envelope(self, kind: str, payload: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Send a Socket Mode envelope to the connected bot; returns its envelope id."""
        if not self._sockets:
            raise AssertionError("no Socket Mode connection is open")
        envelope_id = f"env-{next(self._envelope_ids)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        sending = asyncio.run_coroutine_threadsafe(self._sockets[-1].send_str(json.dumps(envelope)), self._loop)
        sending.result(timeout=5)
        return envelope_id

    @property
    def socket_connections(self) -> int:
        return sum(1 for ws in self._sockets if not ws.closed)

    # ---- reading -----------------------------------------------------------------------------------------

    def calls_to(self, method: str) -> list[ApiCall]:
        return [call for call in self.calls if call.method == method]

    def messages_in(self, channel: str, *, thread_ts: str | None = None) -> list[PostedMessage]:
        return [m for m in self.messages if m.channel == channel and (thread_ts is None or m.thread_ts == thread_ts)]

    def shared_files(self, channel: str) -> list[UploadedFile]:
        return [file for file in self.files if file.shared and file.channel == channel]

    # ---- serving -----------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/api/"):
            return await self._api(request)
        if request.path.startswith("/upload/"):
            return await self._upload(request)
        if request.path.startswith("/files-pri/"):
            return await self._hosted_file(request)
        if request.path == "/link":
            return await self._socket_mode(request)
        if request.path.startswith("/response/"):
            payload = await request.json()
            self.responses.append(ResponsePost(str(request.url), payload))
            return web.Response(text="ok", content_type="text/html")
        return web.Response(status=404, text="not found")

    async def _api(self, request: web.Request) -> web.Response:
        method = request.path.removeprefix("/api/")
        params = await _read_params(request)
        headers = {key.lower(): value for key, value in request.headers.items()}
        call = ApiCall(method, params, headers)
        self.calls.append(call)
        token = self.app_token if method == "apps.connections.open" else self.token
        if headers.get("authorization") != f"Bearer {token}":
            return self._error(method, "invalid_auth")
        scripted = self._scripted(call)
        if scripted is not None:
            extra = {"Retry-After": str(scripted.retry_after)} if scripted.retry_after is not None else {}
            return self._error(method, scripted.error, status=scripted.status, headers=extra)
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            return self._error(method, "unknown_method", status=404)
        try:
            result = await handler(call)
        except _SlackError as error:
            return self._error(method, error.code)
        return web.json_response({"ok": True, **result})

    def _error(
        self, method: str, error: str, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> web.Response:
        self.rejected.append((method, error))
        return web.json_response({"ok": False, "error": error}, status=status, headers=headers)

    def _scripted(self, call: ApiCall) -> _Scripted | None:
        channel = call.params.get("channel") or call.params.get("channel_id")
        for entry in self._script:
            if entry.method == call.method and entry.channel in (None, channel) and entry.remaining > 0:
                entry.remaining -= 1
                return entry
        return None

    async def _stop(self) -> None:
        for ws in self._sockets:
            await ws.close()
        await super()._stop()

    async def _socket_mode(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0LOOKOUT"}}
        await ws.send_str(json.dumps(hello))
        async for message in ws:
            if message.type is not WSMsgType.TEXT:
                continue
            ack = json.loads(message.data)
            if "envelope_id" in ack:
                self.acks[ack["envelope_id"]] = ack.get("payload") or {}
        return ws

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.path.removeprefix("/upload/")
        body = await request.read()
        for file in self.files:
            if file.file_id == file_id:
                file.content = body
                return web.Response(text=f"OK - {len(body)}", content_type="text/plain")
        return web.Response(status=404, text="unknown upload", content_type="text/plain")

    async def _hosted_file(self, request: web.Request) -> web.StreamResponse:
        self.downloads.append((request.path, request.headers.get("Authorization", "")))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=302, headers={"Location": "https://slack.com/signin"})
        file_id = request.path.removeprefix("/files-pri/").split("/", 1)[0].removeprefix(f"{TEAM_ID}-")
        content = self.hosted.get(file_id)
        if content is None:
            return web.Response(status=404)
        if file_id not in self._chunk_sizes:
            return web.Response(body=content)
        response, self.served_bytes[file_id] = await serve_in_chunks(
            request, content, chunk_size=self._chunk_sizes[file_id]
        )
        return response

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    # Handlers are named `_api_<method with _ for .>`; they raise _SlackError for Slack's `ok: false` answers.

    async def _api_auth_test(self, call: ApiCall) -> dict[str, Any]:
        return {
            "url": "https://lookout-test.slack.com/",
            "team": "Lookout Test",
            "user": "lookout",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    async def _api_apps_connections_open(self, call: ApiCall) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/link?ticket=fake"}

    async def _api_chat_postMessage(self, call: ApiCall) -> dict[str, Any]:
        channel = self._channel(call, "channel")
        blocks = call.json_param("blocks") if "blocks" in call.params else None
        text = call.params.get("text", "")
        if not text and not blocks:
            raise _SlackError("no_text")
        _check_blocks(blocks)
        message = PostedMessage(channel, self._next_ts(), text, blocks, call.params.get("thread_ts") or None)
        self.messages.append(message)
        return {"channel": channel, "ts": message.ts, "message": {"type": "message", "text": text, "ts": message.ts}}

    async def _api_chat_update(self, call: ApiCall) -> dict[str, Any]:
        channel = self._channel(call, "channel")
        ts = call.params.get("ts", "")
        for message in self.messages:
            if message.channel == channel and message.ts == ts:
                text = call.params.get("text", "")
                blocks = call.json_param("blocks") if "blocks" in call.params else None
                _check_blocks(blocks)
                message.text = text
                message.blocks = blocks
                message.edits.append(text)
                return {"channel": channel, "ts": ts, "text": text}
        raise _SlackError("message_not_found")

    async def _api_files_getUploadURLExternal(self, call: ApiCall) -> dict[str, Any]:
        filename = call.params.get("filename", "")
        length = int(call.params.get("length") or 0)
        if not filename or length <= 0:
            raise _SlackError("invalid_arguments")
        file = UploadedFile(f"F{next(self._file_ids):08d}", filename, length)
        self.files.append(file)
        return {"upload_url": f"{self.url}/upload/{file.file_id}", "file_id": file.file_id}

    async def _api_files_completeUploadExternal(self, call: ApiCall) -> dict[str, Any]:
        entries = call.json_param("files") or []
        channel = call.params.get("channel_id")
        if channel is not None:
            channel = self._channel(call, "channel_id")
        shared = []
        for entry in entries:
            file = next((f for f in self.files if f.file_id == entry.get("id")), None)
            if file is None or len(file.content) != file.length:
                raise _SlackError("file_not_found" if file is None else "file_upload_size_mismatch")
            file.title = entry.get("title")
            file.channel = channel
            file.thread_ts = call.params.get("thread_ts") or None
            file.initial_comment = call.params.get("initial_comment") or None
            file.shared = channel is not None
            shared.append({"id": file.file_id, "name": file.filename, "title": file.title or file.filename})
        return {"files": shared}

    def _channel(self, call: ApiCall, name: str) -> str:
        channel = call.params.get(name, "")
        if not channel:
            raise _SlackError("channel_not_found")
        if channel in self._not_member:
            raise _SlackError("not_in_channel")
        return channel


class _SlackError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _check_blocks(blocks: Any) -> None:
    """Slack's Block Kit limits: a message breaking them is refused with invalid_blocks."""
    if blocks is None:
        return
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        raise _SlackError("invalid_blocks")
    for block in blocks:
        text = block.get("text", {}).get("text", "") if isinstance(block.get("text"), dict) else ""
        if block.get("type") == "section" and not 0 < len(text) <= MAX_SECTION_TEXT:
            raise _SlackError("invalid_blocks")
        if block.get("type") == "header" and not 0 < len(text) <= MAX_HEADER_TEXT:
            raise _SlackError("invalid_blocks")


async def _read_params(request: web.Request) -> dict[str, str]:
    """Query, form or JSON parameters, every value as text (nested JSON values re-encoded)."""
    params: dict[str, str] = {**request.query}
    if not request.can_read_body:
        return params
    if request.content_type == "application/json":
        for key, value in (await request.json() or {}).items():
            if value is not None:
                params[key] = value if isinstance(value, str) else json.dumps(value)
        return params
    form = await request.post()
    for key, value in form.items():
        params[key] = value if isinstance(value, str) else str(value)
    return params


@contextmanager
def running_fake_slack(*, token: str = BOT_TOKEN) -> Iterator[FakeSlack]:
    """A started fake, stopped on exit."""
    fake = FakeSlack(token=token)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


# ---- requests Slack sends to the bot ---------------------------------------------------------------------


class SlackSigner:
    """Signs request bodies the way Slack does, for the bot's /slack/events endpoint."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def headers(self, body: bytes, *, timestamp: int | None = None, content_type: str) -> dict[str, str]:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        base = b"v0:" + stamp.encode() + b":" + body
        signature = "v0=" + hmac.new(self.secret.encode(), base, hashlib.sha256).hexdigest()
        return {
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature,
            "Content-Type": content_type,
        }


def event_body(event: dict[str, Any], *, event_id: str) -> bytes:
    """An Events API callback (JSON) carrying `event`, as POSTed in HTTP mode."""
    return json.dumps(event_payload(event, event_id=event_id)).encode()


def event_payload(event: dict[str, Any], *, event_id: str) -> dict[str, Any]:
    """An Events API callback carrying `event` (the payload of an `events_api` envelope in Socket Mode)."""
    return {
        "token": "unused-verification-token",
        "team_id": TEAM_ID,
        "api_app_id": "A0LOOKOUT",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
    }


def command_body(command: str, text: str, *, channel: str, user: str, response_url: str) -> bytes:
    """A slash command invocation, form-encoded as Slack POSTs it in HTTP mode."""
    return urlencode(command_payload(command, text, channel=channel, user=user, response_url=response_url)).encode()


def command_payload(command: str, text: str, *, channel: str, user: str, response_url: str) -> dict[str, str]:
    """A slash command's fields (the payload of a `slash_commands` envelope in Socket Mode)."""
    return {
        "token": "unused-verification-token",
        "team_id": TEAM_ID,
        "team_domain": "lookout-test",
        "channel_id": channel,
        "channel_name": "directmessage" if channel.startswith("D") else "research",
        "user_id": user,
        "user_name": "ann",
        "command": command,
        "text": text,
        "api_app_id": "A0LOOKOUT",
        "response_url": response_url,
        "trigger_id": "1337.42.abcd",
    }


def action_body(
    *,
    value: str,
    label: str,
    channel: str,
    user: str,
    message_ts: str,
    thread_ts: str | None,
    response_url: str,
    blocks: list[dict[str, Any]] | None = None,
) -> bytes:
    """A block_actions payload for a press on one of the bot's buttons (form field `payload`, as Slack sends);
    `blocks` are the pressed message's blocks, as Slack includes them."""
    container: dict[str, Any] = {"type": "message", "message_ts": message_ts, "channel_id": channel}
    message: dict[str, Any] = {"type": "message", "ts": message_ts, "user": BOT_USER_ID, "bot_id": BOT_ID}
    message["text"] = "a question"
    message["blocks"] = blocks or []
    if thread_ts:
        container["thread_ts"] = thread_ts
        message["thread_ts"] = thread_ts
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM_ID, "domain": "lookout-test"},
        "user": {"id": user, "username": "ann", "team_id": TEAM_ID},
        "api_app_id": "A0LOOKOUT",
        "token": "unused-verification-token",
        "container": container,
        "trigger_id": "1337.43.abcd",
        "channel": {"id": channel, "name": "research"},
        "message": message,
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": "lookout_button_0",
                "block_id": "b1",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "value": value,
                "action_ts": str(time.time()),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()
