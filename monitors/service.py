"""The monitor service: a chat's monitors (the catalogue it is), and the services gathered beside it — runs,
sharing, briefings, feeds, destinations, feedback, rules and alerts — each its own object, reached as an attribute.
`app` builds each of them (`app.monitor_service.build_monitor_service`) and hands them over as `MonitorParts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from monitors.alerts import AlertService
from monitors.briefings import BriefingService
from monitors.catalogue import UNCHANGED, MonitorCatalogue, MonitorFields, MonitorListener, split_source_specs
from monitors.destinations import DestinationService
from monitors.feedback import MonitorFeedback
from monitors.feeds import MonitorFeeds
from monitors.reader_rules import ReaderRuleService
from monitors.runner import MonitorRunner, SourceResolver
from monitors.runs import SEARCH_LOOKBACK_HOURS, MonitorRuns
from monitors.service_base import ServiceStorage
from monitors.sharing import MonitorSharing
from monitors.views import MonitorSettings, RunSummary, effective_timezone, schedule_of


@dataclass(frozen=True, kw_only=True)
class MonitorParts:
    """The services beside the catalogue, built over it (runs, sharing and rules read monitors through it)."""

    runner: MonitorRunner
    """Executes the runs `runs` opens; also the alerts' recovery pass."""
    runs: MonitorRuns
    sharing: MonitorSharing
    briefings: BriefingService
    feeds: MonitorFeeds
    destinations: DestinationService | None
    feedback: MonitorFeedback
    rules: ReaderRuleService
    alerts: AlertService


PartsBuilder = Callable[[MonitorCatalogue], MonitorParts]
"""Builds the parts over the service's catalogue (the service itself, so they share its listeners)."""


class MonitorService(MonitorCatalogue):
    """Everything chats (commands, agent tools) do with monitors: the catalogue's own methods, and its `runs`,
    `sharing`, `briefings`, `feeds`, `destinations`, `feedback`, `rules` and `alerts`."""

    def __init__(
        self,
        storage: ServiceStorage,
        *,
        resolve_sources: SourceResolver,
        parts: PartsBuilder,
        settings: MonitorSettings | None = None,
    ) -> None:
        super().__init__(storage, resolve_sources=resolve_sources, settings=settings)
        built = parts(self)
        self._runner = built.runner
        self.runs = built.runs
        """Scheduled runs, `/digest`'s run now and `/search`'s one-off run."""
        self.sharing = built.sharing
        """Sharing and subscriptions: share, browse, subscribe, a subscriber's own pause and delivery, handovers."""
        self.briefings = built.briefings
        """Each chat's briefing: its time, and the briefings that are due."""
        self.feeds = built.feeds
        """Each monitor's Atom and JSON feed: its token, and the documents built from its stored runs."""
        self.destinations = built.destinations
        """Email, Discord, ntfy, webhooks… receiving monitors and briefings (None: this process has no senders)."""
        self.feedback = built.feedback
        """Readers' marks on digests (per monitor and chat), each chat's view of a run, and "why this story"."""
        self.rules = built.rules
        """Each chat's own rules on the monitors it receives (/filter)."""
        self.alerts = built.alerts
        """Each chat's alerts on the monitors it receives (checked by the runner on every run)."""

    async def check_pending_alerts(self) -> int:
        """The alerts' recovery pass (`MonitorRunner.check_pending_alerts`): stored runs whose alerts a stopped
        process left unchecked are checked now; the number of notices queued."""
        return await self._runner.check_pending_alerts()


__all__ = [
    "SEARCH_LOOKBACK_HOURS",
    "UNCHANGED",
    "MonitorFields",
    "MonitorListener",
    "MonitorParts",
    "MonitorService",
    "PartsBuilder",
    "RunSummary",
    "effective_timezone",
    "schedule_of",
    "split_source_specs",
]
