"""The reader's rules on a monitor it receives: `/filter <id> …` shows, adds and clears this chat's own rules
(words, RE2 patterns, outlets, a cap, a minimum relevance), which apply to this chat's copy of each digest only."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from agent.commands.action import Family, MonitorArguments, Proposal, ToolRefusal, ToolUse
from agent.commands.common import refuse
from agent.commands.grammar import CLOSE_QUOTES, OPEN_QUOTES, CommandError, ParseOptions, monitor_id, shown
from agent.context import Services, Turn
from kernel import Reply
from monitors import MonitorNotFoundError, MonitorView, monitor_name
from research import RULE_KINDS, ReaderRules, RuleError, RuleKind, escape_markdown

__all__ = ["ACTIONS", "FILTER_HELP", "FilterCommand", "filter_rules"]

FILTER_HELP = """Your own rules on a monitor you own or receive; they change only the digests this chat gets (the \
monitor still collects once for everyone):
- `/filter 3` — show them
- `/filter 3 include ai, chips` — keep only stories mentioning one of these (CJK words match inside text)
- `/filter 3 exclude celebrity, rumour` — leave out stories mentioning any of these
- `/filter 3 regex \\bGPT-?5\\b` — keep only stories matching a pattern (RE2 syntax, case-insensitive; the rest of \
the line is the pattern)
- `/filter 3 exclude-regex (?:sponsored|advert)` — leave out stories matching a pattern
- `/filter 3 allow example.com, hn` — count only reports from these outlets (sites or sources)
- `/filter 3 block example.com` — never count reports from these outlets
- `/filter 3 max 5` — at most 5 stories per digest (`max off` removes the cap)
- `/filter 3 min-relevance 0.4` — leave out stories the run scored below 0.4 (0 to 1; `off` removes it)
- `/filter 3 clear exclude celebrity` — remove one rule; `/filter 3 clear exclude` every rule of a kind; \
`/filter 3 clear` all of them
Words and outlets are separated by commas; a word rule matches whole words ("ai" does not match "said")."""
"""The grammar in full: `/help filter` shows it."""


class FilterCommand(MonitorArguments):
    """`/filter <id> [<kind> <values>|clear [<kind> [<values>]]]`."""

    name: ClassVar[str] = "filter"
    kind: RuleKind | None = Field(default=None, description="The kind of rule; none: show the rules.")
    values: tuple[str, ...] = Field(
        default=(),
        description="Words, outlets (sites or sources) or one RE2 pattern; for max a number of stories, for "
        "min-relevance a number 0-1, or 'off'.",
    )
    clear: bool = Field(default=False, description="Remove the values given (all of the kind, or every rule).")


def _shown(view: MonitorView, rules: ReaderRules, *, changed: bool = False) -> str:
    name = monitor_name(view.id, view.topic)
    if rules.empty:
        state = "cleared: this chat gets its whole digest" if changed else "none: this chat gets its whole digest"
        return (
            f"Your rules on monitor {name}: {state}. `/help filter` shows how to set some, e.g. "
            f"`/filter {view.id} exclude celebrity`."
        )
    lines = "\n".join(f"- {escape_markdown(part)}" for part in rules.parts())
    head = "now" if changed else "are"
    return (
        f"Your rules on monitor {name} {head}:\n{lines}\n\n"
        f"They change only the digests this chat gets. `/filter {view.id} clear` removes them."
    )


# --- parsing ------------------------------------------------------------------------------------------------


def _unquoted(text: str) -> str:
    """A value without one pair of surrounding quotes (straight, curly, guillemets) or slashes (`/GPT-5/`)."""
    if len(text) >= 2 and ((text[0] in OPEN_QUOTES and text[-1] in CLOSE_QUOTES) or text[0] == text[-1] == "/"):
        return text[1:-1]
    return text


def _listed(text: str) -> tuple[str, ...]:
    """Comma-separated values, each without surrounding quotes; empty ones dropped."""
    return tuple(value for part in text.split(",") if (value := _unquoted(part.strip()).strip()))


def _parse_filter(args: str, _options: ParseOptions) -> FilterCommand:
    words = args.split(maxsplit=2)
    if not words:
        raise CommandError("filter", "/filter needs a monitor number (see /monitors), like /filter 3.")
    monitor = monitor_id("filter", words[0])
    if len(words) == 1:
        return FilterCommand(monitor_id=monitor)
    head = words[1].lower()
    rest = words[2] if len(words) > 2 else ""
    if head in ("clear", "remove", "reset"):
        tail = rest.split(maxsplit=1)
        if not tail:
            return FilterCommand(monitor_id=monitor, clear=True)
        kind = _kind(tail[0])
        return FilterCommand(monitor_id=monitor, kind=kind, values=_values(kind, tail[1] if len(tail) > 1 else ""),
                             clear=True)  # fmt: skip
    kind = _kind(head)
    values = _values(kind, rest)
    if not values:
        raise CommandError("filter", f"Say what to {kind} after `{kind}`, like {_EXAMPLES[kind]}.")
    return FilterCommand(monitor_id=monitor, kind=kind, values=values)


_ALIASES: dict[str, RuleKind] = {
    "exclude_regex": "exclude-regex",
    "excluderegex": "exclude-regex",
    "min_relevance": "min-relevance",
    "minrelevance": "min-relevance",
    "relevance": "min-relevance",
    "include-regex": "regex",
}

_EXAMPLES: dict[RuleKind, str] = {
    "include": "/filter 3 include ai, chips",
    "exclude": "/filter 3 exclude celebrity",
    "regex": "/filter 3 regex \\bGPT-?5\\b",
    "exclude-regex": "/filter 3 exclude-regex sponsored|advert",
    "allow": "/filter 3 allow example.com",
    "block": "/filter 3 block example.com",
    "max": "/filter 3 max 5",
    "min-relevance": "/filter 3 min-relevance 0.4",
}


def _kind(word: str) -> RuleKind:
    lowered = word.lower()
    for kind in RULE_KINDS:
        if lowered == kind:
            return kind
    if lowered in _ALIASES:
        return _ALIASES[lowered]
    kinds = ", ".join(RULE_KINDS)
    raise CommandError("filter", f"{shown(word)} is no kind of rule; say one of {kinds}, or clear.")


def _values(kind: RuleKind, text: str) -> tuple[str, ...]:
    if kind in ("regex", "exclude-regex"):
        pattern = _unquoted(text.strip())
        return (pattern,) if pattern else ()
    if kind in ("max", "min-relevance"):
        return (text.strip(),) if text.strip() else ()
    return _listed(text)


# --- the chat tool ------------------------------------------------------------------------------------------


async def _propose_filter(services: Services, turn: Turn, command: FilterCommand) -> Proposal | str:
    try:
        view, rules = await services.monitors.rules.of(command.monitor_id, chat_id=turn.chat.id)
    except MonitorNotFoundError as error:
        raise ToolRefusal(str(error)) from None
    if command.kind is None and not command.clear:
        return "Rules now: " + (rules.summary() or "none")
    try:
        if command.clear:
            changed = ReaderRules() if command.kind is None else rules.removed(command.kind, command.values)
        elif command.kind is not None and command.values:
            changed = rules.added(command.kind, command.values)
        else:
            raise ToolRefusal("Give the kind of rule and its values (words, outlets, a pattern, a number).")
    except RuleError as error:
        raise ToolRefusal(str(error)) from None
    what = changed.summary() or "none (the whole digest)"
    return Proposal(
        description=f"set this chat's rules on monitor {monitor_name(view.id, view.topic)} to: {escape_markdown(what)}"
    )


# --- the definitions ----------------------------------------------------------------------------------------

ACTIONS = Family()
"""The reader's rules family."""


@ACTIONS.action(
    pattern="<id> [include|exclude|regex|exclude-regex|allow|block|max|min-relevance|clear] [values]",
    example="/filter 3 exclude celebrity",
    details=FILTER_HELP,
    parse=_parse_filter,
    instant=True,
    tool=ToolUse(
        name="filter_monitor",
        description="Propose this chat's own rules on a monitor's digests (kind + values; clear removes); the "
        "person must confirm.",
        propose=_propose_filter,
    ),
)
async def filter_rules(services: Services, turn: Turn, command: FilterCommand) -> list[Reply]:
    """Your own rules on a monitor's digests here: words, patterns, outlets, a cap, a minimum relevance.

    Show or change this chat's own rules on one monitor it owns or receives."""
    try:
        if command.kind is None and not command.clear:
            view, rules = await services.monitors.rules.of(command.monitor_id, chat_id=turn.chat.id)
            return [Reply(text=_shown(view, rules))]
        view, rules = await services.monitors.rules.change(
            command.monitor_id, chat_id=turn.chat.id, kind=command.kind, values=command.values, clear=command.clear
        )
    except MonitorNotFoundError as error:
        return refuse(str(error))
    except RuleError as error:
        return refuse(f"{escape_markdown(str(error))} Your rules are unchanged.", usage="filter")
    return [Reply(text=_shown(view, rules, changed=True))]
