"""Driving Lookout as a self-hoster does — `lookout chat` with the model configured in the environment — and
reading back what it stored (SQLite under DATA_DIR), for the real-model suite."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
from typer.testing import CliRunner, Result

from app.cli import cli

runner = CliRunner()

EMPTY_REASON = re.compile(r":\s*\((?:details|see) ")
"""An error line whose reason is empty ("could not run the chat:  (details in …)"): the bug the issue found."""


def chat(lines: Sequence[str]) -> Result:
    """One `lookout chat` session reading `lines`, then end of input."""
    return runner.invoke(cli, ["chat"], input="".join(f"{line}\n" for line in lines))


@contextmanager
def stored(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """The embedded database Lookout wrote under DATA_DIR, read-only."""
    path = data_dir / "lookout.db"
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        yield connection


@dataclass(frozen=True)
class Memory:
    """One conversation as stored: its messages, summary and open confirmation."""

    messages: list[ModelMessage]
    summary: str | None
    confirmation: Any

    @property
    def user_prompts(self) -> list[str]:
        return [
            part.content
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
        ]


def memory(data_dir: Path) -> Memory:
    """The terminal chat's conversation (there is one)."""
    with stored(data_dir) as connection:
        rows = connection.execute("SELECT messages, summary, confirmation FROM conversations").fetchall()
    if not rows:
        return Memory(messages=[], summary=None, confirmation=None)
    [(messages, summary, confirmation)] = rows
    decoded = ModelMessagesTypeAdapter.validate_json(messages) if messages else []
    return Memory(messages=list(decoded), summary=summary, confirmation=confirmation)


def monitor_count(data_dir: Path) -> int:
    with stored(data_dir) as connection:
        [(count,)] = connection.execute("SELECT count(*) FROM monitors").fetchall()
    return int(count)


def runs(data_dir: Path) -> list[dict[str, Any]]:
    """Every run: status, digest (decoded), artifacts, error."""
    with stored(data_dir) as connection:
        rows = connection.execute("SELECT id, status, digest, artifacts, error FROM runs ORDER BY id").fetchall()
    return [
        {
            "id": run_id,
            "status": status,
            "digest": json.loads(digest) if digest else None,
            "artifacts": json.loads(artifacts) if artifacts else {},
            "error": error,
        }
        for run_id, status, digest, artifacts, error in rows
    ]


def deliveries(data_dir: Path, run_id: int) -> list[tuple[str, int]]:
    """(status, parts sent) of each outbox row of a run."""
    with stored(data_dir) as connection:
        rows = connection.execute("SELECT status, parts_sent FROM deliveries WHERE run_id = ?", (run_id,)).fetchall()
    return [(str(status), int(parts)) for status, parts in rows]
