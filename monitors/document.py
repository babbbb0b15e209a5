"""The digest document: one finished monitor run as Lookout's own versioned JSON (`DigestDocument`), the body of
signed webhooks and of the `.json` beside each digest page, with its JSON Schema published in the repository.

Guarantees: a document is built only from what the run stored (its digest, its scored items, its files), so the same
run gives the same document; fields are added, never renamed or removed, within one `schema_version` (a consumer may
ignore fields it does not know); file URLs and the page URL are present only when `PUBLIC_URL` is set.

Regenerate the committed schema with `uv run python -m monitors.document > docs/schemas/digest-document.schema.json`
(a test keeps the file equal to the model).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monitors.tokens import new_token
from research import Digest, render_digest_markdown
from storage import Database, ItemWithScores, RunRecord, RunStatus
from storage.repositories import DigestPageRepository, ItemRepository, MonitorRepository, RunRepository

__all__ = [
    "FILE_NAMES",
    "SCHEMA_VERSION",
    "DigestDocument",
    "DocumentFile",
    "build_document",
    "digest_document",
    "digest_went_out",
    "document_schema_text",
    "page_path",
    "page_urls",
    "run_document",
    "run_time",
    "stored_digest",
]

logger = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 1
"""Raised only by a change a consumer could misread (a field renamed, removed or changing meaning)."""

FileKind = Literal["csv", "chart"]
FILE_NAMES: Final[dict[FileKind, str]] = {"csv": "digest.csv", "chart": "chart.png"}
"""The name of each file under its digest page's URL (`<page>/digest.csv`): fixed, so a URL says nothing of the
monitor; the download is still named after the run (Content-Disposition)."""
MEDIA_TYPES: Final[dict[FileKind, str]] = {"csv": "text/csv; charset=utf-8", "chart": "image/png"}
_EXTENSIONS: Final[dict[FileKind, str]] = {"csv": ".csv", "chart": ".png"}


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, use_attribute_docstrings=True, json_schema_serialization_defaults_required=True
    )


class DocumentMonitor(_Model):
    """The monitor the run belongs to."""

    id: int
    topic: str


class DocumentRun(_Model):
    """The run that wrote the digest."""

    id: int
    scheduled_for: datetime
    """The time the run was scheduled for (unique per monitor)."""
    finished_at: datetime | None
    language: str | None = None
    """The language the digest is written in (ISO 639-1) when the run chose one; null: the topic's own."""


class DocumentDevelopment(_Model):
    """One key development of the digest."""

    text: str
    """Plain text; may cite inline as `[n]`."""
    citations: list[int]
    """The numbers of the cited items (`cited[].number`) that support it."""


class DocumentDisputed(_Model):
    """A claim the items contradict, or that rests on one weak source."""

    claim: str
    status: Literal["disputed", "unverified"]
    citations: list[int] = Field(default_factory=list)


class DocumentCited(_Model):
    """A source the digest cites, by its number."""

    number: int
    title: str
    url: str
    source: str


class DocumentTone(_Model):
    """The mean tone of the stories the digest covers."""

    score: float = Field(ge=-1, le=1)
    label: str
    """positive, negative, neutral or mixed."""
    assessed_by: str
    """model, lexicon or story."""


class DocumentQuality(_Model):
    """The digest's assessment of itself."""

    completeness: float = Field(ge=0, le=1)
    """How much of what matters in the items the digest covers."""
    quality: float = Field(ge=0, le=1)
    """How well its claims are supported (credible, corroborated sources)."""
    missing_angles: list[str] = Field(default_factory=list)
    """What a reader would want that the items do not cover."""


class DocumentItem(_Model):
    """One collected item of a story."""

    id: str
    title: str
    url: str
    source: str
    """The source that found it (`hackernews`, `rss`, …)."""
    published_at: datetime | None
    language: str | None
    relevance: float | None
    credibility: float | None
    score: float | None
    rank: int | None
    delivered: bool
    """Whether this run's digest covered it (the monitor will not report it again)."""


class DocumentStory(_Model):
    """A story: the run's items about one event (a cluster), best first."""

    cluster_id: str | None
    """Null for an item that was not clustered (a story of its own)."""
    rank: int | None
    """The best rank among its items (1 is the top of the run); null when none was ranked."""
    score: float | None
    """The best score among its items."""
    relevance: float | None
    credibility: float | None
    items: list[DocumentItem]


class DocumentNovelty(_Model):
    """What the run counted as new since the monitor's last digest."""

    items: int
    """Items the run collected."""
    new_items: int
    """Of those, items the monitor had not delivered before (new stories, or news in known ones)."""
    nothing_new: bool
    changes_since_last: str | None
    """The digest's own sentence on what changed since the previous one."""


class DocumentFile(_Model):
    """A file the run wrote."""

    kind: FileKind
    name: str
    """The download's file name."""
    media_type: str
    url: str | None
    """Where to download it (under the page's token); null when PUBLIC_URL is not set."""


class DigestDocument(_Model):
    """A Lookout digest: one monitor run, its cited digest and the stories it read."""

    model_config = ConfigDict(
        frozen=True,
        use_attribute_docstrings=True,
        json_schema_serialization_defaults_required=True,
        title="Lookout digest document",
    )

    schema_version: Literal[1] = SCHEMA_VERSION
    """This document's format; consumers should refuse a version they do not know."""
    monitor: DocumentMonitor
    run: DocumentRun
    headline: str
    markdown: str
    """The digest as the chats get it (CommonMark subset, citations as numbered links)."""
    developments: list[DocumentDevelopment]
    disputed: list[DocumentDisputed]
    cited: list[DocumentCited]
    """Every item cited anywhere in the digest, in number order."""
    tone: DocumentTone | None
    quality: DocumentQuality | None
    """Null for a digest with nothing in it."""
    without_model: str | None
    """Set when no language model wrote this digest: one sentence saying so and why."""
    failed_sources: list[str]
    """One line per source that failed in the run."""
    novelty: DocumentNovelty
    stories: list[DocumentStory]
    """Every story of the run, best rank first."""
    files: list[DocumentFile]
    page_url: str | None
    """The digest's web page; null when PUBLIC_URL is not set."""


def run_time(run: RunRecord) -> datetime:
    """When a run's digest was written (its start while it has not finished)."""
    return run.finished_at or run.started_at


def digest_went_out(run: RunRecord) -> bool:
    """Whether a monitor's run is a digest that went out (not a "nothing new" note, not held back): what its feed
    lists and what has a page."""
    return (
        run.monitor_id is not None
        and run.status is RunStatus.SUCCEEDED
        and isinstance(run.digest, dict)
        and bool(run.digest.get("developments"))
        and bool(run.stats.get("delivered", True))
        and not run.stats.get("nothing_new", False)
    )


def page_path(token: str) -> str:
    """The path of a digest's page: `/digests/<token>` (its files under it, its document at `<path>.json`)."""
    return f"/digests/{token}"


async def page_urls(database: Database, runs: Sequence[RunRecord], *, base_url: str) -> dict[int, str]:
    """The page URL under `base_url` of each run that has a page (`digest_went_out`), its token made on first use."""
    tokens = await DigestPageRepository(database).issue([run.id for run in runs if digest_went_out(run)], new_token)
    base = base_url.rstrip("/")
    return {run_id: base + page_path(token) for run_id, token in tokens.items()}


def stored_digest(run: RunRecord) -> Digest | None:
    """The run's main digest, or None when it stored none or one this version cannot read (logged)."""
    if run.digest is None:
        return None
    try:
        return Digest.model_validate(run.digest)
    except ValidationError:
        logger.warning("run %s stores a digest this version cannot read", run.id)
        return None


def _stories(entries: Sequence[ItemWithScores]) -> list[DocumentStory]:
    groups: dict[str, list[ItemWithScores]] = {}
    for entry in entries:
        groups.setdefault(entry.scores.cluster_id or f"\0{entry.item.id}", []).append(entry)

    def best(values: Sequence[float | None]) -> float | None:
        return max((value for value in values if value is not None), default=None)

    stories: list[DocumentStory] = []
    for group in groups.values():
        ranks = [entry.scores.rank for entry in group if entry.scores.rank is not None]
        stories.append(
            DocumentStory(
                cluster_id=group[0].scores.cluster_id,
                rank=min(ranks, default=None),
                score=best([entry.scores.score for entry in group]),
                relevance=best([entry.scores.relevance for entry in group]),
                credibility=best([entry.scores.credibility for entry in group]),
                items=[
                    DocumentItem(
                        id=entry.item.id,
                        title=entry.item.title,
                        url=entry.item.url,
                        source=entry.item.source,
                        published_at=entry.item.published,
                        language=entry.item.language,
                        relevance=entry.scores.relevance,
                        credibility=entry.scores.credibility,
                        score=entry.scores.score,
                        rank=entry.scores.rank,
                        delivered=entry.scores.delivered,
                    )
                    for entry in group
                ],
            )
        )
    stories.sort(key=lambda story: (story.rank is None, story.rank or 0))
    return stories


def run_files(run: RunRecord) -> dict[FileKind, Path]:
    """The run's CSV and chart that still exist on disk (a file cleaned up since is left out)."""
    found: dict[FileKind, Path] = {}
    for kind in FILE_NAMES:
        raw = run.artifacts.get(kind)
        if isinstance(raw, str) and raw and Path(raw).is_file():
            found[kind] = Path(raw)
    return found


def file_name(run: RunRecord, kind: FileKind) -> str:
    """The download name of a run's file: its `file_stem` and the kind's extension."""
    return str(run.stats.get("file_stem") or f"digest-{run.id}") + _EXTENSIONS[kind]


def build_document(
    run: RunRecord, digest: Digest, *, topic: str, items: Sequence[ItemWithScores], page_url: str | None
) -> DigestDocument:
    """The document of a finished run, from what it stored; `page_url`: its page, under which its files are."""
    stats = run.stats
    tone = digest.tone
    language = str(stats.get("digest_language") or "") or None
    page = page_url.rstrip("/") if page_url else None
    return DigestDocument(
        monitor=DocumentMonitor(id=run.monitor_id or 0, topic=topic),
        run=DocumentRun(id=run.id, scheduled_for=run.scheduled_for, finished_at=run.finished_at, language=language),
        headline=digest.headline,
        markdown=render_digest_markdown(digest),
        developments=[DocumentDevelopment(text=d.text, citations=list(d.citations)) for d in digest.developments],
        disputed=[
            DocumentDisputed(claim=c.claim, status=c.status, citations=list(c.citations)) for c in digest.disputed
        ],
        cited=[DocumentCited(number=c.number, title=c.title, url=c.url, source=c.source) for c in digest.cited],
        tone=DocumentTone(score=tone.score, label=tone.label, assessed_by=tone.assessed_by) if tone else None,
        quality=DocumentQuality(
            completeness=digest.quality.completeness,
            quality=digest.quality.quality,
            missing_angles=list(digest.quality.missing_angles),
        )
        if digest.developments
        else None,
        without_model=digest.without_model,
        failed_sources=list(digest.failed_sources),
        novelty=DocumentNovelty(
            items=_count(stats.get("items"), len(items)),
            new_items=_count(stats.get("new_items"), sum(entry.scores.delivered for entry in items)),
            nothing_new=bool(stats.get("nothing_new", False)),
            changes_since_last=digest.changes_since_last,
        ),
        stories=_stories(items),
        files=[
            DocumentFile(
                kind=kind,
                name=file_name(run, kind),
                media_type=MEDIA_TYPES[kind],
                url=f"{page}/{FILE_NAMES[kind]}" if page else None,
            )
            for kind in run_files(run)
        ],
        page_url=page,
    )


def _count(value: object, fallback: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else fallback


async def digest_document(database: Database, run_id: int, *, page_url: str | None = None) -> DigestDocument | None:
    """The document of a monitor's finished run that stored a readable digest; None for anything else (a search,
    a briefing, a failed or running run)."""
    run = await RunRepository(database).get(run_id)
    return await run_document(database, run, page_url=page_url) if run is not None else None


async def run_document(database: Database, run: RunRecord, *, page_url: str | None = None) -> DigestDocument | None:
    """`digest_document` of a run already read."""
    if run.monitor_id is None or run.finished_at is None:
        return None
    digest = stored_digest(run)
    if digest is None:
        return None
    topic = run.stats.get("topic")  # what the monitor was called when the digest went out
    if not isinstance(topic, str) or not topic:
        monitor = await MonitorRepository(database).get(run.monitor_id)
        topic = monitor.topic if monitor is not None else ""
    items = (await ItemRepository(database).of_runs([run.id]))[run.id]
    return build_document(run, digest, topic=topic, items=items, page_url=page_url)


def document_schema_text() -> str:
    """The JSON Schema of `DigestDocument`, as committed in `docs/schemas/digest-document.schema.json`."""
    schema = DigestDocument.model_json_schema(mode="serialization")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(document_schema_text(), end="")
