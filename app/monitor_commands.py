"""`lookout monitors …`: manage standing monitors from the command line, as the operator (an admin)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from app.cli_output import CliOutput

if TYPE_CHECKING:  # the monitor stack is imported when a command runs, so `lookout --help` stays quick
    from app.monitoring import MonitorStack
    from app.settings import Settings
    from monitors import RunSummary

T = TypeVar("T")
CHAT_FORMS = "telegram:<chat id> (a number), slack:<channel id> (C…, D… or G…) or terminal"
"""The chats a monitor can deliver to: `lookout run` sends to Telegram and Slack, `lookout chat` prints terminal's."""
_CHAT_IDS = {
    "telegram": re.compile(r"-?\d{1,20}"),  # users are positive, groups negative (supergroups -100…)
    "slack": re.compile(r"[CDG][A-Z0-9]{2,20}"),  # public and private channels, DMs
}

monitors_cli = typer.Typer(
    help="Standing monitors: add, list, pause, resume, remove, run now; subscribe chats; feeds; export and import.",
    no_args_is_help=True,
)
ChatOption = Annotated[
    str,
    typer.Option("--chat", help="Where digests go: telegram:<chat id>, slack:<channel id> (C…/D…/G…) or terminal."),
]


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
        CliOutput(err=True).line(str(exc))
        raise typer.Exit(code=2) from None


def parse_chat_option(chat: str) -> tuple[str, str]:
    """`(platform, chat id)` from `--chat`; ValueError with the accepted forms when it names no chat Lookout serves."""
    from bots import TERMINAL_CHAT_ID

    platform, _, external_id = chat.strip().partition(":")
    platform, external_id = platform.casefold(), external_id.strip()
    if platform == "terminal" and external_id in ("", TERMINAL_CHAT_ID):
        return "terminal", TERMINAL_CHAT_ID
    pattern = _CHAT_IDS.get(platform)
    if pattern is None or not pattern.fullmatch(external_id):
        raise ValueError(f"--chat must be {CHAT_FORMS}, e.g. telegram:123456789 or slack:C0123456; got “{chat}”")
    return platform, external_id


async def _chat_id(stack: MonitorStack, chat: str) -> int:
    from storage.repositories import ChatRepository

    platform, external_id = parse_chat_option(chat)
    record = await ChatRepository(stack.database).get_or_create(platform, external_id)
    return record.id


def _allowed_chat(settings: Settings, chat: str) -> None:
    """Refuse a chat outside ALLOWED_CHATS/ALLOWED_USERS: it may neither browse nor subscribe."""
    from app.assembly import access_policy

    platform, external_id = parse_chat_option(chat)
    if not access_policy(settings).chat_allowed(platform, external_id):
        raise ValueError(
            f"{platform}:{external_id} is outside ALLOWED_CHATS/ALLOWED_USERS, so it cannot subscribe; add it there "
            "first."
        )


async def _owner_chat_id(stack: MonitorStack, monitor_id: int) -> int:
    from monitors import MonitorNotFoundError
    from storage.repositories import MonitorRepository

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
        return view.summary(owner=":".join(parse_chat_option(chat)))

    CliOutput().markdown(_with_stack(_settings(), work))


@monitors_cli.command("list")
def list_monitors() -> None:
    """Every chat's monitors, with their owner chat, schedule, next run, last result and sources."""
    settings = _settings()

    # Reads and draws only (no sources, senders or models are built), so the listing answers at once.
    async def main() -> list[str]:
        from app.wiring import open_database
        from monitors import monitor_view
        from storage import MonitorListing
        from storage.repositories import ChatRepository, MonitorRepository

        async with open_database(settings) as database:
            chats, monitors = ChatRepository(database), MonitorRepository(database)
            summaries = []
            for record in await monitors.list_all():
                # Each monitor as its owner chat sees it, so times show in that chat's timezone.
                owner = await chats.get(record.owner_chat_id)
                if owner is None:  # deleted since list_all (a chat's monitors go with it)
                    continue
                listing = await monitors.listing_of(record.id, owner.id) or MonitorListing(
                    monitor=record, subscription=None, receivers=0, latest_run_stats=None
                )
                view = monitor_view(listing, owner, default_timezone=settings.timezone)
                summaries.append(view.summary(owner=f"{owner.platform}:{owner.external_id}"))
            return summaries

    summaries = asyncio.run(main())
    CliOutput().markdown(
        "\n\n".join(summaries) if summaries else "No monitors yet. Add one with `lookout monitors add`."
    )


def _admin_action(action: str, monitor_id: int) -> None:
    async def work(stack: MonitorStack) -> str:
        chat_id = await _owner_chat_id(stack, monitor_id)
        act = getattr(stack.service, action)
        view = await act(monitor_id, chat_id=chat_id, is_admin=True)
        return str(view.summary())

    CliOutput().markdown(_with_stack(_settings(), work))


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

    async def work(stack: MonitorStack) -> RunSummary:
        chat_id = await _owner_chat_id(stack, monitor_id)
        return await stack.service.runs.run_now(monitor_id, chat_id, is_admin=True)

    summary = _with_stack(_settings(), work)
    out = CliOutput()
    out.markdown(summary.markdown())
    for kind, path in sorted(summary.artifacts.items()):
        out.line(f"{kind.upper()}: {path}")  # plain: people copy these paths
    if summary.status == "failed":
        raise typer.Exit(code=1)


@monitors_cli.command("subscribe")
def subscribe(
    monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")],
    chat: Annotated[
        str | None,
        typer.Option("--chat", help="A chat that receives it: telegram:<chat id>, slack:<channel id> or terminal."),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="A destination that receives it: an Apprise URL (mailtos://…, discord://…, ntfy://…) or "
            "webhook+https://… (Lookout's signed JSON).",
        ),
    ] = None,
) -> None:
    """Have a chat or a destination receive a monitor's digests too (any monitor: the operator decides; a chat
    must be allowed)."""
    settings = _settings()
    if (chat is None) == (to is None):
        CliOutput(err=True).line("Give either --chat or --to.")
        raise typer.Exit(code=2)
    if to is not None:
        from app.destination_commands import subscribe_destination

        subscribe_destination(settings, monitor_id, to)
        return
    assert chat is not None

    async def work(stack: MonitorStack) -> str:
        from monitors import monitor_name

        _allowed_chat(settings, chat)
        chat_id = await _chat_id(stack, chat)
        view, fresh = await stack.service.sharing.subscribe(chat_id, monitor_id, is_admin=True)
        state = "now receives" if fresh else "already received"
        return (
            f"{chat} {state} monitor {monitor_name(view.id, view.topic)} ({view.schedule}); "
            f"{view.receivers} chat(s) receive it."
        )

    CliOutput().markdown(_with_stack(settings, work))


@monitors_cli.command("unsubscribe")
def unsubscribe(
    monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")],
    chat: ChatOption,
) -> None:
    """Stop a chat receiving a monitor (its owner cannot leave it: remove or hand it over instead)."""
    settings = _settings()

    async def work(stack: MonitorStack) -> str:
        from monitors import monitor_name

        chat_id = await _chat_id(stack, chat)
        view = await stack.service.sharing.unsubscribe(chat_id, monitor_id, is_admin=True)
        return f"{chat} no longer receives monitor {monitor_name(view.id, view.topic)}."

    CliOutput().markdown(_with_stack(settings, work))


@monitors_cli.command("feed")
def feed(
    monitor_id: Annotated[int, typer.Argument(help="The monitor's number.")],
    new: Annotated[bool, typer.Option("--new", help="Replace the feed links; the old ones stop working.")] = False,
) -> None:
    """Print a monitor's Atom and JSON Feed URLs (served by `lookout run` under PUBLIC_URL)."""
    settings = _settings()

    # Reads and writes one token only (no sources, senders or models are built), so it answers at once.
    async def main() -> list[str]:
        from app.wiring import open_database
        from monitors import MonitorFeeds, MonitorNotFoundError, feed_path, monitor_name
        from storage.repositories import MonitorRepository

        async with open_database(settings) as database:
            monitor = await MonitorRepository(database).get(monitor_id)
            if monitor is None:
                raise MonitorNotFoundError(f"There is no monitor #{monitor_id}.")
            token = await MonitorFeeds(database).token(monitor_id, rotate=new)
        base = (settings.public_url or "").rstrip("/")
        lines = [
            f"Monitor {monitor_name(monitor.id, monitor.topic, 'plain')}"
            + (": new feed links, the old ones no longer work." if new else ":"),
            f"Atom:      {base}{feed_path(token, 'atom')}",
            f"JSON Feed: {base}{feed_path(token, 'json')}",
        ]
        if not base:
            lines.append(
                "PUBLIC_URL is not set, so these are only the paths: set PUBLIC_URL to the address where "
                "`lookout run`'s HTTP server is reached (like https://lookout.example.org)."
            )
        return lines

    from monitors import MonitorNotFoundError

    try:
        lines = asyncio.run(main())
    except MonitorNotFoundError as error:
        CliOutput(err=True).line(str(error))
        raise typer.Exit(code=2) from None
    out = CliOutput()
    for line in lines:
        out.line(line)  # plain: people copy these URLs


@monitors_cli.command("export")
def export(
    chat: ChatOption,
    out: Annotated[Path, typer.Option("--out", help="Folder for the files.", file_okay=False)] = Path("."),
) -> None:
    """Write the chat's monitors as JSON (every setting) and their rss: feeds as OPML."""
    settings = _settings()

    async def work(stack: MonitorStack) -> list[str]:
        from datetime import UTC, datetime

        from monitors import export_monitors
        from storage.repositories import ChatRepository

        platform, external_id = parse_chat_option(chat)
        record = await ChatRepository(stack.database).find(platform, external_id)
        if record is None:
            raise ValueError(f"Lookout has never seen {chat}; nothing to export.")
        now = datetime.now(UTC)
        exported = await export_monitors(stack.service, record, now=now)
        if not exported.count:
            return [f"{chat} owns no monitors; nothing written."]
        out.mkdir(parents=True, exist_ok=True)
        stem = f"lookout-monitors-{platform}-{external_id.lstrip('-')}-{now:%Y-%m-%d}"
        written = [out / f"{stem}.json"]
        written[0].write_bytes(exported.json)
        if exported.opml is not None:
            written.append(out / f"{stem}.opml")
            written[1].write_bytes(exported.opml)
        return [f"{exported.count} monitor(s) of {chat}:", *(str(path) for path in written)]

    output = CliOutput()
    for line in _with_stack(settings, work):
        output.line(line)  # plain: people copy these paths


@monitors_cli.command("import")
def import_file(
    file: Annotated[Path, typer.Argument(help="A Lookout JSON export or an OPML file.", exists=True, dir_okay=False)],
    chat: ChatOption,
    topic: Annotated[
        str | None, typer.Option(help="For OPML: one monitor on this topic across all the file's feeds.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Create them without asking.")] = False,
) -> None:
    """Create monitors for the chat from a file, after showing what will be created (and what will not, and why)."""
    settings = _settings()

    async def work(stack: MonitorStack) -> str:
        from monitors import create_imported, plan_import, read_import_file, read_monitor_file
        from research import escape_markdown
        from storage.repositories import ChatRepository

        content = read_import_file(file)  # bounded by the bytes read: a pipe reports no size
        chat_id = await _chat_id(stack, chat)
        record = await ChatRepository(stack.database).get(chat_id)
        assert record is not None
        plan = await plan_import(stack.service, record, read_monitor_file(content, topic=topic))
        if plan.problem:
            raise ValueError(f"Nothing imported from {file.name}: {plan.problem}")
        output.markdown(plan.describe(limit=1000))
        if not plan.entries and not plan.received:
            return "Nothing to create."
        if not yes and not typer.confirm(f"Create these {len(plan.entries)} monitor(s) and alert(s) for {chat}?"):
            return "Nothing was created."
        result = await create_imported(stack.service, chat_id, plan.entries, plan.received)
        lines = [f"Created {len(result.created)} monitor(s): " + ", ".join(f"#{i}" for i, _ in result.created)]
        lines += [f"Attached {escape_markdown(alert)}" for alert in result.alerts]
        lines += [f"Not created: {failed.line()}" for failed in result.failed]
        return "\n".join(lines)

    output = CliOutput()
    output.markdown(_with_stack(settings, work))
