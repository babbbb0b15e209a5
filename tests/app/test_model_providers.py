"""Any model a user brings, from `.env`: the provider URL and key written there reach the real client (checked on a
local OpenAI-compatible server), LLM_MODEL alone switches both models, and a model that cannot be used is one
sentence naming the variable, with the process going on without a model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic_ai import Agent, models

from app.settings import DEFAULT_HEAVY_MODEL, DEFAULT_LIGHT_MODEL, load_settings
from app.wiring import item_embedder, language_models
from research.llm import model_chain
from tests.fakes.anthropic_messages import FakeAnthropic
from tests.fakes.http_server import FakeHTTPServer
from tests.fakes.openai_compat import FakeOpenAI


def write_env(directory: Path, **values: str) -> None:
    (directory / ".env").write_text("".join(f"{name}={value}\n" for name, value in values.items()))


async def test_openai_compatible_server_from_dotenv(isolated_environment: Path, fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="qwen3-0.6b", api_key="sk-from-dotenv")
    fake.reply_text("hello from the local server")
    write_env(
        isolated_environment,
        LLM_MODEL="openai-chat:qwen3-0.6b",
        OPENAI_BASE_URL=fake.base_url,
        OPENAI_API_KEY="sk-from-dotenv",
    )
    settings = load_settings()
    assert settings.llm_heavy_model == "openai-chat:qwen3-0.6b", "LLM_MODEL alone sets the heavy model too"
    assert settings.llm_unavailable_reason() is None
    assert settings.context_tokens() == 8192, "a server given by URL is budgeted as a local one"
    assert settings.embedding_unavailable_reason() is not None, "a local server's embedding model is not guessed"

    chosen = language_models(settings)
    assert chosen.light is not None and chosen.heavy is not None
    assert len(chosen.plain_models()) == 1, "one model built for both roles"
    with models.override_allow_model_requests(True):
        result = await Agent(chosen.heavy).run("hi")

    assert result.output == "hello from the local server"
    (request,) = fake.requests
    assert request.api_key == "sk-from-dotenv" and request.body["model"] == "qwen3-0.6b"
    assert request.max_tokens == settings.llm_chat_max_tokens, "no request without an output limit"
    # the field every compatible server reads: llama-cpp-python ignores max_completion_tokens and runs to n_ctx
    assert request.body.get("max_tokens") == settings.llm_chat_max_tokens
    assert "max_completion_tokens" not in request.body


async def test_ollama_base_url_from_dotenv(isolated_environment: Path, fake_server: FakeHTTPServer) -> None:
    fake = FakeOpenAI(fake_server, model="llama3.2", api_key="not-needed")
    fake.reply_text("ollama answers")
    write_env(isolated_environment, LLM_MODEL="ollama:llama3.2", OLLAMA_BASE_URL=fake.base_url)
    settings = load_settings()
    chosen = language_models(settings)
    assert chosen.light is not None
    assert [model.system for model in model_chain(chosen.light)] == ["ollama"]
    with models.override_allow_model_requests(True):
        result = await Agent(chosen.light).run("hi")
    assert result.output == "ollama answers" and len(fake.requests) == 1


def test_default_light_model_keeps_the_default_heavy_one(isolated_environment: Path) -> None:
    write_env(isolated_environment, GEMINI_API_KEY="k", LLM_HEAVY_MODEL="")
    settings = load_settings()
    assert (settings.llm_model, settings.llm_heavy_model) == (DEFAULT_LIGHT_MODEL, DEFAULT_HEAVY_MODEL)
    assert settings.embedding_model == "google:gemini-embedding-001"
    write_env(isolated_environment, LLM_MODEL="anthropic:claude-haiku-4-5", LLM_HEAVY_MODEL="anthropic:claude-opus-4")
    settings = load_settings()
    assert settings.llm_heavy_model == "anthropic:claude-opus-4", "an explicit heavy model is kept"
    assert settings.llm_unavailable_reason() == (
        "LLM_MODEL is 'anthropic:claude-haiku-4-5' but ANTHROPIC_API_KEY is not set; put it in .env"
    )
    assert settings.embedding_unavailable_reason() is not None, "Anthropic has no embeddings: off"


def test_openai_embeddings_follow_openai(isolated_environment: Path) -> None:
    write_env(isolated_environment, LLM_MODEL="openai:gpt-5-mini", OPENAI_API_KEY="sk-x")
    settings = load_settings()
    assert settings.embedding_model == "openai:text-embedding-3-small"
    assert settings.embedding_unavailable_reason() is None
    embedder = item_embedder(settings, None)
    assert embedder is not None and embedder.model_name == "openai:text-embedding-3-small"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"LLM_MODEL": "bogus:model"}, "LLM_MODEL='bogus:model' names an unknown provider 'bogus'"),
        ({"LLM_MODEL": "gpt-4o"}, "LLM_MODEL must name a provider and a model"),
        ({"LLM_MODEL": "openai-chat:qwen"}, "neither OPENAI_API_KEY nor OPENAI_BASE_URL"),
        ({"LLM_MODEL": "ollama:llama3.2"}, "OLLAMA_BASE_URL is not set"),
    ],
)
def test_an_unusable_model_is_one_sentence_naming_the_variable(
    isolated_environment: Path, env: dict[str, str], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    write_env(isolated_environment, **env)
    settings = load_settings()
    reason = settings.llm_unavailable_reason()
    assert reason is not None and said in reason and "\n" not in reason
    with caplog.at_level(logging.WARNING):
        chosen = language_models(settings)
    assert chosen.light is None and chosen.heavy is None, "commands go on without a model"


def test_readme_local_model_examples_work(isolated_environment: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Local models (Ollama, llama.cpp)", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("```", 1)[0] for block in section.split("```sh\n")[1:]]
    assert len(blocks) == 2
    for block, system in zip(blocks, ["openai", "ollama"], strict=True):
        (isolated_environment / ".env").write_text(block)
        settings = load_settings()
        assert settings.llm_unavailable_reason() is None, block
        chosen = language_models(settings)
        assert [model.system for model in chosen.plain_models()] == [system]
        assert settings.context_tokens() == 8192


def test_provider_clients_take_their_url_key_and_timeout_from_settings_and_never_retry(
    isolated_environment: Path,
) -> None:
    write_env(
        isolated_environment,
        LLM_MODEL="anthropic:claude-haiku-4-5",
        LLM_HEAVY_MODEL="openai-chat:qwen3",
        ANTHROPIC_API_KEY="sk-ant-dotenv",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9/anthropic",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        LLM_TIMEOUT_SECONDS="42",
    )
    settings = load_settings()
    providers: dict[str, object] = {}
    chosen = language_models(settings, providers=providers)
    assert sorted(model.system for model in chosen.plain_models()) == ["anthropic", "openai"]
    anthropic, openai = providers["anthropic"].client, providers["openai"].client  # type: ignore[attr-defined]
    assert anthropic.api_key == "sk-ant-dotenv" and str(anthropic.base_url).startswith("http://127.0.0.1:9/anthropic")
    assert str(openai.base_url) == "http://127.0.0.1:9/v1/"
    for client in (anthropic, openai):
        assert client.max_retries == 0 and client.timeout == 42


def test_an_unusable_heavy_model_leaves_both_roles_to_the_light_one(
    isolated_environment: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # an old .env copy still names the heavy Gemini model, without a Gemini key
    write_env(
        isolated_environment,
        LLM_MODEL="ollama:llama3.2",
        OLLAMA_BASE_URL="http://127.0.0.1:9/v1",
        LLM_HEAVY_MODEL="google:gemini-3.8-flash",
    )
    settings = load_settings()
    assert settings.llm_unavailable_reason() is None
    problem = settings.heavy_model_problem()
    assert problem is not None and problem.startswith("LLM_HEAVY_MODEL is 'google:gemini-3.8-flash' but GEMINI_API_KEY")
    assert settings.heavy_model == "ollama:llama3.2"
    with caplog.at_level(logging.WARNING):
        chosen = language_models(settings)
    assert chosen.heavy is not None and [m.system for m in chosen.plain_models()] == ["ollama"]
    assert "critique and synthesis use LLM_MODEL" in caplog.text


async def test_anthropic_from_dotenv(isolated_environment: Path, fake_server: FakeHTTPServer) -> None:
    claude = FakeAnthropic(fake_server, model="claude-haiku-4-5", api_key="sk-ant-from-dotenv")
    claude.reply_text("hello from the Messages API")
    write_env(
        isolated_environment,
        LLM_MODEL="anthropic:claude-haiku-4-5",
        ANTHROPIC_API_KEY="sk-ant-from-dotenv",
        ANTHROPIC_BASE_URL=claude.base_url,
    )
    settings = load_settings()
    assert settings.llm_unavailable_reason() is None
    chosen = language_models(settings)
    assert chosen.light is not None
    with models.override_allow_model_requests(True):
        result = await Agent(chosen.light, instructions="Be brief.").run("hi")

    assert result.output == "hello from the Messages API"
    (request,) = claude.requests
    assert request.api_key == "sk-ant-from-dotenv" and request.system == "Be brief."
    assert request.max_tokens == settings.llm_chat_max_tokens, "no request without an output limit"
