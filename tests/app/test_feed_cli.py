"""`lookout monitors feed <id> [--new]`: prints the monitor's feed URLs under PUBLIC_URL (the paths and a note to set
it when unset); `--new` replaces the token; an unknown monitor is one clear line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli

runner = CliRunner()
TOKEN = r"[A-Za-z0-9_-]{32,}"


def test_feed_prints_urls_and_new_replaces_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    added = runner.invoke(cli, ["monitors", "add", "DeepSeek", "--chat", "terminal", "--sources", "hn"])
    assert added.exit_code == 0, added.output

    bare = runner.invoke(cli, ["monitors", "feed", "1"])
    monkeypatch.setenv("PUBLIC_URL", "https://lookout.example.org/")
    public = runner.invoke(cli, ["monitors", "feed", "1"])
    rotated = runner.invoke(cli, ["monitors", "feed", "1", "--new"])
    missing = runner.invoke(cli, ["monitors", "feed", "9"])

    assert bare.exit_code == 0, bare.output
    path = re.search(rf"Atom: +(/feeds/({TOKEN})\.atom)", bare.output)
    assert path is not None, bare.output
    assert f"/feeds/{path[2]}.json" in bare.output and "PUBLIC_URL is not set" in bare.output
    assert public.exit_code == 0
    assert f"https://lookout.example.org/feeds/{path[2]}.atom" in public.output
    assert f"https://lookout.example.org/feeds/{path[2]}.json" in public.output
    assert "PUBLIC_URL is not set" not in public.output
    assert rotated.exit_code == 0 and "the old ones no longer work" in rotated.output
    new = re.search(rf"https://lookout.example.org/feeds/({TOKEN})\.atom", rotated.output)
    assert new is not None and new[1] != path[2]
    assert missing.exit_code == 2 and "There is no monitor #9." in missing.output
