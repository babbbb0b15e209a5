"""Assembly of the conversation from settings: `Services`, the `Conversation`, the dispatcher, the terminal session."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from agent import AccessPolicy, ChatAgent, CommandRouter, Conversation, ConversationSettings, Services
from app.monitoring import MonitorStack, monitor_stack, scheduling
from app.settings import Settings
from app.wiring import open_database
from bots import ConsoleSender, Dispatcher, Dispatches, SessionFactory, SharedLocks
from kernel import ChatSender, Clock, utc_now
from monitors import ChatService, ItemService
from sources import HttpClient
from storage import Database

__all__ = [
    "access_policy",
    "build_conversation",
    "build_dispatcher",
    "build_services",
    "conversation_settings",
    "terminal_session",
]

logger = logging.getLogger(__name__)


def conversation_settings(settings: Settings, *, bot_username: str | None = None) -> ConversationSettings:
    """What the conversation layer reads, taken from the settings of the same meaning."""
    return ConversationSettings(
        default_timezone=settings.timezone,
        min_interval_seconds=settings.min_monitor_interval,
        chat_daily_tokens=settings.chat_daily_tokens,
        memory_turns=settings.memory_turns,
        memory_idle_hours=settings.memory_idle_hours,
        request_limit=settings.agent_request_limit,
        token_limit=settings.agent_token_limit,
        exports_dir=settings.exports_dir,
        llm_unavailable_reason=settings.llm_unavailable_reason(),
        bot_username=bot_username,
        public_url=settings.public_url,
    )


def build_services(
    settings: Settings,
    *,
    database: Database,
    stack: MonitorStack,
    http: HttpClient | None = None,
    bot_username: str | None = None,
    clock: Clock = utc_now,
) -> Services:
    """The services every chat shares, on top of the monitor stack (its monitor service, sources and HTTP client).

    `http` replaces the stack's client (the one the sources share) for the chat's own fetches;
    `bot_username` is the bot's @name on platforms that have one, so commands for other bots are ignored.
    The language models are the stack's (one set per process); `clock` replaces the wall clock (tests pin it).
    """
    return Services(
        chats=ChatService(database),
        items=ItemService(database),
        monitors=stack.service,
        resolve_sources=stack.catalog.resolve,
        http=http if http is not None else stack.catalog.client,
        models=stack.models,  # the one set of the process, shared with the monitor pipeline
        settings=conversation_settings(settings, bot_username=bot_username),
        access=access_policy(settings),
        clock=clock,
    )


def build_conversation(services: Services) -> Conversation:
    """Commands to the command router, free text and confirmations to the chat agent (/track's offer and
    /import's list are stored with the conversation like the agent's proposals, so the agent settles them too)."""
    return Conversation(commands=CommandRouter(services), free_text=ChatAgent(services), settings=services.settings)


def access_policy(settings: Settings) -> AccessPolicy:
    """ALLOWED_USERS, ALLOWED_CHATS and ADMIN_USERS as the dispatcher checks them."""
    return AccessPolicy(
        allowed_users=settings.allowed_users,
        allowed_chats=settings.allowed_chats,
        admin_users=settings.admin_users,
    )


def build_dispatcher(settings: Settings, services: Services, *, shared_locks: SharedLocks | None = None) -> Dispatcher:
    """The one dispatcher every frontend of the process hands its messages to; `shared_locks` make its
    per-conversation lock hold across processes (several web processes on PostgreSQL)."""
    return Dispatcher(
        services.chats,
        build_conversation(services),
        access_policy(settings),
        clock=services.clock,
        shared_locks=shared_locks,
    )


def terminal_session(settings: Settings) -> SessionFactory:
    """What `lookout chat` runs behind the prompt: the database, the monitor stack, the scheduler (while this
    process leads scheduling on the database; a `lookout run` on it may lead instead, which the chat says once) and
    the delivery worker with the terminal's sender registered, so monitors created there deliver there."""

    @asynccontextmanager
    async def open_session(sender: ChatSender[Any]) -> AsyncIterator[Dispatches]:
        async with open_database(settings) as database, monitor_stack(settings, database) as stack:
            dispatcher = build_dispatcher(settings, build_services(settings, database=database, stack=stack))
            stack.worker.register("terminal", sender)
            stop = asyncio.Event()
            async with AsyncExitStack() as duties:
                if settings.scaled_out:  # the job queue's workers run the monitors; this process delivers here
                    logger.info("terminal chat: monitors are run by the job queue's workers (JOB_QUEUE=procrastinate)")
                else:
                    await duties.enter_async_context(
                        scheduling(settings, stack, stop, standby=lambda: _tell_led_elsewhere(sender))
                    )
                delivering = asyncio.create_task(stack.worker.run_forever(stop), name="delivery worker")
                try:
                    yield dispatcher
                finally:
                    await dispatcher.finish_background()  # memory folds of the last answers
                    stop.set()
                    await delivering  # the pass under way finishes
            try:
                # A digest queued by the last line (a piped `/digest 1`) is printed before the session ends.
                await stack.worker.run_once()
            except Exception:
                logger.exception("the last delivery pass failed; what is left stays in the outbox")
            finally:
                stack.worker.unregister("terminal")

    return open_session


def _tell_led_elsewhere(sender: ChatSender[Any]) -> None:
    """The one line a `lookout chat` prints when another process (a `lookout run`) schedules the monitors."""
    logger.info("terminal chat: another process on this database schedules the monitors")
    if isinstance(sender, ConsoleSender):
        sender.note(
            "Another Lookout process on this database (a `lookout run`) runs the monitors on schedule; "
            "their digests for this chat are printed here."
        )
