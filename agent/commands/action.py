"""One chat action, defined once: its name, help line, pydantic arguments, how its text is parsed, who may do it,
whether the chat agent must have it confirmed, and the one `run` every route ends in.

A family module defines its actions on the functions that run them (errbot's model): `ACTIONS = Family()`, then
`@ACTIONS.action(pattern=…, example=…, tool=…)` on each `run` — the arguments model is the annotation of the run's
last parameter, the /help line the first paragraph of its docstring (the rest of the docstring is for developers).
A chat tool with no command and no run is `@ACTIONS.tool(name=…, description=…)` on its answer. Definition order is
/help order.

The catalogue (`agent.commands.catalogue`) derives from these definitions the slash-command parser, the router,
`/help`, Telegram's command menu, the Slack manifest and the chat agent's tools; a confirmed proposal stores the
action's name and arguments and runs the same `run` on "yes".
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Literal, Protocol, TypedDict, TypeVar, Unpack, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent.commands.grammar import CommandError, ParseOptions, monitor_id
from agent.context import Services, Turn
from kernel import Attachment, Reply
from monitors import MonitorView

__all__ = [
    "Action",
    "Answer",
    "Arguments",
    "Family",
    "Parse",
    "Proposal",
    "Role",
    "Run",
    "SlackCommand",
    "ToolContext",
    "ToolRefusal",
    "ToolUse",
    "monitor_role",
    "owned_monitor",
]


class Arguments(BaseModel):
    """An action's typed arguments: what the parser makes of a command's text, the chat tool's parameters, and what
    a confirmation stores (as JSON) until "yes"."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    name: ClassVar[str]
    """The action these arguments are for (the router's key)."""


class MonitorArguments(Arguments):
    """Arguments that begin with one monitor of the chat's, by the number `/monitors` shows."""

    monitor_id: int = Field(description="See list_monitors.")
    """The tools' one description of a monitor number."""


Parse = Callable[[str, ParseOptions], Arguments]
"""A command's parser: the whitespace-normalised text after the name → arguments, or `CommandError`."""

Run = Callable[[Services, Turn, Any], Awaitable[list[Reply]]]
"""What an action does for `turn.chat`, with its arguments; the replies say what happened."""

Role = Literal["owner", "subscriber", "admin"]
"""How the chat asking stands to a monitor: it owns it, it only receives it, or the person is an admin."""


async def monitor_role(services: Services, turn: Turn, monitor: int) -> tuple[MonitorView, Role]:
    """The one permission check of the monitor actions: the monitor as this chat sees it and the chat's role.

    Raises `monitors.MonitorNotFoundError` when this chat neither owns nor receives it (and the person is no admin).
    """
    view = await services.monitors.get_monitor(monitor, chat_id=turn.chat.id, is_admin=turn.is_admin)
    if view.owned_here:
        return view, "owner"
    return view, "admin" if turn.is_admin else "subscriber"


async def owned_monitor(services: Services, turn: Turn, monitor: int) -> MonitorView:
    """The monitor, for a change that only its owner (or an admin) may propose; `ToolRefusal` when this chat only
    receives it (and `monitors.MonitorNotFoundError` as for `monitor_role`)."""
    view, role = await monitor_role(services, turn, monitor)
    if role == "subscriber":
        raise ToolRefusal(
            f"Monitor #{view.id} belongs to another chat; this chat only receives it (set_delivery changes how)."
        )
    return view


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """A change a chat tool proposes: shown to the person, carried out by the action's `run` on "yes"."""

    description: str
    """What will happen, in words (a lowercase phrase: "pause monitor #3 “DeepSeek”")."""
    arguments: Arguments | None = None
    """What the confirmation stores when the check made the arguments exact (a chat's address for its name); None:
    the arguments as given."""


class ToolRefusal(Exception):
    """A tool call that cannot be proposed as asked (the model is told why and may try again)."""


Propose = Callable[[Services, Turn, Any], Awaitable[Proposal | str]]
"""Checks a proposed change and says it in words (`Proposal`), or answers at once why nothing needs doing (str)."""


class ToolContext(Protocol):
    """What a tool that acts at once gets from the chat agent's run (`agent.chat.ChatDeps` is one)."""

    services: Services
    turn: Turn
    timezone: str
    """The chat's IANA timezone."""
    read_untrusted: bool
    """Set when the tool handed the model fetched text (proposals after it carry a warning)."""

    @property
    def chat_id(self) -> int: ...

    @property
    def now(self) -> datetime: ...

    @property
    def exports_dir(self) -> Path:
        """The chat's folder for the files its tools make."""
        ...

    def attach(self, attachment: Attachment) -> None:
        """Send a file with the chat agent's reply."""

    async def say(self, text: str, *, done: bool = False) -> None:
        """One progress line to the chat."""


Answer = Callable[[ToolContext, Any], Awaitable[object]]
"""A tool that acts at once: its answer to the model (text, or a pydantic model the tool result is made of).
`ModelRetry` or `ToolRefusal` sends the model back to fix its call; `MonitorNotFoundError` says the number is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    """How the chat agent may use an action: as a tool named for the model, with a compact description."""

    name: str
    """The tool's name (`pause_monitor`)."""
    description: str
    """One or two short sentences: every tool's description is in every chat prompt."""
    propose: Propose | None = None
    """Set when the change needs the person's confirmation: the tool only proposes it."""
    answer: Answer | None = None
    """Set when the tool acts at once and answers the model with this rather than with the command's replies (the
    command speaks to the person; the tool's answer is read by the model)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlackCommand:
    """The action is also a Slack slash command of its own (besides `/lookout <action>`)."""

    description: str
    """Slack's description of the command (the manifest's)."""
    usage_hint: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One chat action; see the module's docstring for what is derived from it. Family modules make them with
    `Family.action` and `Family.tool`."""

    arguments: type[Arguments]
    """Its arguments model, whose `name` is the action's."""
    pattern: str = ""
    """The arguments as the usage line shows them; "" when it takes none (and for an action with no command)."""
    description: str
    """The /help line: one line, under 256 characters (Telegram's setMyCommands limit); `Family` takes it from the
    first paragraph of the run's docstring."""
    run: Run | None = None
    """None only for a chat tool that answers at once and has no command (`command=False`, `ToolUse.answer`)."""
    parse: Parse | None = None
    """None: derived from `arguments` (no fields: no arguments; one `monitor_id`: one monitor number)."""
    example: str | None = None
    """A full example, slash included."""
    details: str | None = None
    """Markdown `/help <name>` adds under the example: a grammar too rich for the usage line."""
    instant: bool = False
    """Answered at once from what is stored (no collection, no model, no file): the chat shows no "typing…" for
    it, since the answer comes before the indicator would (and the call would only add to the bot's flood limit)."""
    tool: ToolUse | None = None
    slack: SlackCommand | None = None
    command: bool = True
    """False: no slash command (not parsed, not in /help or the menus); only the chat tool and its confirmation
    reach it."""

    @property
    def name(self) -> str:
        """Lowercase, no slash (Telegram allows 1-32 of a-z, 0-9 and _): the arguments' `name`, the router's key."""
        return self.arguments.name

    def __post_init__(self) -> None:
        if self.run is None and (self.command or self.tool is None or self.tool.answer is None):
            raise TypeError(f"/{self.name} needs a run (only a tool answering at once, with no command, has none)")

    async def perform(self, services: Services, turn: Turn, arguments: Arguments) -> list[Reply]:
        """Run the action for `turn.chat` (what the command and a confirmed proposal do)."""
        if self.run is None:
            raise LookupError(f"{self.name} is a chat tool only")
        return await self.run(services, turn, arguments)

    @property
    def usage(self) -> str:
        """The usage line: `/track <topic> [schedule] [from <sources>]`."""
        return f"/{self.name} {self.pattern}".rstrip()

    def parser(self) -> Parse:
        """The command's parser: its own, or the one its arguments imply."""
        if self.parse is not None:
            return self.parse
        fields = set(self.arguments.model_fields)
        name, model = self.name, self.arguments
        if not fields:

            def no_arguments(text: str, _options: ParseOptions) -> Arguments:
                if text:
                    raise CommandError(name, f"/{name} takes no arguments.")
                return model()

            return no_arguments
        if fields == {"monitor_id"}:

            def one_monitor(text: str, _options: ParseOptions) -> Arguments:
                words = text.split()
                if len(words) != 1:
                    raise CommandError(name, f"/{name} needs exactly one monitor number (see /monitors).")
                return model.model_validate({"monitor_id": monitor_id(name, words[0])})

            return one_monitor
        raise TypeError(f"/{name} needs its own parser for the arguments {sorted(fields)}")


MAX_DESCRIPTION_CHARS = 256
"""Telegram's setMyCommands limit on a command's description (the /help line)."""

RunT = TypeVar("RunT", bound=Run)
AnswerT = TypeVar("AnswerT", bound=Answer)


def arguments_of(function: Callable[..., object]) -> type[Arguments]:
    """The arguments model a run (or answer) function takes: the annotation of its last parameter. A command with
    two forms annotates a union of models of the same name (`/export <id>` or `/export monitors`): the first is the
    action's (the chat tool's schema, what a confirmation reads back).

    Raises `TypeError` naming the function when that annotation is missing or not `Arguments` models of one name."""
    where = f"{function.__module__}.{function.__qualname__}"
    inner = inspect.unwrap(function)
    parameters = list(inspect.signature(inner).parameters)
    # eval_str: the family modules use `from __future__ import annotations`, so annotations are strings
    annotation = inspect.get_annotations(inner, eval_str=True).get(parameters[-1]) if parameters else None
    models = get_args(annotation) if isinstance(annotation, UnionType) else (annotation,)
    if not all(isinstance(model, type) and issubclass(model, Arguments) for model in models):
        raise TypeError(f"{where}: annotate its last parameter with the action's Arguments model")
    if len({model.name for model in models}) != 1:
        raise TypeError(f"{where}: the models of one action's union must have one name")
    first: type[Arguments] = models[0]
    return first


def help_line(function: Callable[..., object]) -> str:
    """The /help line of an action: the first paragraph of its function's docstring, on one line, without the
    closing full stop (/help adds its own).

    Raises `TypeError` naming the function when there is no docstring or the line is too long for Telegram."""
    where = f"{function.__module__}.{function.__qualname__}"
    paragraph = inspect.cleandoc(function.__doc__ or "").split("\n\n")[0]
    line = " ".join(paragraph.split()).removesuffix(".")
    if not line:
        raise TypeError(f"{where}: its docstring's first paragraph is the action's /help line, and it has none")
    if len(line) > MAX_DESCRIPTION_CHARS:
        raise TypeError(f"{where}: the /help line is over {MAX_DESCRIPTION_CHARS} characters")
    return line


class ActionFields(TypedDict, total=False):
    """What `Family.action` is told of an action besides its run (see `Action`, whose defaults apply)."""

    pattern: str
    parse: Parse | None
    example: str | None
    details: str | None
    instant: bool
    tool: ToolUse | None
    slack: SlackCommand | None
    command: bool


class Family:
    """The actions of one family module, in the order they are defined (the order /help lists them)."""

    def __init__(self) -> None:
        self._actions: list[Action] = []

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions)

    def action(self, **fields: Unpack[ActionFields]) -> Callable[[RunT], RunT]:
        """Define the action the decorated function runs (`Action`'s fields but the three the function gives); the
        function is returned unchanged."""

        def define(run: RunT) -> RunT:
            self._actions.append(Action(arguments=arguments_of(run), description=help_line(run), run=run, **fields))
            return run

        return define

    def tool(self, *, name: str, description: str) -> Callable[[AnswerT], AnswerT]:
        """Define a chat tool with no command and no run, answering the model at once with the decorated function
        (`ToolUse.answer`); the function is returned unchanged."""

        def define(answer: AnswerT) -> AnswerT:
            self._actions.append(
                Action(
                    arguments=arguments_of(answer),
                    description=help_line(answer),
                    command=False,
                    tool=ToolUse(name=name, description=description, answer=answer),
                )
            )
            return answer

        return define
