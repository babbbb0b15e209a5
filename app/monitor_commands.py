"""`lookout monitors …`: manage standing monitors from the command line, as the operator (an admin)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

if TYPE_CHECKING:  # the monitor stack is imported when a command runs, so `lookout --help` stays quick
    from app.monitoring import MonitorStack
    from app.settings import Settings

T = TypeVar("T")
DELIVERING_PLATFORMS = ("telegram",)
"""Platforms `lookout run` can deliver digests to today."""

monitors_cli = typer.Typer(help="Standing monitors: add, list, pause, resume, remove, run now.", no_args_is_help=True)
ChatOption = Annotated[str, typer.Option("--chat", help="Where digests go, as platform:id, e.g. telegram:123456789.")]


def _with_stack(settings: Settings, work: Callable[[MonitorStack], Awaitable[T]]) -> T:
    from app.monitoring import monitor_stack
    from app.wiring import open_database
    from monitors import MonitorNotFoundError, ScheduleError

    async def main() -> T:
        async with open_database(settings) as database, monitor_stack(settings, database) as stack:
            return await work(stack)

    try:
        return asyncio.run(main())
    except (ScheduleError, MonitorNotFoundError, ValueError) as exc:
        typer.echo(str(exc).strip("'\""), err=True)
        raise typer.Exit(code=2) from None


async def _chat_id(stack: MonitorStack, chat: str) -> int:
    from storage import ChatRepository

    platform, _, external_id = chat.partition(":")
    if platform not in DELIVERING_PLATFORMS or not external_id.strip():
        raise ValueError(f"--chat must be {' or '.join(DELIVERING_PLATFORMS)}:<chat id>, e.g. telegram:123456789")
    record = await ChatRepository(stack.database).get_or_create(platform, external_id.strip())
    return record.id


async def _owner_chat_id(stack: MonitorStack, monitor_id: int) -> int:
    from monitors import MonitorNotFoundError
    from storage import MonitorRepository

    monitor = await MonitorRepository(stack.database).get(monitor_id)
    if monitor is None:
        raise MonitorNotFoundError(f"There is no monitor #{monitor_id}.")
    return monitor.owner_chat_id


def _settings() -> Settings:
    from app.cli import startup  # the CLI's one place that loads settings and sets up logging

    return startup()


@monitors_cli.command("add")
def add(
    topic: Annotated[str, typer.Argument(help='What to watch, e.g. "DeepSeek".')],
    chat: ChatOption,
    schedule: Annotated[str, typer.Option(help='e.g. "daily at 08:30", "every 6 hours", "weekdays at 9am".')] = "",
    sources: Annotated[str | None, typer.Option(help="Comma-separated source names or rss:<url>.")] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA timezone of the schedule (default TIMEZONE).")] = None,
    quiet: Annotated[
        bool, typer.Option(help="A run that finds nothing new sends nothing (--no-quiet: a short note instead).")
    ] = True,
) -> None:
    """Create a monitor whose digests `lookout run` delivers to the chat."""

    async def work(stack: MonitorStack) -> str:
        chat_id = await _chat_id(stack, chat)
        view = await stack.service.create_monitor(
            chat_id, topic, schedule_text=schedule, sources=sources, timezone=timezone, quiet=quiet
        )
        return view.summary()

    typer.echo(_with_stack(_settings(), work))


@monitors_cli.command("list")
def list_monitors() -> None:
    """Every monitor, with its schedule, next run, last result and sources."""

    async def work(stack: MonitorStack) -> list[str]:
        from storage import MonitorRepository

        # Each monitor as its owner chat sees it, so times show in that chat's timezone.
        records = await MonitorRepository(stack.database).list_all()
        views = [
            await stack.service.get_monitor(record.id, chat_id=record.owner_chat_id, is_admin=True)
            for record in records
        ]
        return [view.summary() for view in views]

    summaries = _with_stack(_settings(), work)
    typer.echo("\n\n".join(summaries) if summaries else "No monitors yet. Add one with `lookout monitors add`.")


def _admin_action(action: str, monitor_id: int) -> None:
    async def work(stack: MonitorStack) -> str:
        chat_id = await _owner_chat_id(stack, monitor_id)
        act = getattr(stack.service, action)
        view = await act(monitor_id, chat_id=chat_id, is_admin=True)
        return str(view.summary())

    typer.echo(_with_stack(_settings(), work))


@monitors_cli.command("pause")
def pause(monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")]) -> None:
    """Stop running a monitor until it is resumed."""
    _admin_action("pause", monitor_id)


@monitors_cli.command("resume")
def resume(monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")]) -> None:
    """Run a paused monitor again from its next scheduled time."""
    _admin_action("resume", monitor_id)


@monitors_cli.command("remove")
def remove(monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")]) -> None:
    """Delete a monitor with its runs and subscriptions."""
    _admin_action("delete", monitor_id)


@monitors_cli.command("run")
def run_now(monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")]) -> None:
    """Run a monitor now, print its digest, and queue it for its chat (`lookout run` sends it)."""

    async def work(stack: MonitorStack) -> str:
        chat_id = await _owner_chat_id(stack, monitor_id)
        summary = await stack.service.run_now(monitor_id, chat_id, is_admin=True)
        lines = [summary.markdown()]
        lines += [f"{kind.upper()}: {path}" for kind, path in sorted(summary.artifacts.items())]
        return "\n".join(lines)

    typer.echo(_with_stack(_settings(), work))
