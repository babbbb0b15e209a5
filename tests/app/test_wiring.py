"""Wiring turns settings into the lower layers' objects: every source setting reaches the sources."""

from __future__ import annotations

from dataclasses import fields

import pytest
from pydantic_ai.models.google import GoogleModel

from app.settings import load_settings
from app.wiring import SourceCatalog, heavy_model, light_model, open_http_client, sources_config
from sources.config import SourcesConfig


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
    assert light_model(load_settings()) is None
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    monkeypatch.setenv("GEMINI_BASE_URL", "http://127.0.0.1:9")
    light, heavy = light_model(load_settings()), heavy_model(load_settings())
    assert isinstance(light, GoogleModel) and light.model_name == "gemini-3.5-flash-lite"
    assert isinstance(heavy, GoogleModel) and heavy.model_name == "gemini-3.8-flash"
    monkeypatch.setenv("LLM_MODEL", "")
    assert light_model(load_settings()) is None
