"""Research steps: plan queries, collect, de-duplicate and cluster, rank, critique, synthesize, export."""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from research.briefing import Briefing, BriefingSection, TopicDigests, assemble_briefing, render_briefing_markdown
    from research.chart import volume_counts, write_volume_chart
    from research.collect import (
        Collection,
        FailedSources,
        ProgressCallback,
        ProgressEvent,
        SearchOutcome,
        SearchStatus,
        SourceFailure,
        collect,
        failure_lines,
    )
    from research.critique import (
        Contradiction,
        Critique,
        ItemCritique,
        NumberedItem,
        heuristic_critique,
        llm_critique,
        number_items,
    )
    from research.dedupe import Cluster, Deduper, DedupeResult, cluster_items
    from research.digest import (
        CitedItem,
        Development,
        Digest,
        DigestResult,
        DisputedClaim,
        PreviousDigest,
        QualityCheck,
        extractive_digest,
        llm_digest,
        render_digest_markdown,
    )
    from research.embeddings import EmbeddedItems, ItemEmbedder, VectorCache
    from research.export import (
        CLI_FOLDER,
        COLLECTION_CSV_COLUMNS,
        RUN_CSV_COLUMNS,
        STORED_ITEMS_CSV_COLUMNS,
        ExportPaths,
        chat_folder,
        export_stem,
        guard_cell,
        safe_stem,
        write_csv_rows,
        write_exports,
        write_stored_items_csv,
    )
    from research.iterative import CollectionReport, StopReason, run_iterative_collection
    from research.jobs import CollectionJobResult, ResearchResult, research_once, run_collection_job
    from research.language import detect_language, detect_languages, with_languages
    from research.llm import (
        FailureKind,
        ModelSet,
        QuotaMemory,
        RetryingModel,
        RetryPolicy,
        Sleep,
        describe_failure,
        failure_in_words,
        failure_kind,
        failure_leaves,
        model_chain,
        model_label,
        resilient_model,
    )
    from research.markup import escape_markdown
    from research.pipeline import STAGES, PipelineRequest, PipelineResult, run_pipeline
    from research.plan import load_plan
    from research.rank import RankedItem, RankWeights, rank
    from research.reputation import SourceKind, outlet_of, source_kind
    from research.usage import USAGE_KIND_LABELS, LlmUsage, UsageKind, estimate_cost_usd, record_usage, sum_usage

__all__ = [
    "CLI_FOLDER",
    "COLLECTION_CSV_COLUMNS",
    "RUN_CSV_COLUMNS",
    "STAGES",
    "STORED_ITEMS_CSV_COLUMNS",
    "USAGE_KIND_LABELS",
    "Briefing",
    "BriefingSection",
    "CitedItem",
    "Cluster",
    "Collection",
    "CollectionJobResult",
    "CollectionReport",
    "Contradiction",
    "Critique",
    "DedupeResult",
    "Deduper",
    "Development",
    "Digest",
    "DigestResult",
    "DisputedClaim",
    "EmbeddedItems",
    "ExportPaths",
    "FailedSources",
    "FailureKind",
    "ItemCritique",
    "ItemEmbedder",
    "LlmUsage",
    "ModelSet",
    "NumberedItem",
    "PipelineRequest",
    "PipelineResult",
    "PreviousDigest",
    "ProgressCallback",
    "ProgressEvent",
    "QualityCheck",
    "QuotaMemory",
    "RankWeights",
    "RankedItem",
    "ResearchResult",
    "RetryPolicy",
    "RetryingModel",
    "SearchOutcome",
    "SearchStatus",
    "Sleep",
    "SourceFailure",
    "SourceKind",
    "StopReason",
    "TopicDigests",
    "UsageKind",
    "VectorCache",
    "assemble_briefing",
    "chat_folder",
    "cluster_items",
    "collect",
    "describe_failure",
    "detect_language",
    "detect_languages",
    "escape_markdown",
    "estimate_cost_usd",
    "export_stem",
    "extractive_digest",
    "failure_in_words",
    "failure_kind",
    "failure_leaves",
    "failure_lines",
    "guard_cell",
    "heuristic_critique",
    "llm_critique",
    "llm_digest",
    "load_plan",
    "model_chain",
    "model_label",
    "number_items",
    "outlet_of",
    "rank",
    "record_usage",
    "render_briefing_markdown",
    "render_digest_markdown",
    "research_once",
    "resilient_model",
    "run_collection_job",
    "run_iterative_collection",
    "run_pipeline",
    "safe_stem",
    "source_kind",
    "sum_usage",
    "volume_counts",
    "with_languages",
    "write_csv_rows",
    "write_exports",
    "write_stored_items_csv",
    "write_volume_chart",
]

_SUBMODULE_OF = {
    "Briefing": "briefing",
    "BriefingSection": "briefing",
    "TopicDigests": "briefing",
    "assemble_briefing": "briefing",
    "render_briefing_markdown": "briefing",
    "volume_counts": "chart",
    "write_volume_chart": "chart",
    "Collection": "collect",
    "FailedSources": "collect",
    "ProgressCallback": "collect",
    "ProgressEvent": "collect",
    "SearchOutcome": "collect",
    "SearchStatus": "collect",
    "SourceFailure": "collect",
    "collect": "collect",
    "failure_lines": "collect",
    "Contradiction": "critique",
    "Critique": "critique",
    "ItemCritique": "critique",
    "NumberedItem": "critique",
    "heuristic_critique": "critique",
    "llm_critique": "critique",
    "number_items": "critique",
    "Cluster": "dedupe",
    "Deduper": "dedupe",
    "DedupeResult": "dedupe",
    "cluster_items": "dedupe",
    "CitedItem": "digest",
    "Development": "digest",
    "Digest": "digest",
    "DigestResult": "digest",
    "DisputedClaim": "digest",
    "PreviousDigest": "digest",
    "QualityCheck": "digest",
    "escape_markdown": "markup",
    "extractive_digest": "digest",
    "llm_digest": "digest",
    "render_digest_markdown": "digest",
    "EmbeddedItems": "embeddings",
    "ItemEmbedder": "embeddings",
    "VectorCache": "embeddings",
    "CLI_FOLDER": "export",
    "COLLECTION_CSV_COLUMNS": "export",
    "RUN_CSV_COLUMNS": "export",
    "STORED_ITEMS_CSV_COLUMNS": "export",
    "ExportPaths": "export",
    "chat_folder": "export",
    "export_stem": "export",
    "guard_cell": "export",
    "safe_stem": "export",
    "write_csv_rows": "export",
    "write_exports": "export",
    "write_stored_items_csv": "export",
    "CollectionReport": "iterative",
    "StopReason": "iterative",
    "run_iterative_collection": "iterative",
    "CollectionJobResult": "jobs",
    "ResearchResult": "jobs",
    "research_once": "jobs",
    "run_collection_job": "jobs",
    "detect_language": "language",
    "detect_languages": "language",
    "with_languages": "language",
    "FailureKind": "llm",
    "ModelSet": "llm",
    "QuotaMemory": "llm",
    "RetryingModel": "llm",
    "RetryPolicy": "llm",
    "Sleep": "llm",
    "describe_failure": "llm",
    "failure_in_words": "llm",
    "failure_kind": "llm",
    "failure_leaves": "llm",
    "model_chain": "llm",
    "model_label": "llm",
    "resilient_model": "llm",
    "STAGES": "pipeline",
    "PipelineRequest": "pipeline",
    "PipelineResult": "pipeline",
    "run_pipeline": "pipeline",
    "load_plan": "plan",
    "RankedItem": "rank",
    "RankWeights": "rank",
    "rank": "rank",
    "SourceKind": "reputation",
    "outlet_of": "reputation",
    "source_kind": "reputation",
    "USAGE_KIND_LABELS": "usage",
    "LlmUsage": "usage",
    "UsageKind": "usage",
    "estimate_cost_usd": "usage",
    "record_usage": "usage",
    "sum_usage": "usage",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value


class _Face(types.ModuleType):
    """`collect` and `rank` name both a submodule and its function: importing the submodule (which any sibling may
    do first) would rebind the package's name to the module, as Python's import system does; the function stays."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}" and name in _SUBMODULE_OF:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Face
