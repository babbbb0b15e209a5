"""The chat agent's tools, all from the catalogue of chat actions: the action's arguments model is the tool's
parameter schema (compacted: no titles), its `ToolUse` names and describes it; a tool that acts at once answers the
model with `ToolUse.answer`, and a change that needs confirmation is only proposed — the confirmation stores the
action's name and arguments, and "yes" runs the action's `run`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_ai import ModelRetry, RunContext, Tool

from agent.chat.deps import ChatDeps
from agent.commands import ACTIONS, Action
from agent.commands.action import Proposal, ToolRefusal
from agent.confirmations import CatalogueAction
from monitors import MonitorNotFoundError

__all__ = ["PROPOSED", "action_tool", "catalogue_tools", "compact", "compact_schema"]

PROPOSED = (
    "Proposed, NOT done yet. Lookout now shows the person this change with Confirm/Cancel buttons and accepts "
    "a reply of yes; tell them briefly what will happen and that it needs their confirmation."
)


def compact(node: Any) -> Any:
    """A tool's parameter schema with what a model does not need left out: titles, and for an optional parameter
    (`X | None = None`) the null branch and the null default — leaving it out means the same. Every tool's schema
    is in every chat prompt, so this is paid on each request."""
    if isinstance(node, list):
        return [compact(value) for value in node]
    if not isinstance(node, dict):
        return node
    result = {key: compact(value) for key, value in node.items() if key != "title"}
    branches = result.get("anyOf")
    if "default" in result and result["default"] is None and isinstance(branches, list):
        kept = [branch for branch in branches if branch != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(branches):
            del result["anyOf"], result["default"]
            result = {**kept[0], **result}
    return result


def compact_schema(action: Action) -> dict[str, Any]:
    """The arguments model's JSON schema, compacted, without the class docstring (the tool has its description)."""
    schema = dict(compact(action.arguments.model_json_schema()))
    schema.pop("description", None)
    schema.setdefault("properties", {})
    return schema


def action_tool(action: Action) -> Tool[ChatDeps]:
    """The chat tool of one action (which must have a `ToolUse`)."""
    use = action.tool
    if use is None:
        raise ValueError(f"/{action.name} is no chat tool")

    async def call(ctx: RunContext[ChatDeps], **given: Any) -> object:
        deps = ctx.deps
        try:
            arguments = action.arguments.model_validate(given)
        except ValidationError as error:
            raise ModelRetry(f"Invalid arguments for {use.name}: {error.errors(include_url=False)}") from None
        monitor = getattr(arguments, "monitor_id", None)
        try:
            if use.answer is not None:
                return await use.answer(deps, arguments)
            if use.propose is None:
                replies = await action.perform(deps.services, deps.turn, arguments)
                for reply in replies:
                    for attachment in reply.attachments:
                        deps.attach(attachment)
                return "\n\n".join(reply.text for reply in replies)
            outcome = await use.propose(deps.services, deps.turn, arguments)
        except MonitorNotFoundError:
            raise ModelRetry(f"This chat has no monitor #{monitor}; call list_monitors for the ids.") from None
        except ToolRefusal as refusal:
            raise ModelRetry(str(refusal)) from None
        if not isinstance(outcome, Proposal):
            return outcome
        deps.proposals.append(
            CatalogueAction(
                description=outcome.description,
                action=action.name,
                arguments=(outcome.arguments or arguments).model_dump(mode="json"),
            )
        )
        return f"{PROPOSED}\nProposed: {outcome.description}"

    return Tool.from_schema(
        call, name=use.name, description=use.description, json_schema=compact_schema(action), takes_ctx=True
    )


def catalogue_tools() -> dict[str, Tool[ChatDeps]]:
    """Every action's tool, by tool name."""
    return {action.tool.name: action_tool(action) for action in ACTIONS if action.tool is not None}
