"""Settings: defaults, `.env` loading, one clear sentence per mistake, secrets never shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings import DEFAULT_HEAVY_MODEL, DEFAULT_LIGHT_MODEL, Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults() -> None:
    settings = load_settings()
    assert settings.database_url == "sqlite+aiosqlite:///./data/lookout.db"
    assert settings.data_dir == Path("data")
    assert settings.log_level == "INFO"
    assert settings.timezone == "UTC"
    assert settings.telegram_api_url == "https://api.telegram.org"
    assert settings.slack_api_url == "https://slack.com/api/"
    assert (settings.http_host, settings.http_port) == ("127.0.0.1", 8080)
    assert settings.min_monitor_interval == 900
    assert settings.allow_private_urls is False
    assert settings.allowed_users == [] and settings.admin_users == []
    assert (settings.llm_model, settings.llm_heavy_model) == (DEFAULT_LIGHT_MODEL, DEFAULT_HEAVY_MODEL)
    assert settings.llm_unavailable_reason() is not None  # no key → commands only


def test_database_follows_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "d"))
    assert load_settings().database_url == f"sqlite+aiosqlite:///{tmp_path}/d/lookout.db"
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db:5432/lookout")
    assert load_settings().database_url == "postgresql+asyncpg://u:p@db:5432/lookout"


def test_dotenv_is_read_and_environment_wins(monkeypatch: pytest.MonkeyPatch, isolated_environment: Path) -> None:
    (isolated_environment / ".env").write_text(
        "LOG_LEVEL=debug\nTIMEZONE=Asia/Shanghai\nALLOWED_USERS=12, 34,\nGEMINI_API_KEY=from-dotenv-key\n"
        "TELEGRAM_BOT_TOKEN=\n"
    )
    monkeypatch.setenv("TIMEZONE", "Europe/Berlin")
    settings = load_settings()
    assert settings.log_level == "DEBUG"
    assert settings.timezone == "Europe/Berlin"
    assert settings.allowed_users == ["12", "34"]
    assert settings.gemini_api_key is not None
    assert settings.gemini_api_key.get_secret_value() == "from-dotenv-key"
    assert settings.telegram_bot_token is None  # an empty line means "not configured"
    assert settings.llm_unavailable_reason() is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_BOT_TOKEN is set but Slack needs SLACK_APP_TOKEN"),
        ({"SLACK_SIGNING_SECRET": "s"}, "SLACK_BOT_TOKEN is missing"),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"}, "SLACK_APP_TOKEN must be an app-level token"),
        ({"TELEGRAM_WEBHOOK_URL": "https://x.example/telegram/webhook"}, "TELEGRAM_BOT_TOKEN is missing"),
        (
            {"TELEGRAM_BOT_TOKEN": "1:a", "TELEGRAM_WEBHOOK_URL": "https://x.example/telegram/webhook"},
            "TELEGRAM_WEBHOOK_SECRET is missing",
        ),
        (
            {
                "TELEGRAM_BOT_TOKEN": "1:a",
                "TELEGRAM_WEBHOOK_URL": "http://x.example/hook",
                "TELEGRAM_WEBHOOK_SECRET": "s",
            },
            "TELEGRAM_WEBHOOK_URL must be an https:// URL",
        ),
        ({"REDDIT_CLIENT_ID": "abc"}, "REDDIT_CLIENT_ID and REDDIT_CLIENT_SECRET must be set together"),
        ({"TIMEZONE": "Mars/Olympus"}, "TIMEZONE must be an IANA name"),
        ({"LOG_LEVEL": "chatty"}, "LOG_LEVEL must be one of"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL must start with sqlite+aiosqlite://"),
        ({"HTTP_PORT": "99999"}, "HTTP_PORT"),
        ({"MIN_MONITOR_INTERVAL": "5"}, "MIN_MONITOR_INTERVAL"),
        ({"TELEGRAM_API_URL": "ftp://x"}, "TELEGRAM_API_URL: must be an http(s) URL"),
        ({"ALLOW_PRIVATE_URLS": "maybe"}, "ALLOW_PRIVATE_URLS"),
        ({"RSSHUB_PLATFORMS": "weibo,myspace"}, "RSSHUB_PLATFORMS: unknown RSSHub platform(s) myspace"),
    ],
)
def test_each_mistake_is_one_sentence_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message
    assert message.endswith(".")


def test_secrets_never_in_repr_or_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-super-secret-value")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "bot-token-super-secret-value")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-super-secret-value")
    settings = load_settings()
    shown = repr(settings) + str(settings) + settings.model_dump_json()
    assert "super-secret" not in shown
    assert sorted(settings.secret_values()) == sorted(
        ["gemini-super-secret-value", "bot-token-super-secret-value", "xapp-super-secret-value"]
    )
    monkeypatch.setenv("SLACK_APP_TOKEN", "wrong-super-secret-value")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "super-secret" not in str(caught.value)


def test_env_example_lists_every_setting_with_a_comment() -> None:
    lines = (ROOT / ".env.example").read_text().splitlines()
    listed = {}
    for number, line in enumerate(lines):
        match = re.match(r"^([A-Z][A-Z0-9_]*)=", line)
        if match:
            listed[match.group(1)] = lines[number - 1]
    assert set(listed) == {name.upper() for name in Settings.model_fields}
    for name, comment in listed.items():
        assert comment.startswith("# "), f"{name} has no comment line above it"


def test_embeddings_are_on_with_a_gemini_key_and_off_when_empty_or_keyless() -> None:
    assert load_settings(gemini_api_key="k").embedding_unavailable_reason() is None
    keyless = load_settings(gemini_api_key=None).embedding_unavailable_reason()
    assert keyless is not None and "GEMINI_API_KEY" in keyless
    off = load_settings(gemini_api_key="k", embedding_model="").embedding_unavailable_reason()
    assert off is not None and "EMBEDDING_MODEL" in off
