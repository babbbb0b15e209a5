"""The grammar every command's parser shares: options, the error that carries a usage line, the command head,
monitor numbers, counts, quoted words, `from <sources>` tails and schedule phrases. Never raises anything but
`CommandError`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from babel import Locale, UnknownLocaleError

from monitors import ScheduleError, parse_schedule
from research import escape_markdown
from sources import SOURCE_NAMES, SPEC_HELP, parse_platforms

__all__ = [
    "CLOSE_QUOTES",
    "MAX_QUERY_CHARS",
    "OPEN_QUOTES",
    "SCHEDULE_HELP",
    "SLACK_PREFIX",
    "CommandError",
    "ParseOptions",
    "Token",
    "is_command",
    "language_name",
    "monitor_id",
    "phrase_of",
    "positive",
    "schedule_start",
    "shown",
    "slash_head",
    "split_head",
    "split_sources",
    "tokenize",
    "told",
    "visible",
]


class CommandError(Exception):
    """A command Lookout does not know, or wrong arguments; carries the usage line to show the person."""

    def __init__(self, command: str | None, reason: str) -> None:
        self.command = command
        """The command's name (None when unknown)."""
        self.reason = reason
        """What was wrong, in a sentence for the person."""
        super().__init__(reason)

    @property
    def usage(self) -> str:
        """The command's usage line (/help's for an unknown command)."""
        # imported here: the catalogue is built from the actions, whose parsers raise this error
        from agent.commands.catalogue import usage_of

        return usage_of(self.command or "help")

    @property
    def text(self) -> str:
        """The whole answer: the reason, then the usage line."""
        return f"{self.reason}\nUsage: {self.usage}"

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CommandError) and (self.command, self.reason) == (other.command, other.reason)

    def __hash__(self) -> int:
        return hash((self.command, self.reason))


SLACK_PREFIX = "lookout"
"""The word that starts a command where a slash is taken (`/lookout track …`, `lookout track …`)."""

MAX_QUERY_CHARS = 500
MAX_SCHEDULE_WORDS = 12
"""Schedules are short; longer tails of a /track are never tried (keeps parsing linear in practice)."""

SCHEDULE_HELP = (
    'Schedules look like "daily at 08:00", "every 6 hours", "hourly", "weekdays at 09:00", '
    '"weekly on monday at 10:00", "every 2 days at 07:30" or \'cron "0 8 * * 1-5"\'.'
)
"""The schedule grammar in one sentence, for a model that wrote a schedule the grammar does not read."""

OPEN_QUOTES = '"\u201c\u201e\u00ab'
CLOSE_QUOTES = '"\u201d\u201c\u00bb'
# Words that start a schedule phrase: a tail starting with one that fails to parse is reported, not
# swallowed into the topic ("daily at 25:00" is a mistake; "Daily Mail" is a topic).
_SCHEDULE_START = re.compile(r"(every|each|cron)\b.*|(daily|weekly|weekdays|hourly)( (at|on)\b.*)?|at [0-9].*")


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


_INVISIBLE = "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
"""Unicode's format characters (zero-width spaces and joiners, direction marks, the BOM, the soft hyphen): text copied
from a page or typed on a right-to-left keyboard carries them, unseen, around words."""
_INVISIBLE_AT_EDGES = re.compile(rf"(?:^|(?<=\s))[{_INVISIBLE}]+|[{_INVISIBLE}]+(?=\s|$)")


def visible(text: str) -> str:
    """`text` without the invisible format characters at the edges of its words (`\u200b/pause 1\u200e` →
    `/pause 1`); those inside a word (an emoji's joiner, a Persian non-joiner) stay."""
    return _INVISIBLE_AT_EDGES.sub("", text)


def slash_head(text: str) -> tuple[str, str] | None:
    """`/name@Bot args` as ("name@Bot", "args"); None when the text is no slash command. Invisible characters around
    words are not part of them (`visible`)."""
    stripped = visible(text).strip()
    if not stripped.startswith("/"):
        return None
    # "/ track" is not /track: a command name follows the slash directly
    return split_head(stripped[1:]) if stripped[1:2].strip() else ("", stripped[1:])


def split_head(text: str) -> tuple[str, str]:
    """The first word and the rest."""
    parts = text.split(maxsplit=1)
    return (parts[0], parts[1]) if len(parts) == 2 else ((parts[0], "") if parts else ("", ""))


def monitor_id(name: str, text: str) -> int:
    cleaned = text.removeprefix("#")
    if not cleaned.isascii() or not cleaned.isdigit() or len(cleaned) > 12 or int(cleaned) < 1:
        raise CommandError(name, f"Give the monitor's number (see /monitors), not {shown(text)}.")
    return int(cleaned)


def positive(name: str, text: str, *, upper: int, what: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= upper:
        raise CommandError(name, f"{what} must be a whole number from 1 to {upper}, not {shown(text)}.")
    return int(text)


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


# --- /track ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    quoted: bool

    def render(self) -> str:
        return f'"{self.text}"' if self.quoted else self.text


def tokenize(text: str) -> list[Token]:
    """Words, with a double-quoted run (straight, curly or guillemets) kept as one token; an unclosed quote
    runs to the end."""
    tokens: list[Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif char in OPEN_QUOTES:
            end = next((i for i in range(index + 1, len(text)) if text[i] in CLOSE_QUOTES), len(text))
            tokens.append(Token(" ".join(text[index + 1 : end].split()), quoted=True))
            index = end + 1
        else:
            end = next((i for i in range(index, len(text)) if text[i].isspace() or text[i] in OPEN_QUOTES), len(text))
            tokens.append(Token(text[index:end], quoted=False))
            index = end
    return [token for token in tokens if token.text or token.quoted]


def source_specs(words: list[str]) -> tuple[list[str], list[str]]:
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


def split_sources(tokens: list[Token], *, command: str = "track") -> tuple[list[Token], tuple[str, ...]]:
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
        specs, rejected = source_specs(tail)
        if specs and not rejected:
            if index == 0:
                example = f"/{command} DeepSeek from hn"
                raise CommandError(command, f"Say what to {command} before the sources, like {example}.")
            return tokens[:index], tuple(specs)
        if specs or any("," in word or ":" in word for word in tail):
            names = ", ".join(shown(part) for part in rejected)
            feeds = [part for part in rejected if part.lower().startswith("rss:")]
            if feeds and len(feeds) == len(rejected):
                raise CommandError(
                    command, f"{names}: rss: needs an http(s) feed URL, like rss:https://example.org/feed.xml."
                )
            raise CommandError(command, f"Unknown source(s) {names}. Use {SPEC_HELP}.")
    return tokens, ()


def phrase_of(tokens: list[Token]) -> str:
    return " ".join(token.render() for token in tokens)


def is_schedule(phrase: str, timezone: str) -> ScheduleError | None:
    """None when the phrase is a schedule (at any frequency), else why not."""
    try:
        parse_schedule(phrase, timezone=timezone, min_interval_seconds=0)
    except ScheduleError as problem:
        return problem
    return None


def schedule_start(tokens: list[Token], timezone: str) -> int:
    """Where the schedule starts: the longest tail (after at least one topic word) that parses; the end when
    none does. A failing tail that starts like a schedule is an error worth telling, not part of the topic."""
    candidates = range(max(1, len(tokens) - MAX_SCHEDULE_WORDS), len(tokens))
    for first in candidates:
        if is_schedule(phrase_of(tokens[first:]), timezone) is None:
            return first
    for first in candidates:
        phrase = phrase_of(tokens[first:])
        if not tokens[first].quoted and _SCHEDULE_START.fullmatch(phrase.lower()):
            problem = is_schedule(phrase, timezone)
            assert problem is not None  # the loop above returned at every tail that parses
            raise CommandError("track", told(problem))
    return len(tokens)


def told(problem: ScheduleError) -> str:
    """A schedule's error for a chat: its plain text (quoting what was typed, a cron example's `*`) shown as
    written, not read as markdown."""
    return escape_markdown(str(problem))


def shown(text: str) -> str:
    """User text quoted for an error message, shortened, and shown as typed: its markdown is not rendered (or
    `[your account](https://phish.example)` would become a link the bot posts under a label anyone chooses)."""
    return f'"{escape_markdown(text[:40])}…"' if len(text) > 40 else f'"{escape_markdown(text)}"'
