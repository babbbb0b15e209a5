"""The catalogue of chat actions: every action of every family, in the order /help lists them, and everything
derived from it — the command parser, the router's lookup, `/help`, the usage lines, Telegram's command menu
(setMyCommands), the Slack manifest's slash commands and the chat agent's tools' definitions.

Adding an action is one definition in its family's module (and its test); this module only lists the families.
"""

from __future__ import annotations

import logging
import re
from typing import ClassVar

from pydantic import ValidationError

from agent.commands import (
    alerts,
    destinations,
    feedback,
    filters,
    history,
    monitors,
    portability,
    research,
    settings,
    subscriptions,
)
from agent.commands.action import Action, Arguments, Family
from agent.commands.grammar import SLACK_PREFIX, CommandError, ParseOptions, slash_head, split_head, visible
from agent.context import Services, Turn
from kernel import Reply
from research import escape_markdown
from storage import JSONObject

__all__ = [
    "ACTIONS",
    "CATALOGUE",
    "START_TEXT",
    "Command",
    "HelpCommand",
    "StartCommand",
    "action_named",
    "bot_commands",
    "help_text",
    "is_instant_command",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
    "run_stored",
    "slack_commands",
    "usage_of",
]

logger = logging.getLogger(__name__)

Command = Arguments
"""Any parsed command: the arguments of one action (`name` says which)."""

START_TEXT = """**Lookout** keeps watch for you. It follows a topic across Hacker News, news, arXiv, GitHub, \
Wikipedia, the web and any RSS feed, checks what it finds (relevance, credibility, duplicates) and sends a short \
cited digest on your schedule, with a CSV of everything it collected and a chart.

Try:
- `/track DeepSeek daily at 08:30 from hn,news,arxiv` — a digest every morning
- `/track "open source LLM" every 6 hours` — the default sources, four times a day
- `/search open source LLM licences` — one digest, right now
- `/collect posts about Rust in embedded systems target 500` — a big CSV for your own analysis
- `/monitors` — what this chat follows; `/digest <id>` runs one now

Set `/timezone`, `/language` and `/profile` (who you are, what you care about) so digests fit you. \
You can also just write to me in plain words. `/help` lists every command."""

_COMMAND_NAME_RE = re.compile(r"[a-z0-9_]{1,32}")


class StartCommand(Arguments):
    """`/start` (Telegram deep-link payloads are ignored)."""

    name: ClassVar[str] = "start"


class HelpCommand(Arguments):
    """`/help [command]`."""

    name: ClassVar[str] = "help"
    command: str | None = None
    """The command asked about, None for the overview."""


def _parse_start(_args: str, _options: ParseOptions) -> StartCommand:
    return StartCommand()  # Telegram deep links send `/start <payload>`; the payload means nothing to us


def _parse_help(args: str, _options: ParseOptions) -> HelpCommand:
    if not args:
        return HelpCommand()
    wanted = args.lstrip("/").split()[0].lower()
    if wanted not in CATALOGUE:
        raise CommandError("help", f"There is no command /{escape_markdown(wanted[:32])}.")
    return HelpCommand(command=wanted)


_INTRODUCTION = Family()
"""/start and /help, which come first."""


@_INTRODUCTION.action(parse=_parse_start, instant=True)
async def _start(_services: Services, _turn: Turn, _command: StartCommand) -> list[Reply]:
    """What Lookout does, with examples."""
    return [Reply(text=START_TEXT)]


@_INTRODUCTION.action(pattern="[command]", example="/help track", parse=_parse_help, instant=True)
async def _help(_services: Services, _turn: Turn, command: HelpCommand) -> list[Reply]:
    """Commands and how to use them."""
    return [Reply(text=help_text(command.command))]


ACTIONS: tuple[Action, ...] = (
    *_INTRODUCTION,
    *monitors.ACTIONS,
    *filters.ACTIONS,
    *research.ACTIONS,
    *history.ACTIONS,
    *subscriptions.ACTIONS,
    *destinations.ACTIONS,
    *feedback.ACTIONS,
    *alerts.ACTIONS,
    *portability.ACTIONS,
    *settings.ACTIONS,
)
"""Every chat action, in the order /help lists them."""

CATALOGUE: dict[str, Action] = {action.name: action for action in ACTIONS if action.command}
"""Every slash command's action by name, in the order /help lists them."""
_EVERY: dict[str, Action] = {action.name: action for action in ACTIONS}
_PARSERS = {action.name: action.parser() for action in CATALOGUE.values()}


def action_named(name: str) -> Action | None:
    """The action called `name` (the router's and the confirmations' lookup), commands or not."""
    return _EVERY.get(name)


def usage_of(name: str) -> str:
    """The usage line of a command (`/help`'s for an unknown name)."""
    return (CATALOGUE.get(name) or CATALOGUE["help"]).usage


def bot_commands() -> list[tuple[str, str]]:
    """`(name, description)` pairs for Telegram's setMyCommands."""
    return [(action.name, action.description) for action in CATALOGUE.values()]


def slack_commands() -> list[tuple[str, str, str | None]]:
    """`(command, description, usage hint)` of the actions that are Slack slash commands of their own."""
    return [
        (f"/{action.name}", action.slack.description, action.slack.usage_hint)
        for action in ACTIONS
        if action.slack is not None
    ]


def help_text(command: str | None = None) -> str:
    """Markdown for /help: every command with its description, or one command with its example."""
    if command is not None and command in CATALOGUE:
        action = CATALOGUE[command]
        lines = [f"`{action.usage}`", action.description + "."]
        if action.example:
            lines.append(f"Example: `{action.example}`")
        if action.details:
            lines.append(action.details)
        return "\n".join(lines)
    return "\n".join(f"`{action.usage}` — {action.description}" for action in CATALOGUE.values())


# --- the parser's entry points --------------------------------------------------------------------------------


def parse_command(text: str, *, options: ParseOptions | None = None) -> Command | CommandError | None:
    """Parse `/name args` (also `/name@Bot args`), deterministically and without ever raising. None when the text is
    not a command for this bot (free text, or a command addressed to another bot); a `CommandError` with the usage
    line when it is wrong."""
    opts = options or ParseOptions()
    split = slash_head(text)
    if split is None:
        return None
    head, rest = split
    name, _, addressee = head.partition("@")
    if addressee and opts.bot_username and addressee.lower() != opts.bot_username.lstrip("@").lower():
        return None
    return _dispatch(name.lower(), rest, opts)


def is_instant_command(text: str) -> bool:
    """Whether `text` is a command answered at once (`Action.instant`): `/help`, `/monitors@bot`."""
    split = slash_head(text)
    action = CATALOGUE.get(split[0].partition("@")[0].lower()) if split is not None else None
    return action is not None and action.instant


def parse_command_words(text: str, *, options: ParseOptions | None = None) -> Command | CommandError:
    """Parse a command whose first word is the name, without a slash (the text of Slack's `/lookout`).
    Empty text is /help."""
    head, rest = split_head(visible(text).strip().lstrip("/"))
    if not head:
        return HelpCommand()
    return _dispatch(head.partition("@")[0].lower(), rest, options or ParseOptions())


def parse_prefixed(
    text: str, *, prefix: str = SLACK_PREFIX, options: ParseOptions | None = None
) -> Command | CommandError | None:
    """Parse `lookout track …` (a message starting with the prefix word); None when it does not start so."""
    head, rest = split_head(text.strip())
    if head.lower() != prefix.lower():
        return None
    return parse_command_words(rest, options=options)


def _dispatch(name: str, rest: str, options: ParseOptions) -> Command | CommandError:
    parser = _PARSERS.get(name)
    if parser is None:
        known = ", ".join(f"/{n}" for n in CATALOGUE)
        if not name:
            return CommandError(None, f"Put the command right after the slash. Commands: {known}.")
        shown = name if _COMMAND_NAME_RE.fullmatch(name) else name[:32].encode("unicode_escape").decode()
        return CommandError(None, f"I don't know the command /{escape_markdown(shown)}. Commands: {known}.")
    try:
        return parser(" ".join(rest.split()), options)
    except CommandError as problem:
        return problem
    except Exception:  # a parser bug must not take the chat down; the log shows it, the person gets the usage
        logger.exception("command parser failed on /%s", name)
        return CommandError(name, "I could not read those arguments.")


async def run_stored(services: Services, turn: Turn, name: str, arguments: JSONObject) -> str:
    """Run an action stored by a confirmation (its name and arguments as JSON), and say what happened.

    A confirmation stored by another version may name an action this one lacks, or arguments it reads differently:
    that is said in a sentence and nothing is done."""
    action = _EVERY.get(name)
    if action is None or action.run is None:
        return f"This version of Lookout cannot do “{name}” any more; nothing was changed. Please ask again."
    try:
        parsed = action.arguments.model_validate(arguments)
    except ValidationError:
        logger.warning("stored arguments of /%s not readable: %s", name, arguments)
        return f"I could not read that stored /{name} request any more; nothing was changed. Please ask again."
    logger.info("chat %d: confirmed /%s", turn.chat.id, name)
    return "\n\n".join(reply.text for reply in await action.perform(services, turn, parsed))
