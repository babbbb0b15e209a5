"""The chat agent's tools, in the order the model sees them; each is a catalogue action's `ToolUse` and acts only
on the chat that asked."""

from __future__ import annotations

from typing import Final

from pydantic_ai import Tool

from agent.chat.deps import ChatDeps
from agent.chat.tools_catalogue import catalogue_tools
from agent.commands import ACTIONS

__all__ = ["CHAT_TOOLS", "STATE_CHANGING_TOOLS", "TOOL_ORDER"]

TOOL_ORDER: Final = (
    "search_sources",
    "read_page",
    "collect",
    "list_monitors",
    "create_monitor",
    "update_monitor",
    "pause_monitor",
    "resume_monitor",
    "delete_monitor",
    "run_monitor_now",
    "browse_shared_monitors",
    "subscribe_to_monitor",
    "unsubscribe_from_monitor",
    "share_monitor",
    "transfer_monitor",
    "set_delivery",
    "set_briefing",
    "filter_monitor",
    "create_alert",
    "remove_alert",
    "export_monitors",
    "search_history",
    "timeline",
    "export_items",
)
"""The order the model reads the tools in (the look-ups first, then monitors, sharing, delivery, history); an
action's tool missing here comes last, in catalogue order."""

_CATALOGUE = catalogue_tools()

CHAT_TOOLS: Final[tuple[Tool[ChatDeps], ...]] = tuple(
    sorted(_CATALOGUE.values(), key=lambda tool: TOOL_ORDER.index(tool.name) if tool.name in TOOL_ORDER else 99)
)
"""Every tool of the chat agent."""

STATE_CHANGING_TOOLS: Final = frozenset(
    action.tool.name for action in ACTIONS if action.tool is not None and action.tool.propose is not None
)
"""Tools that only propose: their change waits for the person's confirmation."""
