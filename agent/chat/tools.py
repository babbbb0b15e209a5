"""The chat agent's tools, in the order the model sees them; each acts only on the chat that asked."""

from __future__ import annotations

from typing import Final

from pydantic_ai import Tool

from agent.chat.deps import ChatDeps
from agent.chat.tools_data import export_items, search_history, timeline
from agent.chat.tools_monitors import (
    create_monitor,
    delete_monitor,
    list_monitors,
    pause_monitor,
    resume_monitor,
    run_monitor_now,
    update_monitor,
)
from agent.chat.tools_research import collect, read_web_page, search_sources
from agent.chat.tools_sharing import (
    browse_shared_monitors,
    export_monitor_list,
    set_briefing,
    set_delivery,
    share_monitor,
    subscribe_to_monitor,
    transfer_monitor,
    unsubscribe_from_monitor,
)

__all__ = ["CHAT_TOOLS", "STATE_CHANGING_TOOLS"]

CHAT_TOOLS: Final[tuple[Tool[ChatDeps], ...]] = (
    Tool(search_sources),
    Tool(read_web_page, name="read_page"),
    Tool(collect),
    Tool(list_monitors),
    Tool(create_monitor),
    Tool(update_monitor),
    Tool(pause_monitor),
    Tool(resume_monitor),
    Tool(delete_monitor),
    Tool(run_monitor_now),
    Tool(browse_shared_monitors),
    Tool(subscribe_to_monitor),
    Tool(unsubscribe_from_monitor),
    Tool(share_monitor),
    Tool(transfer_monitor),
    Tool(set_delivery),
    Tool(set_briefing),
    Tool(export_monitor_list, name="export_monitors"),
    Tool(search_history),
    Tool(timeline),
    Tool(export_items),
)
"""Every tool of the chat agent; the docstrings are what the model reads."""

STATE_CHANGING_TOOLS: Final = frozenset(
    {
        "create_monitor", "update_monitor", "pause_monitor", "resume_monitor", "delete_monitor",
        "subscribe_to_monitor", "unsubscribe_from_monitor", "share_monitor", "transfer_monitor", "set_delivery",
        "set_briefing",
    }
)  # fmt: skip
"""Tools that only propose: their change waits for the person's confirmation."""
