"""True lines when the model cannot answer: a message longer than the server's whole context, and a server that is
gone. Whatever Lookout says, it must not blame what is not wrong (the model name, the API key), must not crash, and
must not send a request over the context."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.realmodel.checks import request_problems
from tests.realmodel.proxy import ModelProxy
from tests.realmodel.world import EMPTY_REASON, chat, memory

FALSE_CAUSE = ("api key", "model name")
"""What the issue saw Lookout blame for a context-length or template error."""

LONG_MESSAGE = " ".join(f"Paragraph {n}: the committee reviewed the quarterly figures again." for n in range(1400))
"""About 14,000 tokens: more than the server's context of 8,192 on its own."""


def told(output: str) -> str:
    return "\n".join(output.splitlines()[2:])


def test_a_message_longer_than_the_context_gets_a_true_line_and_nothing_over_the_context_is_sent(
    model_env: dict[str, str], proxy: ModelProxy
) -> None:
    result = chat([LONG_MESSAGE])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output[-2000:]
    reply = told(result.output).replace(LONG_MESSAGE, "")
    assert reply.strip(), "the person was told nothing"
    assert not EMPTY_REASON.search(reply), reply
    assert not any(cause in reply.lower() for cause in FALSE_CAUSE), reply
    problems = request_problems(proxy.exchanges)
    assert not problems, "; ".join(problems)
    for text in memory(Path(model_env["DATA_DIR"])).user_prompts:
        assert len(text) <= len(LONG_MESSAGE)


def test_a_server_that_is_gone_is_named_as_such(model_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    result = chat(["Hello there"])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    reply = told(result.output)
    assert reply.strip() and not EMPTY_REASON.search(reply), reply
    assert not any(cause in reply.lower() for cause in FALSE_CAUSE), reply
    assert memory(Path(model_env["DATA_DIR"])).messages == [], "a failed turn was stored as if answered"
