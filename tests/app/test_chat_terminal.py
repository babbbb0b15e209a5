"""`lookout chat` on a real pseudo-terminal, asserting on the screen a person sees (a VT100 emulator reads it):
no library banner, Ctrl-C at the prompt like a shell, and nothing typed during a run mixed into its status."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.gemini import FakeGemini
from tests.fakes.http_server import FakeHTTPServer
from tests.pty_chat import PtyProcess, person_env

PROMPT = r"(?m)^>$"


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
