"""How much of every chat prompt the chat agent's tool definitions take: per tool, the JSON a model receives
(name, description, parameter schema), its characters and an estimate of its tokens; then, for sample messages,
what the tools offered by message (`LLM_CHAT_TOOLS=by_message`, the default for a context ≤ 8192) take instead.

Run: `uv run python bench/tool_schemas.py`. Tokens are estimated at 4 characters per token (no tokenizer is a
dependency); issue #25 measured 3,335 tokens with a real tokenizer for the 21 tools of that day.
"""

from __future__ import annotations

import asyncio
import json

from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from agent.chat.agent import build_chat_agent
from agent.chat.tool_choice import offered_tools

CHARS_PER_TOKEN = 4
"""A common rule of thumb for English text and JSON with OpenAI- and Gemini-style tokenizers."""

MESSAGES = (
    "any news on DeepSeek?",
    "read https://example.com/post",
    "track Rust releases every morning",
    "share my Rust monitor with the team",
    "what did you find about Zig last week?",
    "pause my monitor 3 and email me the digest",
)
"""A message of each kind the chooser tells apart, and one asking for two groups."""


async def main() -> None:
    agent = build_chat_agent()
    context: RunContext[None] = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    definitions = []
    for toolset in agent.toolsets:
        tools = await toolset.get_tools(context)  # type: ignore[arg-type]
        definitions += [tool.tool_def for tool in tools.values()]
    rows = []
    for definition in definitions:
        sent = {
            "name": definition.name,
            "description": definition.description,
            "parameters": definition.parameters_json_schema,
        }
        rows.append((definition.name, len(json.dumps(sent, ensure_ascii=False))))
    print("| tool | characters | ~tokens |\n|---|---:|---:|")
    for name, chars in rows:
        print(f"| {name} | {chars:,} | {chars // CHARS_PER_TOKEN:,} |")
    total = sum(chars for _, chars in rows)
    print(f"| **{len(rows)} tools** | **{total:,}** | **{total // CHARS_PER_TOKEN:,}** |")
    sizes = dict(rows)
    print("\n| message (tools by message) | tools | ~tokens | of all 21 |\n|---|---:|---:|---:|")
    for message in MESSAGES:
        offered = offered_tools(message)
        chars = sum(size for name, size in sizes.items() if name in offered)
        print(f"| {message} | {len(offered)} | {chars // CHARS_PER_TOKEN:,} | {chars / total:.0%} |")


if __name__ == "__main__":
    asyncio.run(main())
