"""The command parser: every command's happy path, bad inputs answering with the usage line, /track's grammar."""

from __future__ import annotations

from datetime import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.commands.catalogue import (
    CATALOGUE,
    Command,
    HelpCommand,
    StartCommand,
    bot_commands,
    help_text,
    is_instant_command,
    parse_command,
    parse_command_words,
    parse_prefixed,
)
from agent.commands.destinations import (
    BriefingToCommand,
    DestinationCommand,
    DestinationsCommand,
    SubscribeToCommand,
)
from agent.commands.feedback import LessCommand, MoreCommand, MuteCommand, UnmuteCommand, WhyCommand
from agent.commands.grammar import CommandError, ParseOptions, is_command
from agent.commands.monitors import (
    DigestCommand,
    MonitorsCommand,
    PauseCommand,
    QuietCommand,
    ResumeCommand,
    TrackCommand,
    UntrackCommand,
)
from agent.commands.portability import FeedCommand
from agent.commands.research import CollectCommand, ExportCommand, SearchCommand
from agent.commands.settings import ForgetCommand, LanguageCommand, ProfileCommand, TimezoneCommand, UsageCommand
from agent.commands.subscriptions import SubscribeCommand
from monitors.schedule import ScheduleKind

OPTIONS = ParseOptions(timezone="Europe/Berlin", min_interval_seconds=900, bot_username="LookoutBot")


def parse(text: str) -> Command | CommandError | None:
    return parse_command(text, options=OPTIONS)


def track(text: str) -> TrackCommand:
    result = parse(text)
    assert isinstance(result, TrackCommand), result
    return result


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/start", StartCommand()),
        ("/start deep-link-payload", StartCommand()),
        ("/help", HelpCommand()),
        ("/help track", HelpCommand(command="track")),
        ("/help /Export", HelpCommand(command="export")),
        ("/monitors", MonitorsCommand()),
        ("/monitors all", MonitorsCommand(all_chats=True)),
        ("/untrack 3", UntrackCommand(monitor_id=3)),
        ("/untrack #12", UntrackCommand(monitor_id=12)),
        ("/pause 4", PauseCommand(monitor_id=4)),
        ("/resume 5", ResumeCommand(monitor_id=5)),
        ("/digest 6", DigestCommand(monitor_id=6)),
        ("/feed 7", FeedCommand(monitor_id=7)),
        ("/feed #7 new", FeedCommand(monitor_id=7, new=True)),
        ("/feed briefing", FeedCommand(monitor_id=None)),
        ("/feed BRIEFING new", FeedCommand(monitor_id=None, new=True)),
        ("/search open source   LLM licences", SearchCommand(query="open source LLM licences")),
        ("/collect posts about Rust in embedded", CollectCommand(request="posts about Rust in embedded")),
        ("/collect Rust embedded target 500", CollectCommand(request="Rust embedded", target=500)),
        ("/collect Rust embedded target=50", CollectCommand(request="Rust embedded", target=50)),
        ("/collect Rust embedded target 2,000", CollectCommand(request="Rust embedded", target=2000)),
        ("/collect ads that target teens", CollectCommand(request="ads that target teens")),
        (
            "/collect Rust embedded from hn,rss:https://example.org/feed.xml target 50",
            CollectCommand(request="Rust embedded", target=50, sources=("hn", "rss:https://example.org/feed.xml")),
        ),
        (
            "/collect Rust embedded target 50 from news",
            CollectCommand(request="Rust embedded", target=50, sources=("news",)),
        ),
        ("/collect news from Ukraine", CollectCommand(request="news from Ukraine")),
        ("/quiet 3 off", QuietCommand(monitor_id=3, quiet=False)),
        ("/quiet #3 ON", QuietCommand(monitor_id=3, quiet=True)),
        ("/quiet 3", QuietCommand(monitor_id=3, quiet=None)),
        ("/export 3", ExportCommand(monitor_id=3)),
        ("/export 3 7", ExportCommand(monitor_id=3, days=7)),
        ("/export 3 30d", ExportCommand(monitor_id=3, days=30)),
        ("/timezone Europe/Berlin", TimezoneCommand(timezone="Europe/Berlin")),
        ("/timezone america/new_york", TimezoneCommand(timezone="America/New_York")),
        ("/timezone", TimezoneCommand(timezone=None)),
        ("/language de", LanguageCommand(language="de")),
        ("/language pt_br", LanguageCommand(language="pt-BR")),
        ("/language zh-hant", LanguageCommand(language="zh-Hant")),
        ("/language", LanguageCommand(language=None)),
        (
            "/profile We build robots;  we care about open models",
            ProfileCommand(profile="We build robots; we care about open models"),
        ),
        ("/profile", ProfileCommand(profile=None)),
        ("/forget", ForgetCommand()),
        ("/usage", UsageCommand()),
        ("  /USAGE  ", UsageCommand()),
    ],
)
def test_every_command_parses(text: str, expected: Command) -> None:
    assert parse(text) == expected


def test_the_table_covers_every_command_and_feeds_help_and_set_my_commands() -> None:
    assert set(CATALOGUE) == {
        "start", "help", "track", "monitors", "untrack", "pause", "resume", "digest", "quiet",
        "search", "collect", "export", "timezone", "language", "profile", "forget", "usage",
        "share", "unshare", "browse", "subscribe", "unsubscribe", "transfer", "briefing", "deliver", "import",
        "feed", "destinations", "destination", "more", "less", "fewer", "unmark", "mute", "unmute", "why",
        "filter",
        "alert", "alerts",
    }  # fmt: skip
    for name, description in bot_commands():
        assert name in CATALOGUE
        assert 1 <= len(description) <= 256
    overview = help_text()
    for spec in CATALOGUE.values():
        assert spec.usage in overview
        if spec.example:  # every example in the table is itself a valid command
            assert not isinstance(parse(spec.example), CommandError | None), spec.example
    assert "/track DeepSeek daily at 08:30" in help_text("track")


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("/help", True),
        ("/HELP track", True),
        ("/monitors@lookout_bot", True),
        ("/usage", True),
        ("/search open models", False),  # collects and asks the model: "typing…" is worth showing
        ("/collect rust target 500", False),
        ("/digest 3", False),
        ("/nosuchcommand", False),
        ("/", False),
        ("help", False),
        ("", False),
    ],
)
def test_instant_commands_are_the_ones_answered_from_what_is_stored(text: str, instant: bool) -> None:
    assert is_instant_command(text) is instant


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/untrack", "untrack"),
        ("/untrack abc", "untrack"),
        ("/untrack 0", "untrack"),
        ("/untrack 1 2", "untrack"),
        ("/pause -3", "pause"),
        ("/resume ３", "resume"),
        ("/digest 99999999999999999999", "digest"),
        ("/search", "search"),
        ("/search " + "x" * 600, "search"),
        ("/collect", "collect"),
        ("/collect target 5", "collect"),
        ("/collect rust target 0", "collect"),
        ("/collect rust target 999999999", "collect"),
        ("/export", "export"),
        ("/export x", "export"),
        ("/export 3 0", "export"),
        ("/export 3 7 9", "export"),
        ("/timezone Mars/Olympus", "timezone"),
        ("/timezone Europe Berlin", "timezone"),
        ("/language 42", "language"),
        ("/language xx", "language"),
        ("/language en-QQ", "language"),
        ("/quiet", "quiet"),
        ("/quiet 3 loud", "quiet"),
        ("/quiet three off", "quiet"),
        ("/collect rust from hn,foo", "collect"),
        ("/collect rust from", "collect"),
        ("/language english please", "language"),
        ("/profile " + "y" * 2100, "profile"),
        ("/forget everything", "forget"),
        ("/usage now", "usage"),
        ("/monitors mine", "monitors"),
        ("/help nonsense", "help"),
        ("/track", "track"),
        ("/track from hn", "track"),
        ('/track "" daily', "track"),
    ],
)
def test_bad_arguments_answer_with_the_commands_usage_line(text: str, command: str) -> None:
    result = parse(text)
    assert isinstance(result, CommandError), result
    assert result.command == command
    assert result.usage == CATALOGUE[command].usage
    assert result.text.endswith(f"Usage: {CATALOGUE[command].usage}")
    assert result.reason


def test_an_unknown_command_names_the_known_ones() -> None:
    result = parse("/frobnicate now")
    assert isinstance(result, CommandError)
    assert result.command is None
    assert "/frobnicate" in result.reason and "/track" in result.reason
    assert result.usage == CATALOGUE["help"].usage


def test_free_text_is_not_a_command() -> None:
    assert parse("track DeepSeek every morning") is None
    assert parse("") is None
    assert not is_command("hello /track")
    assert is_command("  /track x")


def test_track_with_schedule_and_sources() -> None:
    command = track("/track DeepSeek daily at 08:30 from hn,news,arxiv")
    assert command.topic == "DeepSeek"
    assert command.schedule_text == "daily at 08:30"
    assert (command.schedule.kind, command.schedule.at, command.schedule.timezone) == (
        ScheduleKind.DAILY,
        time(8, 30),
        "Europe/Berlin",
    )
    assert command.sources == ("hn", "news", "arxiv")


def test_track_quoted_topic_with_interval() -> None:
    command = track('/track "open source LLM" every 6 hours')
    assert command.topic == "open source LLM"
    assert (command.schedule.kind, command.schedule.every_minutes) == (ScheduleKind.INTERVAL, 360)
    assert command.sources == ()
    assert track("/track \u201cDeepSeek R2\u201d hourly").topic == "DeepSeek R2"


def test_track_bare_number_stays_in_the_topic_with_the_default_schedule() -> None:
    command = track("/track GPT 5")
    assert command.topic == "GPT 5"
    assert command.schedule_text == ""
    assert (command.schedule.kind, command.schedule.at) == (ScheduleKind.DAILY, time(9, 0))


def test_track_too_frequent_says_why() -> None:
    result = parse("/track x every 5 minutes")
    assert isinstance(result, CommandError)
    assert result.command == "track"
    assert "too often" in result.reason and "15 minutes" in result.reason
    assert result.usage == CATALOGUE["track"].usage


@pytest.mark.parametrize(
    ("text", "topic", "kind"),
    [
        ("/track GPT 5 weekly on friday at 5pm", "GPT 5", ScheduleKind.WEEKLY),
        ("/track Daily Mail", "Daily Mail", ScheduleKind.DAILY),
        ("/track news from Ukraine", "news from Ukraine", ScheduleKind.DAILY),
        ('/track rust cron "0 8 * * 1-5"', "rust", ScheduleKind.CRON),
        ("/track rust weekdays at 07:00", "rust", ScheduleKind.WEEKDAYS),
        ("/track rust every 2 days at 10:00", "rust", ScheduleKind.EVERY_DAYS),
    ],
)
def test_track_topic_and_schedule_split(text: str, topic: str, kind: ScheduleKind) -> None:
    command = track(text)
    assert (command.topic, command.schedule.kind) == (topic, kind)


def test_track_schedule_may_name_its_timezone() -> None:
    command = track("/track x hourly in Asia/Tokyo")
    assert command.schedule.timezone == "Asia/Tokyo"


def test_from_with_no_sources_after_it_says_so() -> None:
    # not the time of day: the empty source list is what is wrong
    result = parse("/track DeepSeek daily at 08:30 from")
    assert isinstance(result, CommandError) and result.command == "track"
    assert result.reason.startswith("Name the sources after “from”")
    assert "from hn,news" in result.reason and "rss:<feed url>" in result.reason


def test_track_sources_by_name_feed_and_rsshub() -> None:
    command = track("/track x from HN, rss:https://example.org/feed?a=1,2 rsshub:weibo+zhihu")
    assert command.sources == ("hn", "rss:https://example.org/feed?a=1,2", "rsshub:weibo+zhihu")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("/track x from hn,foo", ['"foo"']),
        ("/track x from rss:ftp://example.org/feed", ["ftp://example.org/feed"]),
        ("/track x from rss:http://[::1/feed", ["http://[::1/feed"]),
        ("/track x daily at 25:00", ['"25:00"']),
        ("/track x every 3 fortnights", ['"fortnights"']),
        ('/track "x" tomorrow', ['"tomorrow"']),
    ],
)
def test_track_mistakes_are_reported_not_swallowed(text: str, words: list[str]) -> None:
    result = parse(text)
    assert isinstance(result, CommandError), result
    assert result.command == "track"
    for word in words:
        assert word in result.reason


def test_telegram_group_form_is_ours_only_when_addressed_to_us() -> None:
    command = parse("/track@LookoutBot DeepSeek every 6 hours")
    assert isinstance(command, TrackCommand) and command.topic == "DeepSeek"
    assert parse("/monitors@lookoutbot") == MonitorsCommand()
    assert parse("/track@SomeOtherBot DeepSeek") is None


def test_slack_forms() -> None:
    command = parse_prefixed("lookout track DeepSeek daily at 08:30 from hn", options=OPTIONS)
    assert isinstance(command, TrackCommand)
    assert (command.topic, command.sources) == ("DeepSeek", ("hn",))
    assert parse_prefixed("Lookout monitors", options=OPTIONS) == MonitorsCommand()
    assert parse_prefixed("looking for news", options=OPTIONS) is None
    assert parse_command_words("pause 3", options=OPTIONS) == PauseCommand(monitor_id=3)
    assert parse_command_words("", options=OPTIONS) == HelpCommand()
    unknown = parse_command_words("frobnicate", options=OPTIONS)
    assert isinstance(unknown, CommandError) and unknown.command is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_any_text_parses_to_a_command_an_error_or_free_text(text: str) -> None:
    head = "" if text[:1].isspace() else (text.split() or [""])[0]
    addressee = head.partition("@")[2]
    addressed_elsewhere = bool(addressee) and addressee.lower() != "lookoutbot"
    slash_result = parse_command("/" + text, options=OPTIONS)
    assert (slash_result is None) == addressed_elsewhere  # `/cmd@OtherBot` is not for us
    for result in (
        slash_result,
        parse_command("/track " + text, options=OPTIONS),
        parse_command_words(text, options=OPTIONS),
    ):
        if isinstance(result, CommandError):
            assert result.usage.startswith("/")
            assert result.reason
            assert "could not read" not in result.reason  # the parser's safety net for its own bugs never fired
    if not is_command(text):
        assert parse_command(text, options=OPTIONS) is None  # free text goes to the agent


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(CATALOGUE)),
    st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(
                ["from", "every", "daily", "at", '"', "#1", "target", "7", "hn,", "rss:http://[", "rsshub:"]
            ),
        )
    ),
)
def test_fuzz_known_commands_with_arbitrary_arguments(name: str, words: list[str]) -> None:
    result = parse_command(f"/{name} {' '.join(words)}", options=OPTIONS)
    if isinstance(result, CommandError):
        assert result.usage == CATALOGUE[name].usage
        assert "could not read" not in result.reason
    else:
        assert result is not None and result.name == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/subscribe 3", SubscribeCommand(monitor_id=3)),
        ("/subscribe #3 to ntfys://ntfy.sh/topic", SubscribeToCommand(monitor_id=3, url="ntfys://ntfy.sh/topic")),
        (
            "/subscribe 3 TO mailtos://a:b@example.com",
            SubscribeToCommand(monitor_id=3, url="mailtos://a:b@example.com"),
        ),
        ("/briefing to webhook+https://example.org/h", BriefingToCommand(url="webhook+https://example.org/h")),
        ("/destinations", DestinationsCommand()),
        ("/destination test 2", DestinationCommand(how="test", destination_id=2)),
        ("/destination delete #4", DestinationCommand(how="remove", destination_id=4)),
    ],
)
def test_destination_commands(text: str, expected: Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["/subscribe 3 to", "/subscribe 3 to a b", "/subscribe 3 into x://y", "/destination 2", "/destination run 2"],
)
def test_bad_destination_commands_answer_with_a_sentence(text: str) -> None:
    result = parse(text)
    assert isinstance(result, CommandError) and result.reason
    assert "://y" not in result.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/more 2", MoreCommand(story=2)),
        ("/less 3 run 41", LessCommand(story=3, run_id=41)),
        ("/less 3 #5", LessCommand(story=3, monitor_id=5)),
        ("/mute example.com", MuteCommand(outlet="example.com")),
        ("/mute 4 run 7", MuteCommand(story=4, run_id=7)),
        ("/unmute Example.com #2", UnmuteCommand(outlet="Example.com", monitor_id=2)),
        ("/why dropped", WhyCommand(story=None)),
        ("/why 1 run 9", WhyCommand(story=1, run_id=9)),
    ],
)
def test_feedback_commands_parse(text: str, expected: Command) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["/more", "/more two", "/less 0", "/more 1 2", "/why", "/mute", "/unmute x run 3"])
def test_bad_feedback_commands_say_how(text: str) -> None:
    assert isinstance(parse(text), CommandError)
