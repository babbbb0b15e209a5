"""The marks' vectors given in the background after a press (`MonitorFeedback.vectors_later`) at the end of a
`lookout chat` session (the monitor stack's close, which `lookout run` shares): a slow embedding server is waited
for, so the vector is stored before the process ends; a hanging one is cut at `MARK_VECTORS_SECONDS`, logged, and
the session still ends cleanly with the mark kept (the monitor's next run gives its vector). `lookout run` gives them
what is left of its shutdown grace, if less."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

from agent.messages import Incoming, Platform
from app.assembly import terminal_session
from app.monitoring import MARK_VECTORS_SECONDS
from app.service import run_service
from app.settings import Settings, load_settings
from app.wiring import open_database
from bots.terminal.chat import TERMINAL_CHAT_ID
from storage import FeedbackMarkRecord
from storage.repositories import ChatRepository, FeedbackRepository, MonitorRepository
from tests.app.test_chat_cli import route_sources, source_env
from tests.fakes.gemini import FakeGeminiEmbeddings
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.telegram import FakeTelegram, running_fake_telegram
from tests.kit import eventually
from tests.monitors.fakes import RecordingSender

SLOW = 1.5
"""Seconds the slow embedding server takes to answer: more than a press waits, less than the shutdown's bound."""
HANGS = 120.0
"""Seconds the hanging server takes: far beyond the bound."""


def chat_settings(server: FakeHTTPServer, data_dir: Path, **overrides: Any) -> Settings:
    """`lookout chat`'s settings with every source on the fake server and no language model."""
    urls = {key.lower(): value for key, value in source_env(server, data_dir).items()}
    return load_settings(_env_file=None, llm_model="", allow_private_urls=True, **urls, **overrides)


async def say(settings: Settings, *lines: str, digest: bool = False) -> list[str]:
    """One `lookout chat` session typing `lines`; with `digest`, the line after `/digest` waits for its delivery."""
    sender = RecordingSender()
    answers: list[str] = []
    async with terminal_session(settings)(sender) as dispatcher:
        for line in lines:
            incoming = Incoming(
                platform="terminal", chat_external_id=TERMINAL_CHAT_ID, user_external_id="me", text=line,
                is_private=True,
            )  # fmt: skip
            answers.append("\n".join(reply.text for reply in await dispatcher.dispatch(incoming)))
            if digest and line.startswith("/digest"):
                await eventually(lambda: bool(sender.sent), what="the digest delivered to the terminal")
    return answers


async def marks_of(
    settings: Settings, *, platform: Platform = "terminal", chat: str = TERMINAL_CHAT_ID
) -> list[FeedbackMarkRecord]:
    """The chat's marks on its one monitor."""
    async with open_database(settings) as database:
        record = await ChatRepository(database).get_or_create(platform, chat)
        [monitor] = await MonitorRepository(database).list_for_chat(record.id)
        return await FeedbackRepository(database).marks(monitor.id, record.id)


@pytest.fixture
def embeddings(fake_server: FakeHTTPServer) -> FakeGeminiEmbeddings:
    return FakeGeminiEmbeddings(fake_server, vector_of=lambda text: [float(len(text)), 1.0, 0.0])


async def first_session(server: FakeHTTPServer, data_dir: Path) -> None:
    """Before an embedding model is configured: a monitor, its digest, and a 👎 with no vector."""
    route_sources(server)
    answers = await say(
        chat_settings(server, data_dir), "/track DeepSeek daily at 08:30 from hn,news", "/digest 1", "/less 1",
        digest=True,
    )  # fmt: skip
    assert answers[-1].startswith("Recorded 👎 less like this on story 1 "), answers


async def test_a_slow_embedding_server_is_waited_for_at_shutdown(
    fake_server: FakeHTTPServer, embeddings: FakeGeminiEmbeddings, tmp_path: Path
) -> None:
    await first_session(fake_server, tmp_path / "data")
    embeddings.delay = SLOW
    settings = chat_settings(
        fake_server, tmp_path / "data", gemini_api_key=embeddings.api_key, gemini_base_url=embeddings.url,
        embedding_model=f"google:{embeddings.model}",
    )  # fmt: skip
    started = time.monotonic()
    with models.override_allow_model_requests(True):
        [pressed] = await say(settings, "/less 2")  # the press is answered; its vectors come in the background
    seconds = time.monotonic() - started
    marks = await marks_of(settings)

    assert pressed.startswith("Recorded 👎 less like this on story 2 "), pressed
    assert len(embeddings.requests) == 1 and sorted(embeddings.texts_embedded) == sorted(m.title for m in marks)
    assert [m.vector is not None for m in marks] == [True, True], "the vectors were cut off by the shutdown"
    assert seconds >= SLOW


async def test_a_hanging_embedding_server_is_cut_at_the_bound_and_the_mark_stays(
    fake_server: FakeHTTPServer, embeddings: FakeGeminiEmbeddings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await first_session(fake_server, tmp_path / "data")
    embeddings.delay = HANGS
    settings = chat_settings(
        fake_server, tmp_path / "data", gemini_api_key=embeddings.api_key, gemini_base_url=embeddings.url,
        embedding_model=f"google:{embeddings.model}",
    )  # fmt: skip
    started = time.monotonic()
    with models.override_allow_model_requests(True), caplog.at_level(logging.WARNING):
        [pressed] = await say(settings, "/less 2")
    seconds = time.monotonic() - started
    marks = await marks_of(settings)

    assert pressed.startswith("Recorded 👎 less like this on story 2 "), pressed
    assert len(embeddings.requests) == 1  # the request was made and never answered
    assert MARK_VECTORS_SECONDS <= seconds < MARK_VECTORS_SECONDS + 10, seconds
    assert [m.kind for m in marks] == ["less", "less"] and all(m.vector is None for m in marks)
    assert "the marks' vectors were not given within 5.0 s; the next run of the monitor gives them" in caplog.text
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.levelno >= logging.ERROR]


GRACE = 3.0
"""SHUTDOWN_GRACE_SECONDS of the `lookout run` below: shorter than `MARK_VECTORS_SECONDS`."""
READER = 5151


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _answered(fake: FakeTelegram, text: str) -> None:
    """`text` pushed by the reader; waits for the bot's answer."""
    before = len(fake.texts(READER))
    fake.push_text(READER, text)
    await eventually(lambda: len(fake.texts(READER)) > before, what=f"the answer to {text}")


async def test_lookout_run_waits_for_the_vectors_within_its_shutdown_grace(
    fake_server: FakeHTTPServer, embeddings: FakeGeminiEmbeddings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`lookout run` with a hanging embedding server: the vectors of a press made just before the stop get what is
    left of SHUTDOWN_GRACE_SECONDS, not the stack's own bound, so the process still ends within its grace."""
    route_sources(fake_server)
    with running_fake_telegram() as fake:
        base = {
            key.lower(): value for key, value in source_env(fake_server, tmp_path / "data").items()
        } | {
            "telegram_bot_token": fake.token, "telegram_api_url": fake.url, "llm_model": "",
            "allow_private_urls": True, "delivery_poll_seconds": 0.2, "shutdown_grace_seconds": GRACE,
        }  # fmt: skip
        stop = asyncio.Event()
        service = asyncio.create_task(
            run_service(load_settings(_env_file=None, http_port=_free_port(), **base), stop=stop)
        )
        await _answered(fake, "/track DeepSeek daily at 08:30 from hn,news")
        fake.push_text(READER, "/digest 1")
        await eventually(lambda: any("/less 1 run" in str(m.reply_markup) for m in fake.texts(READER)), what="digest")
        await _answered(fake, "/less 1")  # no embedding model yet: a mark without a vector
        stop.set()
        await asyncio.wait_for(service, timeout=60)

        embeddings.delay = HANGS
        settings = load_settings(
            _env_file=None, http_port=_free_port(), gemini_api_key=embeddings.api_key, gemini_base_url=embeddings.url,
            embedding_model=f"google:{embeddings.model}", **base,
        )  # fmt: skip
        stop = asyncio.Event()
        with models.override_allow_model_requests(True), caplog.at_level(logging.WARNING):
            service = asyncio.create_task(run_service(settings, stop=stop))
            await _answered(fake, "/less 2")
            await eventually(lambda: len(embeddings.requests) == 1, what="the marks' embedding request")
            stopped = time.monotonic()
            stop.set()
            await asyncio.wait_for(service, timeout=60)
            seconds = time.monotonic() - stopped
    marks = await marks_of(settings, platform="telegram", chat=str(READER))

    assert [m.kind for m in marks] == ["less", "less"] and all(m.vector is None for m in marks)
    assert seconds <= GRACE, seconds
    assert "the marks' vectors were not given within" in caplog.text
