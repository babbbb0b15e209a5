"""Chat-agent tools for this chat's monitors: list and run them now; create and change them only as proposals the
person confirms (pausing, resuming and deleting are the catalogue's actions, see `agent.chat.tools_catalogue`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext

from agent.chat.deps import ChatDeps
from agent.commands.progress import ProgressRelay, prefixed
from monitors import MonitorNotFoundError, MonitorView

__all__ = [
    "MonitorInfo",
    "list_monitors",
    "run_monitor_now",
]


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


async def list_monitors(ctx: RunContext[ChatDeps]) -> list[MonitorInfo]:
    """This chat's monitors (owned or received): ids, schedules, state."""
    views = await ctx.deps.services.monitors.list_monitors(ctx.deps.chat_id)
    return [_info(view, ctx.deps.chat_id) for view in views]


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
