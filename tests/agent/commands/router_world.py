"""The world the command-router tests talk to: a real database, real sources on a fake HTTP server, the real
MonitorService and delivery worker, and a Conversation whose free-text side is a recording stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic_ai.models import Model

from agent.access import AccessPolicy
from agent.chat.agent import ChatAgent
from agent.commands.router import CommandRouter
from agent.context import ConversationSettings, Services, Turn
from agent.conversation import Conversation
from agent.messages import Incoming, IncomingFile, Platform
from app.monitor_service import build_monitor_service
from kernel import ProgressUpdate, Reply
from monitors import ChatService, DeliveryWorker, DestinationSenders, ItemService, MonitorSettings
from research import ItemEmbedder, ModelSet, RetryPolicy
from sources.base import Source
from sources.config import SourcesConfig
from sources.http import HostPolicy, HttpClient
from sources.registry import build_sources, feed_factory, resolve_source_specs, rsshub_factory
from sources.web import WebResult, WebResults, WebSearchRequest, WebSearchSource
from storage import ChatRecord, Database
from storage.repositories import ChatRepository
from storage.repositories.users import UserRepository
from tests.fakes.http_server import FakeHTTPServer, FakeResponse
from tests.kit import FakeClock, offline_resolver
from tests.monitors.fakes import RecordingSender, Sent

PAYLOADS = Path(__file__).resolve().parents[2] / "sources" / "payloads"
NOW = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
"""The tests' "now": a few hours after the recorded payloads' newest items, so they fall in every window."""
CHAT = "1001"
OTHER_CHAT = "2002"


class RecordingFreeText:
    """Stands in for the chat agent (another component): settles nothing, answers free text with a marker and
    records what reached it, so the tests see which messages the router did NOT take."""

    def __init__(self) -> None:
        self.replied: list[str] = []

    async def settle_confirmation(self, turn: Turn) -> list[Reply] | None:
        return None

    async def reply(self, turn: Turn) -> list[Reply]:
        self.replied.append(turn.incoming.text)
        return [Reply(text="(free text)")]


class FakeWebSearch:
    """The web source's search backend (ddgs scrapes search engines and has no endpoint setting): one result per
    query, or `error` raised like a failing engine."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.error: Exception | None = None

    async def __call__(self, request: WebSearchRequest) -> WebResults:
        self.queries.append(request.text)
        if self.error is not None:
            raise self.error
        return WebResults(
            results=[WebResult(title=f"{request.text} explained", href="https://example.org/explained", body="…")]
        )


@dataclass
class Said:
    """What one message got back: the replies and the progress lines, in order."""

    replies: list[Reply]
    progress: list[ProgressUpdate]

    @property
    def text(self) -> str:
        return "\n\n".join(reply.text for reply in self.replies)


@dataclass
class RouterWorld:
    database: Database
    clock: FakeClock
    server: FakeHTTPServer
    services: Services
    conversation: Conversation
    free_text: RecordingFreeText
    exports_dir: Path
    web: FakeWebSearch
    sender: RecordingSender = field(default_factory=RecordingSender)

    async def chat(self, external_id: str = CHAT, *, platform: Platform = "telegram") -> ChatRecord:
        """The chat's current row (created on first use, as the dispatcher does)."""
        return await ChatRepository(self.database).get_or_create(platform, external_id)

    async def say(
        self,
        text: str,
        *,
        chat: str = CHAT,
        user: str = "7",
        is_admin: bool = False,
        thread: str = "",
        platform: Platform = "telegram",
        callback_data: str | None = None,
        file: IncomingFile | None = None,
        is_private: bool = True,
    ) -> Said:
        """Send one message (or a button press, or a document) through `Conversation.respond`, as the dispatcher
        would."""
        chat_record = await self.chat(chat, platform=platform)
        user_record = await UserRepository(self.database).get_or_create(platform, user)
        progress: list[ProgressUpdate] = []

        async def sink(update: ProgressUpdate) -> None:
            progress.append(update)

        incoming = Incoming(
            platform=platform,
            chat_external_id=chat,
            user_external_id=user,
            thread_key=thread,
            text=text,
            is_private=is_private,
            callback_data=callback_data,
            file=file,
        )
        turn = Turn(incoming=incoming, chat=chat_record, user=user_record, is_admin=is_admin, progress=sink)
        replies = await self.conversation.respond(turn)
        return Said(replies=replies, progress=progress)

    async def deliver(self) -> list[Sent]:
        """Run the delivery worker once; what reached the chats."""
        before = len(self.sender.sent)
        senders = {"telegram": self.sender, "slack": self.sender, "terminal": self.sender}
        await DeliveryWorker(self.database, senders, clock=self.clock).run_once()
        return self.sender.sent[before:]


def route_sources(server: FakeHTTPServer) -> None:
    """Recorded answers of every keyless source of the default mix (web search is faked in-process: ddgs has no
    endpoint setting)."""

    def answer(name: str, content_type: str) -> FakeResponse:
        return FakeResponse(body=(PAYLOADS / name).read_bytes(), content_type=content_type)

    for path in ("/hn/search", "/hn/search_by_date"):
        server.route("GET", path, answer("hn_search_by_date.json", "application/json"))
    server.route("GET", "/news/search", answer("news_search.xml", "application/rss+xml"))
    server.route("GET", "/arxiv/query", answer("arxiv_query.xml", "application/atom+xml"))
    server.route("GET", "/github/search/repositories", answer("github_search_repositories.json", "application/json"))
    server.route("GET", "/wikipedia/en/w/api.php", answer("wikipedia_en.json", "application/json"))
    server.route("GET", "/feeds/tech.xml", answer("rss_tech.xml", "application/rss+xml"))


def sources_config(server: FakeHTTPServer) -> SourcesConfig:
    return SourcesConfig(
        user_agent="LookoutTest/0.1 (+https://example.org/lookout-tests)",
        allow_private_urls=True,
        hn_api_url=f"{server.url}/hn",
        news_rss_url=f"{server.url}/news",
        arxiv_api_url=f"{server.url}/arxiv/query",
        github_api_url=f"{server.url}/github",
        wikipedia_api_url=f"{server.url}/wikipedia/{{lang}}/w/api.php",
    )


async def _no_sleep(_seconds: float) -> None:
    return None


@asynccontextmanager
async def open_world(
    database: Database,
    server: FakeHTTPServer,
    tmp_path: Path,
    *,
    heavy_model: Model | None = None,
    light_model: Model | None = None,
    chat_daily_tokens: int = 200_000,
    default_timezone: str = "UTC",
    real_chat_agent: bool = False,
    access: AccessPolicy | None = None,
    allow_private_urls: bool = True,
    public_url: str | None = None,
    embedder: ItemEmbedder | None = None,
) -> AsyncIterator[RouterWorld]:
    """Everything wired as `app` wires it; free text goes to `RecordingFreeText`, or with `real_chat_agent` to the
        real `agent.chat.agent.ChatAgent`. `allow_private_urls=False` is ALLOW_PRIVATE_URLS unset: feeds on the fake
        server (127.0.0.1) are refused, while the configured APIs on it still answer. `embedder` is the feedback's
    embedding model (the runs cluster by words)."""
    route_sources(server)
    clock = FakeClock(NOW)
    client = HttpClient(
        user_agent="LookoutTest/0.1 (+https://example.org/lookout-tests)",
        allow_private=allow_private_urls,
        timeout=5.0,
        max_retries=0,
        backoff_base=0.001,
        resolver=offline_resolver,
    )
    config = sources_config(server)
    available: dict[str, Source] = build_sources(client=client, config=config)
    web = FakeWebSearch()
    available["web"] = WebSearchSource(search_fn=web)
    # arXiv's politeness policy (one request per 3 s) lands on the fake's host, shared by every fake source
    client.set_host_policy("127.0.0.1", HostPolicy())

    def resolve(specs: Sequence[str]) -> list[Source]:
        return resolve_source_specs(
            list(specs),
            available=available,
            make_feed=feed_factory(client=client, config=config),
            make_rsshub=rsshub_factory(client=client, config=config),
        )

    exports_dir = tmp_path / "exports"
    models = ModelSet.of(light_model, heavy_model, policy=RetryPolicy(base_delay=0.0, max_delay=0.0, sleep=_no_sleep))
    monitors = build_monitor_service(
        database,
        resolve_sources=resolve,
        light_model=models.light,
        heavy_model=models.heavy,
        out_dir=exports_dir,
        settings=MonitorSettings(min_interval_seconds=900, default_timezone=default_timezone),
        clock=clock,
        destinations=DestinationSenders(database, http=client, clock=clock),
        http=client,
        embedder=embedder,
    )
    settings = ConversationSettings(
        default_timezone=default_timezone,
        min_interval_seconds=900,
        chat_daily_tokens=chat_daily_tokens,
        exports_dir=exports_dir,
        public_url=public_url,
    )
    services = Services(
        chats=ChatService(database),
        items=ItemService(database),
        monitors=monitors,
        resolve_sources=resolve,
        http=client,
        models=models,
        settings=settings,
        clock=clock,
        access=access or AccessPolicy(),
    )
    free_text = RecordingFreeText()
    chat_agent = ChatAgent(services)
    conversation = Conversation(
        # as app/assembly.py wires them: the router's offers and import lists are settled by the chat agent
        commands=CommandRouter(services),
        free_text=chat_agent if real_chat_agent else free_text,
        settings=settings,
    )
    try:
        yield RouterWorld(
            database=database,
            clock=clock,
            server=server,
            services=services,
            conversation=conversation,
            free_text=free_text,
            exports_dir=exports_dir,
            web=web,
        )
    finally:
        await client.aclose()
