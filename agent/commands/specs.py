"""The chat commands: one table of names and usage lines (for /help, errors and setMyCommands) and their typed forms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from monitors import Schedule

__all__ = [
    "COMMAND_SPECS",
    "BriefingCommand",
    "BrowseCommand",
    "CollectCommand",
    "Command",
    "CommandError",
    "CommandSpec",
    "DeliverCommand",
    "DigestCommand",
    "ExportCommand",
    "ExportMonitorsCommand",
    "ForgetCommand",
    "HelpCommand",
    "ImportCommand",
    "LanguageCommand",
    "MonitorsCommand",
    "PauseCommand",
    "ProfileCommand",
    "QuietCommand",
    "ResumeCommand",
    "SearchCommand",
    "ShareCommand",
    "StartCommand",
    "SubscribeCommand",
    "TimezoneCommand",
    "TrackCommand",
    "TransferCommand",
    "UnshareCommand",
    "UnsubscribeCommand",
    "UntrackCommand",
    "UsageCommand",
    "bot_commands",
    "help_text",
    "usage_of",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """One command as people see it: the name, its arguments, what it does and an example."""

    name: str
    """Lowercase, no slash (Telegram allows 1-32 of a-z, 0-9 and _)."""
    arguments: str
    """The argument pattern, "" when it takes none."""
    description: str
    """One line, under 256 characters (Telegram's setMyCommands limit)."""
    example: str | None = None
    """A full example, slash included."""
    instant: bool = False
    """Answered at once from what is stored (no collection, no model, no file): the chat shows no "typing…" for
    it, since the answer comes before the indicator would (and the call would only add to the bot's flood limit)."""

    @property
    def usage(self) -> str:
        """The usage line: `/track <topic> [schedule] [from <sources>]`."""
        return f"/{self.name} {self.arguments}".rstrip()


_SPECS = (
    CommandSpec(name="start", arguments="", description="What Lookout does, with examples", instant=True),
    CommandSpec(
        name="help",
        arguments="[command]",
        description="Commands and how to use them",
        example="/help track",
        instant=True,
    ),
    CommandSpec(
        name="track",
        arguments="<topic> [schedule] [from <sources>]",
        description="Watch a topic and get a cited digest on a schedule",
        example="/track DeepSeek daily at 08:30 from hn,news,arxiv",
    ),
    CommandSpec(
        name="monitors", arguments="", description="This chat's monitors: schedule, next run, last result", instant=True
    ),
    CommandSpec(
        name="untrack",
        arguments="<id>",
        description="Delete a monitor of this chat",
        example="/untrack 3",
        instant=True,
    ),
    CommandSpec(name="pause", arguments="<id>", description="Pause a monitor", example="/pause 3", instant=True),
    CommandSpec(
        name="resume", arguments="<id>", description="Resume a paused monitor", example="/resume 3", instant=True
    ),
    CommandSpec(
        name="digest", arguments="<id>", description="Run a monitor now and send its digest here", example="/digest 3"
    ),
    CommandSpec(
        name="quiet",
        arguments="<id> [on|off]",
        description="On (the default): a run that finds nothing new sends nothing; off: a short note",
        example="/quiet 3 off",
        instant=True,
    ),
    CommandSpec(
        name="search",
        arguments="<query>",
        description="One-off: collect, critique and summarise a topic now (digest + CSV)",
        example="/search open source LLM licences",
    ),
    CommandSpec(
        name="collect",
        arguments="<request> [from <sources>] [target N]",
        description="Collect many items for a request; CSV and metadata when done",
        example="/collect posts about Rust in embedded systems from hn,news target 500",
    ),
    CommandSpec(
        name="export",
        arguments="<id> [days] | monitors",
        description="CSV of a monitor's items (default: last 30 days); `monitors`: this chat's monitors as JSON + OPML",
        example="/export 3 7",
    ),
    CommandSpec(
        name="share",
        arguments="<id>",
        description="List one of this chat's monitors in /browse so other chats can subscribe",
        example="/share 3",
        instant=True,
    ),
    CommandSpec(
        name="unshare",
        arguments="<id>",
        description="Take a monitor out of /browse",
        example="/unshare 3",
        instant=True,
    ),
    CommandSpec(
        name="browse",
        arguments="[words]",
        description="Shared monitors you can subscribe to (optionally only topics with these words)",
        example="/browse deepseek",
    ),
    CommandSpec(
        name="subscribe",
        arguments="<id>",
        description="Receive a shared monitor's digests in this chat too",
        example="/subscribe 3",
    ),
    CommandSpec(
        name="unsubscribe",
        arguments="<id>",
        description="Stop receiving a monitor you subscribed to",
        example="/unsubscribe 3",
        instant=True,
    ),
    CommandSpec(
        name="transfer",
        arguments="<id> [chat]",
        description="Hand a monitor to one of its subscribers (without a chat: list them)",
        example="/transfer 3 telegram:-1001234567890",
    ),
    CommandSpec(
        name="briefing",
        arguments="<schedule>|off",
        description="One morning briefing of all your monitors instead of a message per run",
        example="/briefing daily at 08:00",
        instant=True,
    ),
    CommandSpec(
        name="deliver",
        arguments="<id> now|briefing",
        description="Get one monitor per run (now) or in your briefing",
        example="/deliver 3 now",
        instant=True,
    ),
    CommandSpec(
        name="import",
        arguments="[file path]",
        description="Create monitors from a JSON or OPML file (send it as a document with the caption /import)",
        example="/import monitors.json",
    ),
    CommandSpec(
        name="timezone",
        arguments="<IANA name>",
        description="Set this chat's timezone for schedules",
        example="/timezone Europe/Berlin",
        instant=True,
    ),
    CommandSpec(
        name="language",
        arguments="<code>",
        description="Set the language of digests and answers",
        example="/language de",
        instant=True,
    ),
    CommandSpec(
        name="profile",
        arguments="<text>",
        description="Tell Lookout who you are and what you care about",
        example="/profile We are a robotics startup; we care about open models and hardware",
        instant=True,
    ),
    CommandSpec(name="forget", arguments="", description="Clear this conversation's memory", instant=True),
    CommandSpec(name="usage", arguments="", description="Tokens and cost today and this month", instant=True),
)

COMMAND_SPECS: dict[str, CommandSpec] = {spec.name: spec for spec in _SPECS}
"""Every command by name, in the order /help lists them."""


def usage_of(name: str) -> str:
    """The usage line of a command (`/help`'s for an unknown name)."""
    return (COMMAND_SPECS.get(name) or COMMAND_SPECS["help"]).usage


def bot_commands() -> list[tuple[str, str]]:
    """`(name, description)` pairs for Telegram's setMyCommands (and Slack's manifest)."""
    return [(spec.name, spec.description) for spec in _SPECS]


def help_text(command: str | None = None) -> str:
    """Markdown for /help: every command with its description, or one command with its example."""
    if command is not None and command in COMMAND_SPECS:
        spec = COMMAND_SPECS[command]
        lines = [f"`{spec.usage}`", spec.description + "."]
        if spec.example:
            lines.append(f"Example: `{spec.example}`")
        return "\n".join(lines)
    return "\n".join(f"`{spec.usage}` — {spec.description}" for spec in _SPECS)


class CommandError(Exception):
    """A command Lookout does not know, or wrong arguments; carries the usage line to show the person."""

    def __init__(self, command: str | None, reason: str) -> None:
        self.command = command
        """The command's name (None when unknown)."""
        self.reason = reason
        """What was wrong, in a sentence for the person."""
        self.usage = usage_of(command or "help")
        """The command's usage line (/help's for an unknown command)."""
        super().__init__(self.text)

    @property
    def text(self) -> str:
        """The whole answer: the reason, then the usage line."""
        return f"{self.reason}\nUsage: {self.usage}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CommandError) and (self.command, self.reason) == (other.command, other.reason)

    def __hash__(self) -> int:
        return hash((self.command, self.reason))


@dataclass(frozen=True, slots=True, kw_only=True)
class StartCommand:
    """`/start` (Telegram deep-link payloads are ignored)."""

    name: ClassVar[str] = "start"


@dataclass(frozen=True, slots=True, kw_only=True)
class HelpCommand:
    """`/help [command]`."""

    name: ClassVar[str] = "help"
    command: str | None = None
    """The command asked about, None for the overview."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackCommand:
    """`/track <topic> [schedule] [from <sources>]`, checked for syntax only; the service creates the monitor."""

    name: ClassVar[str] = "track"
    topic: str
    """Whitespace-normalised, quotes removed."""
    schedule_text: str
    """The schedule as written ("" for the default, `DEFAULT_SCHEDULE_TEXT`)."""
    schedule: Schedule
    """The parsed schedule (in the chat's timezone unless the text named one)."""
    sources: tuple[str, ...]
    """Source specs as given (`hn`, `rss:<url>`, `rsshub:<platforms>`); empty for the default mix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitorsCommand:
    """`/monitors [all]` (`all`: every chat's monitors, for admins)."""

    name: ClassVar[str] = "monitors"
    all_chats: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UntrackCommand:
    """`/untrack <id>`."""

    name: ClassVar[str] = "untrack"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseCommand:
    """`/pause <id>`."""

    name: ClassVar[str] = "pause"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeCommand:
    """`/resume <id>`."""

    name: ClassVar[str] = "resume"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DigestCommand:
    """`/digest <id>`."""

    name: ClassVar[str] = "digest"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchCommand:
    """`/search <query>`."""

    name: ClassVar[str] = "search"
    query: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectCommand:
    """`/collect <request> [target N]`."""

    name: ClassVar[str] = "collect"
    request: str
    target: int | None = None
    """Unique items wanted; None for the job's default."""
    sources: tuple[str, ...] = ()
    """Source specs from `from <sources>`; empty for the default mix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuietCommand:
    """`/quiet <id> [on|off]`: whether a run with nothing new sends nothing (on) or a short note (off)."""

    name: ClassVar[str] = "quiet"
    monitor_id: int
    quiet: bool | None
    """None: show the current setting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportCommand:
    """`/export <id> [days]`."""

    name: ClassVar[str] = "export"
    monitor_id: int
    days: int | None = None
    """The window in days; None for the default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportMonitorsCommand:
    """`/export monitors`: this chat's monitors as JSON and their feeds as OPML."""

    name: ClassVar[str] = "export"


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCommand:
    """`/share <id>`."""

    name: ClassVar[str] = "share"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnshareCommand:
    """`/unshare <id>`."""

    name: ClassVar[str] = "unshare"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowseCommand:
    """`/browse [words]`."""

    name: ClassVar[str] = "browse"
    words: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscribeCommand:
    """`/subscribe <id>`."""

    name: ClassVar[str] = "subscribe"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsubscribeCommand:
    """`/unsubscribe <id>`."""

    name: ClassVar[str] = "unsubscribe"
    monitor_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferCommand:
    """`/transfer <id> [chat]`: without a chat, list who may take it."""

    name: ClassVar[str] = "transfer"
    monitor_id: int
    to_chat: str | None = None
    """`platform:id`, a bare platform id or a subscriber chat's title, as written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BriefingCommand:
    """`/briefing [<schedule>|off]`; without arguments it shows the current one."""

    name: ClassVar[str] = "briefing"
    schedule: Schedule | None = None
    """The new briefing time (in the chat's timezone unless the text named one); None to show or turn off."""
    off: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverCommand:
    """`/deliver <id> now|briefing`."""

    name: ClassVar[str] = "deliver"
    monitor_id: int
    mode: str
    """`now` or `briefing`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportCommand:
    """`/import [path]`: the file is the document sent with the command, or (in the terminal) a path."""

    name: ClassVar[str] = "import"
    path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TimezoneCommand:
    """`/timezone [IANA name]`; without a name it shows the current one."""

    name: ClassVar[str] = "timezone"
    timezone: str | None
    """Canonical IANA name (`Europe/Berlin`), None to show the current setting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LanguageCommand:
    """`/language [code]`; without a code it shows the current one."""

    name: ClassVar[str] = "language"
    language: str | None
    """A BCP 47 tag like `de` or `pt-BR`, None to show the current setting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileCommand:
    """`/profile [text]`; without text it shows the current profile."""

    name: ClassVar[str] = "profile"
    profile: str | None
    """The new profile, None to show the current one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgetCommand:
    """`/forget`."""

    name: ClassVar[str] = "forget"


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageCommand:
    """`/usage`."""

    name: ClassVar[str] = "usage"


Command = (
    StartCommand
    | HelpCommand
    | TrackCommand
    | MonitorsCommand
    | UntrackCommand
    | PauseCommand
    | ResumeCommand
    | DigestCommand
    | QuietCommand
    | SearchCommand
    | CollectCommand
    | ExportCommand
    | ExportMonitorsCommand
    | ShareCommand
    | UnshareCommand
    | BrowseCommand
    | SubscribeCommand
    | UnsubscribeCommand
    | TransferCommand
    | BriefingCommand
    | DeliverCommand
    | ImportCommand
    | TimezoneCommand
    | LanguageCommand
    | ProfileCommand
    | ForgetCommand
    | UsageCommand
)
"""Any parsed command; `match` on the class."""
