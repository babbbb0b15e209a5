"""The destination commands: `/subscribe <id> to <url>`, `/briefing to <url>`, `/destinations` and
`/destination test|remove <n>` — digests delivered to email, Discord, ntfy, Matrix… (Apprise URLs) and signed
webhooks.

These actions have no chat tool: a destination URL carries credentials, so it never goes to the language model,
and replies show it masked. `/subscribe … to …` and `/briefing to …` are parsed by the `subscribe` and `briefing`
commands' parsers (one command each in /help) and run here (`command=False` actions).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from agent.commands.action import Arguments, Family, Run, monitor_role
from agent.commands.common import refuse
from agent.commands.grammar import CommandError, ParseOptions
from agent.context import Services, Turn
from kernel import Reply
from monitors import DestinationError, DestinationService, MonitorNotFoundError, monitor_name
from storage import DestinationRecord

__all__ = [
    "ACTIONS",
    "BriefingToCommand",
    "DestinationCommand",
    "DestinationsCommand",
    "SubscribeToCommand",
    "destination_url",
]

NOT_SET_UP = "Destinations are not available in this process (run `lookout run`)."


class SubscribeToCommand(Arguments):
    """`/subscribe <id> to <url>`: a destination receives a monitor of this chat's."""

    name: ClassVar[str] = "subscribe_to"
    monitor_id: int
    url: str = Field(repr=False)
    """The destination URL as written (a secret: never shown back, never logged)."""


class BriefingToCommand(Arguments):
    """`/briefing to <url>`: a destination also receives this chat's briefing."""

    name: ClassVar[str] = "briefing_to"
    url: str = Field(repr=False)


class DestinationsCommand(Arguments):
    """`/destinations`."""

    name: ClassVar[str] = "destinations"


class DestinationCommand(Arguments):
    """`/destination test|remove <n>`."""

    name: ClassVar[str] = "destination"
    how: Literal["test", "remove"]
    destination_id: int


def destination_url(command: str, text: str) -> str:
    """The URL after `to` (one word), or `CommandError`."""
    words = text.split()
    if len(words) != 1:
        raise CommandError(command, "Give one destination URL after `to`, like mailtos://user:pass@example.com.")
    return words[0]


DestinationRun = Callable[[DestinationService, Services, Turn, Any], Awaitable[list[Reply]]]
"""A destination action's run, given the process's destination service."""


def _with_destinations(run: DestinationRun) -> Run:
    """The action's run where this process has destinations (`lookout run`); elsewhere a sentence saying so. It
    wraps `run` (`functools.wraps`), so the action reads its arguments model and help line from `run`."""

    @functools.wraps(run)
    async def checked(services: Services, turn: Turn, command: Any) -> list[Reply]:
        destinations = services.monitors.destinations
        if destinations is None:
            return refuse(NOT_SET_UP)
        return await run(destinations, services, turn, command)

    return checked


def _added(record: DestinationRecord, secret: str | None, receives: str) -> list[Reply]:
    """The reply to a destination that now receives something: what, its signing secret (shown this once), and
    how to stop it."""
    added = f"destination #{record.id} `{record.label}`"
    if secret is not None:
        added += (
            f". Its signing secret, shown only now: `{secret}` — each POST carries `X-Lookout-Timestamp` and "
            '`X-Lookout-Signature: v1=<hex HMAC-SHA256 of "timestamp.body">`'
        )
    return [Reply(text=f"The {added} {receives} `/destination remove {record.id}` stops it.")]


def _parse_destination(args: str, _options: ParseOptions) -> DestinationCommand:
    words = args.split()
    if len(words) != 2 or words[0].lower() not in ("test", "remove", "delete") or not words[1].lstrip("#").isdigit():
        raise CommandError("destination", "Say `test` or `remove` and the destination's number (see /destinations).")
    how: Literal["test", "remove"] = "test" if words[0].lower() == "test" else "remove"
    return DestinationCommand(how=how, destination_id=int(words[1].lstrip("#")))


ACTIONS = Family()
"""The destination family, in the order /help lists it."""


@ACTIONS.action(instant=True)
@_with_destinations
async def list_destinations(
    destinations: DestinationService, _services: Services, turn: Turn, _command: DestinationsCommand
) -> list[Reply]:
    """Email, Discord, ntfy, webhooks… this chat sends digests to."""
    entries = await destinations.listing(chat_id=turn.chat.id)
    if not entries:
        return [
            Reply(
                text="This chat has added no destination. `/subscribe <id> to <url>` sends a monitor's digests to an "
                "email address, Discord, ntfy, Matrix… (an Apprise URL) or a signed webhook (`webhook+https://…`)."
            )
        ]
    lines = [f"**Destinations added here** ({len(entries)}):"]
    lines += [f"- {DestinationService.describe(record, monitors)}" for record, monitors in entries]
    lines.append("`/destination test <n>` sends a test now; `/destination remove <n>` deletes one.")
    return [Reply(text="\n".join(lines))]


@ACTIONS.action(pattern="test|remove <n>", example="/destination test 1", parse=_parse_destination)
@_with_destinations
async def destination(
    destinations: DestinationService, _services: Services, turn: Turn, command: DestinationCommand
) -> list[Reply]:
    """Send a test to a destination now, or remove it."""
    chat_id = None if turn.is_admin else turn.chat.id
    try:
        if command.how == "remove":
            record = await destinations.remove(command.destination_id, chat_id=chat_id)
            return [Reply(text=f"Destination #{record.id} `{record.label}` removed: nothing more is sent there.")]
        record = await destinations.test(command.destination_id, chat_id=chat_id)
    except DestinationError as error:
        return refuse(str(error))
    return [Reply(text=f"Test sent to destination #{record.id} `{record.label}`: it went through.")]


@ACTIONS.action(command=False)
@_with_destinations
async def subscribe_to(
    destinations: DestinationService, services: Services, turn: Turn, command: SubscribeToCommand
) -> list[Reply]:
    """A destination receives a monitor (written /subscribe <id> to <url>).

    Only the monitor's owner chat (or an admin) may add one."""
    try:
        view, role = await monitor_role(services, turn, command.monitor_id)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    if role == "subscriber":
        return refuse(
            f"Monitor #{view.id} belongs to another chat; only its owner (or an admin) can send it to a destination."
        )
    try:
        view, record, secret, fresh = await destinations.subscribe(view.id, command.url, added_by_chat_id=turn.chat.id)
    except DestinationError as error:
        return refuse(str(error), usage="subscribe")
    except MonitorNotFoundError as error:
        return refuse(str(error))
    state = "now receives" if fresh else "already received"
    return _added(
        record,
        secret,
        f"{state} monitor {monitor_name(view.id, view.topic)} after each run. "
        f"`/destination test {record.id}` sends a test now;",
    )


@ACTIONS.action(command=False)
@_with_destinations
async def briefing_to(
    destinations: DestinationService, _services: Services, turn: Turn, command: BriefingToCommand
) -> list[Reply]:
    """A destination receives this chat's briefing (written /briefing to <url>)."""
    try:
        record, secret = await destinations.follow_briefing(command.url, chat_id=turn.chat.id)
    except DestinationError as error:
        return refuse(str(error), usage="briefing")
    when = (
        ""
        if turn.chat.briefing_schedule
        else " This chat has no briefing yet: set one with `/briefing daily at 08:00`."
    )
    return _added(record, secret, f"receives this chat's briefing too.{when}")
