"""A real `lookout run` delivering one digest to a Telegram chat (fake Bot API), an email address (aiosmtpd) and a
signed webhook, all slow to answer, is killed with SIGKILL at seeded random points and restarted: every recipient
gets the whole digest, and each at most once more than once (the part in flight when the process died)."""

from __future__ import annotations

import asyncio
import email
import email.policy
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from storage import Database, RunOutcome, upgrade_database
from storage.repositories import ChatRepository, DeliveryRepository, DestinationRepository, RunRepository
from tests.fakes.http_server import FakeResponse, running_fake_server
from tests.fakes.telegram import FakeTelegram

TRIALS = 3
SLOW = 0.3
"""Seconds each receiver takes to answer (the message is taken at once): a kill often lands mid-send."""
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@dataclass
class SlowInbox:
    """An aiosmtpd handler that keeps every message, answering after `SLOW` seconds."""

    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))  # type: ignore[arg-type]
        await asyncio.sleep(SLOW)
        return "250 Message accepted for delivery"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(condition, *, what: str, every: float = 0.05, seconds: float = 300.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


async def _setup(database_url: str, smtp_port: int, hook_url: str) -> tuple[int, int]:
    """The email and webhook destinations (their chats' ids)."""
    database = Database(database_url)
    try:
        destinations = DestinationRepository(database)
        mail = await destinations.add(
            platform="apprise",
            external_id="d-mail",
            kind="email",
            url=f"mailto://127.0.0.1:{smtp_port}?to=reader@example.com&from=lookout@example.com",
            secret=None,
            label="mailto://127.0.0.1",
            added_by_chat_id=None,
        )
        hook = await destinations.add(
            platform="webhook",
            external_id="d-hook",
            kind="webhook",
            url=hook_url,
            secret="s" * 43,
            label="webhook+http://127.0.0.1/…",
            added_by_chat_id=None,
        )
        return mail.chat_id, hook.chat_id
    finally:
        await database.dispose()


async def _queue(database_url: str, chat: str, trial: int, files: Path, also: list[int]) -> tuple[int, int]:
    """A finished run for the Telegram chat and the destinations: its digest, CSV and chart, three outbox rows."""
    database = Database(database_url)
    try:
        owner = await ChatRepository(database).get_or_create("telegram", chat)
        run = await RunRepository(database).open_search_run(chat_id=owner.id, query=f"trial {trial}")
        csv, chart = files / f"trial-{trial}.csv", files / f"trial-{trial}.png"
        csv.write_text(f"title,url\nTrial {trial},https://example.org/{trial}\n")
        chart.write_bytes(PNG)
        filler = "The release notes and the benchmarks were discussed at length. " * 20
        digest = {
            "headline": f"DeepSeek ships ({trial})",
            "developments": [{"text": f"Development {n}. {filler}", "citations": [1]} for n in range(1, 8)],
            "quality": {"completeness": 0.8, "quality": 0.8},
            "cited": [{"number": 1, "title": "Release", "url": "https://example.org/r", "source": "hn"}],
        }
        rows = await DeliveryRepository(database).complete_run(
            run.id,
            outcome=RunOutcome(
                finished_at=datetime.now(UTC),
                digest=digest,
                artifacts={"csv": str(csv), "chart": str(chart)},
                stats={"topic": f"Trial {trial}", "file_stem": f"trial-{trial}"},
            ),
            extra_chat_ids=also,
        )
        return run.id, len(rows)
    finally:
        await database.dispose()


def test_kill_9_mid_delivery_to_a_chat_an_email_and_a_webhook(tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'lookout.db'}"
    asyncio.run(upgrade_database(database_url))
    telegram = FakeTelegram(answer_delay=SLOW)
    telegram.start()
    inbox = SlowInbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    smtp.start()
    files = tmp_path / "exports"
    files.mkdir()
    log = tmp_path / "lookout.log"
    with running_fake_server() as receiver:
        receiver.route("POST", "/hook", FakeResponse(status=204, delay=SLOW))
        mail_chat, hook_chat = asyncio.run(_setup(database_url, smtp.port, f"{receiver.url}/hook"))
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DATA_DIR": str(tmp_path / "data"),
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "TELEGRAM_API_URL": telegram.url,
            "ALLOW_PRIVATE_URLS": "true",
            "LLM_MODEL": "",
            "GEMINI_API_KEY": "",
            "LOG_LEVEL": "INFO",
            "DELIVERY_POLL_SECONDS": "0.2",
            "DELIVERY_LEASE_SECONDS": "300",  # the restarted process must take the dead one's claims back itself
        }

        def start() -> subprocess.Popen[bytes]:
            with log.open("ab") as out:
                return subprocess.Popen(
                    [str(Path(sys.executable).parent / "lookout"), "run"],
                    env={**env, "HTTP_PORT": str(_free_port())},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )

        lines = []
        process = start()
        try:
            for trial in range(TRIALS):
                rng = random.Random(trial)
                chat = 7000 + trial
                run_id, rows = asyncio.run(_queue(database_url, str(chat), trial, files, [mail_chat, hook_chat]))
                assert rows == 3
                tag = f"{run_id}-{hook_chat}"
                k = rng.randrange(4)
                _wait_for(lambda: len(telegram.sent(chat)) > k, what=f"message {k + 1} of trial {trial}")  # noqa: B023
                time.sleep(rng.uniform(0, SLOW * 1.2))
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                process = start()
                subject = f"Trial {trial}: DeepSeek ships ({trial})"

                def done() -> bool:
                    emails = [m for m in inbox.messages if m["Subject"] == subject]  # noqa: B023
                    posts = [r for r in receiver.received("/hook") if r.headers["x-lookout-delivery"] == tag]  # noqa: B023
                    telegram_done = any(m.kind == "photo" for m in telegram.sent(chat))  # noqa: B023
                    return bool(emails) and bool(posts) and telegram_done

                _wait_for(done, what=f"trial {trial} delivered everywhere", every=0.25)
                time.sleep(1.0)  # a duplicate would come now
                emails = [m for m in inbox.messages if m["Subject"] == subject]
                posts = [r for r in receiver.received("/hook") if r.headers["x-lookout-delivery"] == tag]
                sent = telegram.sent(chat)
                distinct = {(m.kind, m.text or m.filename) for m in sent}
                lines.append(
                    f"trial {trial}: killed after Telegram message {k + 1}: telegram {len(sent)} sent "
                    f"({len(sent) - len(distinct)} repeated), {len(emails)} email(s), {len(posts)} webhook POST(s)"
                )
                assert len(sent) - len(distinct) <= 1, lines[-1]
                assert 1 <= len(emails) <= 2 and 1 <= len(posts) <= 2, lines[-1]
                for message in emails:
                    names = sorted(part.get_filename() for part in message.iter_attachments())
                    assert names == [f"trial-{trial}.csv", f"trial-{trial}.png"], lines[-1]
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
            telegram.stop()
            smtp.stop()
    print("\n".join(lines))
