"""The long-running process behind `lookout run`: one event loop for the HTTP server and every frontend."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from agent import Services
from app.assembly import build_dispatcher, build_services
from app.frontends import Frontends, build_frontends, describe_frontends
from app.http_server import build_http_app, serve_http
from app.monitoring import MonitorStack, monitor_stack
from app.settings import Settings
from app.wiring import open_database
from bots import Dispatcher, TelegramLimits
from research import ModelSet
from storage import Database

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Component:
    """One part of the process and whether it runs, with the reason when it does not."""

    name: str
    on: bool
    reason: str


def plan_components(settings: Settings) -> list[Component]:
    """Say which parts will run and why the others will not; nothing here pretends to run."""
    llm_reason = settings.llm_unavailable_reason()
    frontends = describe_frontends(settings)
    return [
        Component("http", True, f"serving /healthz on {settings.http_host}:{settings.http_port}"),
        *(Component(name, on, reason) for name, (on, reason) in frontends.items()),
        Component("scheduler", True, "running standing monitors; the delivery worker sends their digests"),
        Component("llm", llm_reason is None, llm_reason or f"{settings.llm_model} / {settings.llm_heavy_model}"),
    ]


def _install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


@dataclass(frozen=True)
class Process:
    """Everything one `lookout run` process is made of, built once by `assemble`."""

    stack: MonitorStack
    """Monitors, scheduler, delivery worker, sources, and the one sender per platform (one Telegram Bot)."""
    services: Services
    dispatcher: Dispatcher
    frontends: Frontends


@asynccontextmanager
async def assemble(
    settings: Settings,
    database: Database,
    *,
    clock: Callable[[], datetime] | None = None,
    models: ModelSet | None = None,
    telegram_limits: TelegramLimits | None = None,
) -> AsyncIterator[Process]:
    """The composition root of `lookout run`: the objects of one process, wired as users run them (nothing
    started yet). Tests build their worlds with it, pinning `clock` and scripting `models` (the process's one
    model set, shared by the chat and the monitors)."""
    async with monitor_stack(
        settings, database, models=models, telegram_limits=telegram_limits, **_clock(clock)
    ) as stack:
        services = build_services(settings, database=database, stack=stack, clock=clock)
        dispatcher = build_dispatcher(settings, services)
        frontends = build_frontends(settings, dispatcher, stack.senders)
        yield Process(stack=stack, services=services, dispatcher=dispatcher, frontends=frontends)


def _clock(clock: Callable[[], datetime] | None) -> dict[str, Callable[[], datetime]]:
    return {"clock": clock} if clock is not None else {}


async def run_service(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Migrate the database, then serve and run monitors until SIGINT/SIGTERM (or `stop` is set)."""
    stop = stop or asyncio.Event()
    _install_stop_signals(stop)
    async with open_database(settings) as database:
        for component in plan_components(settings):
            logger.info("%s: %s — %s", component.name, "on" if component.on else "off", component.reason)
        if not (settings.allowed_users or settings.allowed_chats):
            logger.warning("ALLOWED_USERS and ALLOWED_CHATS are empty: anyone who finds the bot can use it")
        async with assemble(settings, database) as process:
            stack, frontends = process.stack, process.frontends
            jobs = await stack.scheduler.start()
            logger.info("scheduler: %d monitor(s) scheduled", jobs)
            delivering = asyncio.create_task(stack.worker.run_forever(stop), name="delivery worker")

            async def scheduler_running() -> bool:
                return stack.scheduler.running

            async def delivery_running() -> bool:
                return not delivering.done()

            app = build_http_app(
                checks={
                    "database": database.ping,
                    "scheduler": scheduler_running,
                    "delivery": delivery_running,
                    **frontends.checks,
                },
                off={name: why for name, (on, why) in describe_frontends(settings).items() if not on},
                routes=frontends.routes,
            )
            frontends.start_all()
            try:
                await serve_http(app, host=settings.http_host, port=settings.http_port, stop=stop)
            finally:
                stop.set()
                stack.scheduler.shutdown()
                await delivering  # the pass under way finishes; what is left stays pending in the outbox
                await frontends.stop_all()  # messages being answered finish; then the shared Bot closes
                await process.dispatcher.finish_background()  # then the memory folds their answers left
    logger.info("stopped")
