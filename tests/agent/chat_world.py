"""What the chat-agent tests share: real services on a real database, sources on a local fake server, and a
scripted model (`tests.kit.ScriptedModel`) that records every request it gets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.chat.agent import ChatAgent
from agent.chat.llm import RetryPolicy
from agent.context import ConversationSettings, Services, Turn
from agent.messages import Incoming
from app.monitor_service import build_monitor_service
from kernel import Clock, ProgressUpdate, Reply
from monitors import ChatService, ItemService, MonitorSettings
from research import ModelSet
from sources import HttpClient, Source, SourcesConfig, build_sources, feed_factory, resolve_source_specs
from sources.web import WebResults, WebSearchRequest, WebSearchSource
from storage import ChatRecord, Database, UserRecord
from storage.repositories import MonitorRepository
from storage.repositories.users import UserRepository
from tests.fakes.http_server import FakeHTTPServer, FakeResponse


def hn_hit(object_id: str, title: str, *, text: str = "", created: datetime, points: int = 10) -> dict[str, Any]:
    """One Algolia HN story hit, as the real API sends it."""
    return {
        "objectID": object_id,
        "title": title,
        "story_text": text or None,
        "url": f"https://example.com/story/{object_id}",
        "author": "someone",
        "points": points,
        "num_comments": 3,
        "created_at": created.isoformat().replace("+00:00", "Z"),
        "created_at_i": int(created.timestamp()),
        "_tags": ["story", f"story_{object_id}"],
    }


@dataclass
class ChatWorld:
    """A chat, its person, and the services the chat agent runs on."""

    database: Database
    clock: Clock
    server: FakeHTTPServer
    http: HttpClient
    chat: ChatRecord
    user: UserRecord
    exports: Path
    settings: ConversationSettings
    progress: list[ProgressUpdate] = field(default_factory=list)
    web_searches: list[WebSearchRequest] = field(default_factory=list)
    """What the world's "web" source was asked; it answers from `web_results` and never leaves this machine."""
    web_results: WebResults = field(default_factory=WebResults)

    async def _web_search(self, request: WebSearchRequest) -> WebResults:
        self.web_searches.append(request)
        return self.web_results

    def __post_init__(self) -> None:
        config = SourcesConfig(
            allow_private_urls=True,
            hn_api_url=f"{self.server.url}/hn",
            news_rss_url=f"{self.server.url}/news",
            arxiv_api_url=f"{self.server.url}/arxiv",
            github_api_url=f"{self.server.url}/github",
            wikipedia_api_url=f"{self.server.url}/wiki",
        )
        available = build_sources(client=self.http, config=config)
        available["web"] = WebSearchSource(search_fn=self._web_search)  # the default "web" scrapes real engines

        def resolve(specs: Sequence[str]) -> list[Source]:
            make_feed = feed_factory(client=self.http, config=config)
            return resolve_source_specs(list(specs), available=available, make_feed=make_feed)

        self.resolve = resolve
        self.monitors = build_monitor_service(
            self.database,
            resolve_sources=resolve,
            light_model=None,
            heavy_model=None,
            out_dir=self.exports,
            settings=MonitorSettings(min_interval_seconds=900, default_timezone=self.settings.default_timezone),
            clock=self.clock,
        )

    def serve_hn(self, hits: list[dict[str, Any]]) -> None:
        for path in ("/hn/search", "/hn/search_by_date"):
            self.server.route("GET", path, FakeResponse.json({"hits": hits, "nbHits": len(hits)}))

    def services(self, light: Any = None, heavy: Any = None, **settings: Any) -> Services:
        base = replace(self.settings, **settings)
        no_wait = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0, sleep=_no_sleep)
        return Services(
            chats=ChatService(self.database),
            items=ItemService(self.database),
            monitors=self.monitors,
            resolve_sources=self.resolve,
            http=self.http,
            models=ModelSet.of(light, heavy, policy=no_wait),
            settings=base,
            clock=self.clock,
        )

    def agent(self, light: Any = None, heavy: Any = None, **settings: Any) -> ChatAgent:
        return ChatAgent(self.services(light, heavy, **settings))

    async def reply(self, agent: ChatAgent, turn: Turn) -> list[Reply]:
        """The agent's answer, then what the turn left for after the reply (a memory fold), as the dispatcher
        runs it."""
        replies = await agent.reply(turn)
        for job in turn.after_reply:
            await job()
        return replies

    async def person(self, external_id: str, name: str) -> UserRecord:
        return await UserRepository(self.database).get_or_create("telegram", external_id, display_name=name)

    def turn(
        self,
        text: str,
        *,
        callback_data: str | None = None,
        thread_key: str = "",
        user: UserRecord | None = None,
        chat: ChatRecord | None = None,
    ) -> Turn:
        person = user or self.user
        where = chat or self.chat
        incoming = Incoming(
            platform="telegram",
            chat_external_id=where.external_id,
            user_external_id=person.external_id,
            thread_key=thread_key,
            text=text,
            callback_data=callback_data,
            is_private=True,
        )

        async def progress(update: ProgressUpdate) -> None:
            self.progress.append(update)

        return Turn(incoming=incoming, chat=where, user=person, progress=progress)

    async def monitor_topics(self, chat: ChatRecord | None = None) -> list[str]:
        records = await MonitorRepository(self.database).list_for_chat((chat or self.chat).id)
        return [record.topic for record in records]


async def _no_sleep(_seconds: float) -> None:
    return None


async def make_world(
    database: Database,
    clock: Clock,
    server: FakeHTTPServer,
    chat: ChatRecord,
    tmp_path: Path,
    *,
    allow_private_urls: bool = True,
    **settings: Any,
) -> ChatWorld:
    """A world for one test; `settings` override `ConversationSettings` fields. `allow_private_urls=False` is
    ALLOW_PRIVATE_URLS unset: feeds on the fake server (127.0.0.1) are refused."""
    user = await UserRepository(database).get_or_create("telegram", "501", display_name="Alice")
    http = HttpClient(user_agent="lookout-tests", allow_private=allow_private_urls, max_retries=0)
    exports = tmp_path / "exports"
    base = ConversationSettings(exports_dir=exports, llm_unavailable_reason="GEMINI_API_KEY is not set")
    return ChatWorld(
        database=database,
        clock=clock,
        server=server,
        http=http,
        chat=chat,
        user=user,
        exports=exports,
        settings=replace(base, **settings),
    )
