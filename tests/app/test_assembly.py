"""The conversation assembled from settings: every conversation setting mapped, the monitor stack's sources,
client and models shared, the dispatcher applying the access lists, and the dictionary folders of killed processes
removed as the stack starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agent.context import ConversationSettings
from agent.messages import Incoming
from app.assembly import build_dispatcher, build_services
from app.monitoring import monitor_stack
from app.settings import load_settings
from app.wiring import open_database
from kernel import THIS_HOST
from sources import HttpClient


async def test_build_services_maps_every_conversation_setting(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        timezone="Europe/Berlin",
        min_monitor_interval=1800,
        chat_daily_tokens=5000,
        memory_turns=7,
        memory_idle_hours=3.5,
        agent_request_limit=5,
        agent_token_limit=20_000,
    )
    async with open_database(settings) as database, monitor_stack(settings, database) as stack:
        services = build_services(settings, database=database, stack=stack)
        assert services.settings == ConversationSettings(
            default_timezone="Europe/Berlin",
            min_interval_seconds=1800,
            chat_daily_tokens=5000,
            memory_turns=7,
            memory_idle_hours=3.5,
            request_limit=5,
            token_limit=20_000,
            exports_dir=tmp_path / "data" / "exports",
            llm_unavailable_reason=settings.llm_unavailable_reason(),
            bot_username=None,
        )
        assert services.settings.llm_unavailable_reason is not None
        assert "GEMINI_API_KEY" in services.settings.llm_unavailable_reason
        assert not hasattr(services, "database") and services.monitors is stack.service  # storage behind services
        assert services.http is stack.catalog.client  # one polite client for sources and the chat's reads
        assert services.models is stack.models
        assert services.models.light is None and services.models.heavy is None
        assert [source.name for source in services.resolve_sources("hn,news")] == ["hn", "news"]
        with pytest.raises(ValueError, match="myspace"):
            services.resolve_sources("myspace")

        own_client = HttpClient(user_agent="test")
        try:
            named = build_services(
                settings, database=database, stack=stack, http=own_client, bot_username="lookout_bot"
            )
            assert named.http is own_client and named.settings.bot_username == "lookout_bot"
        finally:
            await own_client.aclose()


async def test_with_a_key_the_conversation_has_both_models(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data", gemini_api_key="test-key", gemini_base_url="http://127.0.0.1:9/gemini"
    )
    async with open_database(settings) as database, monitor_stack(settings, database) as stack:
        services = build_services(settings, database=database, stack=stack)
        assert services.settings.llm_unavailable_reason is None
        assert services.models.light is not None and services.models.heavy is not None
        light, heavy = services.models.plain_models()
        assert light.model_name == settings.llm_model.removeprefix("google:")
        assert heavy.model_name == settings.llm_heavy_model.removeprefix("google:")


async def test_the_dispatcher_applies_the_access_lists_from_settings(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", allowed_users=["telegram:1"], admin_users=["telegram:9"])

    def private(user: str, text: str) -> Incoming:
        return Incoming(platform="telegram", chat_external_id=user, user_external_id=user, text=text, is_private=True)

    async with open_database(settings) as database, monitor_stack(settings, database) as stack:
        dispatcher = build_dispatcher(settings, build_services(settings, database=database, stack=stack))
        [denied] = await dispatcher.dispatch(private("2", "/help"))
        assert "This bot is private" in denied.text and "(2)" in denied.text
        [allowed] = await dispatcher.dispatch(private("1", "/help"))
        assert "/track <topic>" in allowed.text  # the command router answered
        [not_admin] = await dispatcher.dispatch(private("1", "/monitors all"))
        [admin] = await dispatcher.dispatch(private("9", "/monitors all"))
        assert "Only admins" in not_admin.text and "Only admins" not in admin.text
        [free_text] = await dispatcher.dispatch(private("1", "hello"))
        assert "GEMINI_API_KEY" in free_text.text  # no model: the chat agent says why, from the settings


async def test_the_monitor_stack_removes_a_killed_processs_folder_as_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lookout run` and `lookout chat` start with the monitor stack: a folder a killed process left is gone then,
    before any Japanese text is read."""
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    tmp = tmp_path / "tmp"
    left = tmp / f"lookout-ipadic-{killed.pid}-{THIS_HOST}-k1ll3dab"
    kept = tmp / f"lookout-ipadic-{os.getpid()}-{THIS_HOST}-l1v3abcd"
    for folder in (left, kept):
        folder.mkdir(parents=True)
        (folder / "sys.dic").write_bytes(b"table")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    settings = load_settings(_env_file=None, data_dir=tmp_path / "data", llm_model="")

    async with open_database(settings) as database, monitor_stack(settings, database):
        assert not left.exists() and (kept / "sys.dic").is_file()
