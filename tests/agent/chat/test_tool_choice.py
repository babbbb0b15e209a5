"""Which chat tools a turn is offered when they are chosen by its message (small models)."""

from __future__ import annotations

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, UserPromptPart

from agent.chat.tool_choice import CORE_TOOLS, TOOL_GROUPS, offered_tools
from agent.chat.tools import CHAT_TOOLS


@pytest.mark.parametrize(
    ("message", "also"),
    [
        ("what happened with DeepSeek today?", set()),
        ("summarise https://example.com/post for me", {"read_page"}),
        ("track Rust releases every morning", {"create_monitor", "pause_monitor", "run_monitor_now"}),
        ("帮我监控英伟达的新闻", {"create_monitor", "delete_monitor"}),
        ("share my Rust monitor with the team", {"share_monitor", "subscribe_to_monitor"}),
        ("what did you find about Zig last week?", {"search_history", "timeline", "export_items"}),
        ("collect everything on the EU AI Act from all sources", {"collect"}),
        ("leave celebrity gossip out of my DeepSeek digest: exclude it", {"filter_monitor"}),
    ],
)
def test_a_message_is_offered_the_core_tools_and_the_groups_it_is_about(message: str, also: set[str]) -> None:
    offered = offered_tools(message)
    assert offered >= CORE_TOOLS | also
    assert len(offered) < len(CHAT_TOOLS), "never the whole set for one topic"
    if not also:
        assert offered == CORE_TOOLS


def test_every_named_tool_exists_and_a_called_tool_stays_offered() -> None:
    names = {tool.name for tool in CHAT_TOOLS}
    assert CORE_TOOLS | {"read_page"} | set().union(*(tools for tools, _ in TOOL_GROUPS)) == names
    history = [ModelResponse(parts=[ToolCallPart(tool_name="set_briefing", args={})])]
    assert "set_briefing" in offered_tools("yes", history)


def test_a_link_given_earlier_keeps_read_page_offered() -> None:
    history = [ModelRequest(parts=[UserPromptPart(content="look at https://example.com/post")])]
    assert "read_page" in offered_tools("and what does it conclude?", history)
    assert "read_page" not in offered_tools("and what does it conclude?")
