"""AiohttpRequest (python-telegram-bot's network seam on aiohttp) through a real `Bot` against the fake Bot API:
what arrives (form parameters, multipart uploads), and failures mapped onto PTB's `TimedOut` and `NetworkError`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from telegram import Bot
from telegram.error import NetworkError, TimedOut

from bots.telegram import TelegramSender, build_bot
from bots.telegram.request import AiohttpRequest
from kernel import Reply, RetryLater
from tests.bots.telegram.test_sender import chat
from tests.fakes.telegram import DEFAULT_TOKEN, FakeTelegram, running_fake_telegram


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with running_fake_telegram() as server:
        yield server


def bot_on(url: str, *, read_timeout: float = 5.0) -> Bot:
    request = AiohttpRequest(read_timeout=read_timeout, connect_timeout=2.0)
    return Bot(DEFAULT_TOKEN, base_url=f"{url}/bot", base_file_url=f"{url}/file/bot", request=request)


async def test_parameters_and_uploads_arrive_as_the_bot_api_reads_them(fake: FakeTelegram) -> None:
    bot = build_bot(fake.token, api_url=fake.url)
    async with bot:
        sent = await bot.send_message(42, "<b>Hello</b> & more", parse_mode="HTML", disable_notification=True)
        await bot.send_document(42, document=b"a,b\n1,2\n", filename="items.csv", caption="the CSV")
    assert sent.message_id > 0 and sent.chat.id == 42  # the answer was read and parsed by PTB
    [text] = fake.texts(42)
    assert (text.text, text.parse_mode) == ("<b>Hello</b> & more", "HTML")
    [document] = fake.documents(42)
    assert (document.filename, document.content, document.caption) == ("items.csv", b"a,b\n1,2\n", "the CSV")
    assert fake.calls_to("sendMessage")[0].params["disable_notification"] == "true"


async def test_an_answer_slower_than_the_read_timeout_is_timed_out() -> None:
    with running_fake_telegram(answer_delay=2.0) as fake:
        bot = bot_on(fake.url, read_timeout=0.3)
        async with bot:
            with pytest.raises(TimedOut):
                await bot.send_message(42, "hello")
        assert [m.text for m in fake.texts(42)] == ["hello"]  # it arrived; only the answer was late


async def test_an_unreachable_server_is_a_network_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bot = bot_on(f"http://127.0.0.1:{port}")
    with pytest.raises(NetworkError) as raised:
        await bot.initialize()  # getMe
    assert not isinstance(raised.value, TimedOut)
    assert "aiohttp.ClientConnectorError" in str(raised.value)
    await bot.shutdown()


async def test_a_request_before_initialize_opens_the_session_and_after_shutdown_says_so(fake: FakeTelegram) -> None:
    request = AiohttpRequest()
    url = f"{fake.url}/bot{fake.token}/getMe"
    status, body = await request.do_request(url, "POST")  # a sender may call before its bot was started
    assert status == 200 and b'"ok": true' in body.replace(b'"ok":true', b'"ok": true')
    await request.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        await request.do_request(url, "POST")


async def test_a_garbled_answer_is_a_network_error_that_does_not_carry_the_token() -> None:
    """aiohttp names the request URL, the token in it, when an answer is not HTTP it can read (a proxy or a broken
    middlebox): the error's text goes into logs and the outbox's stored error, so the token must not be in it."""

    async def garble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n{}")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(garble, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    bot = bot_on(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(NetworkError) as raised:
            await bot.send_message(42, "hello")
        sender = TelegramSender(build_bot(DEFAULT_TOKEN, api_url=f"http://127.0.0.1:{port}"))
        with pytest.raises(RetryLater) as later:
            await sender.send_part(chat("42"), sender.parts(Reply(text="hello"))[0])
        await sender.close()
    finally:
        await bot.shutdown()
        server.close()
        await server.wait_closed()
    secret = DEFAULT_TOKEN.split(":", 1)[1]
    assert "ClientResponseError" in str(raised.value) and secret not in str(raised.value)
    assert "network error" in str(later.value) and secret not in str(later.value)
