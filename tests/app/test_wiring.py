"""Wiring turns settings into the lower layers' objects: every source setting reaches the sources, and the process
builds one set of language models, with one Gemini client, that the chat and the monitors share."""

from __future__ import annotations

import gc
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic_ai import models
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from agent import Incoming
from app.assembly import build_dispatcher, build_services
from app.monitoring import monitor_stack
from app.settings import load_settings
from app.wiring import SourceCatalog, language_models, open_database, open_http_client, sources_config
from research import model_label
from sources.config import SourcesConfig
from tests.fakes.gemini import FakeGemini, daily_quota_body
from tests.fakes.http_server import FakeHTTPServer, FakeResponse


def test_every_sources_config_field_comes_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HN_API_URL", "http://127.0.0.1:1/hn")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_example")
    monkeypatch.setenv("RSSHUB_URL", "http://rsshub.internal:1200")
    monkeypatch.setenv("RSSHUB_PLATFORMS", "weibo,bilibili")
    monkeypatch.setenv("ALLOW_PRIVATE_URLS", "true")
    monkeypatch.setenv("HTTP_USER_AGENT", "Lookout-test (ops@example.org)")
    settings = load_settings()
    config = sources_config(settings)
    assert config.hn_api_url == "http://127.0.0.1:1/hn"
    assert config.github_token is not None and config.github_token.get_secret_value() == "ghp_example"
    assert config.rsshub_url == "http://rsshub.internal:1200"
    assert config.rsshub_platforms == ("weibo", "bilibili")
    assert config.allow_private_urls is True
    assert config.user_agent == "Lookout-test (ops@example.org)"
    for field in fields(SourcesConfig):
        if field.name != "user_agent":
            assert field.name in type(settings).model_fields, f"{field.name} has no setting"


async def test_catalog_resolves_default_and_named_sources() -> None:
    settings = load_settings()
    client = open_http_client(settings)
    try:
        catalog = SourceCatalog.build(settings, client)
        assert [s.name for s in catalog.resolve(None)] == ["hn", "news", "arxiv", "github", "wikipedia", "web"]
        assert [s.name for s in catalog.resolve("hn,rss:https://example.org/feed.xml")] == ["hn", "rss"]
        with pytest.raises(ValueError, match="unknown source"):
            catalog.resolve("hn,myspace")
        with pytest.raises(ValueError, match=r"X_BEARER_TOKEN|bearer"):
            catalog.resolve("x")
    finally:
        await client.aclose()


def test_models_only_when_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert language_models(load_settings()).light is None
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:9")
    built = language_models(load_settings())
    light, heavy = built.plain_models()
    assert isinstance(light, GoogleModel) and light.model_name == "gemini-3.5-flash-lite"
    assert isinstance(heavy, GoogleModel) and heavy.model_name == "gemini-3.8-flash"
    assert light.client is heavy.client  # one Gemini client for every model of the process
    monkeypatch.setenv("LLM_HEAVY_MODEL", "google:gemini-3.5-flash-lite")
    same = language_models(load_settings())
    assert len(same.plain_models()) == 1  # one name, one model object, in both chains
    monkeypatch.setenv("LLM_MODEL", "")
    assert language_models(load_settings()).light is None


def _gemini_providers() -> int:
    gc.collect()
    return sum(1 for thing in gc.get_objects() if isinstance(thing, GoogleProvider))


def _message(text: str, update: int) -> Incoming:
    return Incoming(
        platform="telegram",
        chat_external_id="4242",
        user_external_id="4242",
        text=text,
        event_id=str(update),
        is_private=True,
        user_display_name="Ada",
    )


async def test_lookout_run_wiring_shares_one_model_set_and_one_gemini_client(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeHTTPServer, tmp_path: Path
) -> None:
    light, heavy = FakeGemini(fake_server, model="gemini-light"), FakeGemini(fake_server, model="gemini-heavy")
    for fake in (light, heavy):  # both out of quota: whoever asks first, the others must not ask again
        fake.reply_raw(FakeResponse.json(daily_quota_body(fake.model), status=429))
    created = int(datetime.now(UTC).timestamp())
    hit = {"objectID": "1", "title": "DeepSeek V4 is out", "url": "https://example.com/v4", "created_at_i": created}
    for path in ("/hn/search", "/hn/search_by_date"):
        fake_server.route("GET", path, FakeResponse.json({"hits": [hit], "nbHits": 1}))
    environment = {
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_MODEL": "google:gemini-light",
        "LLM_HEAVY_MODEL": "google:gemini-heavy",
        "GEMINI_API_KEY": light.api_key,
        "GEMINI_BASE_URL": fake_server.url,
        "HN_API_URL": f"{fake_server.url}/hn",
        "ALLOW_PRIVATE_URLS": "true",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    before = _gemini_providers()

    with models.override_allow_model_requests(True):
        # what `lookout run` (app.service.run_service) builds, in the same order
        async with open_database(settings) as database, monitor_stack(settings, database) as stack:
            services = build_services(settings, database=database, stack=stack)
            dispatcher = build_dispatcher(settings, services)
            assert _gemini_providers() - before == 1
            assert services.models is stack.models
            plain = stack.models.plain_models()
            assert sorted(model_label(model) for model in plain) == ["google:gemini-heavy", "google:gemini-light"]

            answer = await dispatcher.dispatch(_message("hello", 1))
            assert "daily quota" in answer[0].text
            assert (len(light.requests), len(heavy.requests)) == (1, 1)

            await dispatcher.dispatch(_message("/track DeepSeek from hn", 2))
            digest = await dispatcher.dispatch(_message("/digest 1", 3))

            assert _gemini_providers() - before == 1  # nothing built another client on the way
    assert fake_server.received("/hn/search") or fake_server.received("/hn/search_by_date")
    assert "digest" in digest[0].text.lower()
    # the monitor's plan, critique and digest steps ran on the same set: its memory of spent quotas kept them from
    # asking either model again
    assert (len(light.requests), len(heavy.requests)) == (1, 1)
