"""Lookout's files: one CSV layout per kind of file, the folder of each chat and the one naming scheme.

Kinds of CSV (each layout named once, here): a collection (`/collect`, `lookout collect`), a run's items (a
monitor's digest, `/search`: the collection's columns plus the critique's), and a monitor's stored items
(`/export` and the chat agent's export tool alike; a briefing's CSV is the same with a first `topic` column).
Every CSV is UTF-8 with a BOM, written whole or not at all, each cell guarded against formula injection. Files go
to DATA_DIR/exports/<platform>-<chat id>/ (the CLI's to exports/cli/), named `<subject>-<YYYYMMDD-HHMM>-<what>.<ext>`.
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel

from research.dedupe import StoryLead, story_leads
from research.pipeline_models import ScoredItem
from research.rank import RankedItem
from sources import Item
from storage import ItemRecord
from storage import ItemWithScores as StoredItem

_TOLD_COLUMNS = ("index", "source", "title", "text", "author", "published")
"""The columns every item CSV opens with (the cells of `_told`)."""
COLLECTION_CSV_COLUMNS = (
    *_TOLD_COLUMNS,
    "url",
    "points",
    "likes",
    "reposts",
    "comments",
    "chars",
    "language",
    "relevance",
    "recency",
    "engagement_score",
    "score",
    "cluster_id",
    "query",
)
"""A collection's CSV: what was found, ranked (`/collect`, `lookout collect`)."""
RUN_CSV_COLUMNS = (
    *COLLECTION_CSV_COLUMNS,
    "credibility",
    "status",
    "sentiment",
    "sentiment_score",
    "story_role",
    "story_lead",
    "story_reports",
)
"""A run's CSV (a monitor's digest, `/search`): the collection's columns plus the critique's credibility, the
item's novelty status (new, update, delivered, repeat), its tone (positive, negative, neutral, mixed or unknown,
and the score from -1 to 1) and its place in its story: `lead` (the report the digest shows for the story) or
`more` (one of the digest's "+N more reports"), the `index` of its story's lead row, and how many reports the story
has in all."""
STORED_ITEMS_CSV_COLUMNS = (
    *_TOLD_COLUMNS,
    "collected",
    "first_seen",
    "url",
    "points",
    "likes",
    "reposts",
    "comments",
    "language",
    "relevance",
    "credibility",
    "score",
    "cluster_id",
    "in_digest",
    "query",
)
"""A monitor's stored items over a window, newest first (`/export` and the chat agent's export tool)."""
CLI_FOLDER = "cli"
"""The folder under DATA_DIR/exports of files the command line writes (it is no chat)."""
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_STEM_MAX = 60


@dataclass(frozen=True)
class ExportPaths:
    """Where the files of one export were written."""

    csv: Path
    json: Path


def guard_cell(value: str) -> str:
    """Prefix `'` to a cell a spreadsheet would run as a formula (starts with = + - @ tab or CR)."""
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def safe_stem(text: str, when: datetime) -> str:
    """A file-name stem from free text and a time: letters and digits of any script, `-` for the rest.

    `safe_stem("DeepSeek R2: news?", t)` -> `deepseek-r2-news-20261120-1200`. Never empty, never a path.
    """
    normalised = unicodedata.normalize("NFKC", text).casefold()
    slug = re.sub(r"(?:[^\w]|_)+", "-", normalised).strip("-")[:_STEM_MAX].strip("-") or "collection"
    return f"{slug}-{when.astimezone(UTC):%Y%m%d-%H%M}"


def chat_folder(platform: str, chat_id: str) -> str:
    """The folder of one chat's files under DATA_DIR/exports: `telegram-123456789`, `slack-C0123456`,
    `terminal-terminal`. Characters a file system may refuse become `_`; never empty, never a path."""
    name = re.sub(r"[^\w.-]+", "_", f"{platform}-{chat_id}").strip("._") or "chat"
    return name[:120]


def export_stem(subject: str, when: datetime, what: str) -> str:
    """The one naming scheme: `<subject>-<YYYYMMDD-HHMM>-<what>`, e.g. `deepseek-20261122-0830-m1-r7` (monitor 1,
    run 7), `…-search-r8`, `…-collect`, `…-m1-last-30d`, `…-timeline-30d`."""
    tag = re.sub(r"[^\w]+", "-", what.casefold()).strip("-")
    return f"{safe_stem(subject, when)}-{tag}" if tag else safe_stem(subject, when)


def _iso_utc(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _count(value: int | None) -> str:
    return "" if value is None else str(value)


def _told(index: int, item: Item | ItemRecord) -> list[str]:
    """The cells both layouts open with: the row's number, then where the item comes from and what it says."""
    return [str(index), item.source, item.title, item.text, item.author or "", _iso_utc(item.published)]


def csv_row(index: int, ranked: RankedItem) -> list[str]:
    """One CSV row, cells already guarded."""
    item = ranked.item
    cells = [
        *_told(index, item),
        item.url,
        _count(item.engagement.points),
        _count(item.engagement.likes),
        _count(item.engagement.reposts),
        _count(item.engagement.comments),
        str(len(item.text)),
        item.language or "",
        f"{ranked.relevance:.4f}",
        f"{ranked.recency:.4f}",
        f"{ranked.engagement:.4f}",
        f"{ranked.score:.4f}",
        ranked.cluster_id or "",
        item.query,
    ]
    return [guard_cell(cell) for cell in cells]


@contextmanager
def _replacing(path: Path, *, encoding: str, newline: str | None = None) -> Iterator[TextIO]:
    """Write to a temporary file next to `path`, then move it into place: a reader never sees half a file."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline=newline) as handle:
            yield handle
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_csv_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """Write a CSV whole or not at all: UTF-8 with BOM so Excel reads non-Latin text; cells already guarded."""
    with _replacing(path, encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(rows)


def write_csv(path: Path, ranked_items: Sequence[RankedItem]) -> None:
    """Write the collection CSV: one row per item, in the given order."""
    rows = (csv_row(index, ranked) for index, ranked in enumerate(ranked_items, start=1))
    write_csv_rows(path, COLLECTION_CSV_COLUMNS, rows)


def write_run_csv(path: Path, items: Sequence[ScoredItem], *, leads: Mapping[str, StoryLead] | None = None) -> None:
    """Write a run's CSV: the collection's columns plus credibility, status, tone and story, in rank order.
    `leads`: each story's lead as the digest showed it (`research.dedupe.story_leads`); without them, or for a
    story they lack, the lead is chosen here the same way."""
    chosen = story_leads([scored.item for scored in items], {s.item.id: s.cluster_id for s in items if s.cluster_id})
    leads = {**chosen, **(leads or {})}
    lead_rank = {scored.item.id: scored.rank for scored in items}
    rows = []
    for scored in items:
        ranked = RankedItem(
            item=scored.item,
            cluster_id=scored.cluster_id,
            relevance=scored.relevance,
            recency=scored.recency,
            engagement=scored.engagement,
            score=scored.score,
        )
        credibility = "" if scored.credibility is None else f"{scored.credibility:.4f}"
        tone = scored.sentiment
        label = tone.label if tone else "unknown"
        score = "" if tone is None else f"{tone.score:.4f}"
        # The score is a number we format ourselves, so a leading "-" is a sign, not a formula: left unguarded.
        story = leads[scored.cluster_id or scored.item.id]
        role = "lead" if story.item_id == scored.item.id else "more"
        rows.append(
            [
                *csv_row(scored.rank, ranked),
                guard_cell(credibility),
                scored.status,
                label,
                score,
                role,
                str(lead_rank[story.item_id]),
                str(story.reports),
            ]
        )
    write_csv_rows(path, RUN_CSV_COLUMNS, rows)


def write_stored_items_csv(path: Path, items: Sequence[StoredItem], *, topics: Sequence[str] | None = None) -> None:
    """Write stored items (a monitor's, newest first, as given), creating the folder if needed; with `topics` (one
    per item), a first `topic` column says which monitor each row came from (a briefing's CSV covers several)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if topics is None:
        rows = (_stored_row(n, entry) for n, entry in enumerate(items, start=1))
        write_csv_rows(path, STORED_ITEMS_CSV_COLUMNS, rows)
        return
    body = (
        [guard_cell(topic), *_stored_row(n, entry)]
        for n, (topic, entry) in enumerate(zip(topics, items, strict=True), start=1)
    )
    write_csv_rows(path, ("topic", *STORED_ITEMS_CSV_COLUMNS), body)


def _stored_row(index: int, entry: StoredItem) -> list[str]:
    item, scores = entry.item, entry.scores
    engagement = item.engagement
    cells = [
        *_told(index, item),
        _iso_utc(item.collected_at),
        _iso_utc(item.first_seen_at),
        item.url,
        *(_count(engagement.get(key)) for key in ("points", "likes", "reposts", "comments")),
        item.language or "",
        _score(scores.relevance),
        _score(scores.credibility),
        _score(scores.score),
        scores.cluster_id or "",
        "yes" if scores.delivered else "no",
        item.query,
    ]
    return [guard_cell(cell) for cell in cells]


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def write_json(path: Path, model: BaseModel) -> None:
    """Write a model as indented UTF-8 JSON (non-Latin text kept readable)."""
    with _replacing(path, encoding="utf-8") as handle:
        handle.write(model.model_dump_json(indent=2))
        handle.write("\n")


def write_exports(report: BaseModel, ranked_items: Sequence[RankedItem], *, out_dir: Path, stem: str) -> ExportPaths:
    """Write `<stem>.csv` and `<stem>.json` (the report) under `out_dir`, creating it if needed."""
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        raise ValueError(f"unsafe file stem {stem!r}; build it with safe_stem()")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = ExportPaths(csv=out_dir / f"{stem}.csv", json=out_dir / f"{stem}.json")
    write_csv(paths.csv, ranked_items)
    write_json(paths.json, report)
    return paths
