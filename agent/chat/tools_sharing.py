"""Chat-agent tools for sharing, done at once (read-only): browse shared monitors and export this chat's. Sharing,
subscribing, handing over, delivery and the briefing are the catalogue's actions (`agent.chat.tools_catalogue`)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from pydantic_ai import ModelRetry, RunContext

from agent.chat.deps import ChatDeps
from agent.messages import Attachment
from monitors import BROWSE_LIMIT, export_monitors

__all__ = [
    "SharedMonitorInfo",
    "browse_shared_monitors",
    "export_monitor_list",
]

NOT_ALLOWED = (
    "This chat is outside the operator's allowlists, so it can neither browse nor subscribe to shared monitors; "
    "tell the person to ask the operator to add the chat to ALLOWED_CHATS."
)


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


def _allowed(deps: ChatDeps) -> None:
    if not deps.services.access.chat_of_allowed(deps.turn.incoming):
        raise ModelRetry(NOT_ALLOWED)


async def browse_shared_monitors(ctx: RunContext[ChatDeps], words: str = "") -> list[SharedMonitorInfo]:
    """Shared monitors of other chats this chat could subscribe to.

    Args:
        words: Only topics with all these words; empty: all.
    """
    deps = ctx.deps
    _allowed(deps)
    entries = await deps.services.monitors.sharing.browse(deps.chat_id, words=words)
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


async def export_monitor_list(ctx: RunContext[ChatDeps]) -> str:
    """Attach this chat's monitors as JSON (for /import) and their RSS feeds as OPML."""
    deps = ctx.deps
    exported = await export_monitors(deps.services.monitors, deps.turn.chat, now=deps.now)
    if not exported.count:
        return "This chat owns no monitors, so there is nothing to export."
    deps.exports_dir.mkdir(parents=True, exist_ok=True)
    stem = f"lookout-monitors-{deps.now:%Y-%m-%d}"
    files = [(f"{stem}.json", exported.json)] + ([(f"{stem}.opml", exported.opml)] if exported.opml else [])
    for name, content in files:
        path = deps.exports_dir / name
        await asyncio.to_thread(path.write_bytes, content)
        deps.attach(Attachment(path=path, filename=name))
    return (
        f"Exported {exported.count} monitors; {' and '.join(name for name, _ in files)} are attached to your reply "
        "automatically. /import the JSON in any chat to make them again."
    )
