"""`lookout destinations …` and `lookout monitors subscribe <id> --to <url>`: destinations (email, Discord, ntfy,
Matrix… through Apprise, and signed webhooks) managed by the operator. URLs are printed masked; a webhook's signing
secret is printed once, when it is added."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli_output import CliOutput

if TYPE_CHECKING:
    from app.monitoring import MonitorStack
    from app.settings import Settings
    from monitors import DestinationService

destinations_cli = typer.Typer(
    help="Destinations (email, Discord, ntfy, webhooks…): list, test, remove; send a chat's briefing to one.",
    no_args_is_help=True,
)
UrlOption = Annotated[
    str,
    typer.Option(
        "--to", help="An Apprise URL (mailtos://…, discord://…, ntfy://…) or webhook+https://… (signed JSON)."
    ),
]

DestinationNumber = Annotated[int, typer.Argument(help="The destination's number (see list).")]


def _settings() -> Settings:
    from app.cli import startup

    return startup()


def _show(work: Callable[[MonitorStack], Awaitable[str]], settings: Settings | None = None) -> None:
    """Run `work` on the monitor stack and print its markdown (the settings loaded when not given)."""
    from app.monitor_commands import _with_stack

    CliOutput().markdown(_with_stack(settings or _settings(), work))


def _service(stack: MonitorStack) -> DestinationService:
    service = stack.service.destinations
    assert service is not None  # the monitor stack always builds it
    return service


def _secret_line(secret: str | None) -> str:
    if secret is None:
        return ""
    return (
        f"\nSigning secret (shown only now): `{secret}` — each POST carries `X-Lookout-Timestamp` and "
        '`X-Lookout-Signature: v1=<hex HMAC-SHA256 of "timestamp.body">`.'
    )


def subscribe_destination(settings: Settings, monitor_id: int, url: str) -> None:
    """`lookout monitors subscribe <id> --to <url>`."""

    async def work(stack: MonitorStack) -> str:
        from monitors import monitor_name

        view, record, secret, fresh = await _service(stack).subscribe(monitor_id, url, added_by_chat_id=None)
        state = "now receives" if fresh else "already received"
        name = monitor_name(view.id, view.topic)
        return f"Destination #{record.id} `{record.label}` {state} monitor {name} ({view.schedule})." + _secret_line(
            secret
        )

    _show(work, settings)


@destinations_cli.command("list")
def list_destinations() -> None:
    """Every destination, masked, with the monitors it receives and its state."""
    from monitors import DestinationService

    async def work(stack: MonitorStack) -> str:
        entries = await _service(stack).listing(chat_id=None)
        if not entries:
            return "No destinations yet: `lookout monitors subscribe <id> --to <url>` adds one."
        return "\n".join(f"- {DestinationService.describe(record, monitors)}" for record, monitors in entries)

    _show(work)


@destinations_cli.command("test")
def test(destination_id: DestinationNumber) -> None:
    """Send a short test message now (a paused destination that takes it is resumed)."""

    async def work(stack: MonitorStack) -> str:
        record = await _service(stack).test(destination_id, chat_id=None)
        return f"Test sent to destination #{record.id} `{record.label}`: it went through."

    _show(work)


@destinations_cli.command("remove")
def remove(destination_id: DestinationNumber) -> None:
    """Delete a destination: nothing more is sent there."""

    async def work(stack: MonitorStack) -> str:
        record = await _service(stack).remove(destination_id, chat_id=None)
        return f"Destination #{record.id} `{record.label}` removed."

    _show(work)


@destinations_cli.command("briefing")
def briefing(
    chat: Annotated[str, typer.Option("--chat", help="Whose briefing: telegram:<chat id>, slack:<channel id>.")],
    to: UrlOption,
) -> None:
    """Send a copy of a chat's briefing to a destination too."""
    from app.monitor_commands import _chat_id

    async def work(stack: MonitorStack) -> str:
        chat_id = await _chat_id(stack, chat)
        record, secret = await _service(stack).follow_briefing(to, chat_id=chat_id)
        return f"Destination #{record.id} `{record.label}` receives {chat}'s briefing too." + _secret_line(secret)

    _show(work)
