"""What sharing, subscribing, delivery and briefing changes do for a chat, each with the sentence that says so:
the one place the commands and the confirmed proposals of the chat agent both go through."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from monitors import (
    MonitorService,
    Schedule,
    SharedMonitor,
    chat_label,
    monitor_name,
    parse_schedule,
)
from research import escape_markdown
from storage import ChatRecord, DeliveryMode

__all__ = [
    "briefing_line",
    "browse_entry",
    "change_delivery",
    "set_briefing",
    "set_shared",
    "subscribe",
    "transfer",
    "unsubscribe",
]


async def subscribe(service: MonitorService, chat_id: int, monitor_id: int, *, is_admin: bool = False) -> str:
    """Put the chat on a shared monitor; raises `MonitorNotFoundError` (not shared, or no such monitor)."""
    view, fresh = await service.sharing.subscribe(chat_id, monitor_id, is_admin=is_admin)
    name = monitor_name(view.id, view.topic, "bold")
    where = "in this chat's briefing" if view.in_briefing else "here after each run"
    if not fresh:
        return f"This chat already receives {name} ({view.schedule}); its digests come {where}."
    return (
        f"This chat now receives {name} — {view.schedule}, sources: {', '.join(view.sources)}. Its digests "
        f"come {where}; `/unsubscribe {view.id}` stops them, `/pause {view.id}` pauses them for this chat only."
    )


async def unsubscribe(service: MonitorService, chat_id: int, monitor_id: int, *, is_admin: bool = False) -> str:
    """Take the chat off a monitor it receives; raises `MonitorNotFoundError` or `ValueError` (its own)."""
    view = await service.sharing.unsubscribe(chat_id, monitor_id, is_admin=is_admin)
    name = monitor_name(view.id, view.topic, "bold")
    return f"This chat no longer receives {name}; the monitor goes on for the chats that keep it."


async def set_shared(
    service: MonitorService, chat_id: int, monitor_id: int, *, shared: bool, is_admin: bool = False
) -> str:
    """Share or unshare a monitor the chat owns; raises `MonitorNotFoundError` for another chat's."""
    if shared:
        view = await service.sharing.share(monitor_id, chat_id=chat_id, is_admin=is_admin)
        name = monitor_name(view.id, view.topic, "bold")
        return (
            f"{name} is shared: other chats find it with `/browse` and subscribe with `/subscribe {view.id}`. "
            f"Only this chat can change it; `/unshare {view.id}` takes it out of /browse."
        )
    view = await service.sharing.unshare(monitor_id, chat_id=chat_id, is_admin=is_admin)
    name = monitor_name(view.id, view.topic, "bold")
    others = view.other_receivers
    keep = f" The {others} chat{'s' * (others != 1)} already subscribed keep it." if others else ""
    return f"{name} is no longer listed in /browse; no new chat can subscribe.{keep}"


async def transfer(
    service: MonitorService, chat_id: int, monitor_id: int, to_chat: ChatRecord, *, is_admin: bool = False
) -> str:
    """Hand the monitor to a chat that subscribes to it; raises `MonitorNotFoundError` or `ValueError`."""
    view = await service.sharing.transfer(monitor_id, chat_id=chat_id, to_chat=to_chat, is_admin=is_admin)
    name = monitor_name(view.id, view.topic, "bold")
    return (
        f"{name} now belongs to {chat_label(to_chat)}, who was told. This chat still receives it "
        f"(`/unsubscribe {view.id}` to stop) but can no longer change it."
    )


async def change_delivery(
    service: MonitorService,
    chat_id: int,
    monitor_id: int,
    *,
    paused: bool | None = None,
    mode: DeliveryMode | None = None,
) -> str:
    """Pause or resume this chat's own delivery of a monitor, or choose one message per run or the briefing;
    raises `MonitorNotFoundError` when the chat does not receive it."""
    sharing = service.sharing
    if paused is True:
        view, changed = await sharing.pause_delivery(chat_id, monitor_id)
        name = monitor_name(view.id, view.topic, "bold")
        state = "is paused" if changed else "was already paused"
        return (
            f"Delivery of {name} {state} for this chat only; the monitor goes on for its other chats. "
            f"`/resume {view.id}` starts it again here."
        )
    if paused is False:
        view, changed = await sharing.resume_delivery(chat_id, monitor_id)
        name = monitor_name(view.id, view.topic, "bold")
        state = "resumes" if changed else "was not paused"
        return f"Delivery of {name} to this chat {state}."
    if mode is None:
        raise ValueError("Say whether to pause, resume, or how to deliver.")
    chat = await service.chat(chat_id)
    if mode is DeliveryMode.BRIEFING and chat.briefing_schedule is None:
        raise ValueError("This chat has no briefing yet; set one first, e.g. `/briefing daily at 08:00`.")
    view, _changed = await sharing.set_delivery(chat_id, monitor_id, mode)
    name = monitor_name(view.id, view.topic, "bold")
    if view.in_briefing:
        return f"{name} now comes in this chat's briefing ({briefing_line(chat)})."
    return f"{name} now comes here after each run, even when this chat has a briefing."


def briefing_line(chat: ChatRecord) -> str:
    """The chat's briefing in words ("every day at 08:00 (Europe/Berlin); next 2026-11-24 08:00 CET") or "none"."""
    if not chat.briefing_schedule:
        return "none"
    try:
        schedule = parse_schedule(chat.briefing_schedule, timezone=chat.timezone, min_interval_seconds=0)
    except ValueError:
        return chat.briefing_schedule
    next_at = chat.briefing_next_at
    when = f"; next {next_at.astimezone(ZoneInfo(schedule.timezone)):%Y-%m-%d %H:%M %Z}" if next_at else ""
    return f"{schedule.describe()}{when}"


async def set_briefing(service: MonitorService, chat_id: int, schedule: Schedule | None) -> str:
    """Set or turn off the chat's briefing; raises `ScheduleError` for a schedule a briefing cannot have."""
    chat = await service.briefings.set_briefing(chat_id, schedule)
    if schedule is None:
        return "Briefing off: each monitor's digest comes here on its own after each run again."
    views = [view for view in await service.list_monitors(chat_id) if view.subscribed]
    inside = sum(1 for view in views if view.in_briefing)
    apart = len(views) - inside
    kept = f"; {apart} kept one message per run (`/deliver <id> now`)" if apart else ""
    return (
        f"Briefing set: {briefing_line(chat)}. It covers {inside} of this chat's monitors{kept}: one message with a "
        f"section per topic, one CSV and one chart. `/deliver <id> now` keeps a monitor's digests coming one by "
        "one; `/briefing off` stops it."
    )


def browse_entry(entry: SharedMonitor) -> str:
    """One shared monitor as /browse lists it."""
    view = entry.view
    name = monitor_name(view.id, view.topic, "bold")
    count = view.receivers
    state = " · this chat's own" if view.owned_here else (" · ✓ this chat receives it" if view.subscribed else "")
    return (
        f"{name} — {view.schedule}{' · paused' if view.paused else ''}\n"
        f"sources: {escape_markdown(', '.join(view.sources))} · by {escape_markdown(entry.owner)} · {count} "
        f"subscriber{'s' * (count != 1)}{state}\nlast: {escape_markdown(view.last_result)}"
    )
