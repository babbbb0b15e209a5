"""The digest document of a stored run: what the digest said, every story with its items and scores, novelty and
files; it validates against the committed JSON Schema, which is what the model generates."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from monitors import MonitorView, RunSummary
from monitors.document import DigestDocument, digest_document, document_schema_text
from storage.repositories import RunRepository
from tests.monitors.conftest import T0, World

SCHEMA = Path(__file__).parents[2] / "docs" / "schemas" / "digest-document.schema.json"
PAGE = "https://lookout.example.org/digests/abc"


async def one_run(world: World) -> tuple[MonitorView, RunSummary, int]:
    """A monitor of the two fake sources and its first run, stored."""
    service = world.service()
    view = await service.create_monitor(world.chats[0].id, "DeepSeek", schedule_text="daily", sources="hn,news")
    summary = await service.runs.run_monitor(view.id, T0)
    assert summary is not None and summary.status == "ok" and summary.run_id is not None
    return view, summary, summary.run_id


def test_the_committed_schema_is_the_models() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == document_schema_text(), (
        "regenerate it: uv run python -m monitors.document > docs/schemas/digest-document.schema.json"
    )


async def test_a_runs_document_has_its_digest_stories_novelty_and_files(world: World) -> None:
    view, summary, run_id = await one_run(world)
    run = await RunRepository(world.database).get(run_id)
    assert run is not None and run.digest is not None

    document = await digest_document(world.database, run_id, page_url=PAGE + "/")
    assert document is not None

    assert document.schema_version == 1
    assert (document.monitor.id, document.monitor.topic) == (view.id, "DeepSeek")
    assert document.run.id == run_id and document.run.scheduled_for == T0
    assert document.headline == run.digest["headline"] and document.headline in document.markdown
    assert document.developments and all(d.citations for d in document.developments)
    numbers = {c.number for c in document.cited}
    assert {n for d in document.developments for n in d.citations} <= numbers
    # both sources answered the same three stories; every collected item is in exactly one story
    item_ids = [item.id for story in document.stories for item in story.items]
    assert sorted(item_ids) == sorted({f"{s}:{s}-{n}" for s in ("hn", "news") for n in range(3)})
    ranks = [story.rank for story in document.stories if story.rank is not None]
    assert ranks == sorted(ranks) and ranks[0] == 1
    first = document.stories[0].items[0]
    assert first.title.endswith("about DeepSeek") and first.url.startswith("https://") and first.source
    assert document.novelty.items == summary.items and document.novelty.new_items == summary.new_items > 0
    assert not document.novelty.nothing_new
    kinds = {file.kind: file for file in document.files}
    assert set(kinds) == {"csv", "chart"}
    assert kinds["chart"].url == PAGE + "/chart.png" and kinds["csv"].url == PAGE + "/digest.csv"
    assert kinds["csv"].name.endswith(".csv") and kinds["chart"].media_type == "image/png"
    assert document.page_url == PAGE

    body = json.loads(document.model_dump_json())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(body)
    assert DigestDocument.model_validate(body) == document


async def test_without_a_public_url_nothing_has_a_url_and_other_runs_have_no_document(world: World) -> None:
    _, _, run_id = await one_run(world)

    document = await digest_document(world.database, run_id)
    assert document is not None and document.page_url is None
    assert document.files and all(file.url is None for file in document.files)
    assert await digest_document(world.database, run_id + 1000) is None
