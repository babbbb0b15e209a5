"""python-telegram-bot's network seam (`BaseRequest`) on aiohttp: every Bot API call of the process goes through it.

Why not PTB's default `HTTPXRequest`: httpcore's pool re-checks every pooled connection, with a system call each,
whenever a request starts or ends, so a call through httpx costs several times aiohttp's CPU, more with many calls in
flight (`bench/chat.py`). PTB keeps the Bot API itself (parameters, JSON answers, errors); this class only moves
bytes, and maps aiohttp's failures onto PTB's `TimedOut` and `NetworkError` as `HTTPXRequest` does.

Timeouts: `connect_timeout` bounds opening a connection, `pool_timeout` waiting for a free one (both within
aiohttp's `connect`), `read_timeout` each wait for the server's bytes; a call may pass its own (getUpdates does).
Uploads (files) get `media_write_timeout` as PTB's default class gives them.

Downloads of files people sent (`download_at_most`) read at most one byte past a limit whatever size Telegram
reported (`bots.downloads.read_at_most`), where PTB's `File.download_as_bytearray` would read the whole body.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit, urlunsplit

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

from bots.downloads import read_at_most

__all__ = ["AiohttpRequest"]

_TOKEN_IN_PATH = re.compile(r"/bot[^/\s'\"]+/")
"""The `/bot<token>/` of a Bot API URL, which aiohttp's error texts quote (an answer it cannot read as HTTP names the
request's URL): those texts go to logs and to the outbox's stored errors, the token must not."""
_DOWNLOAD_SECONDS = 30.0
"""The most one download of a file a person sent may take: a host dripping bytes cannot hold a turn longer."""


class AiohttpRequest(BaseRequest):
    """A `telegram.request.BaseRequest` on one `aiohttp.ClientSession` (HTTP/1.1, keep-alive pool)."""

    def __init__(
        self,
        *,
        connection_pool_size: int = 32,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._media_write_timeout = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._shut_down = False

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
            )
        self._shut_down = False

    async def shutdown(self) -> None:
        self._shut_down = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def _open_session(self) -> aiohttp.ClientSession:
        """The session to call through; used before `initialize` (a sender whose bot was never started), it opens
        the session now, as PTB's `HTTPXRequest` has its client from the start."""
        if self._shut_down:
            raise RuntimeError("This AiohttpRequest is shut down!")
        if self._session is None or self._session.closed:
            await self.initialize()
            assert self._session is not None
        return self._session

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = await self._open_session()
        files = request_data is not None and request_data.contains_files
        read = self._read_timeout if isinstance(read_timeout, DefaultValue) else read_timeout
        connect = self._connect_timeout if isinstance(connect_timeout, DefaultValue) else connect_timeout
        pool = self._pool_timeout if isinstance(pool_timeout, DefaultValue) else pool_timeout
        if isinstance(write_timeout, DefaultValue):
            write = self._media_write_timeout if files else self._write_timeout
        else:
            write = write_timeout
        timeout = aiohttp.ClientTimeout(
            # aiohttp's `connect` covers waiting for a pooled connection and opening one
            connect=None if pool is None or connect is None else pool + connect,
            sock_connect=connect,
            # sending happens before the first read; an upload's whole exchange is bounded by write + read
            sock_read=read if not files or read is None or write is None else read + write,
        )
        body = _body(request_data)
        try:
            async with session.request(method, url, data=body, timeout=timeout) as response:
                return response.status, await response.read()
        except TimeoutError as error:  # aiohttp's timeouts are TimeoutErrors
            raise TimedOut from error
        except aiohttp.ClientError as error:
            told = _TOKEN_IN_PATH.sub("/bot<token>/", str(error))
            raise NetworkError(f"aiohttp.{type(error).__name__}: {told}") from error

    async def download_at_most(self, file_url: str, limit: int) -> bytes:
        """The file at `file_url` (a `File.file_path` from getFile) up to its end or `limit + 1` bytes, whichever
        comes first; raises `NetworkError`/`TimedOut` (as Bot API calls do) when it cannot be had."""
        session = await self._open_session()
        parts = urlsplit(file_url)
        if parts.scheme not in ("http", "https"):
            raise NetworkError("the file is not at an http(s) URL")
        url = urlunsplit(parts._replace(path=quote(parts.path)))  # as PTB's File encodes it
        timeout = aiohttp.ClientTimeout(total=_DOWNLOAD_SECONDS, sock_connect=self._connect_timeout)
        try:
            async with session.get(url, timeout=timeout, allow_redirects=False) as response:
                if response.status != 200:
                    raise NetworkError(f"the file host answered HTTP {response.status}")
                return await read_at_most(response.content, limit)  # leaving early closes the connection
        except TimeoutError as error:
            raise TimedOut from error
        except aiohttp.ClientError as error:
            raise NetworkError(f"aiohttp.{type(error).__name__}") from error


def _body(request_data: RequestData | None) -> aiohttp.FormData | dict[str, str] | None:
    """Form-encoded parameters, or multipart when there are files (as python-telegram-bot's own request sends)."""
    if request_data is None:
        return None
    if not request_data.contains_files:
        return request_data.json_parameters
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, (filename, content, mime_type) in request_data.multipart_data.items():
        form.add_field(name, content, filename=filename, content_type=mime_type)
    return form
