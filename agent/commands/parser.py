"""Turn `/command args` text into typed commands, deterministically and without ever raising."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from babel import Locale, UnknownLocaleError

from agent.commands.specs import (
    COMMAND_SPECS,
    BriefingCommand,
    BrowseCommand,
    CollectCommand,
    Command,
    CommandError,
    DeliverCommand,
    DigestCommand,
    ExportCommand,
    ExportMonitorsCommand,
    ForgetCommand,
    HelpCommand,
    ImportCommand,
    LanguageCommand,
    MonitorsCommand,
    PauseCommand,
    ProfileCommand,
    QuietCommand,
    ResumeCommand,
    SearchCommand,
    ShareCommand,
    StartCommand,
    SubscribeCommand,
    TimezoneCommand,
    TrackCommand,
    TransferCommand,
    UnshareCommand,
    UnsubscribeCommand,
    UntrackCommand,
    UsageCommand,
)
from monitors import ScheduleError, parse_schedule
from sources import SOURCE_NAMES, SPEC_HELP, parse_platforms

__all__ = [
    "SLACK_PREFIX",
    "ParseOptions",
    "is_command",
    "is_instant_command",
    "language_name",
    "parse_command",
    "parse_command_words",
    "parse_prefixed",
]

logger = logging.getLogger(__name__)

SLACK_PREFIX = "lookout"
"""The word that starts a command where a slash is taken (`/lookout track …`, `lookout track …`)."""

MAX_QUERY_CHARS = 500
MAX_PROFILE_CHARS = 2000
MAX_TARGET = 100_000
MAX_EXPORT_DAYS = 3650
MAX_SCHEDULE_WORDS = 12
"""Schedules are short; longer tails of a /track are never tried (keeps parsing linear in practice)."""

_OPEN_QUOTES = '"\u201c\u201e\u00ab'
_CLOSE_QUOTES = '"\u201d\u201c\u00bb'
# Words that start a schedule phrase: a tail starting with one that fails to parse is reported, not
# swallowed into the topic ("daily at 25:00" is a mistake; "Daily Mail" is a topic).
_SCHEDULE_START = re.compile(r"(every|each|cron)\b.*|(daily|weekly|weekdays|hourly)( (at|on)\b.*)?|at [0-9].*")
_LANGUAGE_RE = re.compile(r"[a-z]{2,3}(-[a-z0-9]{2,8})*", re.IGNORECASE)
_COMMAND_NAME_RE = re.compile(r"[a-z0-9_]{1,32}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParseOptions:
    """What the parser needs from the chat and the settings."""

    timezone: str = "UTC"
    """The chat's timezone, for /track schedules without "in <zone>"."""
    min_interval_seconds: int = 900
    """MIN_MONITOR_INTERVAL: /track schedules more frequent than this are refused."""
    bot_username: str | None = None
    """The bot's username: `/cmd@OtherBot` in a group is not for us (parsed as not-a-command)."""


def is_command(text: str) -> bool:
    """Whether a message is a slash command (free text otherwise)."""
    return text.lstrip().startswith("/")


def _slash_head(text: str) -> tuple[str, str] | None:
    """`/name@Bot args` as ("name@Bot", "args"); None when the text is no slash command."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    # "/ track" is not /track: a command name follows the slash directly
    return _split_head(stripped[1:]) if stripped[1:2].strip() else ("", stripped[1:])


def parse_command(text: str, *, options: ParseOptions | None = None) -> Command | CommandError | None:
    """Parse `/name args` (also `/name@Bot args`). None when the text is not a command for this bot (free
    text, or a command addressed to another bot); a `CommandError` with the usage line when it is wrong."""
    opts = options or ParseOptions()
    split = _slash_head(text)
    if split is None:
        return None
    head, rest = split
    name, _, addressee = head.partition("@")
    if addressee and opts.bot_username and addressee.lower() != opts.bot_username.lstrip("@").lower():
        return None
    return _dispatch(name.lower(), rest, opts)


def is_instant_command(text: str) -> bool:
    """Whether `text` is a command answered at once (`CommandSpec.instant`): `/help`, `/monitors@bot`."""
    split = _slash_head(text)
    spec = COMMAND_SPECS.get(split[0].partition("@")[0].lower()) if split is not None else None
    return spec is not None and spec.instant


def parse_command_words(text: str, *, options: ParseOptions | None = None) -> Command | CommandError:
    """Parse a command whose first word is the name, without a slash (the text of Slack's `/lookout`).
    Empty text is /help."""
    head, rest = _split_head(text.strip().lstrip("/"))
    if not head:
        return HelpCommand()
    return _dispatch(head.partition("@")[0].lower(), rest, options or ParseOptions())


def parse_prefixed(
    text: str, *, prefix: str = SLACK_PREFIX, options: ParseOptions | None = None
) -> Command | CommandError | None:
    """Parse `lookout track …` (a message starting with the prefix word); None when it does not start so."""
    head, rest = _split_head(text.strip())
    if head.lower() != prefix.lower():
        return None
    return parse_command_words(rest, options=options)


def _split_head(text: str) -> tuple[str, str]:
    """The first word and the rest."""
    parts = text.split(maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else ((parts[0], "") if parts else ("", ""))


def _dispatch(name: str, rest: str, options: ParseOptions) -> Command | CommandError:
    parser = _PARSERS.get(name)
    if parser is None:
        known = ", ".join(f"/{n}" for n in COMMAND_SPECS)
        if not name:
            return CommandError(None, f"Put the command right after the slash. Commands: {known}.")
        shown = name if _COMMAND_NAME_RE.fullmatch(name) else name[:32].encode("unicode_escape").decode()
        return CommandError(None, f"I don't know the command /{shown}. Commands: {known}.")
    try:
        return parser(" ".join(rest.split()), options)
    except CommandError as problem:
        return problem
    except Exception:  # a parser bug must not take the chat down; the log shows it, the person gets the usage
        logger.exception("command parser failed on /%s", name)
        return CommandError(name, "I could not read those arguments.")


# --- one parser per command; each gets the whitespace-normalised argument text -----------------------------


def _no_arguments(name: str, command: Command) -> Callable[[str, ParseOptions], Command]:
    def parse(args: str, _options: ParseOptions) -> Command:
        if args:
            raise CommandError(name, f"/{name} takes no arguments.")
        return command

    return parse


def _parse_start(_args: str, _options: ParseOptions) -> Command:
    return StartCommand()  # Telegram deep links send `/start <payload>`; the payload means nothing to us


def _parse_help(args: str, _options: ParseOptions) -> Command:
    if not args:
        return HelpCommand()
    wanted = args.lstrip("/").split()[0].lower()
    if wanted not in COMMAND_SPECS:
        raise CommandError("help", f"There is no command /{wanted[:32]}.")
    return HelpCommand(command=wanted)


def _parse_monitors(args: str, _options: ParseOptions) -> Command:
    if args.lower() not in ("", "all"):
        raise CommandError("monitors", "/monitors takes no arguments (admins may add `all`).")
    return MonitorsCommand(all_chats=args.lower() == "all")


def _monitor_id(name: str, text: str) -> int:
    cleaned = text.removeprefix("#")
    if not cleaned.isascii() or not cleaned.isdigit() or len(cleaned) > 12 or int(cleaned) < 1:
        raise CommandError(name, f"Give the monitor's number (see /monitors), not {_shown(text)}.")
    return int(cleaned)


def _with_monitor_id(name: str, build: Callable[[int], Command]) -> Callable[[str, ParseOptions], Command]:
    def parse(args: str, _options: ParseOptions) -> Command:
        words = args.split()
        if len(words) != 1:
            raise CommandError(name, f"/{name} needs exactly one monitor number (see /monitors).")
        return build(_monitor_id(name, words[0]))

    return parse


def _positive(name: str, text: str, *, upper: int, what: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= upper:
        raise CommandError(name, f"{what} must be a whole number from 1 to {upper}, not {_shown(text)}.")
    return int(text)


def _parse_search(args: str, _options: ParseOptions) -> Command:
    if not args:
        raise CommandError("search", "Say what to search for.")
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("search", f"Keep the query under {MAX_QUERY_CHARS} characters.")
    return SearchCommand(query=args)


_TARGET = re.compile(r"(?P<request>.*?) ?\btarget ?[=:]? ?(?P<count>[0-9][0-9,_]*)", re.IGNORECASE)


def _split_target(args: str) -> tuple[str, int | None]:
    # only "target <number>" at the very end is the option: "ads that target teens" is a request
    match = _TARGET.fullmatch(args)
    if match is None:
        return args, None
    count = match["count"].replace(",", "").replace("_", "")
    return match["request"].strip(), _positive("collect", count, upper=MAX_TARGET, what="The target")


def _parse_collect(args: str, _options: ParseOptions) -> Command:
    # `target N` and `from <sources>` may come in either order at the end
    args, target = _split_target(args)
    tokens, sources = _split_sources(_tokens(args), command="collect")
    args = _phrase(tokens)
    if target is None:
        args, target = _split_target(args)
    if not args:
        raise CommandError("collect", "Say what to collect.")
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("collect", f"Keep the request under {MAX_QUERY_CHARS} characters.")
    return CollectCommand(request=args, target=target, sources=sources)


def _parse_export(args: str, _options: ParseOptions) -> Command:
    words = args.split()
    if [word.lower() for word in words] == ["monitors"]:
        return ExportMonitorsCommand()
    if not 1 <= len(words) <= 2:
        raise CommandError(
            "export", "/export needs a monitor number (and, optionally, a number of days), or `monitors`."
        )
    days = None
    if len(words) == 2:
        days = _positive("export", words[1].removesuffix("d"), upper=MAX_EXPORT_DAYS, what="The number of days")
    return ExportCommand(monitor_id=_monitor_id("export", words[0]), days=days)


def _parse_browse(args: str, _options: ParseOptions) -> Command:
    if len(args) > MAX_QUERY_CHARS:
        raise CommandError("browse", f"Keep the words under {MAX_QUERY_CHARS} characters.")
    return BrowseCommand(words=args)


def _parse_transfer(args: str, _options: ParseOptions) -> Command:
    first, _, rest = args.partition(" ")
    if not first:
        raise CommandError("transfer", "Give the monitor's number, and the chat to hand it to.")
    target = rest.strip().strip(_OPEN_QUOTES + _CLOSE_QUOTES).strip()
    if len(target) > 256:
        raise CommandError("transfer", "That chat name is too long.")
    return TransferCommand(monitor_id=_monitor_id("transfer", first), to_chat=target or None)


def _parse_briefing(args: str, options: ParseOptions) -> Command:
    if not args:
        return BriefingCommand()
    if args.lower() in ("off", "stop", "none", "cancel"):
        return BriefingCommand(off=True)
    try:
        schedule = parse_schedule(args, timezone=options.timezone, min_interval_seconds=options.min_interval_seconds)
    except ScheduleError as problem:
        raise CommandError("briefing", str(problem)) from None
    return BriefingCommand(schedule=schedule)


_DELIVERY_MODES = {"now": "now", "immediately": "now", "each": "now", "briefing": "briefing", "digest": "briefing"}


def _parse_deliver(args: str, _options: ParseOptions) -> Command:
    words = args.split()
    if len(words) != 2 or words[1].lower() not in _DELIVERY_MODES:
        raise CommandError("deliver", "Give the monitor's number and `now` or `briefing`, like /deliver 3 now.")
    return DeliverCommand(monitor_id=_monitor_id("deliver", words[0]), mode=_DELIVERY_MODES[words[1].lower()])


def _parse_import(args: str, _options: ParseOptions) -> Command:
    path = args.strip().strip(_OPEN_QUOTES + _CLOSE_QUOTES).strip()
    if len(path) > 4096:
        raise CommandError("import", "That path is too long.")
    return ImportCommand(path=path or None)


def _parse_timezone(args: str, _options: ParseOptions) -> Command:
    if not args:
        return TimezoneCommand(timezone=None)
    if len(args.split()) != 1:
        raise CommandError("timezone", "Give one IANA timezone name, like Europe/Berlin or America/New_York.")
    try:
        # parse_schedule canonicalises and loads the zone; the default schedule is only a vehicle for that
        schedule = parse_schedule("", timezone=args, min_interval_seconds=0)
    except ScheduleError as problem:
        raise CommandError("timezone", str(problem)) from None
    return TimezoneCommand(timezone=schedule.timezone)


def _parse_language(args: str, _options: ParseOptions) -> Command:
    if not args:
        return LanguageCommand(language=None)
    if len(args) > 35 or not _LANGUAGE_RE.fullmatch(args.replace("_", "-")):
        raise CommandError("language", f"Give a language code like en, de, zh or pt-BR, not {_shown(args)}.")
    primary, *rest = args.replace("_", "-").split("-")
    subtags = [tag.upper() if len(tag) == 2 else tag.title() if len(tag) == 4 else tag.lower() for tag in rest]
    code = "-".join([primary.lower(), *subtags])
    if language_name(code) is None:
        raise CommandError("language", f"{_shown(args)} is not a language code I know; try en, de, zh or pt-BR.")
    return LanguageCommand(language=code)


def language_name(code: str) -> str | None:
    """The English name of a language tag (`de` → German, `pt-BR` → Portuguese (Brazil)), or None when it is not
    a real language. Checked against the Unicode CLDR locale data that Babel ships, so only languages people
    write in pass (`xx`, `tlh` and made-up regions do not)."""
    try:
        locale = Locale.parse(code, sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    name = locale.get_display_name("en")
    return name if isinstance(name, str) and name else None


def _parse_quiet(args: str, _options: ParseOptions) -> Command:
    words = args.split()
    if not 1 <= len(words) <= 2:
        raise CommandError("quiet", "/quiet needs a monitor number and on or off, like /quiet 3 off.")
    monitor_id = _monitor_id("quiet", words[0])
    if len(words) == 1:
        return QuietCommand(monitor_id=monitor_id, quiet=None)
    setting = words[1].lower()
    if setting not in _SWITCH:
        raise CommandError("quiet", f"Say on or off after the monitor number, not {_shown(words[1])}.")
    return QuietCommand(monitor_id=monitor_id, quiet=_SWITCH[setting])


_SWITCH = {"on": True, "yes": True, "true": True, "off": False, "no": False, "false": False}


def _parse_profile(args: str, _options: ParseOptions) -> Command:
    if len(args) > MAX_PROFILE_CHARS:
        raise CommandError("profile", f"Keep the profile under {MAX_PROFILE_CHARS} characters.")
    return ProfileCommand(profile=args or None)


# --- /track ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    quoted: bool

    def render(self) -> str:
        return f'"{self.text}"' if self.quoted else self.text


def _tokens(text: str) -> list[_Token]:
    """Words, with a double-quoted run (straight, curly or guillemets) kept as one token; an unclosed quote
    runs to the end."""
    tokens: list[_Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif char in _OPEN_QUOTES:
            end = next((i for i in range(index + 1, len(text)) if text[i] in _CLOSE_QUOTES), len(text))
            tokens.append(_Token(" ".join(text[index + 1 : end].split()), quoted=True))
            index = end + 1
        else:
            end = next((i for i in range(index, len(text)) if text[i].isspace() or text[i] in _OPEN_QUOTES), len(text))
            tokens.append(_Token(text[index:end], quoted=False))
            index = end
    return [token for token in tokens if token.text or token.quoted]


def _source_specs(words: list[str]) -> tuple[list[str], list[str]]:
    """`(valid specs, rejected parts)` of a `from …` tail: names, `rss:<url>` and `rsshub:<platforms>`."""
    parts: list[str] = []
    for word in words:
        for chunk in filter(None, word.split(",")):
            # a feed URL may contain commas: a chunk after an rss: URL that is not a spec itself belongs to it
            if parts and parts[-1].lower().startswith("rss:") and not _looks_like_spec(chunk):
                parts[-1] += "," + chunk
            else:
                parts.append(chunk)
    specs: list[str] = []
    rejected: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        prefix, colon, argument = part.partition(":")
        lowered = prefix.lower()
        if not colon and lowered in SOURCE_NAMES:
            spec = lowered
        elif colon and lowered == "rss" and _is_feed_url(argument):
            spec = f"rss:{argument}"
        elif colon and lowered == "rsshub" and _platforms_ok(argument):
            spec = f"rsshub:{argument.lower()}"
        else:
            rejected.append(part)
            continue
        if spec not in specs:
            specs.append(spec)
    return specs, rejected


def _looks_like_spec(chunk: str) -> bool:
    lowered = chunk.strip().lower()
    return lowered in SOURCE_NAMES or lowered.startswith(("rss:", "rsshub:"))


def _is_feed_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False


def _platforms_ok(argument: str) -> bool:
    try:
        parse_platforms(argument)
    except ValueError:
        return False
    return True


def _split_sources(tokens: list[_Token], *, command: str = "track") -> tuple[list[_Token], tuple[str, ...]]:
    """Cut `from <sources>` off the end. A `from` whose tail names no source at all belongs to the topic
    ("news from Ukraine"); a tail that names some sources but not others is an error, and so is a `from` with
    nothing after it."""
    if tokens and not tokens[-1].quoted and tokens[-1].text.lower() == "from":
        raise CommandError(
            command,
            "Name the sources after “from”, like from hn,news or from rss:<feed url>; or leave “from” out for the "
            "default mix.",
        )
    for index in range(len(tokens) - 2, -1, -1):
        token = tokens[index]
        if token.quoted or token.text.lower() != "from":
            continue
        tail = [t.text for t in tokens[index + 1 :]]
        specs, rejected = _source_specs(tail)
        if specs and not rejected:
            if index == 0:
                example = f"/{command} DeepSeek from hn"
                raise CommandError(command, f"Say what to {command} before the sources, like {example}.")
            return tokens[:index], tuple(specs)
        if specs or any("," in word or ":" in word for word in tail):
            names = ", ".join(_shown(part) for part in rejected)
            raise CommandError(command, f"Unknown source(s) {names}. Use {SPEC_HELP}.")
    return tokens, ()


def _parse_track(args: str, options: ParseOptions) -> Command:
    tokens, sources = _split_sources(_tokens(args))
    if not tokens:
        raise CommandError("track", "Say what to track, like /track DeepSeek.")
    split = _schedule_start(tokens, options.timezone)
    if tokens[0].quoted and split > 1:
        raise CommandError("track", f"After the quoted topic I expected a schedule, not {_shown(tokens[1].text)}.")
    topic = " ".join(" ".join(token.text for token in tokens[:split]).split())
    if not topic:
        raise CommandError("track", "Say what to track, like /track DeepSeek.")
    phrase = _phrase(tokens[split:])
    try:
        # the minimum interval is checked only now, so "every 5 minutes" is reported as too frequent
        # instead of silently becoming part of the topic
        schedule = parse_schedule(phrase, timezone=options.timezone, min_interval_seconds=options.min_interval_seconds)
    except ScheduleError as problem:
        raise CommandError("track", str(problem)) from None
    return TrackCommand(topic=topic, schedule_text=phrase, schedule=schedule, sources=sources)


def _phrase(tokens: list[_Token]) -> str:
    return " ".join(token.render() for token in tokens)


def _is_schedule(phrase: str, timezone: str) -> ScheduleError | None:
    """None when the phrase is a schedule (at any frequency), else why not."""
    try:
        parse_schedule(phrase, timezone=timezone, min_interval_seconds=0)
    except ScheduleError as problem:
        return problem
    return None


def _schedule_start(tokens: list[_Token], timezone: str) -> int:
    """Where the schedule starts: the longest tail (after at least one topic word) that parses; the end when
    none does. A failing tail that starts like a schedule is an error worth telling, not part of the topic."""
    candidates = range(max(1, len(tokens) - MAX_SCHEDULE_WORDS), len(tokens))
    for first in candidates:
        if _is_schedule(_phrase(tokens[first:]), timezone) is None:
            return first
    for first in candidates:
        phrase = _phrase(tokens[first:])
        if not tokens[first].quoted and _SCHEDULE_START.fullmatch(phrase.lower()):
            problem = _is_schedule(phrase, timezone)
            raise CommandError("track", str(problem))
    return len(tokens)


def _shown(text: str) -> str:
    """User text quoted for an error message, shortened."""
    return f'"{text[:40]}…"' if len(text) > 40 else f'"{text}"'


_PARSERS: dict[str, Callable[[str, ParseOptions], Command]] = {
    "start": _parse_start,
    "help": _parse_help,
    "track": _parse_track,
    "monitors": _parse_monitors,
    "untrack": _with_monitor_id("untrack", lambda i: UntrackCommand(monitor_id=i)),
    "pause": _with_monitor_id("pause", lambda i: PauseCommand(monitor_id=i)),
    "resume": _with_monitor_id("resume", lambda i: ResumeCommand(monitor_id=i)),
    "digest": _with_monitor_id("digest", lambda i: DigestCommand(monitor_id=i)),
    "search": _parse_search,
    "collect": _parse_collect,
    "export": _parse_export,
    "share": _with_monitor_id("share", lambda i: ShareCommand(monitor_id=i)),
    "unshare": _with_monitor_id("unshare", lambda i: UnshareCommand(monitor_id=i)),
    "browse": _parse_browse,
    "subscribe": _with_monitor_id("subscribe", lambda i: SubscribeCommand(monitor_id=i)),
    "unsubscribe": _with_monitor_id("unsubscribe", lambda i: UnsubscribeCommand(monitor_id=i)),
    "transfer": _parse_transfer,
    "briefing": _parse_briefing,
    "deliver": _parse_deliver,
    "import": _parse_import,
    "timezone": _parse_timezone,
    "language": _parse_language,
    "quiet": _parse_quiet,
    "profile": _parse_profile,
    "forget": _no_arguments("forget", ForgetCommand()),
    "usage": _no_arguments("usage", UsageCommand()),
}
