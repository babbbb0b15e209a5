"""A fake Telegram Bot API server on 127.0.0.1 that speaks the real wire format and records what the bot sent.

Point python-telegram-bot at it with `Bot(token, base_url=fake.api_url, base_file_url=fake.file_url)` or
`ApplicationBuilder().token(fake.token).base_url(fake.api_url)`. It runs on its own thread and event loop
(like `tests.fakes.http_server`), so sync and async tests, and benchmarks, can all use it.

Requests: `POST /bot<token>/<method>` with a JSON, form-encoded or multipart body (python-telegram-bot sends
forms, JSON-encoding nested values, and multipart when it uploads a file). Answers are
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": N, "description": "...", "parameters": {...}}`.
A wrong token gets 401, an unknown method 404.

Methods: getMe, getUpdates (queued updates from `offset` on; an empty queue is long-polled for at most
`min(timeout, long_poll_cap)` seconds), sendMessage, editMessageText, editMessageReplyMarkup, sendDocument,
sendPhoto (multipart uploads keep filename and bytes), sendChatAction, setMyCommands, answerCallbackQuery, setWebhook,
deleteWebhook, getWebhookInfo, getFile (for documents people sent, downloaded from `/file/bot<token>/<path>`).

Reading what arrived:
- `fake.calls` — every `ApiCall(method, params, files)` in order; `fake.calls_to("sendMessage")`.
- `fake.texts(chat_id)`, `fake.documents(chat_id)`, `fake.photos(chat_id)`, `fake.sent(chat_id)` — the
  `SentMessage`s each chat received (text with parse_mode; upload filename and bytes; caption), in order.
- `fake.commands`, `fake.webhook`, `fake.chat_actions`, `fake.answered_callbacks`, `fake.edits`.
- `fake.on_message(listener)` — called with each `SentMessage` as it arrives (on the fake's thread);
  `fake.served_at[update_id]` — when getUpdates first handed an update out (latency measurements).
- `fake.rejected` — how many calls were answered with an error (`fake.throttled`: 429s from the ceiling;
  `fake.conflicts`: getUpdates cut short with 409 by a newer one — two pollers on one token — as Telegram does).

Scripting:
- `fake.fail("sendMessage", ApiError.retry_after(5), chat_id=42, times=1)` — the next matching call(s)
  get that error instead. Ready-made: `ApiError.retry_after(n)`, `.blocked()`, `.cant_parse_entities()`,
  `.migrated(new_chat_id)`.
- `fake.push_update({...})`, `fake.push_text(chat_id, "hi")`, `fake.push_callback(message_id, data)`,
  `fake.push_document(chat_id, "feeds.opml", b"...", caption="/import")` —
  updates for getUpdates (ids assigned); a document's `reported_size=` is what the update and getFile claim,
  `chunk_size=` streams its bytes in chunks (`fake.served_bytes[file_id]`: how many went out);
  `fake.text_update(...)`/`fake.callback_update(...)` build the same updates without queueing them (to POST to a
  webhook).
- `RateLimit(per_second=30, per_chat_per_second=1, per_chat_burst=3, group_messages=20, group_period=60)`
  passed to the constructor: sends beyond the ceiling (token buckets: overall, per chat, and per group — a
  negative chat id — as Telegram's 20 messages a minute) get 429 with `retry_after`. `group_period` may be
  short in tests, so pacing shows in seconds, not minutes.
- `answer_delay=0.3`: every send is recorded at once but answered that much later, like a slow Bot API; a
  client killed meanwhile never hears that its message arrived.

Webhook delivery (`fake.deliver_to_webhook(upstreams)`): from then on, while a webhook is set (setWebhook), pushed
updates are POSTed to it instead of waiting for getUpdates, the way Telegram's Bot API server delivers them
(tdlib/telegram-bot-api, `WebhookActor`): one update of a chat at a time, the chat's next one only after the
previous got a 2xx answer; different chats at once, up to setWebhook's `max_connections` (default 40); a non-2xx
answer or a failed connection sends the same update again later (at once the first time, then after 2, 4, … s, or
the answer's `Retry-After`), the chat's later updates waiting behind it; the secret in
`X-Telegram-Bot-Api-Secret-Token`. `upstreams` stands for the load balancer in front of several web processes:
each POST goes to the next upstream URL in turn (round robin per request, as nginx does); without upstreams, to
the webhook URL itself. `fake.webhook_posts` records every POST (update id, upstream, status or error);
`served_at` is when an update's first POST began.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.http_server import ThreadedFakeServer, serve_in_chunks

DEFAULT_TOKEN = "123456:TEST-fake-token"
SEND_METHODS = frozenset({"sendMessage", "sendDocument", "sendPhoto"})
"""The methods the rate ceiling counts as messages."""


@dataclass(frozen=True)
class ApiError:
    """An error answer of the Bot API."""

    error_code: int
    description: str
    parameters: dict[str, int] | None = None

    @classmethod
    def retry_after(cls, seconds: int) -> ApiError:
        return cls(429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds})

    @classmethod
    def blocked(cls) -> ApiError:
        return cls(403, "Forbidden: bot was blocked by the user")

    @classmethod
    def cant_parse_entities(cls) -> ApiError:
        return cls(400, 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0')

    @classmethod
    def migrated(cls, new_chat_id: int) -> ApiError:
        return cls(
            400, "Bad Request: group chat was upgraded to a supergroup chat", {"migrate_to_chat_id": new_chat_id}
        )

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error_code": self.error_code, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


@dataclass(frozen=True)
class Upload:
    """A file that arrived in a multipart body."""

    field: str
    filename: str | None
    content: bytes


@dataclass(frozen=True)
class ApiCall:
    """One Bot API call as it arrived: string parameters (nested values still JSON text) and uploads."""

    method: str
    params: dict[str, str]
    files: dict[str, Upload]
    at: float = field(default_factory=time.monotonic)
    """When it arrived (`time.monotonic()`)."""

    @property
    def chat_id(self) -> str | None:
        return self.params.get("chat_id")

    def json_param(self, name: str) -> Any:
        """A parameter python-telegram-bot JSON-encoded (reply_markup, commands, entities)."""
        value = self.params.get(name)
        return None if value is None else json.loads(value)


@dataclass
class SentMessage:
    """A message the bot sent to a chat: text, document or photo."""

    message_id: int
    chat_id: str
    kind: str
    """"text", "document" or "photo"."""
    text: str | None = None
    parse_mode: str | None = None
    caption: str | None = None
    filename: str | None = None
    content: bytes | None = None
    reply_markup: Any = None
    at: float = field(default_factory=time.monotonic)
    """When it arrived (`time.monotonic()`), for throughput measurements."""


@dataclass(frozen=True)
class WebhookPost:
    """One POST of an update to the webhook (`deliver_to_webhook`) and how it ended."""

    update_id: int
    upstream: str
    status: int | None
    """The HTTP status of the answer; None when the connection failed (`error` says how)."""
    error: str | None = None
    at: float = field(default_factory=time.monotonic)
    """When the POST began (`time.monotonic()`)."""


DEFAULT_MAX_CONNECTIONS = 40
"""setWebhook's `max_connections` when not given (Telegram's default)."""


@dataclass
class RateLimit:
    """The ceiling the fake enforces on sends: token buckets overall, per chat and per group (bursts allowed)."""

    per_second: float = 30.0
    burst: float = 30.0
    per_chat_per_second: float | None = 1.0
    per_chat_burst: float = 3.0
    group_messages: float | None = 20.0
    """Sends to one group (a negative chat id) per `group_period`; None leaves groups to the other buckets."""
    group_period: float = 60.0
    tolerance: float = 0.05
    """Seconds of clock difference forgiven (the client's limiter and this fake time the same send apart)."""


@dataclass
class _Bucket:
    rate: float
    capacity: float
    tokens: float
    stamp: float = field(default_factory=time.monotonic)

    def take(self, now: float, *, tolerance: float = 0.0) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1 - tolerance * self.rate:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


@dataclass
class _Scripted:
    method: str
    error: ApiError
    chat_id: str | None
    remaining: int


class FakeTelegram(ThreadedFakeServer):
    """The fake Bot API server; see the module docstring for what it answers and records."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_username: str = "lookout_test_bot",
        rate_limit: RateLimit | None = None,
        long_poll_cap: float = 0.5,
        answer_delay: float = 0.0,
    ) -> None:
        super().__init__(thread_name="fake-telegram")
        self.answer_delay = answer_delay
        self.token = token
        self.bot_id = int(token.split(":", 1)[0])
        self.bot_username = bot_username
        self.rate_limit = rate_limit
        self.long_poll_cap = long_poll_cap
        self.calls: list[ApiCall] = []
        self.messages: list[SentMessage] = []
        self.edits: list[ApiCall] = []
        self.chat_actions: list[tuple[str, str]] = []
        self.commands: list[dict[str, str]] = []
        self.answered_callbacks: list[str] = []
        self.webhook: dict[str, str] = {}
        self.rejected = 0
        self.throttled = 0
        self.conflicts = 0
        """getUpdates calls cut short with 409 by a newer one (two pollers on one token), as Telegram does."""
        self._poll_in_flight: asyncio.Event | None = None
        self.served_at: dict[int, float] = {}
        """update_id → when getUpdates first handed the update out (`time.monotonic()`), for latency measurements."""
        self.files: dict[str, tuple[str, bytes]] = {}
        """file_id → (file_path, bytes) of documents people sent (`document_update`), for getFile and downloads."""
        self._reported_sizes: dict[str, int] = {}
        self._chunk_sizes: dict[str, int] = {}
        self.served_bytes: dict[str, int] = {}
        """file_id → bytes written of a document served in chunks before its download ended or was cut off."""
        self._listeners: list[Callable[[SentMessage], None]] = []
        self._script: list[_Scripted] = []
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.webhook_posts: list[WebhookPost] = []
        """Every POST of an update to the webhook, in order of starting (see `deliver_to_webhook`)."""
        self.webhook_max_connections = DEFAULT_MAX_CONNECTIONS
        self._upstreams: list[str] | None = None
        """None: updates wait for getUpdates; a list: they are POSTed to the webhook (see `deliver_to_webhook`)."""
        self._next_upstream = 0
        self._chat_queues: dict[str, deque[dict[str, Any]]] = {}
        self._chat_senders: set[asyncio.Task[None]] = set()
        self._connections: asyncio.Semaphore | None = None
        self._session: aiohttp.ClientSession | None = None
        self._overall: _Bucket | None = None
        self._per_chat: dict[str, _Bucket] = {}
        self._per_group: dict[str, _Bucket] = {}
        if rate_limit is not None:
            self._overall = _Bucket(rate_limit.per_second, rate_limit.burst, rate_limit.burst)

    # ---- addresses ----------------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The `base_url` for python-telegram-bot (it appends the token)."""
        return f"{self.url}/bot"

    @property
    def file_url(self) -> str:
        return f"{self.url}/file/bot"

    # ---- scripting ----------------------------------------------------------------------------------------

    def fail(self, method: str, error: ApiError, *, chat_id: int | str | None = None, times: int = 1) -> None:
        """Answer the next `times` calls of `method` (to `chat_id`, if given) with `error`."""
        target = None if chat_id is None else str(chat_id)
        self._script.append(_Scripted(method, error, target, times))

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates; an `update_id` is assigned when missing. Returns the id."""
        if "update_id" not in update:
            update = {"update_id": next(self._update_ids), **update}
        if self._upstreams is not None:
            self._loop.call_soon_threadsafe(self._queue_for_webhook, update)
        else:
            self._updates.append(update)
        return int(update["update_id"])

    def text_update(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        chat_type: str | None = None,
        reply_to_message_id: int | None = None,
        thread_id: int | None = None,
    ) -> dict[str, Any]:
        """An update carrying a text message from a person, with a fresh update_id (not queued).

        The user id defaults to the chat id of a private chat. `/command` and `@bot_username` get their
        entities (offsets in UTF-16 units, as Telegram counts); `reply_to_message_id` names a message the
        bot sent earlier; `thread_id` makes it a forum-topic message.
        """
        sender = user_id if user_id is not None else abs(chat_id)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chat(str(chat_id), chat_type),
            "from": {"id": sender, "is_bot": False, "first_name": f"User {sender}"},
            "text": text,
        }
        entities = []
        if text.startswith("/"):
            command = text.split()[0]
            entities.append({"type": "bot_command", "offset": 0, "length": _utf16(command)})
        mention = f"@{self.bot_username}"
        at = text.lower().find(mention.lower())
        if at >= 0:
            entities.append({"type": "mention", "offset": _utf16(text[:at]), "length": _utf16(mention)})
        if entities:
            message["entities"] = entities
        if reply_to_message_id is not None:
            replied = next((m for m in self.messages if m.message_id == reply_to_message_id), None)
            assert replied is not None, f"the bot sent no message {reply_to_message_id}"
            message["reply_to_message"] = self._message(replied, {"text": replied.text or ""})
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            message["chat"]["is_forum"] = True
        return {"update_id": next(self._update_ids), "message": message}

    def push_text(self, chat_id: int, text: str, **options: Any) -> int:
        """Queue a text message from a person (see `text_update` for the options); returns the update_id."""
        return self.push_update(self.text_update(chat_id, text, **options))

    def callback_update(self, message_id: int, data: str, *, user_id: int | None = None) -> dict[str, Any]:
        """An update for a press of the button with `data` under the bot's message `message_id` (not queued)."""
        sent = next((m for m in self.messages if m.message_id == message_id), None)
        assert sent is not None, f"the bot sent no message {message_id}"
        chat_id = int(sent.chat_id)
        presser = user_id if user_id is not None else abs(chat_id)
        message = self._message(sent, {"text": sent.text or ""})
        if sent.reply_markup:
            message["reply_markup"] = sent.reply_markup
        query = {
            "id": f"cb{next(self._update_ids)}",
            "from": {"id": presser, "is_bot": False, "first_name": f"User {presser}"},
            "chat_instance": f"ci{chat_id}",
            "message": message,
            "data": data,
        }
        return {"update_id": next(self._update_ids), "callback_query": query}

    def push_callback(self, message_id: int, data: str, *, user_id: int | None = None) -> int:
        """Queue a button press (see `callback_update`); returns the update_id."""
        return self.push_update(self.callback_update(message_id, data, user_id=user_id))

    def document_update(
        self,
        chat_id: int,
        filename: str,
        content: bytes,
        *,
        caption: str | None = None,
        user_id: int | None = None,
        chat_type: str | None = None,
        mime_type: str = "application/octet-stream",
        reported_size: int | None = None,
        chunk_size: int | None = None,
    ) -> dict[str, Any]:
        """An update carrying a document a person sent (optionally with a caption), not queued. The bytes are
        served by getFile and the file endpoint, as Telegram serves uploaded documents. `reported_size`: the size
        the update and getFile claim instead of the true one; `chunk_size`: the bytes are streamed that many at a
        time (`fake.served_bytes` says how many went out before the download ended or was cut off)."""
        update = self.text_update(chat_id, caption or "", user_id=user_id, chat_type=chat_type)
        message = update["message"]
        del message["text"]
        if "entities" in message:
            message["caption_entities"] = message.pop("entities")
        if caption:
            message["caption"] = caption
        file_id = f"doc{next(self._update_ids)}"
        self.files[file_id] = (f"documents/{file_id}-{filename}", content)
        if reported_size is not None:
            self._reported_sizes[file_id] = reported_size
        if chunk_size is not None:
            self._chunk_sizes[file_id] = chunk_size
        message["document"] = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "file_name": filename,
            "mime_type": mime_type,
            "file_size": len(content) if reported_size is None else reported_size,
        }
        return update

    def push_document(self, chat_id: int, filename: str, content: bytes, **options: Any) -> int:
        """Queue a document a person sent (see `document_update`); returns the update_id."""
        return self.push_update(self.document_update(chat_id, filename, content, **options))

    def push_membership(self, chat_id: int, status: str, *, user_id: int | None = None) -> int:
        """Queue a `my_chat_member` update: the bot's status in the chat changed to `status` ("kicked" when a
        person blocks the bot in a private chat, "left"/"kicked" when removed from a group, "member" when back)."""
        person = user_id if user_id is not None else abs(chat_id)
        bot = {"id": self.bot_id, "is_bot": True, "first_name": "Lookout", "username": self.bot_username}
        old_status = "member" if status in {"kicked", "left"} else "kicked"
        new_member: dict[str, Any] = {"user": bot, "status": status}
        if status == "kicked":
            new_member["until_date"] = 0
        old_member: dict[str, Any] = {"user": bot, "status": old_status}
        if old_status == "kicked":
            old_member["until_date"] = 0
        change = {
            "chat": self._chat(str(chat_id)),
            "from": {"id": person, "is_bot": False, "first_name": f"User {person}"},
            "date": int(time.time()),
            "old_chat_member": old_member,
            "new_chat_member": new_member,
        }
        return self.push_update({"my_chat_member": change})

    # ---- webhook delivery ---------------------------------------------------------------------------------

    def deliver_to_webhook(self, upstreams: Sequence[str] = ()) -> None:
        """POST updates to the webhook from now on, as Telegram does (see the module docstring); updates already
        queued for getUpdates go first. `upstreams`: the load balancer's servers, used in turn."""
        self._upstreams = list(upstreams)
        asyncio.run_coroutine_threadsafe(self._start_delivery(), self._loop).result(timeout=10)

    async def _start_delivery(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        queued, self._updates = self._updates, []
        for update in queued:
            self._queue_for_webhook(update)

    def _queue_for_webhook(self, update: dict[str, Any]) -> None:
        """On the fake's loop: the update joins its chat's queue; the chat's sender starts if idle."""
        chat = _queue_key(update)
        queue = self._chat_queues.get(chat)
        if queue is not None:
            queue.append(update)
            return
        self._chat_queues[chat] = deque([update])
        task = asyncio.get_running_loop().create_task(self._send_chat_queue(chat), name=f"webhook chat {chat}")
        self._chat_senders.add(task)
        task.add_done_callback(self._chat_senders.discard)

    async def _send_chat_queue(self, chat: str) -> None:
        queue = self._chat_queues[chat]
        try:
            while queue:
                await self._post_until_accepted(queue[0])
                queue.popleft()
        finally:
            del self._chat_queues[chat]

    async def _post_until_accepted(self, update: dict[str, Any]) -> None:
        """POST one update until a 2xx answer (Telegram gives up after a day; the fake tries for ever)."""
        update_id = int(update["update_id"])
        failures = 0
        while True:
            while not self.webhook.get("url"):  # no webhook (yet, or deleted): wait, as Telegram keeps updates
                await asyncio.sleep(0.05)
            if self._connections is None:
                self._connections = asyncio.Semaphore(self.webhook_max_connections)
            async with self._connections:
                target = self._upstream()
                headers = {"Content-Type": "application/json"}
                if secret := self.webhook.get("secret_token"):
                    headers["X-Telegram-Bot-Api-Secret-Token"] = secret
                self.served_at.setdefault(update_id, time.monotonic())
                retry_after: float | None = None
                assert self._session is not None
                try:
                    async with self._session.post(target, data=json.dumps(update), headers=headers) as answer:
                        await answer.read()
                        self.webhook_posts.append(WebhookPost(update_id, target, answer.status))
                        if 200 <= answer.status <= 299:
                            return
                        header = answer.headers.get("Retry-After", "")
                        retry_after = float(header) if header.isdigit() else None
                except (aiohttp.ClientError, OSError) as error:
                    self.webhook_posts.append(WebhookPost(update_id, target, None, type(error).__name__))
            delay = retry_after if retry_after is not None else (0.0 if failures == 0 else min(60.0, 2.0**failures))
            failures += 1
            await asyncio.sleep(delay)

    def _upstream(self) -> str:
        if not self._upstreams:
            return self.webhook["url"]
        target = self._upstreams[self._next_upstream % len(self._upstreams)]
        self._next_upstream += 1
        return target

    async def _stop(self) -> None:
        await super()._stop()  # ends the chats' senders too
        if self._session is not None:
            await self._session.close()

    # ---- reading ------------------------------------------------------------------------------------------

    def on_message(self, listener: Callable[[SentMessage], None]) -> None:
        """Call `listener(sent)` for every message the bot sends, on the fake's thread, as it arrives."""
        self._listeners.append(listener)

    def calls_to(self, method: str) -> list[ApiCall]:
        return [call for call in self.calls if call.method == method]

    def sent(self, chat_id: int | str) -> list[SentMessage]:
        return [message for message in self.messages if message.chat_id == str(chat_id)]

    def texts(self, chat_id: int | str) -> list[SentMessage]:
        return [message for message in self.sent(chat_id) if message.kind == "text"]

    def documents(self, chat_id: int | str) -> list[SentMessage]:
        return [message for message in self.sent(chat_id) if message.kind == "document"]

    def photos(self, chat_id: int | str) -> list[SentMessage]:
        return [message for message in self.sent(chat_id) if message.kind == "photo"]

    # ---- serving ------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(f"/file/bot{self.token}/"):
            return await self._file(request, request.path.removeprefix(f"/file/bot{self.token}/"))
        prefix = f"/bot{self.token}/"
        if not request.path.startswith("/bot"):
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        if not request.path.startswith(prefix):
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        method = request.path.removeprefix(prefix)
        params, files = await _read_body(request)
        call = ApiCall(method, params, files)
        self.calls.append(call)
        error = self._scripted_error(call) or self._over_ceiling(call)
        if error is not None:
            self.rejected += 1
            return web.json_response(error.payload(), status=error.error_code)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            self.rejected += 1
            return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)
        if method == "getUpdates":
            return await self._poll(call)
        result = await handler(call)
        if self.answer_delay and call.method in SEND_METHODS:
            await asyncio.sleep(self.answer_delay)  # delivered already; the answer is what is slow
        return web.json_response({"ok": True, "result": result})

    async def _file(self, request: web.Request, wanted: str) -> web.StreamResponse:
        found = next(((file_id, content) for file_id, (path, content) in self.files.items() if path == wanted), None)
        if found is None:
            return web.Response(status=404)
        file_id, content = found
        if file_id not in self._chunk_sizes:
            return web.Response(body=content)
        response, self.served_bytes[file_id] = await serve_in_chunks(
            request, content, chunk_size=self._chunk_sizes[file_id]
        )
        return response

    async def _poll(self, call: ApiCall) -> web.Response:
        """One getUpdates consumer per token: a new call ends the one still waiting with 409, as Telegram does."""
        if self._poll_in_flight is not None:
            self._poll_in_flight.set()
        cut_short = self._poll_in_flight = asyncio.Event()
        try:
            result = await self._api_getUpdates(call, cut_short)
        except _CutShort:
            self.conflicts += 1
            self.rejected += 1
            conflict = ApiError(409, "Conflict: terminated by other getUpdates request")
            return web.json_response(conflict.payload(), status=409)
        finally:
            if self._poll_in_flight is cut_short:
                self._poll_in_flight = None
        return web.json_response({"ok": True, "result": result})

    def _scripted_error(self, call: ApiCall) -> ApiError | None:
        for entry in self._script:
            if entry.method == call.method and entry.chat_id in (None, call.chat_id) and entry.remaining > 0:
                entry.remaining -= 1
                return entry.error
        return None

    def _over_ceiling(self, call: ApiCall) -> ApiError | None:
        if self._overall is None or self.rate_limit is None or call.method not in SEND_METHODS:
            return None
        now = time.monotonic()
        limit = self.rate_limit
        buckets: list[_Bucket] = []
        if limit.per_chat_per_second is not None and call.chat_id is not None:
            bucket = self._per_chat.get(call.chat_id)
            if bucket is None:
                bucket = _Bucket(limit.per_chat_per_second, limit.per_chat_burst, limit.per_chat_burst)
                self._per_chat[call.chat_id] = bucket
            buckets.append(bucket)
        if limit.group_messages is not None and call.chat_id is not None and call.chat_id.startswith("-"):
            group = self._per_group.get(call.chat_id)
            if group is None:
                rate = limit.group_messages / limit.group_period
                group = _Bucket(rate, limit.group_messages, limit.group_messages)
                self._per_group[call.chat_id] = group
            buckets.append(group)
        buckets.append(self._overall)
        taken: list[_Bucket] = []
        wait = 0.0
        for bucket in buckets:
            wait = bucket.take(now, tolerance=limit.tolerance)
            if wait:
                break
            taken.append(bucket)
        if wait == 0.0:
            return None
        for bucket in taken:  # give the tokens back: nothing was sent
            bucket.tokens += 1
        self.throttled += 1
        return ApiError.retry_after(max(1, math.ceil(wait)))

    def _chat(self, chat_id: str, chat_type: str | None = None) -> dict[str, Any]:
        numeric = int(chat_id) if chat_id.lstrip("-").isdigit() else 0
        kind = chat_type or ("private" if numeric > 0 else "supergroup" if chat_id.startswith("-100") else "group")
        chat: dict[str, Any] = {"id": numeric, "type": kind}
        if kind == "private":
            chat["first_name"] = f"User {numeric}"
        else:
            chat["title"] = f"Group {numeric}"
        return chat

    def _message(self, sent: SentMessage, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "message_id": sent.message_id,
            "date": int(time.time()),
            "chat": self._chat(sent.chat_id),
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Lookout", "username": self.bot_username},
            **extra,
        }

    def _record(self, call: ApiCall, kind: str, **fields: Any) -> SentMessage:
        sent = SentMessage(next(self._message_ids), call.chat_id or "", kind, **fields)
        self.messages.append(sent)
        for listener in self._listeners:
            listener(sent)
        return sent

    # Handlers are named `_api_<method>` after the Bot API method they answer.

    async def _api_getMe(self, call: ApiCall) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Lookout",
            "username": self.bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _api_getUpdates(self, call: ApiCall, cut_short: asyncio.Event | None = None) -> list[dict[str, Any]]:
        offset = int(call.params.get("offset") or 0)
        limit = int(call.params.get("limit") or 100)
        wait = min(float(call.params.get("timeout") or 0), self.long_poll_cap)
        if offset:
            self._updates = [update for update in self._updates if update["update_id"] >= offset]
        deadline = time.monotonic() + wait
        while not self._updates and time.monotonic() < deadline:
            if cut_short is not None and cut_short.is_set():
                raise _CutShort
            await asyncio.sleep(0.01)
        served = self._updates[:limit]
        now = time.monotonic()
        for update in served:
            self.served_at.setdefault(int(update["update_id"]), now)
        return served

    async def _api_sendMessage(self, call: ApiCall) -> dict[str, Any]:
        text = call.params.get("text", "")
        sent = self._record(
            call,
            "text",
            text=text,
            parse_mode=call.params.get("parse_mode"),
            reply_markup=call.json_param("reply_markup"),
        )
        return self._message(sent, {"text": text})

    async def _api_editMessageText(self, call: ApiCall) -> dict[str, Any]:
        self.edits.append(call)
        message_id = int(call.params.get("message_id") or 0)
        text = call.params.get("text", "")
        for sent in self.messages:
            if sent.message_id == message_id and sent.chat_id == call.chat_id:
                sent.text, sent.parse_mode = text, call.params.get("parse_mode")
                return self._message(sent, {"text": text, "edit_date": int(time.time())})
        raise web.HTTPBadRequest(
            text=json.dumps({"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}),
            content_type="application/json",
        )

    async def _api_editMessageReplyMarkup(self, call: ApiCall) -> dict[str, Any] | bool:
        self.edits.append(call)
        message_id = int(call.params.get("message_id") or 0)
        for sent in self.messages:
            if sent.message_id == message_id and sent.chat_id == call.chat_id:
                sent.reply_markup = call.json_param("reply_markup")
                return self._message(sent, {"text": sent.text or "", "edit_date": int(time.time())})
        raise web.HTTPBadRequest(
            text=json.dumps({"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}),
            content_type="application/json",
        )

    async def _api_sendDocument(self, call: ApiCall) -> dict[str, Any]:
        upload = _upload(call, "document")
        sent = self._record(
            call, "document", caption=call.params.get("caption"), filename=upload.filename, content=upload.content
        )
        file = {"file_id": f"doc{sent.message_id}", "file_unique_id": f"d{sent.message_id}"}
        document = {**file, "file_name": upload.filename, "file_size": len(upload.content)}
        extra: dict[str, Any] = {"document": document}
        if sent.caption:
            extra["caption"] = sent.caption
        return self._message(sent, extra)

    async def _api_sendPhoto(self, call: ApiCall) -> dict[str, Any]:
        upload = _upload(call, "photo")
        sent = self._record(
            call, "photo", caption=call.params.get("caption"), filename=upload.filename, content=upload.content
        )
        size = {"file_id": f"photo{sent.message_id}", "file_unique_id": f"p{sent.message_id}", "width": 800}
        extra: dict[str, Any] = {"photo": [{**size, "height": 600, "file_size": len(upload.content)}]}
        if sent.caption:
            extra["caption"] = sent.caption
        return self._message(sent, extra)

    async def _api_getFile(self, call: ApiCall) -> dict[str, Any]:
        file_id = call.params.get("file_id", "")
        path, content = self.files[file_id]
        size = self._reported_sizes.get(file_id, len(content))
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": size, "file_path": path}

    async def _api_sendChatAction(self, call: ApiCall) -> bool:
        self.chat_actions.append((call.chat_id or "", call.params.get("action", "")))
        return True

    async def _api_setMyCommands(self, call: ApiCall) -> bool:
        self.commands = list(call.json_param("commands") or [])
        return True

    async def _api_answerCallbackQuery(self, call: ApiCall) -> bool:
        self.answered_callbacks.append(call.params.get("callback_query_id", ""))
        return True

    async def _api_setWebhook(self, call: ApiCall) -> bool:
        self.webhook = {key: value for key, value in call.params.items() if key in {"url", "secret_token"}}
        connections = int(call.params.get("max_connections") or DEFAULT_MAX_CONNECTIONS)
        if connections != self.webhook_max_connections:
            self.webhook_max_connections, self._connections = connections, None
        return True

    async def _api_deleteWebhook(self, call: ApiCall) -> bool:
        self.webhook = {}
        if call.params.get("drop_pending_updates") in {"true", "True", "1"}:
            self._updates.clear()
        return True

    async def _api_getWebhookInfo(self, call: ApiCall) -> dict[str, Any]:
        return {"url": self.webhook.get("url", ""), "has_custom_certificate": False, "pending_update_count": 0}


async def _read_body(request: web.Request) -> tuple[dict[str, str], dict[str, Upload]]:
    """Parameters and uploads of a JSON, form-encoded or multipart body; every value as text, like a form."""
    params: dict[str, str] = {**request.query}
    files: dict[str, Upload] = {}
    if request.content_type == "application/json":
        raw = await request.json() if request.can_read_body else {}
        for key, value in (raw or {}).items():
            params[key] = value if isinstance(value, str) else json.dumps(value)
        return params, files
    form = await request.post()
    for key, value in form.items():
        if isinstance(value, web.FileField):
            files[key] = Upload(key, value.filename, value.file.read())
        elif isinstance(value, str):
            params[key] = value
        else:
            params[key] = bytes(value).decode()
    return params, files


def _queue_key(update: dict[str, Any]) -> str:
    """Which queue an update waits in for webhook delivery: its chat's (one update of a chat at a time), else its
    own."""
    for kind in ("message", "edited_message", "channel_post", "my_chat_member", "chat_member"):
        if kind in update:
            return f"chat {update[kind]['chat']['id']}"
    query = update.get("callback_query")
    if query is not None and "message" in query:
        return f"chat {query['message']['chat']['id']}"
    return f"update {update['update_id']}"


class _CutShort(Exception):
    """A waiting getUpdates was ended by a newer one."""


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _upload(call: ApiCall, name: str) -> Upload:
    """The uploaded file of parameter `name`, sent directly or as `attach://<field>`."""
    value = call.params.get(name, "")
    field_name = value.removeprefix("attach://") if value.startswith("attach://") else name
    if field_name in call.files:
        return call.files[field_name]
    return Upload(name, None, value.encode())  # a file_id or URL: nothing was uploaded


@contextmanager
def running_fake_telegram(
    *,
    token: str = DEFAULT_TOKEN,
    rate_limit: RateLimit | None = None,
    long_poll_cap: float = 0.5,
    answer_delay: float = 0.0,
) -> Iterator[FakeTelegram]:
    """A started fake, stopped on exit."""
    fake = FakeTelegram(token=token, rate_limit=rate_limit, long_poll_cap=long_poll_cap, answer_delay=answer_delay)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()
