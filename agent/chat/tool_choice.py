"""Which chat tools a turn is offered: all of them, or (for a small model) the few its message is about.

A small model reads every tool definition on every request: the 23 chat tools are ~2,550 tokens, near a third of an
8,192-token context, before the person's message. When `ModelLimits.offers_tools_by_message()` says so, a turn is
offered `CORE_TOOLS` plus the groups whose words its message contains, `read_page` when it or an earlier message of
the kept history has a link, and every tool the kept history already called, so a follow-up ("yes, pause it") still
has the tool the last turn used.
Guarantees: the choice is a pure function of the message and the history (no model is asked); it only ever hides
tools, never adds one the agent lacks; the confirmation gate and the tool-call caps apply to what is offered as to
the full set. Words are matched as word starts, case-insensitively, in English and a few common other languages;
a message in none of them gets the core tools, which can still answer ("search", "list my monitors").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.tools import ToolDefinition

from agent.chat.deps import ChatDeps

__all__ = ["CORE_TOOLS", "TOOL_GROUPS", "offered_tools", "prepare_offered_tools"]

CORE_TOOLS: Final = frozenset({"search_sources", "list_monitors"})
"""Offered on every turn: a search answers most questions, and the list says what the chat already tracks."""

_URL = re.compile(r"https?://|www\.", re.IGNORECASE)

TOOL_GROUPS: Final[tuple[tuple[frozenset[str], tuple[str, ...]], ...]] = (
    (
        frozenset({
            "create_monitor", "update_monitor", "pause_monitor", "resume_monitor", "delete_monitor", "run_monitor_now",
        }),
        ("monitor", "track", "watch", "follow", "digest", "schedul", "every ", "daily", "weekly", "hourly", "pause",
         "resume", "stop", "delete", "remove", "rename", "run ", "überwach", "surveill", "suivre", "seguir", "监控",
         "跟踪", "订阅"),
    ),
    (
        frozenset({"browse_shared_monitors", "subscribe_to_monitor", "unsubscribe_from_monitor", "share_monitor",
                   "transfer_monitor"}),
        ("share", "shared", "subscri", "unsubscri", "transfer", "hand over", "public", "teil", "partag", "compart"),
    ),
    (
        frozenset({"set_delivery", "set_briefing", "export_monitors"}),
        ("deliver", "briefing", "email", "e-mail", "mail", "send ", "quiet", "export", "opml", "backup"),
    ),
    (
        frozenset({"filter_monitor"}),
        ("filter", "rule", "exclude", "include", "block", "regex", "only stories", "fewer", "at most", "relevan",
         "过滤", "屏蔽"),
    ),
    (
        frozenset({"create_alert", "remove_alert"}),
        ("alert", "tell me when", "let me know", "notify", "as soon as", "at once", "right away", "ping me",
         "benachrichtig", "prévien", "avísame", "avisa"),
    ),
    (
        frozenset({"read_page"}),
        ("page", "article", "link", "url", "website", "site", "read ", "seite", "artikel", "网页", "文章", "链接"),
    ),
    (
        frozenset({"collect"}),
        ("collect", "gather", "research", "report", "thorough", "in depth", "all sources", "sammel", "recherch",
         "investig"),
    ),
    (
        frozenset({"search_history", "timeline", "export_items"}),
        ("history", "timeline", "before", "earlier", "last week", "last month", "stored", "found", "delivered",
         "csv", "spreadsheet", "export", "trend", "over time", "verlauf", "historique", "histor"),
    ),
)  # fmt: skip
"""Tool groups and the word starts that call for them."""


def _mentions(text: str, starts: Iterable[str]) -> bool:
    lowered = f" {text.lower()}"
    return any(
        (start in lowered) if not start[0].isascii() else re.search(rf"(?<![a-z]){re.escape(start)}", lowered)
        for start in starts
    )


def _called(history: Sequence[ModelMessage]) -> set[str]:
    return {
        part.tool_name
        for message in history
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }


def _said(history: Sequence[ModelMessage]) -> str:
    """The person's earlier messages in the kept history (where a link they refer to later was given)."""
    return "\n".join(
        part.content
        for message in history
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    )


def offered_tools(message: str, history: Sequence[ModelMessage] = ()) -> frozenset[str]:
    """The tools a turn with `message` is offered when tools are chosen by message (see the module docstring)."""
    offered = set(CORE_TOOLS)
    if _URL.search(message) or _URL.search(_said(history)):
        offered.add("read_page")
    for tools, starts in TOOL_GROUPS:
        if _mentions(message, starts):
            offered |= tools
    return frozenset(offered | _called(history))


async def prepare_offered_tools(ctx: RunContext[ChatDeps], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
    """`PrepareTools` hook: the run's tools, narrowed to `ChatDeps.offered_tools` when the turn chose some."""
    offered = ctx.deps.offered_tools
    if offered is None:
        return tool_defs
    return [tool for tool in tool_defs if tool.name in offered]
