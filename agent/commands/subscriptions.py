"""The sharing commands: /share, /unshare, /browse, /subscribe, /unsubscribe, /transfer, /briefing and /deliver."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from agent import subscribing
from agent.commands.action import (
    Arguments,
    Family,
    MonitorArguments,
    Proposal,
    ToolContext,
    ToolRefusal,
    ToolUse,
    monitor_role,
    owned_monitor,
)
from agent.commands.common import chat_timezone, refuse
from agent.commands.destinations import BriefingToCommand, SubscribeToCommand, destination_url
from agent.commands.grammar import (
    CLOSE_QUOTES,
    MAX_QUERY_CHARS,
    OPEN_QUOTES,
    SCHEDULE_HELP,
    CommandError,
    ParseOptions,
    monitor_id,
    told,
)
from agent.context import Services, Turn
from kernel import Button, Reply
from monitors import (
    BROWSE_LIMIT,
    MonitorNotFoundError,
    Schedule,
    ScheduleError,
    chat_label,
    monitor_name,
    parse_schedule,
)
from storage import ChatRecord, DeliveryMode

__all__ = [
    "ACTIONS",
    "NOT_ALLOWED",
    "NOT_ALLOWED_TOOL",
    "BriefingCommand",
    "BrowseCommand",
    "DeliverCommand",
    "ShareCommand",
    "SharedMonitorInfo",
    "SubscribeCommand",
    "TransferCommand",
    "UnshareCommand",
    "UnsubscribeCommand",
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
NOT_ALLOWED_TOOL = (
    "This chat is outside the operator's allowlists, so it can neither browse nor subscribe to shared monitors; "
    "tell the person to ask the operator to add the chat to ALLOWED_CHATS."
)
"""The same refusal, told to the chat agent (which passes it on)."""


class ShareCommand(MonitorArguments):
    """`/share <id>` (the chat tool may also unshare: `shared=false`)."""

    name: ClassVar[str] = "share"
    shared: bool = Field(default=True, description="False to stop sharing.")


class UnshareCommand(MonitorArguments):
    """`/unshare <id>`."""

    name: ClassVar[str] = "unshare"


class BrowseCommand(Arguments):
    """`/browse [words]`."""

    name: ClassVar[str] = "browse"
    words: str = Field(default="", description="Only topics with all these words; empty: all.")


class SubscribeCommand(Arguments):
    """`/subscribe <id>`."""

    name: ClassVar[str] = "subscribe"
    monitor_id: int = Field(description="See browse_shared_monitors.")


class UnsubscribeCommand(MonitorArguments):
    """`/unsubscribe <id>`."""

    name: ClassVar[str] = "unsubscribe"


class TransferCommand(MonitorArguments):
    """`/transfer <id> [chat]`: without a chat, list who may take it."""

    name: ClassVar[str] = "transfer"
    to_chat: str | None = Field(default=None, description="The subscriber chat's name or platform:id.")
    """`platform:id`, a bare platform id or a subscriber chat's title, as written."""


class BriefingCommand(Arguments):
    """`/briefing [<schedule>|off]`; without arguments it shows the current one."""

    name: ClassVar[str] = "briefing"
    schedule: str | None = Field(default=None, description='When, e.g. "daily at 08:00" (the chat\'s timezone).')
    """The new briefing time in the schedule grammar (the parser's canonical text names its zone); None to show the
    current one or, with `off`, to turn it off."""
    off: bool = Field(default=False, description="True turns the briefing off.")


class DeliverCommand(MonitorArguments):
    """`/deliver <id> now|briefing` (the chat tool may also pause or resume this chat's delivery)."""

    name: ClassVar[str] = "deliver"
    how: Literal["now", "briefing", "pause", "resume"]
    """After each run, in this chat's briefing, or this chat's delivery paused or resumed."""


def chat_may_share(services: Services, turn: Turn) -> bool:
    """Whether this chat may browse and subscribe: the chat itself is inside ALLOWED_*/ADMIN_USERS (see
    `AccessPolicy.chat_allowed`), not merely the person writing."""
    return services.access.chat_of_allowed(turn.incoming)


def _not_allowed(turn: Turn) -> list[Reply]:
    return refuse(NOT_ALLOWED.format(chat_id=turn.incoming.chat_external_id))


async def _set_shared(services: Services, turn: Turn, monitor_id: int, *, shared: bool) -> list[Reply]:
    try:
        text = await subscribing.set_shared(
            services.monitors, turn.chat.id, monitor_id, shared=shared, is_admin=turn.is_admin
        )
    except MonitorNotFoundError as error:
        return refuse(f"{error} Only the chat that owns a monitor can share it.")
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


def _briefing_schedule(
    text: str | None, turn: Turn, services: Services, *, min_interval_seconds: int
) -> Schedule | None:
    """A briefing's schedule text read in the chat's timezone (unless it names one); raises `ScheduleError`."""
    if text is None:
        return None
    return parse_schedule(text, timezone=chat_timezone(turn, services), min_interval_seconds=min_interval_seconds)


# --- parsing ------------------------------------------------------------------------------------------------


def _parse_share(args: str, _options: ParseOptions) -> ShareCommand:
    words = args.split()
    if len(words) != 1:
        raise CommandError("share", "/share needs exactly one monitor number (see /monitors).")
    return ShareCommand(monitor_id=monitor_id("share", words[0]))


def _parse_browse(args: str, _options: ParseOptions) -> BrowseCommand:
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("browse", f"Keep the words under {MAX_QUERY_CHARS} characters.")
    return BrowseCommand(words=args)


def _parse_transfer(args: str, _options: ParseOptions) -> TransferCommand:
    first, _, rest = args.partition(" ")
    if not first:
        raise CommandError("transfer", "Give the monitor's number, and the chat to hand it to.")
    target = rest.strip().strip(OPEN_QUOTES + CLOSE_QUOTES).strip()
    if len(target) > 256:
        raise CommandError("transfer", "That chat name is too long.")
    return TransferCommand(monitor_id=monitor_id("transfer", first), to_chat=target or None)


def _parse_subscribe(args: str, _options: ParseOptions) -> SubscribeCommand | SubscribeToCommand:
    first, _, rest = args.partition(" ")
    if not first:
        raise CommandError("subscribe", "/subscribe needs a monitor number (see /browse).")
    number = monitor_id("subscribe", first)
    if not rest:
        return SubscribeCommand(monitor_id=number)
    word, _, url = rest.partition(" ")
    if word.lower() != "to":
        raise CommandError("subscribe", "Write /subscribe <id>, or /subscribe <id> to <destination URL>.")
    return SubscribeToCommand(monitor_id=number, url=destination_url("subscribe", url))


def _parse_briefing(args: str, options: ParseOptions) -> BriefingCommand | BriefingToCommand:
    if not args:
        return BriefingCommand()
    word, _, url = args.partition(" ")
    if word.lower() == "to":
        return BriefingToCommand(url=destination_url("briefing", url))
    if args.lower() in ("off", "stop", "none", "cancel"):
        return BriefingCommand(off=True)
    try:
        schedule = parse_schedule(args, timezone=options.timezone, min_interval_seconds=options.min_interval_seconds)
    except ScheduleError as problem:
        raise CommandError("briefing", told(problem)) from None
    return BriefingCommand(schedule=schedule.to_text())


_DELIVERY_MODES: dict[str, Literal["now", "briefing"]] = {
    "now": "now", "immediately": "now", "each": "now", "briefing": "briefing", "digest": "briefing",
}  # fmt: skip


def _parse_deliver(args: str, _options: ParseOptions) -> DeliverCommand:
    words = args.split()
    if len(words) != 2 or words[1].lower() not in _DELIVERY_MODES:
        raise CommandError("deliver", "Give the monitor's number and `now` or `briefing`, like /deliver 3 now.")
    return DeliverCommand(monitor_id=monitor_id("deliver", words[0]), how=_DELIVERY_MODES[words[1].lower()])


# --- proposals (the chat agent's tools) ---------------------------------------------------------------------


async def _propose_subscribe(services: Services, turn: Turn, command: SubscribeCommand) -> Proposal | str:
    if not chat_may_share(services, turn):
        raise ToolRefusal(NOT_ALLOWED.format(chat_id=turn.incoming.chat_external_id))
    entries = {entry.view.id: entry for entry in await services.monitors.sharing.browse(turn.chat.id)}
    entry = entries.get(command.monitor_id)
    if entry is None and not turn.is_admin:
        raise ToolRefusal(f"There is no shared monitor #{command.monitor_id}; call browse_shared_monitors for the ids.")
    if entry is not None and entry.view.subscribed:
        return f"This chat already receives monitor #{command.monitor_id}; nothing to do."
    if entry is None:
        name = f"#{command.monitor_id}"
    else:
        name = f"{monitor_name(entry.view.id, entry.view.topic)} ({entry.view.schedule}, by {entry.owner})"
    return Proposal(description=f"subscribe to monitor {name}")


async def _propose_unsubscribe(services: Services, turn: Turn, command: UnsubscribeCommand) -> Proposal | str:
    view, role = await monitor_role(services, turn, command.monitor_id)
    if role == "owner":
        raise ToolRefusal(f"This chat owns monitor #{view.id}: propose delete_monitor or transfer_monitor instead.")
    return Proposal(description=f"stop receiving monitor {monitor_name(view.id, view.topic)}")


async def _propose_transfer(services: Services, turn: Turn, command: TransferCommand) -> Proposal | str:
    view = await owned_monitor(services, turn, command.monitor_id)
    candidates = await services.monitors.sharing.subscribers(view.id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    matches = _matching(candidates, command.to_chat or "")
    if len(matches) != 1:
        names = ", ".join(f"{chat_label(chat)} ({_address(chat)})" for chat in candidates) or "none"
        raise ToolRefusal(f"Name exactly one subscriber chat of monitor #{view.id}; its subscribers: {names}.")
    target = matches[0]
    return Proposal(
        description=f"hand monitor {monitor_name(view.id, view.topic)} over to {chat_label(target)}",
        arguments=TransferCommand(monitor_id=view.id, to_chat=_address(target)),
    )


_DELIVERY_WORDS = {
    "pause": "pause this chat's delivery of",
    "resume": "resume this chat's delivery of",
    "now": "receive after each run",
    "briefing": "receive in this chat's briefing",
}


async def _propose_deliver(services: Services, turn: Turn, command: DeliverCommand) -> Proposal | str:
    view, _role = await monitor_role(services, turn, command.monitor_id)
    if command.how == "briefing" and turn.chat.briefing_schedule is None:
        raise ToolRefusal("This chat has no briefing; propose set_briefing first.")
    return Proposal(description=f"{_DELIVERY_WORDS[command.how]} monitor {monitor_name(view.id, view.topic)}")


async def _propose_briefing(services: Services, turn: Turn, command: BriefingCommand) -> Proposal | str:
    if command.off:
        return Proposal(description="turn this chat's briefing off", arguments=BriefingCommand(off=True))
    if command.schedule is None:
        return f"This chat's briefing: {subscribing.briefing_line(turn.chat)}."
    try:
        schedule = _briefing_schedule(
            command.schedule, turn, services, min_interval_seconds=services.settings.min_interval_seconds
        )
    except ScheduleError as error:
        raise ToolRefusal(f"{error} {SCHEDULE_HELP}") from None
    assert schedule is not None  # a text was given
    return Proposal(
        description=f"send this chat one briefing {schedule.describe()} instead of a message per run",
        arguments=BriefingCommand(schedule=schedule.to_text()),
    )


async def _propose_share(services: Services, turn: Turn, command: ShareCommand) -> Proposal | str:
    view = await owned_monitor(services, turn, command.monitor_id)
    if view.shared == command.shared:
        return f"Monitor #{view.id} is already {'shared' if command.shared else 'not shared'}; nothing to do."
    what = "share" if command.shared else "stop sharing"
    return Proposal(description=f"{what} monitor {monitor_name(view.id, view.topic)}")


# --- what the chat agent's tool answers -------------------------------------------------------------------


class SharedMonitorInfo(BaseModel):
    """One shared monitor another chat may subscribe to."""

    id: int
    topic: str
    schedule: str
    sources: list[str]
    owner: str
    """The owner chat's name."""
    subscribers: int
    last_result: str
    this_chat_receives_it: bool


async def _browse_for_model(context: ToolContext, command: BrowseCommand) -> list[SharedMonitorInfo]:
    if not chat_may_share(context.services, context.turn):
        raise ToolRefusal(NOT_ALLOWED_TOOL)
    entries = await context.services.monitors.sharing.browse(context.chat_id, words=command.words)
    return [
        SharedMonitorInfo(
            id=entry.view.id,
            topic=entry.view.topic,
            schedule=entry.view.schedule,
            sources=list(entry.view.sources),
            owner=entry.owner,
            subscribers=entry.view.receivers,
            last_result=entry.view.last_result,
            this_chat_receives_it=entry.view.subscribed,
        )
        for entry in entries[: BROWSE_LIMIT * 3]
    ]


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The sharing family, in the order /help lists it."""


@ACTIONS.action(
    pattern="<id>",
    example="/share 3",
    parse=_parse_share,
    instant=True,
    tool=ToolUse(
        name="share_monitor",
        description="Propose listing a monitor of this chat for other chats to subscribe to (shared=false: "
        "unlist it); the person must confirm.",
        propose=_propose_share,
    ),
)
async def share(services: Services, turn: Turn, command: ShareCommand) -> list[Reply]:
    """List one of this chat's monitors in /browse so other chats can subscribe."""
    return await _set_shared(services, turn, command.monitor_id, shared=command.shared)


@ACTIONS.action(pattern="<id>", example="/unshare 3", instant=True)
async def unshare(services: Services, turn: Turn, command: UnshareCommand) -> list[Reply]:
    """Take a monitor out of /browse."""
    return await _set_shared(services, turn, command.monitor_id, shared=False)


@ACTIONS.action(
    pattern="[words]",
    example="/browse deepseek",
    parse=_parse_browse,
    tool=ToolUse(
        name="browse_shared_monitors",
        description="Shared monitors of other chats this chat could subscribe to.",
        answer=_browse_for_model,
    ),
)
async def browse(services: Services, turn: Turn, command: BrowseCommand) -> list[Reply]:
    """Shared monitors you can subscribe to (optionally only topics with these words).

    Shared monitors with a Subscribe button each (the ones this chat does not receive yet)."""
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


@ACTIONS.action(
    pattern="<id> [to <url>]",
    example="/subscribe 3",
    parse=_parse_subscribe,
    tool=ToolUse(
        name="subscribe_to_monitor",
        description="Propose that this chat also receives a shared monitor's digests.",
        propose=_propose_subscribe,
    ),
)
async def subscribe(services: Services, turn: Turn, command: SubscribeCommand) -> list[Reply]:
    """Receive a shared monitor's digests in this chat too (to <url>: at an email address, Discord, ntfy… or a
    webhook)."""
    if not chat_may_share(services, turn):
        return _not_allowed(turn)
    try:
        text = await subscribing.subscribe(services.monitors, turn.chat.id, command.monitor_id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    return [Reply(text=text)]


@ACTIONS.action(
    pattern="<id>",
    example="/unsubscribe 3",
    instant=True,
    tool=ToolUse(
        name="unsubscribe_from_monitor",
        description="Propose that this chat stops receiving a monitor another chat owns.",
        propose=_propose_unsubscribe,
    ),
)
async def unsubscribe(services: Services, turn: Turn, command: UnsubscribeCommand) -> list[Reply]:
    """Stop receiving a monitor you subscribed to."""
    try:
        text = await subscribing.unsubscribe(
            services.monitors, turn.chat.id, command.monitor_id, is_admin=turn.is_admin
        )
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]


@ACTIONS.action(
    pattern="<id> [chat]",
    example="/transfer 3 telegram:-1001234567890",
    parse=_parse_transfer,
    tool=ToolUse(
        name="transfer_monitor",
        description="Propose handing a monitor of this chat to one of its subscriber chats; the person must confirm.",
        propose=_propose_transfer,
    ),
)
async def transfer(services: Services, turn: Turn, command: TransferCommand) -> list[Reply]:
    """Hand a monitor to one of its subscribers (without a chat: list them)."""
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


@ACTIONS.action(
    pattern="<schedule>|off|to <url>",
    example="/briefing daily at 08:00",
    parse=_parse_briefing,
    instant=True,
    tool=ToolUse(
        name="set_briefing",
        description="Propose one briefing of all this chat's monitors at a set time instead of a message per run "
        "(or off); the person must confirm.",
        propose=_propose_briefing,
    ),
)
async def briefing(services: Services, turn: Turn, command: BriefingCommand) -> list[Reply]:
    """One morning briefing of all your monitors instead of a message per run (to <url>: a copy to an email address,
    Discord, ntfy… or a webhook).

    Show, set or turn off the chat's briefing."""
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
        schedule = _briefing_schedule(command.schedule, turn, services, min_interval_seconds=0)
        text = await subscribing.set_briefing(services.monitors, turn.chat.id, None if command.off else schedule)
    except ScheduleError as error:
        return refuse(told(error), usage="briefing")
    return [Reply(text=text)]


@ACTIONS.action(
    pattern="<id> now|briefing",
    example="/deliver 3 now",
    parse=_parse_deliver,
    instant=True,
    tool=ToolUse(
        name="set_delivery",
        description="Propose how THIS chat receives a monitor (other chats unaffected): after each run (now), in "
        "the briefing, paused or resumed; the person must confirm.",
        propose=_propose_deliver,
    ),
)
async def deliver(services: Services, turn: Turn, command: DeliverCommand) -> list[Reply]:
    """Get one monitor per run (now) or in your briefing.

    One monitor's digests one by one (`now`) or in this chat's briefing."""
    paused = {"pause": True, "resume": False}.get(command.how)
    try:
        text = await subscribing.change_delivery(
            services.monitors,
            turn.chat.id,
            command.monitor_id,
            paused=paused,
            mode=DeliveryMode(command.how) if paused is None else None,
        )
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]
