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
    Tool(search_history),
    Tool(timeline),
    Tool(export_items),
)
"""Every tool of the chat agent; the docstrings are what the model reads."""

STATE_CHANGING_TOOLS: Final = frozenset(
    {"create_monitor", "update_monitor", "pause_monitor", "resume_monitor", "delete_monitor"}
)
"""Tools that only propose: their change waits for the person's confirmation."""
