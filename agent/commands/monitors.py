"""The monitor commands: /track, /monitors, /untrack, /pause, /resume and /digest, for the chat that asks."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from agent import subscribing
from agent.commands.action import (
    Arguments,
    Family,
    MonitorArguments,
    Proposal,
    SlackCommand,
    ToolContext,
    ToolRefusal,
    ToolUse,
    monitor_role,
    owned_monitor,
)
from agent.commands.common import (
    BUDGET_SPENT_NOTE,
    chat_timezone,
    chat_zone,
    count,
    local_time,
    models_allowed,
    refuse,
)
from agent.commands.grammar import (
    SCHEDULE_HELP,
    CommandError,
    ParseOptions,
    monitor_id,
    phrase_of,
    schedule_start,
    shown,
    split_sources,
    tokenize,
    told,
)
from agent.commands.progress import PipelineProgress, ProgressRelay, prefixed
from agent.confirmations import CatalogueAction, PendingConfirmation
from agent.context import Services, Turn
from kernel import Reply, error_reference
from monitors import (
    MonitorAccessError,
    MonitorNotFoundError,
    MonitorView,
    RunSummary,
    Schedule,
    ScheduleError,
    SubscribeOffer,
    monitor_name,
    parse_schedule,
)
from research import escape_markdown
from storage import DeliveryMode

__all__ = [
    "ACTIONS",
    "DigestCommand",
    "MonitorInfo",
    "MonitorsCommand",
    "PauseCommand",
    "QuietCommand",
    "ResumeCommand",
    "TrackCommand",
    "UntrackCommand",
    "digest",
    "list_monitors",
    "pause",
    "quiet",
    "resume",
    "run_status",
    "track",
    "untrack",
]

TRACK_EXAMPLE = "/track DeepSeek daily at 08:30 from hn,news,arxiv"


class TrackCommand(Arguments):
    """`/track <topic> [schedule] [from <sources>]`, checked for syntax only; the service creates the monitor."""

    name: ClassVar[str] = "track"
    topic: str
    """Whitespace-normalised, quotes removed."""
    schedule_text: str
    """The schedule as written ("" for the default, `DEFAULT_SCHEDULE_TEXT`)."""
    schedule: Schedule
    """The parsed schedule (in the chat's timezone unless the text named one)."""
    sources: tuple[str, ...]
    """Source specs as given (`hn`, `rss:<url>`, `rsshub:<platforms>`); empty for the default mix."""


class MonitorsCommand(Arguments):
    """`/monitors [all]` (`all`: every chat's monitors, for admins)."""

    name: ClassVar[str] = "monitors"
    all_chats: SkipJsonSchema[bool] = False
    """Not offered to the chat agent (its tool lists this chat's monitors only)."""


class UntrackCommand(MonitorArguments):
    """`/untrack <id>`."""

    name: ClassVar[str] = "untrack"


class PauseCommand(MonitorArguments):
    """`/pause <id>`."""

    name: ClassVar[str] = "pause"


class ResumeCommand(MonitorArguments):
    """`/resume <id>`."""

    name: ClassVar[str] = "resume"


class DigestCommand(MonitorArguments):
    """`/digest <id>`."""

    name: ClassVar[str] = "digest"


class CreateArguments(Arguments):
    """A new monitor as the chat agent proposes it (`create`: no slash command of its own; /track is the command)."""

    name: ClassVar[str] = "create"
    topic: str = Field(description='What to watch, e.g. "DeepSeek".')
    schedule: str = Field(
        default="daily at 09:00",
        description='E.g. "daily at 08:00", "every 6 hours", "weekdays at 09:00", "weekly on monday at 10:00"; the '
        'chat\'s timezone unless it ends "in <IANA zone>".',
    )
    sources: tuple[str, ...] | None = Field(default=None, description="As for search_sources; empty: the default mix.")


class UpdateArguments(MonitorArguments):
    """Changes to one monitor (`update`: no slash command of its own; /quiet sets one of them)."""

    name: ClassVar[str] = "update"
    topic: str | None = Field(default=None, description="New topic.")
    schedule: str | None = Field(default=None, description='New schedule, e.g. "every 12 hours".')
    sources: tuple[str, ...] | None = Field(default=None, description="New full list of sources.")
    include_keywords: tuple[str, ...] | None = Field(default=None, description="Items must mention one of these.")
    exclude_keywords: tuple[str, ...] | None = Field(default=None, description="Drop items mentioning any of these.")
    quiet: bool | None = Field(
        default=None, description="True: send nothing when nothing is new (the default); false: a short note (/quiet)."
    )


class QuietCommand(Arguments):
    """`/quiet <id> [on|off]`: whether a run with nothing new sends nothing (on) or a short note (off)."""

    name: ClassVar[str] = "quiet"
    monitor_id: int
    quiet: bool | None
    """None: show the current setting."""


async def _offer(
    services: Services, turn: Turn, command: TrackCommand, offer: SubscribeOffer, ttl: timedelta
) -> list[Reply]:
    """Subscribe to the shared monitor ("yes", the first button) or create this chat's own ("no", the second)."""
    view = offer.view
    create = CatalogueAction(
        description=f"create your own monitor “{escape_markdown(command.topic)}” instead",
        action="create",
        arguments=CreateArguments(
            topic=command.topic, schedule=command.schedule.to_text(), sources=command.sources or None
        ).model_dump(mode="json"),
    )
    subscribe = CatalogueAction(
        description=f"subscribe to monitor {monitor_name(view.id, view.topic)}",
        action="subscribe",
        arguments={"monitor_id": view.id},
    )
    pending = await PendingConfirmation.offer(
        services,
        turn,
        [subscribe],
        ttl=ttl,
        declined=[create],
        labels=(f"Subscribe to #{view.id}", "Create my own"),
    )
    count = view.receivers
    differences = (
        "It differs from what you asked: " + "; ".join(offer.differences) + "."
        if offer.differences
        else "It does exactly what you asked."
    )
    minutes = PendingConfirmation.minutes_open(ttl)
    text = (
        f"A shared monitor already follows this: {monitor_name(view.id, view.topic, 'bold')} — {view.schedule}, "
        f"sources: {escape_markdown(', '.join(view.sources))}; by {escape_markdown(offer.owner)}, {count} "
        f"subscriber{'s' * (count != 1)}, last: {escape_markdown(view.last_result)}.\n{differences}\n"
        "Subscribe to it instead of creating a duplicate? "
        f"{pending.how_to_answer(minutes=minutes)}"
    )
    return [Reply(text=text, buttons=pending.buttons)]


async def _set_paused(
    services: Services, turn: Turn, monitor_id: int, *, paused: bool
) -> tuple[MonitorView, MonitorView] | list[Reply]:
    """/pause and /resume: the owner (or an admin) pauses or resumes the monitor for every chat, giving the monitor
    before and after; a subscriber, only its own delivery, and a refusal are answered at once (the replies)."""
    try:
        before, role = await monitor_role(services, turn, monitor_id)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    if role == "subscriber":
        return await _own_delivery(services, turn, monitor_id, paused=paused)
    change = services.monitors.pause if paused else services.monitors.resume
    try:
        view = await change(monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:  # deleted meanwhile
        return refuse(str(error))
    return before, view


async def _own_delivery(services: Services, turn: Turn, monitor_id: int, *, paused: bool) -> list[Reply]:
    """A subscriber's /pause or /resume: its own delivery only, the monitor runs on for the others."""
    try:
        text = await subscribing.change_delivery(services.monitors, turn.chat.id, monitor_id, paused=paused)
    except (MonitorNotFoundError, ValueError) as error:
        return refuse(str(error))
    return [Reply(text=text)]


def quiet_state(monitor_id: int, quiet: bool) -> str:
    """What `/quiet` on or off means for this monitor, in words."""
    if quiet:
        return f"a run that finds nothing new sends nothing (`/quiet {monitor_id} off` asks for a short note instead)"
    return f"a run that finds nothing new sends a short “nothing new” note (`/quiet {monitor_id} on` stops them)"


def _subscriber_only(view: MonitorView, action: str) -> str:
    """This chat sees the monitor (it receives the digests) but another chat owns it."""
    return (
        f"Monitor {monitor_name(view.id, view.topic)} belongs to another chat: this chat receives its digests, "
        f"but only that chat can {action} it. `/untrack {view.id}` stops the digests here."
    )


def run_status(what: str, summary: RunSummary) -> str:
    """One line on how a run ended, for /digest and /search."""
    if summary.status == "failed":
        reference = error_reference(summary.error_id)
        if summary.source_errors:  # every source failed: one line each, with its URL
            lines = "\n".join(f"- {escape_markdown(line)}" for line in summary.source_errors)
            return f"{what} failed: every source failed. Nothing was sent.\n{lines}"
        return f"{what} failed: {escape_markdown(summary.error or 'unknown error')}{reference}. Nothing was sent."
    collected = count(summary.items, "item")
    if summary.status == "empty":
        body = f"{what} ran: {collected} collected, nothing new since the last digest"
    else:
        body = f"{what} ran: {collected} collected, {summary.new_items:,} new"
    follows = " — the digest follows." if summary.deliveries else "."
    problems = ""
    if summary.source_errors:
        lines = "\n".join(f"- {escape_markdown(line)}" for line in summary.source_errors)
        problems = "\nSources that failed:\n" + lines
    return body + follows + problems


def _next_run(view: MonitorView, turn: Turn, services: Services) -> str:
    if view.paused:
        return "none while paused"
    if view.next_run is None:
        return "not scheduled"
    return local_time(view.next_run, chat_zone(turn, services))


def _entry(view: MonitorView, turn: Turn, services: Services, *, show_owner: bool) -> str:
    zone = chat_zone(turn, services)
    state = "⏸ paused" if view.paused else f"next {_next_run(view, turn, services)}"
    last = escape_markdown(view.last_result) + (f" ({local_time(view.last_run, zone)})" if view.last_run else "")
    owner = f" · chat {view.owner_chat_id}" if show_owner else ""
    # quiet is the default: only a monitor that sends "nothing new" notes says so
    flags = ("" if view.quiet else " · notes when nothing is new") + (" · shared" if view.shared else "")
    others = view.other_receivers
    if view.owned_here and others > 0:
        flags += f" · {others} other chat{'s' * (others != 1)} subscribed"
    if view.delivery_paused:
        delivery = "\nyour delivery: ⏸ paused (`/resume` to get it again)"
    elif view.in_briefing:
        delivery = "\nyour delivery: in the briefing"
    elif view.delivery is DeliveryMode.NOW and turn.chat.briefing_schedule:
        delivery = "\nyour delivery: after each run (kept out of the briefing)"
    else:
        delivery = ""
    if view.rules:
        delivery += f"\nyour rules: {escape_markdown(view.rules)} (`/filter {view.id}`)"
    for alert in view.alerts:
        delivery += f"\nyour alert {escape_markdown(alert)}"
    if view.alerts:
        delivery += " (`/alerts`)"
    return (
        f"{monitor_name(view.id, view.topic, 'bold')} — {view.schedule}{flags}{owner}\n"
        f"{state} · sources: {escape_markdown(', '.join(view.sources))}\n"
        f"last run: {last}{delivery}"
    )


# --- parsing ------------------------------------------------------------------------------------------------


def _parse_track(args: str, options: ParseOptions) -> TrackCommand:
    tokens, sources = split_sources(tokenize(args))
    if not tokens:
        raise CommandError("track", "Say what to track, like /track DeepSeek.")
    split = schedule_start(tokens, options.timezone)
    if tokens[0].quoted and split > 1:
        raise CommandError("track", f"After the quoted topic I expected a schedule, not {shown(tokens[1].text)}.")
    topic = " ".join(" ".join(token.text for token in tokens[:split]).split())
    if not topic:
        raise CommandError("track", "Say what to track, like /track DeepSeek.")
    phrase = phrase_of(tokens[split:])
    try:
        # the minimum interval is checked only now, so "every 5 minutes" is reported as too frequent
        # instead of silently becoming part of the topic
        schedule = parse_schedule(phrase, timezone=options.timezone, min_interval_seconds=options.min_interval_seconds)
    except ScheduleError as problem:
        raise CommandError("track", told(problem)) from None
    return TrackCommand(topic=topic, schedule_text=phrase, schedule=schedule, sources=sources)


def _parse_monitors(args: str, _options: ParseOptions) -> MonitorsCommand:
    if args.lower() not in ("", "all"):
        raise CommandError("monitors", "/monitors takes no arguments (admins may add `all`).")
    return MonitorsCommand(all_chats=args.lower() == "all")


_SWITCH = {"on": True, "yes": True, "true": True, "off": False, "no": False, "false": False}


def _parse_quiet(args: str, _options: ParseOptions) -> QuietCommand:
    words = args.split()
    if not 1 <= len(words) <= 2:
        raise CommandError("quiet", "/quiet needs a monitor number and on or off, like /quiet 3 off.")
    monitor = monitor_id("quiet", words[0])
    if len(words) == 1:
        return QuietCommand(monitor_id=monitor, quiet=None)
    setting = words[1].lower()
    if setting not in _SWITCH:
        raise CommandError("quiet", f"Say on or off after the monitor number, not {shown(words[1])}.")
    return QuietCommand(monitor_id=monitor, quiet=_SWITCH[setting])


# --- proposals (the chat agent's tools) ---------------------------------------------------------------------


async def _propose_pause(services: Services, turn: Turn, command: PauseCommand) -> Proposal | str:
    view, role = await monitor_role(services, turn, command.monitor_id)
    if role == "subscriber":
        if view.delivery_paused:
            return f"This chat's delivery of monitor #{view.id} is already paused."
        return Proposal(
            description=f"pause this chat's delivery of monitor {monitor_name(view.id, view.topic)} "
            "(it goes on for the other chats)"
        )
    if view.paused:
        return f"Monitor #{view.id} is already paused."
    return Proposal(description=f"pause monitor {monitor_name(view.id, view.topic)}")


async def _propose_resume(services: Services, turn: Turn, command: ResumeCommand) -> Proposal | str:
    view, role = await monitor_role(services, turn, command.monitor_id)
    if role == "subscriber":
        if not view.delivery_paused:
            return f"This chat's delivery of monitor #{view.id} is not paused."
        return Proposal(description=f"resume this chat's delivery of monitor {monitor_name(view.id, view.topic)}")
    if not view.paused:
        when = f"{view.next_run:%Y-%m-%d %H:%M %Z}" if view.next_run else None
        return f"Monitor #{view.id} is not paused; next run {when}."
    return Proposal(description=f"resume monitor {monitor_name(view.id, view.topic)}")


async def _propose_untrack(services: Services, turn: Turn, command: UntrackCommand) -> Proposal | str:
    view = await owned_monitor(services, turn, command.monitor_id)
    return Proposal(description=f"delete monitor {monitor_name(view.id, view.topic)} ({view.schedule})")


def _checked_topic(services: Services, topic: str) -> str:
    try:
        return services.monitors.clean_topic(topic)  # the same check /track makes
    except ValueError as error:
        raise ToolRefusal(str(error)) from None


def _checked_schedule(services: Services, turn: Turn, text: str) -> Schedule:
    try:
        return parse_schedule(
            text, timezone=chat_timezone(turn, services), min_interval_seconds=services.settings.min_interval_seconds
        )
    except ScheduleError as error:
        raise ToolRefusal(f"{error} {SCHEDULE_HELP}") from None


async def _checked_sources(services: Services, sources: tuple[str, ...] | None) -> tuple[str, ...]:
    specs = tuple(dict.fromkeys(spec.strip() for spec in sources or () if spec.strip()))
    if specs:
        try:
            # the same check /track makes: unknown or switched-off sources, and feeds the fetcher would refuse
            await services.monitors.check_sources(list(specs))
        except ValueError as error:
            raise ToolRefusal(f"{error} Leave `sources` empty for the default mix.") from None
    return specs


async def _propose_create(services: Services, turn: Turn, command: CreateArguments) -> Proposal | str:
    clean = _checked_topic(services, command.topic)
    parsed = _checked_schedule(services, turn, command.schedule)
    specs = await _checked_sources(services, command.sources)
    next_run = f"{parsed.next_run(services.clock()).astimezone(ZoneInfo(parsed.timezone)):%Y-%m-%d %H:%M %Z}"
    return Proposal(
        description=f"create monitor “{clean}” — {parsed.describe()}, first run {next_run}, "
        f"sources: {', '.join(specs) if specs else 'the default mix'}",
        arguments=CreateArguments(topic=clean, schedule=parsed.to_text(), sources=specs or None),
    )


async def _propose_update(services: Services, turn: Turn, command: UpdateArguments) -> Proposal | str:
    view = await owned_monitor(services, turn, command.monitor_id)
    changes: list[str] = []
    topic = _checked_topic(services, command.topic) if command.topic is not None else None
    if topic is not None:
        changes.append(f"topic → “{escape_markdown(topic)}”")
    schedule = _checked_schedule(services, turn, command.schedule) if command.schedule is not None else None
    if schedule is not None:
        changes.append(f"schedule → {schedule.describe()}")
    specs = await _checked_sources(services, command.sources) if command.sources is not None else None
    if specs is not None:
        changes.append(f"sources → {', '.join(specs) or 'the default mix'}")
    if command.include_keywords is not None:
        changes.append(f"must mention → {', '.join(command.include_keywords) or 'anything'}")
    if command.exclude_keywords is not None:
        changes.append(f"skip items mentioning → {', '.join(command.exclude_keywords) or 'nothing'}")
    if command.quiet is not None:
        changes.append("nothing new → " + ("send nothing" if command.quiet else "send a short note"))
    if not changes:
        raise ToolRefusal(
            "Give at least one change: topic, schedule, sources, include_keywords, exclude_keywords or quiet."
        )
    exact = command.model_copy(
        update={
            "monitor_id": view.id,
            "topic": topic,
            "schedule": schedule.to_text() if schedule else None,
            "sources": specs,
        }
    )
    return Proposal(
        description=f"change monitor {monitor_name(view.id, view.topic)}: {'; '.join(changes)}", arguments=exact
    )


# --- what the chat agent's tools answer -------------------------------------------------------------------


class MonitorInfo(BaseModel):
    """One monitor of this chat, compactly."""

    id: int
    topic: str
    schedule: str
    """In words, with its timezone."""
    next_run: str | None
    """Local time of the next run; None while paused."""
    paused: bool
    sources: list[str]
    last_result: str
    quiet: bool
    """True: a run with nothing new sends nothing; False: a short "nothing new" note."""
    owned_here: bool
    """False for a monitor this chat only receives (another chat owns it and may change it)."""
    shared: bool = False
    """Listed for other chats to subscribe to."""
    this_chat_delivery: str = "after each run"
    """How this chat gets it: "after each run", "in the briefing" or "paused for this chat"."""


def _when(moment: datetime | None) -> str | None:
    return f"{moment:%Y-%m-%d %H:%M %Z}" if moment else None


def _info(view: MonitorView, chat_id: int) -> MonitorInfo:
    return MonitorInfo(
        id=view.id,
        topic=view.topic,
        schedule=view.schedule,
        next_run=_when(view.next_run),
        paused=view.paused,
        sources=list(view.sources),
        last_result=view.last_result,
        quiet=view.quiet,
        owned_here=view.owner_chat_id == chat_id,
        shared=view.shared,
        this_chat_delivery=(
            "paused for this chat"
            if view.delivery_paused
            else "in the briefing"
            if view.in_briefing
            else "after each run"
        ),
    )


async def _list_for_model(context: ToolContext, _command: MonitorsCommand) -> list[MonitorInfo]:
    views = await context.services.monitors.list_monitors(context.chat_id)
    return [_info(view, context.chat_id) for view in views]


async def _run_for_model(context: ToolContext, command: DigestCommand) -> str:
    turn = context.turn
    monitors = context.services.monitors
    view = await monitors.get_monitor(command.monitor_id, chat_id=context.chat_id, is_admin=turn.is_admin)
    await context.say(f"Running monitor {monitor_name(view.id, view.topic, 'plain')}…")
    async with ProgressRelay(turn.progress, prefixed(f"#{view.id} · ")) as relay:
        summary = await monitors.runs.run_now(view.id, context.chat_id, is_admin=turn.is_admin, progress=relay)
        relay.final_text = f"Monitor #{view.id} finished: {summary.status}."
    if summary.status == "failed":
        return f"The run of monitor #{view.id} failed: {summary.error or 'unknown error'}."
    delivered = (
        "The digest is on its way to this chat as a separate message; do not repeat it."
        if summary.deliveries
        else "Nothing was queued for this chat."
    )
    return (
        f"Ran monitor {monitor_name(view.id, view.topic, 'plain')}: {summary.status}, {summary.items} items collected, "
        f"{summary.new_items} new. {delivered}"
    )


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The monitor family, in the order /help lists it."""


@ACTIONS.action(
    command=False,
    tool=ToolUse(
        name="create_monitor",
        description="Propose a monitor that searches on a schedule and sends this chat a digest; the person "
        "must confirm.",
        propose=_propose_create,
    ),
)
async def create(services: Services, turn: Turn, command: CreateArguments) -> list[Reply]:
    """Create a monitor the chat agent proposed.

    The confirmed proposal's schedule text names its timezone."""
    try:
        zone = parse_schedule(command.schedule, timezone=chat_timezone(turn, services), min_interval_seconds=0).timezone
        view = await services.monitors.create_monitor(
            turn.chat.id,
            command.topic,
            schedule_text=command.schedule,
            sources=list(command.sources or ()) or None,
            timezone=zone,
        )
    except (ScheduleError, ValueError) as error:
        return refuse(f"Could not create monitor “{escape_markdown(command.topic)}”: {escape_markdown(str(error))}")
    next_run = local_time(view.next_run, ZoneInfo(zone)) if view.next_run else "paused"
    return [
        Reply(
            text=f"Created monitor {monitor_name(view.id, view.topic, 'bold')}: {view.schedule}; next run {next_run}; "
            f"sources: {', '.join(view.sources)}."
        )
    ]


@ACTIONS.action(
    command=False,
    tool=ToolUse(
        name="update_monitor",
        description="Propose changing a monitor of this chat (only the given fields); the person must confirm.",
        propose=_propose_update,
    ),
)
async def update(services: Services, turn: Turn, command: UpdateArguments) -> list[Reply]:
    """Change a monitor as the chat agent proposed.

    Only the fields the confirmed proposal gives change."""
    try:
        view = await services.monitors.update_monitor(
            command.monitor_id,
            chat_id=turn.chat.id,
            is_admin=turn.is_admin,
            topic=command.topic,
            schedule_text=command.schedule,
            sources=list(command.sources) if command.sources is not None else None,
            include_keywords=command.include_keywords,
            exclude_keywords=command.exclude_keywords,
            quiet=command.quiet,
        )
    except (MonitorNotFoundError, ScheduleError, ValueError) as error:
        return refuse(f"Could not change monitor #{command.monitor_id}: {error}")
    return [Reply(text=f"Updated monitor:\n{view.summary()}")]


@ACTIONS.action(
    pattern="<topic> [schedule] [from <sources>]",
    example="/track DeepSeek daily at 08:30 from hn,news,arxiv",
    parse=_parse_track,
    slack=SlackCommand(
        description="Start a standing monitor that posts a cited digest here", usage_hint="DeepSeek daily at 9"
    ),
)
async def track(services: Services, turn: Turn, command: TrackCommand) -> list[Reply]:
    """Watch a topic and get a cited digest on a schedule.

    Create the monitor for this chat; the reply says exactly what was created. When a shared monitor already
    follows the same topic with compatible sources, offer to subscribe to it instead (the person chooses)."""
    if services.access.chat_of_allowed(turn.incoming):
        offer = await services.monitors.sharing.offer_for(
            turn.chat.id, command.topic, sources=command.sources, schedule_words=command.schedule.describe()
        )
        if offer is not None:
            return await _offer(services, turn, command, offer, services.settings.confirmation_ttl)
    try:
        view = await services.monitors.create_monitor(
            turn.chat.id,
            command.topic,
            schedule_text=command.schedule_text,
            sources=list(command.sources) or None,
            # the parser read the schedule in the chat's timezone (or the one the text named): keep it
            timezone=command.schedule.timezone,
        )
    except (ScheduleError, ValueError) as error:
        return refuse(f"{escape_markdown(str(error).rstrip('.'))}. No monitor was created.", usage="track")
    lines = [
        f"Tracking **{escape_markdown(view.topic)}** as monitor #{view.id}.",
        f"Schedule: {view.schedule}",
        f"Next run: {_next_run(view, turn, services)}",
        f"Sources: {escape_markdown(', '.join(view.sources))}",
        f"`/digest {view.id}` runs it now, `/pause {view.id}` pauses it, `/untrack {view.id}` deletes it.",
    ]
    return [Reply(text="\n".join(lines))]


@ACTIONS.action(
    parse=_parse_monitors,
    instant=True,
    tool=ToolUse(
        name="list_monitors",
        description="This chat's monitors (owned or received): ids, schedules, state.",
        answer=_list_for_model,
    ),
    slack=SlackCommand(description="List this channel's monitors"),
)
async def list_monitors(services: Services, turn: Turn, command: MonitorsCommand) -> list[Reply]:
    """This chat's monitors: schedule, next run, last result.

    This chat's monitors, the ones it owns apart from the ones it subscribes to (every chat's for an admin
    asking for `all`)."""
    if command.all_chats and not turn.is_admin:
        return refuse("Only admins can list every chat's monitors; `/monitors` lists this chat's.")
    views = await services.monitors.list_monitors(turn.chat.id, all_chats=command.all_chats, chat=turn.chat)
    if not views:
        where = "in any chat" if command.all_chats else "in this chat"
        return [Reply(text=f"No monitors {where} yet — try `{TRACK_EXAMPLE}`, or `/browse` the shared ones.")]
    if command.all_chats:
        entries = [_entry(view, turn, services, show_owner=True) for view in views]
        return [Reply(text=f"**Every chat's monitors** ({len(views)}):\n\n" + "\n\n".join(entries))]
    owned = [view for view in views if view.owned_here]
    received = [view for view in views if not view.owned_here]
    parts = []
    if owned:
        parts.append(f"**Owned by this chat** ({len(owned)}):\n\n" + "\n\n".join(
            _entry(view, turn, services, show_owner=False) for view in owned))  # fmt: skip
    if received:
        parts.append(f"**Subscribed from other chats** ({len(received)}):\n\n" + "\n\n".join(
            _entry(view, turn, services, show_owner=False) for view in received))  # fmt: skip
    briefing = subscribing.briefing_line(turn.chat)
    if briefing != "none":
        parts.append(f"Briefing: {briefing}.")
    return [Reply(text="\n\n".join(parts))]


@ACTIONS.action(
    pattern="<id>",
    example="/untrack 3",
    instant=True,
    tool=ToolUse(
        name="delete_monitor",
        description="Propose deleting one of this chat's monitors with its history.",
        propose=_propose_untrack,
    ),
)
async def untrack(services: Services, turn: Turn, command: UntrackCommand) -> list[Reply]:
    """Delete a monitor of this chat.

    For a monitor this chat only receives: stop receiving it (its owner keeps it)."""
    try:
        view = await services.monitors.delete(command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorAccessError as error:
        if await services.monitors.unsubscribe(turn.chat.id, command.monitor_id):
            return [
                Reply(
                    text=f"This chat no longer receives monitor #{command.monitor_id}; "
                    "it belongs to another chat, which keeps it."
                )
            ]
        return refuse(str(error))
    except MonitorNotFoundError as error:
        return refuse(str(error))
    others = view.other_receivers
    told = f" Its {others} other subscriber chat{'s were' if others != 1 else ' was'} told." if others > 0 else ""
    return [Reply(text=f"Deleted monitor {monitor_name(view.id, view.topic)}; no more digests from it.{told}")]


@ACTIONS.action(
    pattern="<id>",
    example="/pause 3",
    instant=True,
    tool=ToolUse(
        name="pause_monitor",
        description="Propose pausing a monitor (for one another chat owns: only this chat's delivery).",
        propose=_propose_pause,
    ),
)
async def pause(services: Services, turn: Turn, command: PauseCommand) -> list[Reply]:
    """Pause a monitor.

    The owner pauses the monitor (for every chat); a subscriber pauses only its own delivery."""
    changed = await _set_paused(services, turn, command.monitor_id, paused=True)
    if isinstance(changed, list):
        return changed
    before, view = changed
    already = "was already paused" if before.paused else "is paused"
    others = view.other_receivers
    also = (
        f" Its {others} subscriber chat{'s get' if others != 1 else ' gets'} nothing meanwhile." if others > 0 else ""
    )
    name = monitor_name(view.id, view.topic)
    return [Reply(text=f"Monitor {name} {already}; `/resume {view.id}` starts it again.{also}")]


@ACTIONS.action(
    pattern="<id>",
    example="/resume 3",
    instant=True,
    tool=ToolUse(
        name="resume_monitor",
        description="Propose resuming a paused monitor (for one another chat owns: this chat's delivery).",
        propose=_propose_resume,
    ),
)
async def resume(services: Services, turn: Turn, command: ResumeCommand) -> list[Reply]:
    """Resume a paused monitor.

    The owner resumes the monitor; a subscriber resumes its own delivery."""
    changed = await _set_paused(services, turn, command.monitor_id, paused=False)
    if isinstance(changed, list):
        return changed
    before, view = changed
    state = "was not paused" if not before.paused else "is running again"
    name = monitor_name(view.id, view.topic)
    return [Reply(text=f"Monitor {name} {state}; next run {_next_run(view, turn, services)}.")]


@ACTIONS.action(
    pattern="<id>",
    example="/digest 3",
    tool=ToolUse(
        name="run_monitor_now",
        description="Run a monitor now; its digest reaches this chat as a separate message.",
        answer=_run_for_model,
    ),
    slack=SlackCommand(description="Run a monitor now and post its digest with the CSV", usage_hint="3"),
)
async def digest(services: Services, turn: Turn, command: DigestCommand) -> list[Reply]:
    """Run a monitor now and send its digest here.

    Run the monitor now; the digest (with its CSV and chart) reaches this chat through the outbox."""
    try:
        # checked first so a wrong number answers at once, without a status message
        view = await services.monitors.get_monitor(command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    use_models = await models_allowed(services, turn)
    async with ProgressRelay(turn.progress, PipelineProgress()) as relay:
        await relay.announce(f"running monitor {monitor_name(view.id, view.topic, 'plain')}…")
        try:
            summary = await services.monitors.runs.run_now(
                command.monitor_id, turn.chat.id, is_admin=turn.is_admin, progress=relay, use_models=use_models
            )
        except MonitorNotFoundError as error:  # deleted meanwhile
            relay.final_text = "stopped"
            return refuse(str(error))
        relay.final_text = "failed" if summary.status == "failed" else "done — the digest follows"
    note = "" if use_models else f"\n{BUDGET_SPENT_NOTE}"
    return [Reply(text=run_status(f"Monitor #{view.id}", summary) + note)]


@ACTIONS.action(pattern="<id> [on|off]", example="/quiet 3 off", parse=_parse_quiet, instant=True)
async def quiet(services: Services, turn: Turn, command: QuietCommand) -> list[Reply]:
    """On (the default): a run that finds nothing new sends nothing; off: a short note.

    Show or set whether a run with nothing new sends nothing (quiet, the default) or a short note."""
    try:
        before = await services.monitors.get_monitor(command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin)
    except MonitorNotFoundError as error:
        return refuse(str(error))
    if command.quiet is None:
        name = monitor_name(before.id, before.topic)
        return [Reply(text=f"Monitor {name}: {quiet_state(before.id, before.quiet)}.")]
    try:
        view = await services.monitors.update_monitor(
            command.monitor_id, chat_id=turn.chat.id, is_admin=turn.is_admin, quiet=command.quiet
        )
    except MonitorAccessError:
        return refuse(_subscriber_only(before, "change"))
    except MonitorNotFoundError as error:
        return refuse(str(error))
    return [Reply(text=f"Monitor {monitor_name(view.id, view.topic)}: {quiet_state(view.id, view.quiet)}.")]
