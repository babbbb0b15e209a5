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

__all__ = [
    "CSV_COLUMNS",
    "Cluster",
    "Collection",
    "CollectionJobResult",
    "CollectionReport",
    "DedupeResult",
    "Deduper",
    "ExportPaths",
    "ProgressCallback",
    "ProgressEvent",
    "RankWeights",
    "RankedItem",
    "ResearchResult",
    "SearchOutcome",
    "SearchStatus",
    "StopReason",
    "cluster_items",
    "collect",
    "rank",
    "research_once",
    "run_collection_job",
    "run_iterative_collection",
    "safe_stem",
    "write_exports",
]
