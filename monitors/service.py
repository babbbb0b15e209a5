"""The monitor service: a chat's monitors (the catalogue it is), and the services gathered beside it — runs,
sharing, briefings, feeds, destinations, feedback, rules and alerts — each its own object, reached as an attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic_ai.models import Model

from kernel import Clock, utc_now
from monitors.alerts import AlertService
from monitors.briefings import BriefingService
from monitors.catalogue import UNCHANGED, MonitorCatalogue, MonitorFields, MonitorListener, split_source_specs
from monitors.destination_send import DestinationSenders
from monitors.destinations import DestinationService
from monitors.feedback import MonitorFeedback
from monitors.feeds import MonitorFeeds
from monitors.reader_rules import ReaderRuleService
from monitors.recorder import RunRecorder
from monitors.runner import MonitorRunner, PipelineFunction, SourceResolver
from monitors.runs import SEARCH_LOOKBACK_HOURS, MonitorRuns
from monitors.sharing import MonitorSharing
from monitors.views import MonitorSettings, RunSummary, effective_timezone, schedule_of
from research import ItemEmbedder, run_pipeline
from sources import HttpClient
from storage import Database


class MonitorService(MonitorCatalogue):
    """Everything chats (commands, agent tools) do with monitors: the catalogue's own methods, and its `runs`,
    `sharing`, `briefings`, `feeds`, `destinations`, `feedback`, `rules` and `alerts`."""

    def __init__(
        self,
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
    ) -> None:
        super().__init__(
            database,
            resolve_sources=resolve_sources,
            settings=settings,
            clock=clock,
            on_deliveries_queued=on_deliveries_queued,
        )
        recorder = RunRecorder(database, on_queued=on_deliveries_queued)
        self._runner = MonitorRunner(
            database,
            resolve_sources=resolve_sources,
            light_model=light_model,
            heavy_model=heavy_model,
            out_dir=out_dir,
            settings=self.settings,
            clock=clock,
            pipeline=pipeline,
            on_deliveries_queued=on_deliveries_queued,
            recorder=recorder,
        )
        self.runs = MonitorRuns(self, self._runner, recorder, clock=clock)
        """Scheduled runs, `/digest`'s run now and `/search`'s one-off run."""
        self.sharing = MonitorSharing(self, database, clock=clock, on_queued=on_deliveries_queued)
        """Sharing and subscriptions: share, browse, subscribe, a subscriber's own pause and delivery, handovers."""
        self.briefings = BriefingService(
            database,
            out_dir=out_dir,
            clock=clock,
            min_interval_seconds=self.settings.min_interval_seconds,
            on_queued=on_deliveries_queued,
        )
        """Each chat's briefing: its time, and the briefings that are due."""
        self.feeds = MonitorFeeds(database, clock=clock)
        """Each monitor's Atom and JSON feed: its token, and the documents built from its stored runs."""
        self.destinations = (
            DestinationService(database, http=http, senders=destinations, sharing=self.sharing, clock=clock)
            if destinations is not None and http is not None
            else None
        )
        """Email, Discord, ntfy, webhooks… receiving monitors and briefings (None: this process has no senders)."""

        self.feedback = MonitorFeedback(database, clock=clock, embedder=embedder)
        """Readers' marks on digests (per monitor and chat), each chat's view of a run, and "why this story"."""

        self.rules = ReaderRuleService(self, database)
        """Each chat's own rules on the monitors it receives (/filter)."""
        self.alerts = AlertService(database, clock=clock)
        """Each chat's alerts on the monitors it receives (checked by the runner on every run)."""

    # ---- runs: `runs` (MonitorRuns) does them ------------------------------------------------------------

    async def check_pending_alerts(self) -> int:
        """The alerts' recovery pass (`MonitorRunner.check_pending_alerts`): stored runs whose alerts a stopped
        process left unchecked are checked now; the number of notices queued."""
        return await self._runner.check_pending_alerts()


__all__ = [
    "SEARCH_LOOKBACK_HOURS",
    "UNCHANGED",
    "MonitorFields",
    "MonitorListener",
    "MonitorService",
    "RunSummary",
    "effective_timezone",
    "schedule_of",
    "split_source_specs",
]
