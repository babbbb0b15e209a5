"""`lookout chat` on a real pseudo-terminal, asserting on the screen a person sees (a VT100 emulator reads it):
no library banner, Ctrl-C at the prompt like a shell, and nothing typed during a run mixed into its status."""

from __future__ import annotations

from pathlib import Path

from tests.app.test_chat_cli import GatedServer, gated_server, route_sources, source_env
from tests.fakes.gemini import FakeGemini
from tests.fakes.http_server import FakeHTTPServer
from tests.pty_chat import PtyProcess, person_env

PROMPT = r"(?m)^>$"
__all__ = ["gated_server"]  # the fixture, shared with the older terminal tests


def test_no_library_banner_ever_appears_in_the_conversation(fake_server: FakeHTTPServer, tmp_path: Path) -> None:
    """pydantic-ai prints a first-run banner to a terminal unless told not to (#9.3)."""
    gemini = FakeGemini(fake_server)
    gemini.reply_text("Hello! I keep watch on topics for you.")
    env = person_env(
        DATA_DIR=str(tmp_path / "data"), GEMINI_API_KEY=gemini.api_key, GEMINI_BASE_URL=gemini.url,
        LLM_MODEL=f"google:{gemini.model}", LLM_HEAVY_MODEL=f"google:{gemini.model}",
    )  # fmt: skip
    chat = PtyProcess(["chat"], env=env, cwd=tmp_path)
    try:
        chat.wait_for(PROMPT)
        chat.type("hello there\r")
        chat.wait_for(r"I keep watch on topics for you\.[\s\S]*\n>$")
        chat.type("\x04")
        assert chat.close() == 0
    finally:
        chat.kill()
    assert gemini.requests, "the free text never reached the model"
    seen = chat.screen.text
    assert "PYDANTIC_AI_NO_BANNER" not in chat.raw and "logfire" not in chat.raw.lower(), seen
    assert "pydantic" not in seen.lower(), seen


def test_ctrl_c_at_the_prompt_ends_the_line_like_a_shell_and_typing_during_a_run_waits_for_the_prompt(
    gated_server: GatedServer, tmp_path: Path
) -> None:
    """#9.4: `> half-typed^C`, then a fresh prompt on the next line; keys typed while a run shows its status line
    are not drawn into it, and reappear at the next prompt (type-ahead, as in a shell)."""
    route_sources(gated_server, hn_prefix="/gated/hn")
    env = person_env(**source_env(gated_server, tmp_path / "data", hn_prefix="/gated/hn"))
    chat = PtyProcess(["chat"], env=env, cwd=tmp_path)
    try:
        chat.wait_for(PROMPT)
        chat.type("/untrack 42")
        chat.wait_for(r"(?m)^> /untrack 42$")
        chat.type("\x03")
        chat.wait_for(r"(?m)^> /untrack 42\^C\n>$")
        assert chat.screen.cursor_line == ">"  # the cursor waits on the fresh prompt

        chat.type("/track Mistral daily from hn\r")
        chat.wait_for(r"as monitor #1[\s\S]*\n>$")
        chat.type("/digest 1\r")
        assert gated_server.gated.wait(timeout=90), "the monitor never reached its source"
        chat.wait_for(r"(?m)^… ")  # the status line is up
        chat.type("hello")
        chat.settle(1.5)
        assert "hello" not in chat.screen.text, chat.screen.text
        status = [line for line in chat.screen.lines if line.startswith("… ")]
        assert status and all("hello" not in line for line in status)

        gated_server.released.set()
        chat.wait_for(r"Monitor #1 ran[\s\S]*\n> hello$")  # what was typed is waiting at the prompt
        chat.type("\x15/quit\r")  # Ctrl-U clears it
        assert chat.close() == 0
    finally:
        chat.kill()
    assert "Traceback" not in chat.screen.text
