"""Logging scrubs Telegram tokens and configured secrets from every record, messages and tracebacks alike."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from app.logging_setup import configure_logging

TOKEN = "123456789:FAKE-token-not-a-real-one_123456"


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_token_in_url_and_secrets_are_scrubbed() -> None:
    out = io.StringIO()
    configure_logging(level="DEBUG", secrets=["fake-slack-secret-1234"], stream=out)
    log = logging.getLogger("lookout.test")
    log.info("POST https://api.telegram.org/bot%s/sendMessage", TOKEN)
    log.warning("slack said no to %s", "fake-slack-secret-1234")
    try:
        raise RuntimeError(f"failed https://api.telegram.org/bot{TOKEN}/getUpdates")
    except RuntimeError:
        log.exception("boom")
    text = out.getvalue()
    assert TOKEN not in text
    assert "FAKE-token-not-a-real-one_123456" not in text
    assert "fake-slack-secret-1234" not in text
    assert text.count("bot[redacted]") == 2
    assert "slack said no to [redacted]" in text
    assert "RuntimeError" in text  # the traceback itself is kept


def test_httpx_is_kept_quiet_and_setup_replaces_handlers() -> None:
    out = io.StringIO()
    configure_logging(level="DEBUG", stream=io.StringIO())
    configure_logging(level="INFO", stream=out)
    assert len(logging.getLogger().handlers) == 1
    logging.getLogger("httpx").info("HTTP Request: GET https://api.telegram.org/bot%s/getMe", TOKEN)
    assert logging.getLogger("httpx").level == logging.WARNING
    assert out.getvalue() == ""
