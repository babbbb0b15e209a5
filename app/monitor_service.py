"""The composition of the monitor service: the catalogue, and each service beside it (the run recorder, the runner,
runs, sharing, briefings, feeds, destinations, feedback, rules, alerts) built here and handed to `MonitorService`.
The monitor stack (`app.monitoring`) builds its service with it; so do tests and benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic_ai.models import Model

from kernel import Clock, utc_now
from monitors import (
    AlertService,
    BriefingService,
    DestinationSenders,
    DestinationService,
    MonitorCatalogue,
    MonitorFeedback,
    MonitorFeeds,
    MonitorParts,
    MonitorRunner,
    MonitorRuns,
    MonitorService,
    MonitorSettings,
    MonitorSharing,
    PipelineFunction,
    ReaderRuleService,
    RunRecorder,
    ServiceStorage,
    SourceResolver,
)
from research import ItemEmbedder, run_pipeline
from sources import HttpClient
from storage import Database


def build_monitor_service(
    database: Database,
    *,
    resolve_sources: SourceResolver,
    light_model: Model | None,
    heavy_model: Model | None,
    out_dir: Path,
    settings: MonitorSettings | None = None,
    clock: Clock = utc_now,
    pipeline: PipelineFunction = run_pipeline,
    on_deliveries_queued: Callable[[], None] | None = None,
    destinations: DestinationSenders | None = None,
    http: HttpClient | None = None,
    embedder: ItemEmbedder | None = None,
) -> MonitorService:
    """The monitor service over `database`: runs with these models and `pipeline`, files under `out_dir`; a run
    or briefing that queued outbox rows calls `on_deliveries_queued`; `destinations` and `http` (both, or none)
    deliver to Apprise and webhook destinations; `embedder` lets feedback read the stories' stored vectors."""
    settings = settings or MonitorSettings()
    storage = ServiceStorage(database=database, clock=clock, on_queued=on_deliveries_queued)

    def parts(catalogue: MonitorCatalogue) -> MonitorParts:
        recorder = RunRecorder(database, on_queued=on_deliveries_queued)
        feedback = MonitorFeedback(database, clock=clock, embedder=embedder)
        runner = MonitorRunner(
            storage,
            resolve_sources=resolve_sources,
            light_model=light_model,
            heavy_model=heavy_model,
            out_dir=out_dir,
            settings=settings,
            pipeline=pipeline,
            recorder=recorder,
            before_run=feedback.vectors_before_run,  # marks made or imported since get vectors before views decide
        )
        sharing = MonitorSharing(catalogue, storage)
        return MonitorParts(
            runner=runner,
            runs=MonitorRuns(catalogue, runner, recorder, clock=clock, chat_daily_tokens=settings.chat_daily_tokens),
            sharing=sharing,
            briefings=BriefingService(
                storage, out_dir=out_dir, min_interval_seconds=settings.min_interval_seconds, feedback=feedback
            ),
            feeds=MonitorFeeds(database, clock=clock),
            destinations=(
                DestinationService(database, http=http, senders=destinations, sharing=sharing, clock=clock)
                if destinations is not None and http is not None
                else None
            ),
            feedback=feedback,
            rules=ReaderRuleService(catalogue, database),
            alerts=AlertService(database, clock=clock),
        )

    return MonitorService(storage, resolve_sources=resolve_sources, parts=parts, settings=settings)
