"""Every app test starts from an empty environment in an empty directory, so the machine's config can't leak in."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from app.settings import Settings


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


PAYLOADS = Path(__file__).resolve().parents[1] / "sources" / "payloads"


def recent_hn_payload() -> bytes:
    """The recorded Hacker News answer with its stories moved into the last few hours (their spacing kept): the
    CLI runs on the real clock, and a monitor's look-back window would leave the recorded dates out, so a run
    would find nothing new and, rightly, send nothing."""
    document = json.loads((PAYLOADS / "hn_search_by_date.json").read_bytes())
    newest = max(hit["created_at_i"] for hit in document["hits"])
    shift = int(datetime.now(UTC).timestamp()) - 3600 - newest
    for hit in document["hits"]:
        moved = hit["created_at_i"] + shift
        hit["created_at_i"] = moved
        hit["created_at"] = datetime.fromtimestamp(moved, UTC).isoformat().replace("+00:00", "Z")
    return json.dumps(document).encode()


def recent_news_payload() -> bytes:
    """The recorded Google News answer with every item published an hour ago (see `recent_hn_payload`)."""
    stamp = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    document = (PAYLOADS / "news_search.xml").read_text(encoding="utf-8")
    return re.sub(r"<pubDate>[^<]*</pubDate>", f"<pubDate>{stamp}</pubDate>", document).encode()
