"""`Family`: an action is defined on the function that runs it — its arguments model from the annotation, its /help
line from the docstring, in definition order — and a definition that lacks either is refused at import."""

from __future__ import annotations

from typing import ClassVar

import pytest

from agent.commands.action import Arguments, Family, MonitorArguments, ToolContext
from agent.commands.catalogue import CATALOGUE, help_text
from agent.context import Services, Turn
from kernel import Reply


class PingCommand(Arguments):
    """`/ping`."""

    name: ClassVar[str] = "ping"


class PokeCommand(MonitorArguments):
    """`/poke <id>`."""

    name: ClassVar[str] = "poke"


class PokeAllCommand(Arguments):
    """`/poke all`: the second form of /poke."""

    name: ClassVar[str] = "poke"


class LookUp(Arguments):
    """The chat tool's look-up."""

    name: ClassVar[str] = "look_up"
    query: str


def test_an_action_is_its_run_with_the_annotated_model_and_the_docstring_line_in_definition_order() -> None:
    family = Family()

    async def ping(_services: Services, _turn: Turn, _command: PingCommand) -> list[Reply]:
        """Answer pong, to see that the bot is up.

        For developers: this paragraph is not in /help."""
        return [Reply(text="pong")]

    async def poke(_services: Services, _turn: Turn, _command: PokeCommand | PokeAllCommand) -> list[Reply]:
        """Poke a monitor, or every one."""
        return []

    async def look_up(_context: ToolContext, command: LookUp) -> str:
        """Look something up for the chat agent."""
        return command.query

    assert family.action(instant=True)(ping) is ping  # returned unchanged: tests still call run functions
    family.action(pattern="<id>|all", example="/poke 3")(poke)
    assert family.tool(name="look_up", description="Look it up.")(look_up) is look_up

    first, second, third = family
    assert (first.name, first.arguments, first.run, first.instant) == ("ping", PingCommand, ping, True)
    assert first.description == "Answer pong, to see that the bot is up"
    assert (second.arguments, second.usage, second.description) == (
        PokeCommand,
        "/poke <id>|all",
        "Poke a monitor, or every one",
    )
    assert (third.name, third.command, third.run) == ("look_up", False, None)
    assert third.tool is not None and (third.tool.name, third.tool.answer) == ("look_up", look_up)


def test_a_definition_without_a_model_or_a_help_line_is_refused_with_the_function_named() -> None:
    family = Family()

    async def untyped(_services: Services, _turn: Turn, _command) -> list[Reply]:  # type: ignore[no-untyped-def]
        """Has a help line but no model."""
        return []

    async def undocumented(_services: Services, _turn: Turn, _command: PingCommand) -> list[Reply]:
        return []

    async def two_names(_services: Services, _turn: Turn, _command: PingCommand | PokeCommand) -> list[Reply]:
        """Two actions in one."""
        return []

    async def wordy(_services: Services, _turn: Turn, _command: PingCommand) -> list[Reply]:
        return []

    wordy.__doc__ = "word " * 60

    with pytest.raises(TypeError, match=r"untyped: annotate its last parameter"):
        family.action()(untyped)
    with pytest.raises(TypeError, match=r"undocumented: its docstring's first paragraph"):
        family.action()(undocumented)
    with pytest.raises(TypeError, match=r"two_names: the models of one action's union must have one name"):
        family.action()(two_names)
    with pytest.raises(TypeError, match=r"wordy: the /help line is over 256 characters"):
        family.action()(wordy)
    assert list(family) == []


def test_the_help_line_is_the_docstring_s_first_paragraph_on_one_line() -> None:
    """A help line that wraps in the docstring is one line in /help (and in Telegram's menu)."""
    briefing = CATALOGUE["briefing"]
    assert "\n" not in briefing.description
    assert briefing.description.startswith("One morning briefing of all your monitors instead of a message per run")
    assert f"`{briefing.usage}` — {briefing.description}" in help_text().splitlines()
