"""/export monitors (this chat's monitors as JSON plus their feeds as OPML), /import (a document, or a path in
the terminal), which creates monitors only after the person confirms the list, and /feed (a monitor's digests as
Atom and JSON Feed URLs for a feed reader)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from agent.commands.action import Arguments, Family, ToolContext, monitor_role
from agent.commands.common import chat_exports_dir, chat_zone, refuse
from agent.commands.grammar import CLOSE_QUOTES, OPEN_QUOTES, CommandError, ParseOptions, monitor_id, shown
from agent.confirmations import CatalogueAction, PendingConfirmation
from agent.context import Services, Turn
from kernel import Attachment, Reply
from monitors import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_MONITORS,
    MonitorEntry,
    MonitorNotFoundError,
    ReceivedEntry,
    create_imported,
    export_monitors,
    feed_path,
    monitor_name,
    plan_import,
    read_import_file,
    read_monitor_file,
)
from research import escape_markdown

__all__ = [
    "ACTIONS",
    "IMPORT_HELP",
    "ExportMonitorsCommand",
    "FeedCommand",
    "ImportCommand",
    "ImportEntries",
    "MonitorListExport",
    "export_chat_monitors",
    "feed",
    "import_entries",
    "import_monitors",
    "read_import_source",
]

IMPORT_HELP = (
    "Send the file as a document with the caption `/import` (in the terminal: `/import <path>`): a JSON file from "
    "`/export monitors`, or an OPML file from a feed reader, whose folders become monitors on the folder's topic "
    f"(`/import as <topic>` watches one topic across all its feeds). Up to {MAX_IMPORT_BYTES // 1_000_000} MB and "
    f"{MAX_IMPORT_MONITORS} monitors per file; you confirm the list before anything is created."
)


class ExportMonitorsCommand(Arguments):
    """`/export monitors`: this chat's monitors as JSON and their feeds as OPML (the /export action's second form)."""

    name: ClassVar[str] = "export"


class MonitorListExport(Arguments):
    """The chat tool's `/export monitors` (`export_monitors`: no slash command of its own)."""

    name: ClassVar[str] = "export_monitors"


class ImportEntries(Arguments):
    """The monitors a confirmed /import creates (`import_entries`: no slash command; /import proposes it)."""

    name: ClassVar[str] = "import_entries"
    entries: tuple[MonitorEntry, ...]
    received: tuple[ReceivedEntry, ...] = ()
    """Alerts on monitors the exporting chat received, attached where this chat receives them."""


class FeedCommand(Arguments):
    """`/feed <id>|briefing [new]`: the feed URLs of a monitor or of this chat's briefing; `new` replaces them (the
    old ones stop working)."""

    name: ClassVar[str] = "feed"
    monitor_id: int | None = Field(default=None, description="See list_monitors; none: this chat's briefing.")
    new: bool = False


class ImportCommand(Arguments):
    """`/import [path]`: the file is the document sent with the command, or (in the terminal) a path."""

    name: ClassVar[str] = "import"
    path: str | None = None


async def export_chat_monitors(services: Services, turn: Turn, _command: ExportMonitorsCommand) -> list[Reply]:
    """The monitors this chat owns as `lookout-monitors-<day>.json` and, when they read feeds, `….opml`."""
    now = services.clock()
    exported = await export_monitors(services.monitors, turn.chat, now=now)
    if not exported.count and not exported.received:
        return [Reply(text="This chat owns no monitors to export. `/monitors` lists what it receives.")]
    day = now.astimezone(chat_zone(turn, services)).date().isoformat()
    out_dir = chat_exports_dir(services, turn)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = f"lookout-monitors-{day}"
    json_path = out_dir / f"{name}.json"
    json_path.write_bytes(exported.json)
    attachments = [Attachment(path=json_path, filename=json_path.name, caption="Every setting; /import it anywhere")]
    feeds = ""
    if exported.opml is not None:
        opml_path = out_dir / f"{name}.opml"
        opml_path.write_bytes(exported.opml)
        attachments.append(Attachment(path=opml_path, filename=opml_path.name, caption="The rss: feeds, for readers"))
        feeds = f", and OPML with their {exported.feeds} rss: feed{'s' * (exported.feeds != 1)} (one folder each)"
    alerts = exported.received
    received = (
        f"; its {alerts} alert{'s' * (alerts != 1)} on monitors it only receives are in the JSON too (attached "
        "again where a chat importing it receives those monitors)"
        if alerts
        else ""
    )
    text = (
        f"Exported {exported.count} monitor{'s' * (exported.count != 1)} of this chat: JSON with every setting"
        f"{feeds}. `/import` the JSON in any chat to make them again; monitors this chat only subscribes to are "
        f"not included{received}."
    )
    return [Reply(text=text, attachments=tuple(attachments))]


async def read_import_source(turn: Turn, command: ImportCommand) -> tuple[bytes, str, str | None] | str:
    """(content, file name, topic) to import, or why there is nothing to read (a sentence for the person).

    A document sent with the command wins; its argument (`as <topic>` or just a topic) is the OPML topic. In the
    terminal the argument is a path, optionally followed by `as <topic>`; it is read off the event loop (a named
    pipe waits for its writer) and only up to the limit, whatever size the file system reports."""
    argument = command.path or ""
    sent = turn.incoming.file
    if sent is not None:
        if sent.content is None:
            return sent.problem or f"That file is over the {MAX_IMPORT_BYTES // 1_000_000} MB import limit."
        topic = argument.removeprefix("as ").strip() or None
        return sent.content, sent.filename, topic
    if turn.incoming.platform != "terminal" or not argument:
        return IMPORT_HELP
    return await asyncio.to_thread(_read_path, argument)


def _read_path(argument: str) -> tuple[bytes, str, str | None] | str:
    path_text, topic = argument, None
    if not Path(path_text).expanduser().exists() and " as " in argument:
        path_text, _, rest = argument.rpartition(" as ")
        topic = rest.strip() or None
    path = Path(path_text.strip()).expanduser()
    try:
        return read_import_file(path), path.name, topic
    except ValueError as error:
        return str(error)
    except OSError as error:
        return f"I cannot read {path}: {error.strerror or error}."


def _feed_links(services: Services, token: str, first: str, *, rotate: str) -> str:
    base = (services.settings.public_url or "").rstrip("/")
    lines = [first, f"Atom: `{base}{feed_path(token, 'atom')}`", f"JSON Feed: `{base}{feed_path(token, 'json')}`"]
    if not base:
        lines.append(
            "PUBLIC_URL is not set, so these are only the paths: set PUBLIC_URL to the address where `lookout run`'s "
            "HTTP server is reached (like https://lookout.example.org) and put it in front of them."
        )
    lines.append(f"Anyone with these links can read what they list. {rotate}".rstrip())
    return "\n".join(lines)


def _parse_feed(args: str, _options: ParseOptions) -> FeedCommand:
    words = args.split()
    if not 1 <= len(words) <= 2:
        raise CommandError(
            "feed", "/feed needs a monitor number (see /monitors) or `briefing`, like /feed 3, or /feed 3 new."
        )
    if len(words) == 2 and words[1].lower() != "new":
        raise CommandError("feed", f"After the monitor number only `new` may follow, not {shown(words[1])}.")
    new = len(words) == 2
    if words[0].lower() == "briefing":
        return FeedCommand(monitor_id=None, new=new)
    return FeedCommand(monitor_id=monitor_id("feed", words[0]), new=new)


def _parse_import(args: str, _options: ParseOptions) -> ImportCommand:
    path = args.strip().strip(OPEN_QUOTES + CLOSE_QUOTES).strip()
    if len(path) > 4096:
        raise CommandError("import", "That path is too long.")
    return ImportCommand(path=path or None)


ACTIONS = Family()
"""/feed and /import (/export monitors is a form of the research family's /export)."""


@ACTIONS.action(pattern="<id>|briefing [new]", example="/feed 3", parse=_parse_feed, instant=True)
async def feed(services: Services, turn: Turn, command: FeedCommand) -> list[Reply]:
    """A monitor's digests (or this chat's briefings) as Atom and JSON Feed links for a feed reader (new: replace the
    links).

    The Atom and JSON Feed URLs of a monitor (for whoever receives it; `new`: the owner, or an admin, revokes the
    old ones) or of this chat's briefing. Without PUBLIC_URL the reply gives the paths and says to set it."""
    if command.monitor_id is None:
        token = await services.monitors.feeds.briefing_token(turn.chat.id, rotate=command.new)
        if command.new:
            first = "New feed links for this chat's briefing; the old ones no longer work."
        else:
            first = "The feed of this chat's briefing, one entry per briefing:"
        if turn.chat.briefing_schedule is None:
            first += " (This chat has no briefing yet: `/briefing daily at 08:00` sets one.)"
        return [Reply(text=_feed_links(services, token, first, rotate="`/feed briefing new` replaces them."))]
    try:
        view, role = await monitor_role(services, turn, command.monitor_id)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    if command.new and role == "subscriber":
        return refuse(
            f"Only the chat that owns monitor #{view.id} can replace its feed links; `/feed {view.id}` gives them."
        )
    token = await services.monitors.feeds.token(view.id, rotate=command.new)
    name = monitor_name(view.id, view.topic)
    first = (
        f"New feed links for monitor {name}; the old ones no longer work."
        if command.new
        else f"The feed of monitor {name}, one entry per digest:"
    )
    rotate = f"`/feed {view.id} new` replaces them." if role != "subscriber" else ""
    return [Reply(text=_feed_links(services, token, first, rotate=rotate))]


@ACTIONS.action(pattern="[file path]", example="/import monitors.json", parse=_parse_import)
async def import_monitors(services: Services, turn: Turn, command: ImportCommand) -> list[Reply]:
    """Create monitors from a JSON or OPML file (send it as a document with the caption /import).

    Read the file, check every entry, and ask to confirm the list (refused entries listed with their reason)."""
    confirmation_ttl = services.settings.confirmation_ttl
    source = await read_import_source(turn, command)
    if isinstance(source, str):
        return refuse(source)
    content, name, topic = source
    plan = await plan_import(services.monitors, turn.chat, read_monitor_file(content, topic=topic))
    if plan.problem:
        return refuse(f"Nothing was imported from {name}: {plan.problem}")
    if not plan.entries and not plan.received:
        return [Reply(text=f"Nothing to import from {name}.\n\n{plan.describe()}")]
    count = len(plan.entries)
    alerts = sum(len(entry.alerts) for entry in plan.received)
    what = f"{count} monitor{'s' * (count != 1)}" if count else f"{alerts} alert{'s' * (alerts != 1)}"
    action = CatalogueAction(
        description=f"create {what} from {name}",
        action="import_entries",
        arguments=ImportEntries(entries=plan.entries, received=plan.received).model_dump(mode="json"),
    )
    pending = await PendingConfirmation.offer(
        services, turn, [action], ttl=confirmation_ttl, labels=(f"Create {count or what}", "Cancel")
    )
    minutes = PendingConfirmation.minutes_open(confirmation_ttl)
    text = f"From {name}:\n\n{plan.describe()}\n\n{pending.how_to_answer(minutes=minutes)}"
    return [Reply(text=text, buttons=pending.buttons)]


@ACTIONS.action(command=False)
async def import_entries(services: Services, turn: Turn, command: ImportEntries) -> list[Reply]:
    """Create the monitors of a confirmed /import.

    The reply has one line each, the ones refused with why."""
    result = await create_imported(services.monitors, turn.chat.id, command.entries, command.received)
    lines = [f"Created {len(result.created)} monitor{'s' * (len(result.created) != 1)}:"]
    lines += [f"- #{monitor_id} {escape_markdown(topic)}" for monitor_id, topic in result.created]
    lines += [f"- attached {escape_markdown(alert)}" for alert in result.alerts]
    lines += [f"- not created: {failed.line()}" for failed in result.failed]
    return [Reply(text="\n".join(lines))]


@ACTIONS.tool(
    name="export_monitors", description="Attach this chat's monitors as JSON (for /import) and their RSS feeds as OPML."
)
async def _export_for_model(context: ToolContext, _command: MonitorListExport) -> str:
    """This chat's monitors as JSON and OPML, for the chat agent (`/export monitors` is the command)."""
    now = context.now
    exported = await export_monitors(context.services.monitors, context.turn.chat, now=now)
    if not exported.count:
        return "This chat owns no monitors, so there is nothing to export."
    context.exports_dir.mkdir(parents=True, exist_ok=True)
    stem = f"lookout-monitors-{now:%Y-%m-%d}"
    files = [(f"{stem}.json", exported.json)] + ([(f"{stem}.opml", exported.opml)] if exported.opml else [])
    for name, content in files:
        path = context.exports_dir / name
        await asyncio.to_thread(path.write_bytes, content)
        context.attach(Attachment(path=path, filename=name))
    return (
        f"Exported {exported.count} monitors; {' and '.join(name for name, _ in files)} are attached to your reply "
        "automatically. /import the JSON in any chat to make them again."
    )
