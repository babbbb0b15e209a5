"""`lookout monitors subscribe|unsubscribe|export|import` as an operator runs them, for every platform's chats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.fakes.hostile_xml import MARKER, hostile_document
from tests.kit import NameLookups

PAYLOADS = Path(__file__).resolve().parents[1] / "monitors" / "payloads"
runner = CliRunner()


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    for name in ("ALLOWED_USERS", "ALLOWED_CHATS", "ADMIN_USERS", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def lookout(*args: str, stdin: str | None = None) -> tuple[int, str]:
    """The exit code and what the operator reads: standard output on success, the error otherwise (logs go to
    standard error)."""
    result = runner.invoke(cli, ["monitors", *args], input=stdin)
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def test_subscribe_and_unsubscribe_chats_of_every_platform(environment: Path) -> None:
    assert lookout("add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn")[0] == 0

    slack = lookout("subscribe", "1", "--chat", "slack:C0123ABCD")
    terminal = lookout("subscribe", "1", "--chat", "terminal")
    group = lookout("subscribe", "1", "--chat", "telegram:-1001234567890")
    again = lookout("subscribe", "1", "--chat", "slack:C0123ABCD")
    left = lookout("unsubscribe", "1", "--chat", "terminal")
    owner_leaves = lookout("unsubscribe", "1", "--chat", "telegram:4242")
    bad = lookout("subscribe", "1", "--chat", "discord:42")
    missing = lookout("subscribe", "9", "--chat", "slack:C0123ABCD")

    assert slack == (0, "slack:C0123ABCD now receives monitor #1 “DeepSeek” (every day at 09:00 (UTC)); 2 chat(s) "
                        "receive it.\n")  # fmt: skip
    assert terminal[0] == 0 and "3 chat(s)" in terminal[1]
    assert group[0] == 0 and "4 chat(s)" in group[1]
    assert again[0] == 0 and "already received" in again[1]
    assert left == (0, "terminal no longer receives monitor #1 “DeepSeek”.\n")
    assert owner_leaves[0] == 2 and "owns monitor #1" in owner_leaves[1]
    assert (
        bad[0] == 2
        and "--chat must be telegram:<chat id> (a number), slack:<channel id> (C…, D… or G…) or terminal" in bad[1]
    )
    assert missing[0] == 2 and "no shared monitor #9" in missing[1]


def test_a_chat_outside_the_allowlists_cannot_be_subscribed(environment: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALLOWED_USERS", "telegram:4242")
    monkeypatch.setenv("ALLOWED_CHATS", "slack:C0ALLOWED")
    assert lookout("add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn")[0] == 0

    refused = lookout("subscribe", "1", "--chat", "slack:C0OUTSIDE")
    allowed_channel = lookout("subscribe", "1", "--chat", "slack:C0ALLOWED")
    allowed_person = lookout("subscribe", "1", "--chat", "telegram:4242")

    assert refused[0] == 2 and "slack:C0OUTSIDE is outside ALLOWED_CHATS/ALLOWED_USERS" in refused[1]
    assert allowed_channel[0] == 0 and allowed_person[0] == 0


def test_export_then_import_into_another_chat_round_trips(environment: Path, no_internet_lookups: NameLookups) -> None:
    no_internet_lookups.expected.add("x.example")  # adding the feed checks its host: here, as offline, it resolves not
    assert lookout("add", "DeepSeek", "--chat", "telegram:4242", "--sources", "hn,rss:https://x.example/ai.xml",
                   "--schedule", "weekdays at 07:30", "--timezone", "Asia/Shanghai")[0] == 0  # fmt: skip
    assert lookout("add", "Mistral", "--chat", "telegram:4242", "--sources", "news", "--quiet")[0] == 0
    out = environment / "out"

    exported = lookout("export", "--chat", "telegram:4242", "--out", str(out))
    json_path, opml_path = sorted(out.iterdir())
    declined = lookout("import", str(json_path), "--chat", "slack:C0TEAM001", stdin="n\n")
    imported = lookout("import", str(json_path), "--chat", "slack:C0TEAM001", stdin="y\n")
    twice = lookout("import", str(json_path), "--chat", "slack:C0TEAM001", "--yes")
    exported_again = lookout("export", "--chat", "slack:C0TEAM001", "--out", str(environment / "again"))

    assert exported[0] == 0 and exported[1].startswith("2 monitor(s) of telegram:4242:")
    assert json_path.suffix == ".json" and opml_path.suffix == ".opml"
    # drawn by the CLI's one renderer (CliOutput): no raw markdown in a pipe
    assert "2 monitors to create:\n• “DeepSeek” — weekdays at 07:30" in declined[1] and "**" not in declined[1]
    assert declined[1].endswith("Nothing was created.\n")
    assert imported[0] == 0 and "Created 2 monitor(s): #3, #4" in imported[1]
    assert "this chat already has that monitor" in twice[1] and twice[1].endswith("Nothing to create.\n")
    assert exported_again[0] == 0
    (again_json,) = sorted(p for p in (environment / "again").iterdir() if p.suffix == ".json")
    assert json.loads(again_json.read_bytes())["monitors"] == json.loads(json_path.read_bytes())["monitors"]


def test_import_a_feed_reader_opml_with_a_topic_and_bad_files(
    environment: Path, no_internet_lookups: NameLookups
) -> None:
    no_internet_lookups.offline = True  # the import checks each of the readers' ~30 feed hosts; here none resolves
    feedly = lookout("import", str(PAYLOADS / "feedly.opml"), "--chat", "terminal", "--yes")
    flat = lookout("import", str(PAYLOADS / "stringer.opml"), "--chat", "terminal", "--topic", "Rust", "--yes")
    garbage_path = environment / "garbage.json"
    garbage_path.write_text("{not json")
    garbage = lookout("import", str(garbage_path), "--chat", "terminal")

    assert feedly[0] == 0 and "Created 13 monitor(s)" in feedly[1]
    assert flat[0] == 0 and "Created 1 monitor(s): #14" in flat[1]
    assert garbage[0] == 2 and "Nothing imported from garbage.json: That JSON is not a Lookout" in garbage[1]


def test_import_refuses_hostile_opml_by_name(environment: Path) -> None:
    path = environment / "quadratic.opml"
    path.write_bytes(hostile_document("quadratic", "opml"))

    code, output = lookout("import", str(path), "--chat", "terminal", "--yes")

    assert code == 2
    assert "Nothing imported from quadratic.opml: That OPML file was refused: this file defines XML entities" in output
    assert MARKER not in output
