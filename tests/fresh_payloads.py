"""Recorded source answers re-dated to now, so their items fall inside a monitor's look-back window whenever the
test runs (a run that finds nothing new sends, and writes, no files)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

PAYLOADS = Path(__file__).resolve().parent / "sources" / "payloads"


def fresh_hn_payload(*, hours_ago: float = 1.0) -> bytes:
    """The recorded Hacker News answer with every story dated `hours_ago` before now."""
    payload = json.loads((PAYLOADS / "hn_search_by_date.json").read_text(encoding="utf-8"))
    when = datetime.now(UTC) - timedelta(hours=hours_ago)
    for hit in payload["hits"]:
        hit["created_at"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        hit["created_at_i"] = int(when.timestamp())
    return json.dumps(payload).encode()


def fresh_news_payload(*, hours_ago: float = 1.0) -> bytes:
    """The recorded Google News RSS answer with every item's pubDate `hours_ago` before now."""
    when = format_datetime(datetime.now(UTC) - timedelta(hours=hours_ago), usegmt=True)
    text = (PAYLOADS / "news_search.xml").read_text(encoding="utf-8")
    return re.sub(r"<pubDate>[^<]*</pubDate>", f"<pubDate>{when}</pubDate>", text).encode()
