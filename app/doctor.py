"""`lookout doctor`: check every outside part the configuration names, one line each, before a deployment relies on it.

Checks, in order: the database (reachable, and its schema against this code's migrations); each configured chat
platform's token (Telegram `getMe`, Slack `auth.test`); each configured language model and the embedding model, with
a real request of one token; each source that needs a key and has one (a one-result search); the HTTP port (free to
listen on). Parts that are not configured get an "off" line and are not failures. Each check is bounded in time and
every line goes through the log scrubber, so no token reaches the terminal.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from app.logging_setup import SecretScrubber

if TYPE_CHECKING:
    from app.settings import Settings

CHECK_SECONDS = 20.0
"""Longest one check may take: a part that answers slower than this is as good as down for a health check."""
PROBE_QUERY = "open source"
"""What a keyed source is searched for: common enough that every source has a result, harmless everywhere."""


class Status(StrEnum):
    OK = "ok"
    OFF = "off"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One line of the report: the part, how it stands, and in a few words why."""

    name: str
    status: Status
    detail: str

    def line(self) -> str:
        return f"{self.status.value:<4}  {self.name}: {self.detail}"


async def run_checks(settings: Settings) -> list[Check]:
    """Every check the configuration calls for, in report order (each bounded by `CHECK_SECONDS`)."""
    checks: list[Check] = [await _bounded("database", _database(settings))]
    checks += await _frontends(settings)
    checks += await _models(settings)
    checks += await _keyed_sources(settings)
    checks.append(_http_port(settings))
    scrub = SecretScrubber(settings.secret_values()).scrub
    return [Check(check.name, check.status, scrub(check.detail)) for check in checks]


async def _bounded(name: str, work: Awaitable[Check]) -> Check:
    try:
        return await asyncio.wait_for(work, CHECK_SECONDS)
    except TimeoutError:
        return Check(name, Status.FAIL, f"no answer within {CHECK_SECONDS:.0f} s")
    except Exception as error:  # a check that broke is a failed check, never a crash of the report
        return Check(name, Status.FAIL, _words(error))


def _words(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 200 else text[:199] + "…"


async def _database(settings: Settings) -> Check:
    from sqlalchemy.engine import make_url

    from storage import pending_migrations

    where = make_url(settings.database_url).render_as_string(hide_password=True)
    try:
        pending = await pending_migrations(settings.database_url)
    except LookupError as error:
        return Check("database", Status.FAIL, f"{where}: {error}")
    except Exception as error:
        return Check("database", Status.FAIL, f"cannot open {where}: {_words(error)}")
    if pending:
        count = f"{len(pending)} migration{'s' if len(pending) != 1 else ''}"
        return Check(
            "database", Status.OK, f"{where}: {count} to apply (the next start applies them, or `lookout db upgrade`)"
        )
    return Check("database", Status.OK, f"{where}: schema up to date")


async def _frontends(settings: Settings) -> list[Check]:
    checks = []
    if settings.telegram_bot_token is None:
        checks.append(Check("telegram", Status.OFF, "TELEGRAM_BOT_TOKEN is not set"))
    else:
        checks.append(await _bounded("telegram", _telegram(settings)))
    if settings.slack_bot_token is None:
        checks.append(Check("slack", Status.OFF, "SLACK_BOT_TOKEN is not set"))
    else:
        checks.append(await _bounded("slack", _slack(settings)))
    return checks


async def _telegram(settings: Settings) -> Check:
    from telegram.error import InvalidToken, TelegramError

    from bots import build_bot

    assert settings.telegram_bot_token is not None
    bot = build_bot(settings.telegram_bot_token.get_secret_value(), api_url=settings.telegram_api_url)
    try:
        async with bot:  # initialising calls getMe
            username = bot.username
    except InvalidToken:
        return Check("telegram", Status.FAIL, "the token was refused (getMe: Unauthorized): check TELEGRAM_BOT_TOKEN")
    except TelegramError as error:
        return Check("telegram", Status.FAIL, f"getMe failed at {settings.telegram_api_url}: {_words(error)}")
    return Check("telegram", Status.OK, f"token accepted: the bot is @{username}")


async def _slack(settings: Settings) -> Check:
    from slack_sdk.errors import SlackApiError, SlackClientError

    from bots import build_web_client

    assert settings.slack_bot_token is not None
    client = build_web_client(
        settings.slack_bot_token.get_secret_value(), api_url=settings.slack_api_url, max_rate_limit_wait=0
    )
    try:
        identity = await client.auth_test()
    except SlackApiError as error:
        reason = error.response.get("error") if error.response is not None else None
        return Check("slack", Status.FAIL, f"auth.test refused the token ({reason or 'error'}): check SLACK_BOT_TOKEN")
    except (SlackClientError, OSError) as error:
        return Check("slack", Status.FAIL, f"auth.test failed at {settings.slack_api_url}: {_words(error)}")
    return Check("slack", Status.OK, f"token accepted: the bot is {identity.get('user')} in {identity.get('team')}")


async def _models(settings: Settings) -> list[Check]:
    from app.wiring import item_embedder, language_models

    checks = []
    reason = settings.llm_unavailable_reason()
    if reason is not None:
        checks.append(Check("language model", Status.OFF, reason))
    else:
        providers: dict[str, Any] = {}
        for model in language_models(settings, providers=providers).plain_models():
            checks.append(await _bounded("language model", _model_call(model)))
    reason = settings.embedding_unavailable_reason()
    if reason is not None:
        checks.append(Check("embedding model", Status.OFF, reason))
    else:
        embedder = item_embedder(settings, None)
        assert embedder is not None  # available: the reason above is None
        checks.append(await _bounded("embedding model", _embedding_call(embedder.embedder, embedder.model_name)))
    return checks


async def _model_call(model: Any) -> Check:
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.settings import ModelSettings

    from research import failure_in_words, model_label

    label = model_label(model)
    try:
        prompt = [ModelRequest.user_text_prompt("Say OK.")]
        await model_request(model, prompt, model_settings=ModelSettings(max_tokens=1))
    except Exception as error:
        reason = failure_in_words(error)
        server = _server_of(getattr(model, "base_url", None))
        where = f" (server {server})" if server and reason in ("connection error", "no answer in time") else ""
        return Check("language model", Status.FAIL, f"{label}: {reason}{where}")
    return Check("language model", Status.OK, f"{label} answered")


def _server_of(url: object) -> str | None:
    """Scheme, host and port of a model's base URL: where a connection failed, without a path or credentials."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


async def _embedding_call(embedder: Any, name: str) -> Check:
    from research import failure_in_words

    try:
        result = await embedder.embed_query("ok")
    except Exception as error:
        return Check("embedding model", Status.FAIL, f"{name}: {failure_in_words(error)}")
    return Check("embedding model", Status.OK, f"{name} answered ({len(result.embeddings[0])} dimensions)")


async def _keyed_sources(settings: Settings) -> list[Check]:
    from app.wiring import SourceCatalog, open_http_client

    client = open_http_client(settings)
    try:
        catalog = SourceCatalog.build(settings, client)
        keyed = [
            source
            for name, source in catalog.by_name.items()
            if source.unavailable_reason() is None and (source.needs_key or _has_optional_key(settings, name))
        ]
        return [await _bounded(f"source {source.name}", _source_search(source)) for source in keyed]
    finally:
        await client.aclose()


def _has_optional_key(settings: Settings, name: str) -> bool:
    """Sources that work without a key but were given one (GitHub: 5000 requests an hour instead of 60)."""
    return name == "github" and settings.github_token is not None


async def _source_search(source: Any) -> Check:
    from sources import SearchQuery, SourceError, failure_reason

    name = f"source {source.name}"
    try:
        batch = await source.search(SearchQuery(text=PROBE_QUERY, limit=1))
    except SourceError as error:
        return Check(name, Status.FAIL, failure_reason(error.kind, str(error), status=error.status))
    return Check(name, Status.OK, f"key accepted ({len(batch.items)} result{'s' if len(batch.items) != 1 else ''})")


def _http_port(settings: Settings) -> Check:
    name, where = f"http port {settings.http_port}", f"{settings.http_host}:{settings.http_port}"
    try:
        family = socket.AF_INET6 if ":" in settings.http_host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((settings.http_host, settings.http_port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return Check(name, Status.FAIL, f"{where} is in use (is Lookout running already?)")
        return Check(name, Status.FAIL, f"cannot listen on {where}: {error.strerror}")
    return Check(name, Status.OK, f"free on {settings.http_host}")


def report(checks: list[Check], echo: Callable[[str], None]) -> bool:
    """Print one line per check; whether every check passed (an "off" part is not a failure)."""
    for check in checks:
        echo(check.line())
    failed = sum(check.status is Status.FAIL for check in checks)
    echo(f"{failed} check{'s' if failed != 1 else ''} failed." if failed else "Every check passed.")
    return not failed
