"""The labelled headline set (tests/research/payloads/headlines.json) as items and story labels."""

from __future__ import annotations

import json
from pathlib import Path

from sources.base import Item

HEADLINES = Path(__file__).parent / "payloads" / "headlines.json"


def labelled_items() -> tuple[list[Item], list[str]]:
    """Every headline as an `Item`, and beside it the story it belongs to."""
    rows = json.loads(HEADLINES.read_text(encoding="utf-8"))["items"]
    items = [
        Item(
            id=f"{row['outlet']}:{row['id']}",
            source=row["outlet"],
            url=f"https://{row['outlet']}.example/{row['id']}",
            title=row["title"],
            text=row["lead"],
            language=row["language"],
        )
        for row in rows
    ]
    return items, [row["story"] for row in rows]
