"""Research steps: plan queries, collect, de-duplicate and cluster, rank, critique, synthesize, export."""

from research.chart import write_volume_chart
from research.collect import (
    Collection,
    ProgressCallback,
    ProgressEvent,
    SearchOutcome,
    SearchStatus,
    collect,
)
from research.critique import (
    Contradiction,
    Critique,
    ItemCritique,
    LlmUsage,
    NumberedItem,
    estimate_cost_usd,
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
from research.export import CSV_COLUMNS, ExportPaths, guard_cell, safe_stem, write_csv_rows, write_exports
from research.iterative import CollectionReport, StopReason, run_iterative_collection
from research.jobs import CollectionJobResult, ResearchResult, research_once, run_collection_job
from research.language import detect_language, with_languages
from research.llm import FailureKind, RetryingModel, RetryPolicy, Sleep, failure_kind, failure_leaves, resilient_model
from research.pipeline import STAGES, PipelineRequest, PipelineResult, run_pipeline
from research.plan import load_plan
from research.rank import RankedItem, RankWeights, rank
from research.reputation import SourceKind, outlet_of, source_kind

__all__ = [
    "CSV_COLUMNS",
    "STAGES",
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
    "FailureKind",
    "ItemCritique",
    "ItemEmbedder",
    "LlmUsage",
    "NumberedItem",
    "PipelineRequest",
    "PipelineResult",
    "PreviousDigest",
    "ProgressCallback",
    "ProgressEvent",
    "QualityCheck",
    "RankWeights",
    "RankedItem",
    "ResearchResult",
    "RetryPolicy",
    "RetryingModel",
    "SearchOutcome",
    "SearchStatus",
    "Sleep",
    "SourceKind",
    "StopReason",
    "VectorCache",
    "cluster_items",
    "collect",
    "detect_language",
    "estimate_cost_usd",
    "extractive_digest",
    "failure_kind",
    "failure_leaves",
    "guard_cell",
    "heuristic_critique",
    "llm_critique",
    "llm_digest",
    "load_plan",
    "number_items",
    "outlet_of",
    "rank",
    "render_digest_markdown",
    "research_once",
    "resilient_model",
    "run_collection_job",
    "run_iterative_collection",
    "run_pipeline",
    "safe_stem",
    "source_kind",
    "with_languages",
    "write_csv_rows",
    "write_exports",
    "write_volume_chart",
]
