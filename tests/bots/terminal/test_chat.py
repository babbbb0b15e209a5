"""The terminal frontend's parts: what it prints (markdown, files, buttons, progress), how lines become messages
for the real dispatcher, and the REPL's life cycle (EOF, /quit, a session that cannot open)."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.access import AccessPolicy
from agent.context import Turn
from bots.dispatcher import Dispatcher
from bots.terminal.chat import ConsoleSender, Dispatches, TerminalChat, run_terminal_chat
from bots.terminal.output import ConsoleOutput, save_attachment
from bots.terminal.reader import LineReader
from kernel import Attachment, Button, ChatSender, ProgressUpdate, Reply
from kernel import Attachment as DigestAttachment
from monitors import ChatService
from storage import ChatRecord, Database, upgrade_database
from tests.backends import sqlite_url

CONFIRM = Reply(
    text="Create monitor **DeepSeek**, daily at 08:30?",
    buttons=(
        Button(label="Yes, create it", callback_data="confirm:1:yes"),
        Button(label="Cancel", callback_data="confirm:1:no"),
    ),
)


class ScriptedConversation:
    """Stands in for the conversation layer: answers from a script and records every turn it is handed."""

    def __init__(self, script: dict[str, list[Reply]] | None = None) -> None:
        self.script = script or {}
        self.turns: list[Turn] = []

    async def respond(self, turn: Turn) -> list[Reply]:
        self.turns.append(turn)
        return self.script.get(turn.incoming.text, [Reply(text=f"echo: {turn.incoming.text}")])


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    url = sqlite_url(tmp_path / "lookout.db")
    await upgrade_database(url)
    db = Database(url)
    yield db
    await db.dispose()


def plain_output(tmp_path: Path) -> tuple[ConsoleOutput, io.StringIO]:
    stream = io.StringIO()
    return ConsoleOutput(stream, exports_dir=tmp_path / "exports", styled=False), stream


def csv_file(path: Path, text: str = "title,url\nA,https://a.example\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---- printing ---------------------------------------------------------------------------------------------


def test_a_file_already_in_exports_is_printed_where_it_is(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    inside = csv_file(exports / "deepseek-2026-11-22-m1-r1.csv")
    assert save_attachment(inside, "deepseek-2026-11-22.csv", exports) == inside.resolve()
    assert sorted(p.name for p in exports.iterdir()) == ["deepseek-2026-11-22-m1-r1.csv"]  # no copy


def test_a_file_elsewhere_is_copied_into_exports_without_overwriting(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    first = save_attachment(csv_file(tmp_path / "tmp" / "a.csv", "one"), "../deep seek?.csv", exports)
    second = save_attachment(csv_file(tmp_path / "tmp" / "b.csv", "two"), "../deep seek?.csv", exports)
    assert first == (exports / "deep_seek_.csv").resolve()
    assert second == (exports / "deep_seek_-1.csv").resolve()
    assert first.read_text() == "one" and second.read_text() == "two"


def test_a_reply_prints_its_text_the_saved_files_and_the_buttons_as_choices(tmp_path: Path) -> None:
    output, stream = plain_output(tmp_path)
    outside = csv_file(tmp_path / "work" / "items.csv")
    output.reply(
        Reply(
            text="**Done**: 2 items.",
            attachments=(
                Attachment(path=outside, filename="rust-embedded-2026-11-22.csv"),
                Attachment(path=tmp_path / "missing.png", filename="chart.png", kind="image"),
            ),
            buttons=CONFIRM.buttons,
        )
    )
    printed = stream.getvalue()
    saved = (tmp_path / "exports" / "rust-embedded-2026-11-22.csv").resolve()
    assert "Done: 2 items.\n" in printed  # not a terminal: the words without markdown syntax
    assert f"CSV: {saved}\n" in printed and saved.read_text() == outside.read_text()
    assert "Chart: chart.png could not be saved" in printed
    assert "[1] Yes, create it   [2] Cancel" in printed and "yes or no" in printed


def test_on_a_terminal_markdown_is_rendered_and_link_targets_stay_visible(tmp_path: Path) -> None:
    stream = io.StringIO()
    output = ConsoleOutput(stream, exports_dir=tmp_path / "exports", styled=True, width=80)
    output.reply(Reply(text="**DeepSeek** cut prices [1](https://news.example/a)"))
    printed = stream.getvalue()
    assert "**" not in printed and "\x1b[1mDeepSeek\x1b[0m" in printed
    assert "https://news.example/a" in printed


def test_progress_is_plain_lines_in_a_pipe_and_one_edited_line_on_a_terminal(tmp_path: Path) -> None:
    output, stream = plain_output(tmp_path)
    asyncio.run(output.progress(ProgressUpdate(text="collecting 2 sources…")))
    asyncio.run(output.progress(ProgressUpdate(text="critiquing…")))
    assert stream.getvalue() == "… collecting 2 sources…\n… critiquing…\n"

    styled_stream = io.StringIO()
    styled = ConsoleOutput(styled_stream, exports_dir=tmp_path, styled=True, width=80)
    asyncio.run(styled.progress(ProgressUpdate(text="collecting 2 sources…")))
    asyncio.run(styled.progress(ProgressUpdate(text="critiquing…")))
    asyncio.run(styled.progress(ProgressUpdate(text="done", done=True)))
    printed = styled_stream.getvalue()
    assert "\n" not in printed  # the same line, rewritten in place
    assert printed.count("\r\x1b[K") == 3 and printed.endswith("\r\x1b[K")
    assert "critiquing…" in printed


def test_a_long_status_stays_on_one_terminal_line(tmp_path: Path) -> None:
    stream = io.StringIO()
    output = ConsoleOutput(stream, exports_dir=tmp_path, styled=True, width=40)
    asyncio.run(output.progress(ProgressUpdate(text="collecting\n" + "hn, news, arxiv, github, " * 8)))
    printed = stream.getvalue()
    visible = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", printed)
    assert "\n" not in printed and len(visible) <= 39 and visible.endswith("…")
    assert visible.startswith("… collecting hn, news")


def test_a_digest_arriving_at_the_prompt_is_printed_above_what_is_being_typed(tmp_path: Path) -> None:
    stream = io.StringIO()
    output = ConsoleOutput(stream, exports_dir=tmp_path / "exports", styled=True, width=80)
    output.line_buffer = lambda: "/track Open"
    output.prompt_started("> ")
    chart = csv_file(tmp_path / "exports" / "deepseek.png", "png")
    digest = Reply(
        text="**DeepSeek** · 2026-11-22\n\n1. Prices cut [1]",
        attachments=(DigestAttachment(path=chart, filename="deepseek.png", kind="image"),),
    )
    chat = ChatRecord(
        id=1, platform="terminal", external_id="terminal", title=None, timezone="UTC", language=None, profile=None,
        active=True, created_at=datetime(2026, 11, 22, tzinfo=UTC),
    )  # fmt: skip
    asyncio.run(ConsoleSender(output).send_part(chat, digest))
    printed = stream.getvalue()
    assert printed.startswith("\r\x1b[K")  # the half-typed line is cleared first ...
    assert f"Chart: {chart.resolve()}" in printed
    assert printed.endswith("> /track Open")  # ... and drawn again under the digest


def test_lines_from_a_pipe_come_without_newlines_until_the_end(tmp_path: Path) -> None:
    reader = LineReader(io.StringIO("/monitors\r\nhello\n\nlast"), interactive=False, history_file=tmp_path / "h")
    assert [reader.read("> ") for _ in range(5)] == ["/monitors", "hello", "", "last", None]
    reader.close()
    assert not (tmp_path / "h").exists()  # history is kept for terminals only


# ---- lines into the dispatcher ------------------------------------------------------------------------------


async def test_each_line_reaches_the_dispatcher_as_a_private_terminal_message(
    database: Database, tmp_path: Path
) -> None:
    conversation = ScriptedConversation()
    output, stream = plain_output(tmp_path)
    chat = TerminalChat(Dispatcher(ChatService(database), conversation, AccessPolicy()), output, user="ada")
    await chat.handle_line("  hello there  ")
    await chat.handle_line("   ")  # nothing to send
    [turn] = conversation.turns
    incoming = turn.incoming
    assert (incoming.platform, incoming.chat_external_id, incoming.user_external_id) == ("terminal", "terminal", "ada")
    assert incoming.text == "hello there" and incoming.is_private and incoming.addressed_to_bot
    assert turn.chat.platform == "terminal" and turn.user.display_name == "ada"
    assert "echo: hello there" in stream.getvalue()


async def test_the_terminal_is_allowed_even_when_allowlists_are_set(database: Database, tmp_path: Path) -> None:
    conversation = ScriptedConversation()
    output, stream = plain_output(tmp_path)
    policy = AccessPolicy(allowed_users=["telegram:1"], allowed_chats=["C0123"])
    await TerminalChat(Dispatcher(ChatService(database), conversation, policy), output, user="ada").handle_line(
        "/monitors"
    )
    assert len(conversation.turns) == 1 and "echo: /monitors" in stream.getvalue()


async def test_a_button_is_picked_by_number_or_label_for_the_next_line_only(database: Database, tmp_path: Path) -> None:
    conversation = ScriptedConversation({"/track DeepSeek": [CONFIRM]})
    output, stream = plain_output(tmp_path)
    chat = TerminalChat(Dispatcher(ChatService(database), conversation, AccessPolicy()), output, user="ada")
    await chat.handle_line("/track DeepSeek")
    await chat.handle_line("1")
    await chat.handle_line("1")  # no buttons pending any more: just the text "1"
    await chat.handle_line("/track DeepSeek")
    await chat.handle_line("CANCEL")
    presses = [(t.incoming.text, t.incoming.callback_data) for t in conversation.turns]
    assert presses == [
        ("/track DeepSeek", None),
        ("Yes, create it", "confirm:1:yes"),
        ("1", None),
        ("/track DeepSeek", None),
        ("Cancel", "confirm:1:no"),
    ]
    assert stream.getvalue().count("[1] Yes, create it") == 2


async def test_a_line_too_long_for_a_message_is_refused_in_a_sentence(database: Database, tmp_path: Path) -> None:
    conversation = ScriptedConversation()
    output, stream = plain_output(tmp_path)
    await TerminalChat(Dispatcher(ChatService(database), conversation, AccessPolicy()), output, user="ada").handle_line(
        "x" * 100_001
    )
    assert conversation.turns == []
    assert "too long" in stream.getvalue()


# ---- the REPL's life cycle ----------------------------------------------------------------------------------


class Session:
    """A session factory over a real dispatcher on its own database; records that it was closed."""

    def __init__(self, url: str, conversation: ScriptedConversation) -> None:
        self.url = url
        self.conversation = conversation
        self.sender: ChatSender[Any] | None = None
        self.closed = False

    @asynccontextmanager
    async def __call__(self, sender: ChatSender[Any]) -> AsyncIterator[Dispatches]:
        self.sender = sender
        database = Database(self.url)
        try:
            yield Dispatcher(ChatService(database), self.conversation, AccessPolicy())
        finally:
            await database.dispose()
            self.closed = True


@pytest.fixture
def session(tmp_path: Path) -> Session:
    url = sqlite_url(tmp_path / "repl.db")
    asyncio.run(upgrade_database(url))
    return Session(url, ScriptedConversation())


def test_the_repl_answers_each_line_and_ends_cleanly_at_end_of_input(session: Session, tmp_path: Path) -> None:
    stdout = io.StringIO()
    run_terminal_chat(
        session, stdin=io.StringIO("hello\n/monitors\n"), stdout=stdout, exports_dir=tmp_path / "exports", user="ada"
    )
    assert [t.incoming.text for t in session.conversation.turns] == ["hello", "/monitors"]
    assert "echo: hello\n" in stdout.getvalue() and "echo: /monitors\n" in stdout.getvalue()
    assert isinstance(session.sender, ConsoleSender) and session.closed


def test_quit_ends_the_session_like_ctrl_d(session: Session, tmp_path: Path) -> None:
    stdout = io.StringIO()
    run_terminal_chat(
        session, stdin=io.StringIO("hello\n/quit\nnever sent\n"), stdout=stdout, exports_dir=tmp_path, user="ada"
    )
    assert [t.incoming.text for t in session.conversation.turns] == ["hello"]
    assert session.closed


def test_a_session_that_cannot_open_raises_its_error(tmp_path: Path) -> None:
    @asynccontextmanager
    async def broken(_sender: ChatSender[Any]) -> AsyncIterator[Dispatches]:
        raise ConnectionRefusedError("the database server is not answering")
        yield  # pragma: no cover - makes this an async generator

    with pytest.raises(ConnectionRefusedError, match="not answering"):
        run_terminal_chat(broken, stdin=io.StringIO("hello\n"), stdout=io.StringIO(), exports_dir=tmp_path, user="ada")
