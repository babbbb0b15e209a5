"""The marks' vectors given in the background after a press (`MonitorFeedback.vectors_later`) at the end of a
`lookout chat` session (the monitor stack's close, which `lookout run` shares): a slow embedding server is waited
for, so the vector is stored before the process ends; a hanging one is cut at `MARK_VECTORS_SECONDS`, logged, and
the session still ends cleanly with the mark kept (the monitor's next run gives its vector)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

from agent.messages import Incoming
from app.assembly import terminal_session
from app.monitoring import MARK_VECTORS_SECONDS
from app.settings import Settings, load_settings
from app.wiring import open_database
from bots.terminal.chat import TERMINAL_CHAT_ID
from storage import FeedbackMarkRecord
from storage.repositories import ChatRepository, FeedbackRepository
from tests.app.test_chat_cli import route_sources, source_env
from tests.fakes.gemini import FakeGeminiEmbeddings
from tests.fakes.http_server import FakeHTTPServer
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


async def marks_of(settings: Settings) -> list[FeedbackMarkRecord]:
    async with open_database(settings) as database:
        chat = await ChatRepository(database).get_or_create("terminal", TERMINAL_CHAT_ID)
        return await FeedbackRepository(database).marks(1, chat.id)


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
