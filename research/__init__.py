"""Research steps: plan queries, collect, de-duplicate and cluster, rank, critique, synthesize, export."""

from research.collect import (
    Collection,
    ProgressCallback,
    ProgressEvent,
    SearchOutcome,
    SearchStatus,
    collect,
)
from research.dedupe import Cluster, Deduper, DedupeResult, cluster_items
from research.export import CSV_COLUMNS, ExportPaths, safe_stem, write_exports
from research.iterative import CollectionReport, StopReason, run_iterative_collection
from research.jobs import CollectionJobResult, ResearchResult, research_once, run_collection_job
from research.rank import RankedItem, RankWeights, rank
from research.reputation import SourceKind, outlet_of, source_kind

__all__ = [
    "CSV_COLUMNS",
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
    "ExportPaths",
    "ItemCritique",
    "LlmUsage",
    "NumberedItem",
    "PreviousDigest",
    "ProgressCallback",
    "ProgressEvent",
    "QualityCheck",
    "RankWeights",
    "RankedItem",
    "ResearchResult",
    "SearchOutcome",
    "SearchStatus",
    "SourceKind",
    "StopReason",
    "cluster_items",
    "collect",
    "extractive_digest",
    "heuristic_critique",
    "llm_critique",
    "llm_digest",
    "number_items",
    "outlet_of",
    "rank",
    "render_digest_markdown",
    "research_once",
    "run_collection_job",
    "run_iterative_collection",
    "safe_stem",
    "source_kind",
    "write_exports",
    "write_volume_chart",
]
