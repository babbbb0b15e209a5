"""The terminal's own renderer over the shared markdown AST (#9.1, #9.2): what a person sees on the screen keeps
the reply's lines, lists and links, and shows their own words exactly as typed."""

from __future__ import annotations

import io
from pathlib import Path

from agent.commands.catalogue import help_text
from bots.terminal.output import ConsoleOutput
from bots.terminal.render import markdown_to_plain, render_markdown
from kernel import Reply
from research import escape_markdown
from tests.terminal_screen import TerminalScreen

TRACK_REPLY = (
    "Tracking **DeepSeek** as monitor #1.\n"
    "Schedule: every day at 08:30 (UTC)\n"
    "Next run: 2026-11-23 08:30 UTC\n"
    "Sources: hn, news, arxiv\n"
    "`/digest 1` runs it now, `/pause 1` pauses it, `/untrack 1` deletes it."
)


def shown(reply: Reply, tmp_path: Path, *, columns: int = 80) -> TerminalScreen:
    """The reply printed by the terminal chat on a terminal `columns` wide, as the screen shows it."""
    stream = io.StringIO()
    ConsoleOutput(stream, exports_dir=tmp_path / "exports", styled=True, width=columns).reply(reply)
    screen = TerminalScreen(columns=columns)
    screen.feed(stream.getvalue())
    return screen


def test_each_line_of_a_reply_stays_a_line_on_the_screen(tmp_path: Path) -> None:
    screen = shown(Reply(text=TRACK_REPLY), tmp_path)
    assert screen.lines[:5] == [
        "Tracking DeepSeek as monitor #1.",
        "Schedule: every day at 08:30 (UTC)",
        "Next run: 2026-11-23 08:30 UTC",
        "Sources: hn, news, arxiv",
        "/digest 1 runs it now, /pause 1 pauses it, /untrack 1 deletes it.",
    ]
    assert screen.bold("DeepSeek")


def test_help_prints_one_command_per_line_with_its_angle_brackets(tmp_path: Path) -> None:
    screen = shown(Reply(text=help_text()), tmp_path, columns=120)
    track = [line for line in screen.lines if "/track <topic> [schedule] [from <sources>]" in line]
    monitors = [line for line in screen.lines if line.lstrip("• ").startswith("/monitors")]
    assert track and monitors, screen.text
    assert len(screen.lines) > 10  # not one paragraph


def test_lists_keep_their_markers_and_wrap_under_their_text(tmp_path: Path) -> None:
    text = "**Sources**\n- [1] first item with a fairly long title that needs to wrap on a narrow screen\n- second"
    screen = shown(Reply(text=text), tmp_path, columns=40)
    assert screen.lines[0] == "Sources"
    assert screen.lines[1].startswith("• [1] first item")
    assert screen.lines[2].startswith("  ") and not screen.lines[2].startswith("  •")  # a hanging indent
    assert any(line.startswith("• second") for line in screen.lines)


def test_a_link_shows_its_address_and_a_long_url_is_never_cut_by_a_newline(tmp_path: Path) -> None:
    url = "https://news.example/" + "a-long-path-segment/" * 6 + "story.html"
    stream = io.StringIO()
    ConsoleOutput(stream, exports_dir=tmp_path, styled=True, width=40).reply(Reply(text=f"Read [the story]({url})"))
    printed = stream.getvalue()
    assert url in printed  # whole between escape codes: a terminal folds it, so copying it gives the URL
    assert "the story" in printed


def test_what_the_person_typed_is_shown_verbatim_never_read_as_markup(tmp_path: Path) -> None:
    for typed in ("__init__ internals", "<b>bold</b>", "<script>x</script>", "*stars* and `ticks`", "[red]x[/red]"):
        text = f"Tracking **{escape_markdown(typed)}** as monitor #1."
        assert shown(Reply(text=text), tmp_path).lines[0] == f"Tracking {typed} as monitor #1."
        assert markdown_to_plain(text) == f"Tracking {typed} as monitor #1."


def test_control_characters_from_a_feed_never_reach_the_terminal(tmp_path: Path) -> None:
    hostile = "Title \x1b[2J\x1b]0;owned\x07 end"
    rendered = render_markdown(hostile, styled=True, width=80)
    assert "\x1b[2J" not in rendered and "\x1b]0;" not in rendered and "\x07" not in rendered
    assert "Title \ufffd[2J\ufffd]0;owned\ufffd end" in render_markdown(hostile, styled=False)


def test_piped_output_is_plain_and_never_wrapped() -> None:
    long_line = "word " * 60 + "https://example.com/" + "x" * 100
    plain = render_markdown(f"**Bold** and _it_\n{long_line}", styled=False)
    assert plain == f"Bold and it\n{long_line.rstrip()}\n"
    assert "\x1b" not in plain


def test_a_digest_title_with_markdown_marks_reads_as_written() -> None:
    from research import Digest, render_digest_markdown
    from research.digest import CitedItem, Development, QualityCheck

    digest = Digest(
        headline="Python's __init__ and *args explained",
        developments=[Development(text="The `__init__` hook runs first [1].", citations=[1])],
        quality=QualityCheck(completeness=0.8, quality=0.7),
        cited=[CitedItem(number=1, title="On __init__ [draft]", url="https://blog.example/init_", source="rss")],
    )
    plain = markdown_to_plain(render_digest_markdown(digest))
    assert plain.startswith("Python's __init__ and *args explained\n")
    assert "1. The `__init__` hook runs first [1]." in plain
    assert "[1] On __init__ (draft) (https://blog.example/init_) — rss" in plain
