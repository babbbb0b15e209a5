"""The sharing commands: /share, /unshare, /browse, /subscribe, /unsubscribe, /transfer, /briefing and /deliver."""

from __future__ import annotations

from agent import subscribing
from agent.commands.common import refuse
from agent.commands.specs import (
    BriefingCommand,
    BrowseCommand,
    DeliverCommand,
    ShareCommand,
    SubscribeCommand,
    TransferCommand,
    UnshareCommand,
    UnsubscribeCommand,
)
from agent.context import Services, Turn
from agent.messages import Button, Reply
from monitors import BROWSE_LIMIT, MonitorNotFoundError, ScheduleError, chat_label
from storage import ChatRecord, DeliveryMode

__all__ = [
    "NOT_ALLOWED",
    "briefing",
    "browse",
    "chat_may_share",
    "deliver",
    "share",
    "subscribe",
    "transfer",
    "unshare",
    "unsubscribe",
]

NOT_ALLOWED = (
    "This chat is not on this Lookout's allowlist, so it can neither browse nor subscribe to shared monitors. "
    "Ask the operator to add its id ({chat_id}) to ALLOWED_CHATS."
)


def chat_may_share(services: Services, turn: Turn) -> bool:
    """Whether this chat may browse and subscribe: the chat itself is inside ALLOWED_*/ADMIN_USERS (see
    `AccessPolicy.chat_allowed`), not merely the person writing."""
    return services.access.chat_of_allowed(turn.incoming)


def _not_allowed(turn: Turn) -> list[Reply]:
    return refuse(NOT_ALLOWED.format(chat_id=turn.incoming.chat_external_id))


async def share(services: Services, turn: Turn, command: ShareCommand) -> list[Reply]:
    return await _set_shared(services, turn, command.monitor_id, shared=True)


async def unshare(services: Services, turn: Turn, command: UnshareCommand) -> list[Reply]:
    return await _set_shared(services, turn, command.monitor_id, shared=False)


async def _set_shared(services: Services, turn: Turn, monitor_id: int, *, shared: bool) -> list[Reply]:
    try:
        text = await subscribing.set_shared(
            services.monitors, turn.chat.id, monitor_id, shared=shared, is_admin=turn.is_admin
        )
    except MonitorNotFoundError as error:
        return refuse(f"{error} Only the chat that owns a monitor can share it.")
    return [Reply(text=text)]


async def browse(services: Services, turn: Turn, command: BrowseCommand) -> list[Reply]:
    """Shared monitors with a Subscribe button each (the ones this chat does not receive yet)."""
    if not chat_may_share(services, turn):
        return _not_allowed(turn)
    entries = await services.monitors.sharing.browse(turn.chat.id, words=command.words)
    if not entries:
        wanted = f" about “{command.words}”" if command.words else ""
        return [
            Reply(
                text=f"No shared monitors{wanted} yet. Share one of yours with `/share <id>` so other chats can "
                "subscribe."
            )
        ]
    shown = entries[:BROWSE_LIMIT]
    more = len(entries) - len(shown)
    lines = [f"**Shared monitors** ({len(entries)}), most followed first:"]
    lines += [subscribing.browse_entry(entry) for entry in shown]
    buttons = tuple(
        Button(label=f"Subscribe #{entry.view.id}", callback_data=f"/subscribe {entry.view.id}")
        for entry in shown
        if not entry.view.subscribed
    )
    tail = f"{more} more: narrow it down with `/browse <words>`. " if more else ""
    if buttons:
        lines.append(f"{tail}Subscribe with the buttons or `/subscribe <id>`.")
    elif tail:
        lines.append(tail.strip())
    return [Reply(text="\n\n".join(lines), buttons=buttons)]


async def subscribe(services: Services, turn: Turn, command: SubscribeCommand) -> list[Reply]:
    if not chat_may_share(services, turn):
        return _not_allowed(turn)
    try:
        text = await subscribing.subscribe(services.monitors, turn.chat.id, command.monitor_id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    return [Reply(text=text)]


async def unsubscribe(services: Services, turn: Turn, command: UnsubscribeCommand) -> list[Reply]:
    try:
        text = await subscribing.unsubscribe(
            services.monitors, turn.chat.id, command.monitor_id, is_admin=turn.is_admin
        )
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]


async def transfer(services: Services, turn: Turn, command: TransferCommand) -> list[Reply]:
    """Hand a monitor to one of its subscribers; without a chat, list the subscribers it may go to."""
    try:
        candidates = await services.monitors.sharing.subscribers(
            command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin
        )
    except MonitorNotFoundError as error:
        return refuse(f"{error} Only the chat that owns a monitor can hand it over.")
    if command.to_chat is None:
        if not candidates:
            return [
                Reply(
                    text=f"No other chat subscribes to monitor #{command.monitor_id}, so there is nobody to hand it "
                    f"to. `/share {command.monitor_id}` lets chats find and subscribe to it first."
                )
            ]
        lines = [f"Monitor #{command.monitor_id} can go to one of its subscribers:"]
        lines += [f"- `{_address(chat)}` {chat_label(chat)}" for chat in candidates]
        lines.append(f"Say `/transfer {command.monitor_id} <chat>` with one of them.")
        return [Reply(text="\n".join(lines))]
    matches = _matching(candidates, command.to_chat)
    if len(matches) != 1:
        reason = "several subscribers are called that" if matches else "no subscriber of it is called that"
        return refuse(
            f"I cannot tell which chat you mean: {reason}. `/transfer {command.monitor_id}` lists them with their "
            "addresses."
        )
    try:
        text = await subscribing.transfer(
            services.monitors, turn.chat.id, command.monitor_id, matches[0], is_admin=turn.is_admin
        )
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]


def _address(chat: ChatRecord) -> str:
    return f"{chat.platform}:{chat.external_id}"


def _matching(candidates: list[ChatRecord], wanted: str) -> list[ChatRecord]:
    """The subscribers `wanted` names: by `platform:id`, by id alone, or by title (case and a leading # ignored)."""
    text = wanted.strip()
    by_address = [chat for chat in candidates if _address(chat) == text or chat.external_id == text]
    if by_address:
        return by_address
    title = text.lstrip("#").casefold()
    return [chat for chat in candidates if chat.title and chat.title.lstrip("#").casefold() == title]


async def briefing(services: Services, turn: Turn, command: BriefingCommand) -> list[Reply]:
    """Show, set or turn off the chat's briefing."""
    if command.schedule is None and not command.off:
        line = subscribing.briefing_line(turn.chat)
        if line == "none":
            return [
                Reply(
                    text="This chat has no briefing: each monitor's digest comes on its own. `/briefing daily at "
                    "08:00` gathers them into one message a day."
                )
            ]
        return [Reply(text=f"This chat's briefing: {line}. `/briefing off` stops it.")]
    try:
        text = await subscribing.set_briefing(services.monitors, turn.chat.id, command.schedule)
    except ScheduleError as error:
        return refuse(str(error), usage="briefing")
    return [Reply(text=text)]


async def deliver(services: Services, turn: Turn, command: DeliverCommand) -> list[Reply]:
    """One monitor's digests one by one (`now`) or in this chat's briefing."""
    try:
        text = await subscribing.change_delivery(
            services.monitors, turn.chat.id, command.monitor_id, mode=DeliveryMode(command.mode)
        )
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]
