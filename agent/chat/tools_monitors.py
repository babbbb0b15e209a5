"""Chat-agent tools for this chat's monitors: list and run them now; create and change them only as proposals the
person confirms (pausing, resuming and deleting are the catalogue's actions, see `agent.chat.tools_catalogue`)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext

from agent.chat.deps import ChatDeps
from agent.chat.tools_catalogue import PROPOSED
from agent.commands.grammar import SCHEDULE_HELP
from agent.commands.progress import ProgressRelay, prefixed
from agent.confirmations import (
    CreateMonitorAction,
    MonitorAction,
    UpdateMonitorAction,
)
from monitors import MonitorNotFoundError, MonitorView, Schedule, ScheduleError, parse_schedule

__all__ = [
    "MonitorInfo",
    "create_monitor",
    "list_monitors",
    "owned_view",
    "run_monitor_now",
    "update_monitor",
    "visible_view",
]

MAX_TOPIC_CHARS = 200


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


def _schedule(deps: ChatDeps, text: str) -> Schedule:
    try:
        return parse_schedule(
            text, timezone=deps.timezone, min_interval_seconds=deps.services.settings.min_interval_seconds
        )
    except ScheduleError as error:
        raise ModelRetry(f"{error} {SCHEDULE_HELP}") from None


async def _sources(deps: ChatDeps, sources: list[str] | None) -> tuple[str, ...]:
    specs = tuple(dict.fromkeys(spec.strip() for spec in sources or () if spec.strip()))
    if specs:
        try:
            # the same check /track makes: unknown or switched-off sources, and feeds the fetcher would refuse
            await deps.services.monitors.check_sources(list(specs))
        except ValueError as error:
            raise ModelRetry(f"{error} Leave `sources` empty for the default mix.") from None
    return specs


def _topic(topic: str) -> str:
    clean = " ".join(topic.split())
    if not clean:
        raise ModelRetry("Give the monitor a topic, e.g. DeepSeek.")
    if len(clean) > MAX_TOPIC_CHARS:
        raise ModelRetry(f"Keep the topic under {MAX_TOPIC_CHARS} characters.")
    return clean


async def visible_view(deps: ChatDeps, monitor_id: int) -> MonitorView:
    """The monitor if this chat owns or receives it; otherwise the model is told to check the ids."""
    try:
        return await deps.services.monitors.get_monitor(monitor_id, chat_id=deps.chat_id, is_admin=deps.turn.is_admin)
    except MonitorNotFoundError:
        raise ModelRetry(f"This chat has no monitor #{monitor_id}; call list_monitors for the ids.") from None


async def owned_view(deps: ChatDeps, monitor_id: int) -> MonitorView:
    """The monitor, if this chat may change it; otherwise the model is told to check the ids."""
    view = await visible_view(deps, monitor_id)
    if view.owner_chat_id != deps.chat_id and not deps.turn.is_admin:
        raise ModelRetry(
            f"Monitor #{monitor_id} belongs to another chat; this chat only receives it (set_delivery changes how)."
        )
    return view


def _propose(deps: ChatDeps, action: MonitorAction) -> str:
    deps.proposals.append(action)
    return f"{PROPOSED}\nProposed: {action.description}"


async def list_monitors(ctx: RunContext[ChatDeps]) -> list[MonitorInfo]:
    """This chat's monitors (owned or received): ids, schedules, state."""
    views = await ctx.deps.services.monitors.list_monitors(ctx.deps.chat_id)
    return [_info(view, ctx.deps.chat_id) for view in views]


async def create_monitor(
    ctx: RunContext[ChatDeps], topic: str, schedule: str = "daily at 09:00", sources: list[str] | None = None
) -> str:
    """Propose a monitor that searches on a schedule and sends this chat a digest; the person must confirm.

    Args:
        topic: What to watch, e.g. "DeepSeek".
        schedule: E.g. "daily at 08:00", "every 6 hours", "weekdays at 09:00", "weekly on monday at 10:00"; the
            chat's timezone unless it ends "in <IANA zone>".
        sources: As for search_sources; empty: the default mix.
    """
    deps = ctx.deps
    clean = _topic(topic)
    parsed = _schedule(deps, schedule)
    specs = await _sources(deps, sources)
    next_run = _when(parsed.next_run(deps.now).astimezone(ZoneInfo(parsed.timezone)))
    description = (
        f"create monitor “{clean}” — {parsed.describe()}, first run {next_run}, "
        f"sources: {', '.join(specs) if specs else 'the default mix'}"
    )
    action = CreateMonitorAction(
        description=description, topic=clean, schedule_text=parsed.to_text(), sources=specs, timezone=parsed.timezone
    )
    return _propose(deps, action)


async def update_monitor(
    ctx: RunContext[ChatDeps],
    monitor_id: int,
    topic: str | None = None,
    schedule: str | None = None,
    sources: list[str] | None = None,
    include_keywords: list[str] | None = None,
    exclude_keywords: list[str] | None = None,
    quiet: bool | None = None,
) -> str:
    """Propose changing a monitor of this chat (only the given fields); the person must confirm.

    Args:
        monitor_id: See list_monitors.
        topic: New topic.
        schedule: New schedule, e.g. "every 12 hours".
        sources: New full list of sources.
        include_keywords: Items must mention one of these.
        exclude_keywords: Drop items mentioning any of these.
        quiet: True: send nothing when nothing is new (the default); false: a short note (/quiet).
    """
    deps = ctx.deps
    view = await owned_view(deps, monitor_id)
    changes: list[str] = []
    clean = _topic(topic) if topic is not None else None
    if clean is not None:
        changes.append(f"topic → “{clean}”")
    schedule_text = None
    if schedule is not None:
        parsed = _schedule(deps, schedule)
        schedule_text = parsed.to_text()
        changes.append(f"schedule → {parsed.describe()}")
    specs = await _sources(deps, sources) if sources is not None else None
    if specs is not None:
        changes.append(f"sources → {', '.join(specs) or 'the default mix'}")
    include = tuple(include_keywords) if include_keywords is not None else None
    exclude = tuple(exclude_keywords) if exclude_keywords is not None else None
    if include is not None:
        changes.append(f"must mention → {', '.join(include) or 'anything'}")
    if exclude is not None:
        changes.append(f"skip items mentioning → {', '.join(exclude) or 'nothing'}")
    if quiet is not None:
        changes.append("nothing new → " + ("send nothing" if quiet else "send a short note"))
    if not changes:
        raise ModelRetry(
            "Give at least one change: topic, schedule, sources, include_keywords, exclude_keywords or quiet."
        )
    action = UpdateMonitorAction(
        description=f"change monitor #{view.id} “{view.topic}”: {'; '.join(changes)}",
        monitor_id=view.id,
        topic=clean,
        schedule_text=schedule_text,
        sources=specs,
        include_keywords=include,
        exclude_keywords=exclude,
        quiet=quiet,
    )
    return _propose(deps, action)


async def run_monitor_now(ctx: RunContext[ChatDeps], monitor_id: int) -> str:
    """Run a monitor now; its digest reaches this chat as a separate message.

    Args:
        monitor_id: See list_monitors.
    """
    deps = ctx.deps
    try:
        view = await deps.services.monitors.get_monitor(monitor_id, chat_id=deps.chat_id, is_admin=deps.turn.is_admin)
    except MonitorNotFoundError:
        raise ModelRetry(f"This chat has no monitor #{monitor_id}; call list_monitors for the ids.") from None
    await deps.say(f"Running monitor #{view.id} “{view.topic}”…")
    async with ProgressRelay(deps.turn.progress, prefixed(f"#{view.id} · ")) as relay:
        summary = await deps.services.monitors.run_now(
            view.id, deps.chat_id, is_admin=deps.turn.is_admin, progress=relay
        )
        relay.final_text = f"Monitor #{view.id} finished: {summary.status}."
    if summary.status == "failed":
        return f"The run of monitor #{view.id} failed: {summary.error or 'unknown error'}."
    delivered = (
        "The digest is on its way to this chat as a separate message; do not repeat it."
        if summary.deliveries
        else "Nothing was queued for this chat."
    )
    return (
        f"Ran monitor #{view.id} “{view.topic}”: {summary.status}, {summary.items} items collected, "
        f"{summary.new_items} new. {delivered}"
    )
