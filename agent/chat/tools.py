"""The chat agent's tools, in the order the model sees them; each acts only on the chat that asked."""

from __future__ import annotations

from typing import Final

from pydantic_ai import Tool

from agent.chat.deps import ChatDeps
from agent.chat.tools_catalogue import CompactToolSchema, catalogue_tools
from agent.chat.tools_data import export_items, search_history, timeline
from agent.chat.tools_monitors import (
    list_monitors,
    run_monitor_now,
)
from agent.chat.tools_research import collect, read_web_page, search_sources
from agent.chat.tools_sharing import (
    browse_shared_monitors,
    export_monitor_list,
)
from agent.commands import ACTIONS

__all__ = ["CHAT_TOOLS", "STATE_CHANGING_TOOLS"]

_CATALOGUE = catalogue_tools()

CHAT_TOOLS: Final[tuple[Tool[ChatDeps], ...]] = (
    Tool(search_sources, schema_generator=CompactToolSchema),
    Tool(read_web_page, name="read_page", schema_generator=CompactToolSchema),
    Tool(collect, schema_generator=CompactToolSchema),
    Tool(list_monitors, schema_generator=CompactToolSchema),
    _CATALOGUE["create_monitor"],
    _CATALOGUE["update_monitor"],
    _CATALOGUE["pause_monitor"],
    _CATALOGUE["resume_monitor"],
    _CATALOGUE["delete_monitor"],
    Tool(run_monitor_now, schema_generator=CompactToolSchema),
    Tool(browse_shared_monitors, schema_generator=CompactToolSchema),
    _CATALOGUE["subscribe_to_monitor"],
    _CATALOGUE["unsubscribe_from_monitor"],
    _CATALOGUE["share_monitor"],
    _CATALOGUE["transfer_monitor"],
    _CATALOGUE["set_delivery"],
    _CATALOGUE["set_briefing"],
    _CATALOGUE["create_alert"],
    _CATALOGUE["remove_alert"],
    Tool(export_monitor_list, name="export_monitors", schema_generator=CompactToolSchema),
    Tool(search_history, schema_generator=CompactToolSchema),
    Tool(timeline, schema_generator=CompactToolSchema),
    Tool(export_items, schema_generator=CompactToolSchema),
)
"""Every tool of the chat agent; the docstrings are what the model reads."""

STATE_CHANGING_TOOLS: Final = frozenset(
    action.tool.name for action in ACTIONS if action.tool is not None and action.tool.propose is not None
)
"""Tools that only propose: their change waits for the person's confirmation."""
