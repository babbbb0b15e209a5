"""Logging, set up once at start: one handler, quiet HTTP libraries, and secrets scrubbed from every record."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

# A Telegram bot token sits in every Bot API URL: bot<digits>:<35-ish chars>.
TELEGRAM_TOKEN_IN_URL = re.compile(r"bot\d{5,}:[A-Za-z0-9_-]{20,}")
REDACTED = "[redacted]"
# Libraries that log whole request URLs (and so tokens) at INFO.
NOISY_LOGGERS = ("httpx", "httpcore", "hpack", "urllib3", "aiosqlite", "asyncio", "apprise")
"""Libraries that log whole request URLs (and so tokens) below WARNING: Apprise logs destination URLs at DEBUG."""
# The job queue logs two lines per job at INFO (several a second in a busy minute); Lookout's own lines say
# what each run and delivery did, and procrastinate's warnings and errors still show.
CHATTY_LOGGERS = ("procrastinate",)


class SecretScrubber(logging.Filter):
    """Rewrites each record so that token-shaped strings and the configured secrets never reach output."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first, so a secret that contains another is removed whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        text = TELEGRAM_TOKEN_IN_URL.sub("bot" + REDACTED, text)
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        return True


def silence_library_banners() -> None:
    """Turn off what libraries print on their own at first use (pydantic-ai's banner): Lookout's output is the
    conversation and its own lines. Call once at process start, before any agent runs.

    pydantic-ai reads its switch from the environment at the banner's moment, so the library itself is not
    imported here (a command that never runs a model never loads it); if it is loaded already, its flag is set too."""
    os.environ["PYDANTIC_AI_NO_BANNER"] = "1"
    pydantic_ai = sys.modules.get("pydantic_ai")
    if pydantic_ai is not None:
        pydantic_ai.BANNER_ENABLED = False  # type: ignore[attr-defined]


def configure_logging(
    *, level: str = "INFO", secrets: Iterable[str] = (), stream: TextIO | None = None, file: Path | None = None
) -> None:
    """Install the one root handler (on `file`, appended to, or on `stream`, default stderr); call from the CLI
    entry point, never at import. Every library's records go through it, so none reaches the console on its own."""
    handler: logging.Handler
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(file, encoding="utf-8", delay=True)  # created by the first record
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretScrubber(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        if isinstance(old, logging.FileHandler):
            old.close()
    root.addHandler(handler)
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level == "DEBUG" else logging.WARNING)
