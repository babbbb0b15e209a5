"""The per-chat commands: /timezone, /language, /profile, /forget and /usage."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from typing import ClassVar, Unpack
from zoneinfo import ZoneInfo

from agent.commands.action import Arguments, Family
from agent.commands.common import chat_timezone, chat_zone, local_time
from agent.commands.grammar import CommandError, ParseOptions, language_name, shown, told
from agent.context import Services, Turn
from kernel import Reply
from monitors import ChatBudget, ScheduleError, parse_schedule
from research import USAGE_KIND_LABELS
from storage import ChatChanges, ChatRecord, UsageTotals

__all__ = [
    "ACTIONS",
    "ForgetCommand",
    "LanguageCommand",
    "ProfileCommand",
    "TimezoneCommand",
    "UsageCommand",
    "forget",
    "language",
    "profile",
    "timezone",
    "usage",
]

MAX_PROFILE_CHARS = 2000
"""A profile is a few sentences; it goes into every prompt of the chat."""
_LANGUAGE_RE = re.compile(r"[a-z]{2,3}(-[a-z0-9]{2,8})*", re.IGNORECASE)


class TimezoneCommand(Arguments):
    """`/timezone [IANA name]`; without a name it shows the current one."""

    name: ClassVar[str] = "timezone"
    timezone: str | None
    """Canonical IANA name (`Europe/Berlin`), None to show the current setting."""


class LanguageCommand(Arguments):
    """`/language [code]`; without a code it shows the current one."""

    name: ClassVar[str] = "language"
    language: str | None
    """A BCP 47 tag like `de` or `pt-BR`, None to show the current setting."""


class ProfileCommand(Arguments):
    """`/profile [text]`; without text it shows the current profile."""

    name: ClassVar[str] = "profile"
    profile: str | None
    """The new profile, None to show the current one."""


class ForgetCommand(Arguments):
    """`/forget`."""

    name: ClassVar[str] = "forget"


class UsageCommand(Arguments):
    """`/usage`."""

    name: ClassVar[str] = "usage"


_NO_MODEL = "There is no language model now, so"
_CLEAR_PROFILE = ("clear", "off", "none", "reset", "delete", "remove")
"""`/profile <one of these>` removes the profile (nobody's profile is one of these words)."""


def _totals(totals: UsageTotals) -> str:
    tokens = totals.input_tokens + totals.output_tokens
    if not tokens and not totals.requests:
        return "nothing yet"
    cost = f"${totals.cost:.4f}" if totals.cost < 1 else f"${totals.cost:,.2f}"
    requests = f"{totals.requests:,} request{'' if totals.requests == 1 else 's'}"
    return f"{tokens:,} tokens ({totals.input_tokens:,} in, {totals.output_tokens:,} out) in {requests}, {cost}"


async def _update(services: Services, turn: Turn, **changes: Unpack[ChatChanges]) -> ChatRecord:
    updated = await services.chats.update(turn.chat.id, **changes)
    if updated is None:  # the dispatcher stored the chat before the turn; its absence is a real fault
        raise LookupError(f"chat {turn.chat.id} does not exist")
    return updated


# --- parsing ------------------------------------------------------------------------------------------------


def _parse_timezone(args: str, _options: ParseOptions) -> TimezoneCommand:
    if not args:
        return TimezoneCommand(timezone=None)
    if len(args.split()) != 1:
        raise CommandError("timezone", "Give one IANA timezone name, like Europe/Berlin or America/New_York.")
    try:
        # parse_schedule canonicalises and loads the zone; the default schedule is only a vehicle for that
        schedule = parse_schedule("", timezone=args, min_interval_seconds=0)
    except ScheduleError as problem:
        raise CommandError("timezone", told(problem)) from None
    return TimezoneCommand(timezone=schedule.timezone)


def _parse_language(args: str, _options: ParseOptions) -> LanguageCommand:
    if not args:
        return LanguageCommand(language=None)
    if len(args) > 35 or not _LANGUAGE_RE.fullmatch(args.replace("_", "-")):
        raise CommandError("language", f"Give a language code like en, de, zh or pt-BR, not {shown(args)}.")
    primary, *rest = args.replace("_", "-").split("-")
    subtags = [tag.upper() if len(tag) == 2 else tag.title() if len(tag) == 4 else tag.lower() for tag in rest]
    code = "-".join([primary.lower(), *subtags])
    if language_name(code) is None:
        raise CommandError("language", f"{shown(args)} is not a language code I know; try en, de, zh or pt-BR.")
    return LanguageCommand(language=code)


def _parse_profile(args: str, _options: ParseOptions) -> ProfileCommand:
    if len(args) > MAX_PROFILE_CHARS:
        raise CommandError("profile", f"Keep the profile under {MAX_PROFILE_CHARS} characters.")
    return ProfileCommand(profile=args or None)


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The per-chat settings family, in the order /help lists it."""


@ACTIONS.action(pattern="<IANA name>", example="/timezone Europe/Berlin", parse=_parse_timezone, instant=True)
async def timezone(services: Services, turn: Turn, command: TimezoneCommand) -> list[Reply]:
    """Set this chat's timezone for schedules.

    Show the chat's timezone, or set it (the parser already checked and canonicalised the name)."""
    now = services.clock()
    if command.timezone is None:
        zone = chat_zone(turn, services)
        return [
            Reply(
                text=f"This chat's timezone is {chat_timezone(turn, services)} (now {local_time(now, zone)}).\n"
                "Change it with `/timezone Europe/Berlin` (any IANA name)."
            )
        ]
    await _update(services, turn, timezone=command.timezone)
    zone = ZoneInfo(command.timezone)
    return [
        Reply(
            text=f"Timezone set to {command.timezone} (now {local_time(now, zone)}). New monitors and their "
            "times use it; monitors you already have keep the timezone they were created with."
        )
    ]


@ACTIONS.action(pattern="<code>", example="/language de", parse=_parse_language, instant=True)
async def language(services: Services, turn: Turn, command: LanguageCommand) -> list[Reply]:
    """Set the language of digests and answers."""
    if command.language is None:
        current = turn.chat.language
        if current is None:
            return [Reply(text="No language is set for this chat; set one with `/language de` (any language code).")]
        return [Reply(text=f"This chat's language is {current}; change it with `/language <code>`.")]
    await _update(services, turn, language=command.language)
    name = language_name(command.language) or command.language
    if services.models.light is None:  # nothing is written in it until a model is on: say what changes now
        return [
            Reply(
                text=f"Language set to {command.language}, {name}. {_NO_MODEL} digests list the items as they were "
                f"written and Lookout's own messages stay in English; once a model is on, digests and answers for "
                f"this chat will be written in {name}."
            )
        ]
    return [Reply(text=f"Language set to {command.language}, {name}: digests and answers for this chat will use it.")]


@ACTIONS.action(
    pattern="<text>",
    example="/profile We are a robotics startup; we care about open models and hardware",
    parse=_parse_profile,
    instant=True,
)
async def profile(services: Services, turn: Turn, command: ProfileCommand) -> list[Reply]:
    """Tell Lookout who you are and what you care about."""
    if command.profile is None:
        current = turn.chat.profile
        if not current:
            return [
                Reply(
                    text="This chat has no profile yet. Tell Lookout who you are and what you care about, e.g. "
                    "`/profile We are a robotics startup; we care about open models and hardware`."
                )
            ]
        quoted = "\n".join(f"> {line}" for line in current.splitlines())
        return [
            Reply(
                text=f"This chat's profile:\n{quoted}\nReplace it with `/profile <text>`, or remove it with "
                "`/profile clear`."
            )
        ]
    if command.profile.strip().strip(".!").casefold() in _CLEAR_PROFILE:
        if not turn.chat.profile:
            return [Reply(text="This chat has no profile, so there was nothing to clear.")]
        await _update(services, turn, profile=None)
        return [Reply(text="Profile cleared: digests and answers for this chat no longer take one into account.")]
    # NUL cannot be stored in PostgreSQL text; nobody means one in a profile
    await _update(services, turn, profile=command.profile.replace("\x00", ""))
    if services.models.light is None:  # only the model reads it (critique's relevance, the digest, answers)
        return [
            Reply(
                text=f"Profile saved. {_NO_MODEL} it changes nothing yet: items are scored and digests put "
                "together without reading it. Once a model is on, every digest and answer for this chat will take "
                "it into account."
            )
        ]
    return [Reply(text="Profile saved: every digest and answer for this chat will take it into account.")]


@ACTIONS.action(instant=True)
async def forget(services: Services, turn: Turn, _command: ForgetCommand) -> list[Reply]:
    """Clear this conversation's memory.

    This chat and thread only; its summary and open confirmation included."""
    if await services.chats.conversations.clear(turn.chat.id, turn.incoming.thread_key):
        return [Reply(text="Done: I forgot this conversation. Monitors and settings are unchanged.")]
    return [Reply(text="There was nothing to forget: this conversation has no memory yet.")]


@ACTIONS.action(instant=True)
async def usage(services: Services, turn: Turn, _command: UsageCommand) -> list[Reply]:
    """Tokens and cost today and this month.

    Today by kind of call, and what is left of today's budget.

    Usage is recorded per UTC day (chat answers, memory summaries, monitor runs, collections) and the daily budget
    counts UTC days, so "today" here is the UTC day too: a day in the chat's own timezone would mix two recorded
    days."""
    now = services.clock()
    today = now.astimezone(UTC).date()
    repository = services.chats.usage
    day_by_kind = await repository.by_kind(turn.chat.id, today, today)
    day = UsageTotals.total(day_by_kind.values())
    month = await repository.for_month(turn.chat.id, today.year, today.month)
    lines = [
        "**Model usage of this chat**",
        f"Today ({today.isoformat()}, UTC): {_totals(day)}",
    ]
    if day.tokens:
        kinds = sorted(day_by_kind.items(), key=lambda entry: -entry[1].tokens)
        lines.append(
            "By kind today: "
            + ", ".join(f"{USAGE_KIND_LABELS.get(kind, kind)} {totals.tokens:,}" for kind, totals in kinds)
        )
    lines.append(f"This month ({today:%B %Y}): {_totals(month)}")
    budget = ChatBudget(usage=services.chats.usage, daily_tokens=services.settings.chat_daily_tokens)
    left = budget.left(day.tokens)
    if left is None:
        lines.append("There is no daily token limit.")
    else:
        reset = local_time(datetime.combine(today + timedelta(days=1), time(), UTC), chat_zone(turn, services))
        lines.append(f"Left today: {max(left, 0):,} of {budget.daily_tokens:,} tokens (the budget renews {reset}).")
        if left <= 0:
            lines.append("Free-text answers wait until then; commands still work.")
    return [Reply(text="\n".join(lines))]
