"""The real-model suite's fixtures: the server named by LOOKOUT_TEST_MODEL_URL (`.ci/model_server.sh` starts one),
a recording proxy in front of it, and an environment configured the way a self-hoster configures Lookout for it
(`openai-chat:` model strings, OPENAI_BASE_URL, no other provider).

Without LOOKOUT_TEST_MODEL_URL the suite is skipped, unless LOOKOUT_REQUIRE_REAL_MODEL=1 (CI), where it fails.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic_ai import models

from app.settings import Settings
from tests.realmodel.proxy import ModelProxy, running_proxy

URL_ENV = "LOOKOUT_TEST_MODEL_URL"
REQUIRE_ENV = "LOOKOUT_REQUIRE_REAL_MODEL"
LISTING_SECONDS = 120.0
"""How long the server's model listing may take: llama-cpp-python answers it only between generations."""


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 says the real-model suite must run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def real_model_requests() -> Iterator[None]:
    """This suite is the one that talks to a real model server: model requests are allowed here (tests/conftest.py
    blocks them everywhere else)."""
    with models.override_allow_model_requests(True):
        yield


@pytest.fixture(scope="session")
def model_server() -> tuple[str, str]:
    """The server's base URL (ending in /v1) and the id of the model it serves."""
    url = os.environ.get(URL_ENV, "").strip().rstrip("/")
    if not url:
        _unavailable(f"{URL_ENV} is not set (bash .ci/model_server.sh starts a server and prints it)")
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=LISTING_SECONDS) as answer:
            listing = json.loads(answer.read())
    except OSError as error:
        _unavailable(f"the model server at {url} does not answer: {error}")
    models = [str(entry["id"]) for entry in listing.get("data", [])]
    if not models:
        _unavailable(f"the model server at {url} lists no model")
    return url, models[0]


@pytest.fixture
def proxy(model_server: tuple[str, str]) -> Iterator[ModelProxy]:
    with running_proxy(model_server[0]) as recording:
        yield recording


@pytest.fixture
def model_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model_server: tuple[str, str], proxy: ModelProxy
) -> dict[str, str]:
    """An empty environment in an empty directory, then what a self-hoster writes for a llama.cpp server: both
    model strings, the server's URL and a placeholder key; embeddings off (the server has none); structured output
    in `LOOKOUT_TEST_OUTPUT_MODE`, by default `json_object` (the schema in a `json_object` response format, which
    llama-cpp-python's server constrains by grammar; it refuses `json_schema` at once, so `native` shows every stage
    falling back with a true reason)."""
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_BASE_URL", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    model = f"openai-chat:{model_server[1]}"
    env = {
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_MODEL": model,
        "LLM_HEAVY_MODEL": model,
        "EMBEDDING_MODEL": "",
        "OPENAI_BASE_URL": proxy.base_url,
        "OPENAI_API_KEY": "sk-local-not-checked",
        "LLM_OUTPUT_MODE": os.environ.get("LOOKOUT_TEST_OUTPUT_MODE", "json_object"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
