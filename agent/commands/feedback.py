"""The feedback commands: /more, /less, /fewer, /mute, /unmute, /unmark and /why — a reader's marks on the stories of
the digests this chat received, and what put a story in (or left it out).

Story numbers are the ones this chat saw in the digest, or in a monitor's section of a briefing (after its own
feedback); without `#<monitor>` or `run <id>` they mean the last digest or briefing this chat received (after a
briefing of several monitors, `#<monitor>` says which section). The buttons send the same commands with the run
named (`/more 3 run 41`), so a press goes through the same parser and checks as typing it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from pydantic import Field

from agent.commands.action import Arguments, Family, Parse, RunT
from agent.commands.common import refuse
from agent.commands.grammar import CommandError, ParseOptions, monitor_id, shown
from agent.context import Services, Turn
from kernel import Reply
from monitors import FeedbackError, acknowledgment, story_buttons
from research import MarkKind

__all__ = [
    "ACTIONS",
    "FewerCommand",
    "LessCommand",
    "MoreCommand",
    "MuteCommand",
    "UnmarkCommand",
    "UnmuteCommand",
    "WhyCommand",
]

_MAX_STORY = 1000
"""No digest has more stories than this; a larger number is a typo."""


class _Which(Arguments):
    """Which digest: the last this chat received, of a monitor (`#3`), or a run (`run 41`)."""

    monitor_id: int | None = Field(default=None, description="Only digests of this monitor.")
    run_id: int | None = Field(default=None, description="The run whose digest is meant.")


class _StoryMark(_Which):
    story: int = Field(ge=1, description="The story's number in the digest as this chat saw it.")


class MoreCommand(_StoryMark):
    """`/more <n> [#<monitor>|run <id>]`: 👍."""

    name: ClassVar[str] = "more"


class LessCommand(_StoryMark):
    """`/less <n> [#<monitor>|run <id>]`: 👎."""

    name: ClassVar[str] = "less"


class FewerCommand(_StoryMark):
    """`/fewer <n> [#<monitor>|run <id>]`: fewer stories like this one."""

    name: ClassVar[str] = "fewer"


class UnmarkCommand(_StoryMark):
    """`/unmark <n> [#<monitor>|run <id>]`: undo this chat's mark on a story."""

    name: ClassVar[str] = "unmark"


class MuteCommand(_Which):
    """`/mute <outlet>|<n> [#<monitor>|run <id>]`: an outlet by name, or the outlet of story n."""

    name: ClassVar[str] = "mute"
    outlet: str | None = None
    story: int | None = None


class UnmuteCommand(Arguments):
    """`/unmute <outlet> [#<monitor>]`."""

    name: ClassVar[str] = "unmute"
    outlet: str
    monitor_id: int | None = None


class WhyCommand(_Which):
    """`/why <n>|dropped [#<monitor>|run <id>]`."""

    name: ClassVar[str] = "why"
    story: int | None = None
    """None: what was left out."""


def _which(name: str, words: list[str]) -> dict[str, int]:
    """`#3` / `monitor 3` / `run 41` at the end of the words (removed from them)."""
    found: dict[str, int] = {}
    if len(words) >= 2 and words[-2].casefold() in ("run", "monitor"):
        key = "run_id" if words[-2].casefold() == "run" else "monitor_id"
        value = words[-1]
        if not value.isascii() or not value.isdigit() or len(value) > 12 or int(value) < 1:
            raise CommandError(name, f"Give the {words[-2].casefold()}'s number, not {shown(value)}.")
        found[key] = int(value)
        del words[-2:]
    elif words and words[-1].startswith("#"):
        found["monitor_id"] = monitor_id(name, words[-1])
        del words[-1]
    return found


def _story(name: str, text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 4 or not 1 <= int(text) <= _MAX_STORY:
        raise CommandError(name, f"Give the story's number in the digest (1, 2, …), not {shown(text)}.")
    return int(text)


def _story_parser(model: type[_StoryMark]) -> Parse:
    def parse(text: str, _options: ParseOptions) -> Arguments:
        words = text.split()
        which = _which(model.name, words)
        if len(words) != 1:
            needs = f"/{model.name} needs one story number from the last digest"
            raise CommandError(model.name, f"{needs}, e.g. /{model.name} 2.")
        return model(story=_story(model.name, words[0]), **which)

    return parse


def _parse_mute(text: str, _options: ParseOptions) -> Arguments:
    words = text.split()
    which = _which("mute", words)
    if len(words) != 1:
        raise CommandError("mute", "/mute needs an outlet (e.g. /mute example.com) or a story number.")
    if words[0].isdigit():
        return MuteCommand(story=_story("mute", words[0]), **which)
    return MuteCommand(outlet=words[0][:200], **which)


def _parse_unmute(text: str, _options: ParseOptions) -> Arguments:
    words = text.split()
    which = _which("unmute", words)
    if "run_id" in which or len(words) != 1:
        raise CommandError("unmute", "/unmute needs the outlet to unmute, e.g. /unmute example.com.")
    return UnmuteCommand(outlet=words[0][:200], monitor_id=which.get("monitor_id"))


def _parse_why(text: str, _options: ParseOptions) -> Arguments:
    words = text.split()
    which = _which("why", words)
    if len(words) != 1:
        raise CommandError("why", "/why needs a story number from the last digest, or `dropped`.")
    if words[0].casefold() in ("dropped", "left", "out"):
        return WhyCommand(story=None, **which)
    return WhyCommand(story=_story("why", words[0]), **which)


_DONE = {"more": "👍 recorded", "less": "👎 recorded", "fewer": "fewer like this"}
"""What a story's row says once its button was pressed."""


def _unchanged(reason: str, command: _Which) -> list[Reply]:
    """A refusal; pressed from a digest's row, the row stays as it was."""
    row = () if command.run_id is not None else None
    return [reply.model_copy(update={"pressed_row": row}) for reply in refuse(reason)]


async def _mark(services: Services, turn: Turn, command: _StoryMark, kind: MarkKind) -> list[Reply]:
    """/more, /less and /fewer: record the mark; pressed from a digest's row, the row says so."""
    try:
        result = await services.monitors.feedback.mark(
            turn.chat.id, kind, command.story, run_id=command.run_id, monitor_id=command.monitor_id
        )
    except FeedbackError as error:
        return _unchanged(str(error), command)
    row = None
    if command.run_id is not None:
        row = acknowledgment(command.story, result.run_id, _DONE[kind], label=result.label)
    return [Reply(text=result.text, pressed_row=row)]


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The feedback family, in the order /help lists it."""


def _story_mark(model: type[_StoryMark], *, example: int) -> Callable[[RunT], RunT]:
    """The definition of a mark on story n of a digest (`/more 2`): one grammar, answered at once."""
    return ACTIONS.action(
        pattern="<n> [#<monitor>|run <id>]",
        example=f"/{model.name} {example}",
        parse=_story_parser(model),
        instant=True,
    )


@_story_mark(MoreCommand, example=2)
async def more(services: Services, turn: Turn, command: MoreCommand) -> list[Reply]:
    """👍 More stories like story n of the last digest or briefing, in this chat."""
    return await _mark(services, turn, command, "more")


@_story_mark(LessCommand, example=4)
async def less(services: Services, turn: Turn, command: LessCommand) -> list[Reply]:
    """👎 Fewer stories like story n of the last digest or briefing, or from its outlet, in this chat."""
    return await _mark(services, turn, command, "less")


@_story_mark(FewerCommand, example=3)
async def fewer(services: Services, turn: Turn, command: FewerCommand) -> list[Reply]:
    """Fewer stories on the subject of story n of the last digest or briefing, in this chat."""
    return await _mark(services, turn, command, "fewer")


@_story_mark(UnmarkCommand, example=2)
async def unmark(services: Services, turn: Turn, command: UnmarkCommand) -> list[Reply]:
    """Undo this chat's 👍/👎/fewer on story n of a digest."""
    try:
        result = await services.monitors.feedback.unmark(
            turn.chat.id, command.story, run_id=command.run_id, monitor_id=command.monitor_id
        )
    except FeedbackError as error:
        return _unchanged(str(error), command)
    row = story_buttons(command.story, command.run_id, label=result.label) if command.run_id is not None else None
    return [Reply(text=result.text, pressed_row=row)]


@ACTIONS.action(pattern="<outlet>|<n> [#<monitor>]", example="/mute example.com", parse=_parse_mute, instant=True)
async def mute(services: Services, turn: Turn, command: MuteCommand) -> list[Reply]:
    """Leave an outlet's stories out of this chat's digests of a monitor (other chats still get them)."""
    feedback = services.monitors.feedback
    try:
        if command.story is not None:
            result = await feedback.mark(
                turn.chat.id, "mute", command.story, run_id=command.run_id, monitor_id=command.monitor_id
            )
        else:
            result = await feedback.mute(
                turn.chat.id, command.outlet or "", monitor_id=command.monitor_id, run_id=command.run_id
            )
    except FeedbackError as error:
        return _unchanged(str(error), command)
    row = None
    if command.run_id is not None and command.story is not None:
        undo = f"/unmute {result.outlet} #{result.monitor_id}"
        row = acknowledgment(command.story, result.run_id, f"🔇 {result.outlet} muted", undo=undo, label=result.label)
    return [Reply(text=result.text, pressed_row=row)]


@ACTIONS.action(pattern="<outlet> [#<monitor>]", example="/unmute example.com", parse=_parse_unmute, instant=True)
async def unmute(services: Services, turn: Turn, command: UnmuteCommand) -> list[Reply]:
    """Let a muted outlet's stories back into this chat's digests."""
    text = await services.monitors.feedback.unmute(turn.chat.id, command.outlet, monitor_id=command.monitor_id)
    return [Reply(text=text)]


@ACTIONS.action(pattern="<n>|dropped [#<monitor>|run <id>]", example="/why 2", parse=_parse_why, instant=True)
async def why(services: Services, turn: Turn, command: WhyCommand) -> list[Reply]:
    """Why story n is in the last digest or briefing (scores, novelty, feedback), or what your feedback left out."""
    try:
        text = await services.monitors.feedback.why(
            turn.chat.id, command.story, run_id=command.run_id, monitor_id=command.monitor_id
        )
    except FeedbackError as error:
        return _unchanged(str(error), command)
    return [Reply(text=text, pressed_row=() if command.run_id is not None else None)]  # the row stays as it was
