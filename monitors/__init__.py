"""Standing monitors: schedule grammar, scheduler, runs, subscriptions, briefings and the delivery outbox."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from monitors.alerts import MAX_ALERTS_PER_CHAT, AlertService
    from monitors.briefings import BriefingService
    from monitors.catalogue import MonitorCatalogue, split_source_specs
    from monitors.chats import ChatService
    from monitors.delivery import DeliveryWorker
    from monitors.destination_send import DestinationSenders
    from monitors.destinations import DestinationError, DestinationService
    from monitors.feedback import FeedbackError, MonitorFeedback, acknowledgment, story_buttons
    from monitors.feeds import FeedKind, MonitorFeeds, feed_path
    from monitors.items import ItemService
    from monitors.pages import DigestPages, PageKind
    from monitors.portability import (
        MAX_IMPORT_BYTES,
        MAX_IMPORT_MONITORS,
        MonitorEntry,
        create_imported,
        export_monitors,
        plan_import,
        read_import_file,
        read_monitor_file,
    )
    from monitors.reader_rules import ReaderRuleService
    from monitors.recorder import RunRecorder
    from monitors.runner import MonitorRunner, PipelineFunction, SourceResolver, item_of_record
    from monitors.runs import MonitorRuns
    from monitors.schedule import Schedule, ScheduleError, parse_schedule
    from monitors.scheduler import MonitorScheduler, due_monitor_ids
    from monitors.service import MonitorParts, MonitorService
    from monitors.service_base import ServiceStorage
    from monitors.sharing import (
        BROWSE_LIMIT,
        MonitorSharing,
        SharedMonitor,
        SubscribeOffer,
        chat_label,
        normalise_topic,
    )
    from monitors.views import (
        MonitorAccessError,
        MonitorNotFoundError,
        MonitorSettings,
        MonitorView,
        RunSummary,
        effective_timezone,
        monitor_view,
    )

__all__ = [
    "BROWSE_LIMIT",
    "MAX_ALERTS_PER_CHAT",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_MONITORS",
    "AlertService",
    "BriefingService",
    "ChatService",
    "DeliveryWorker",
    "DestinationError",
    "DestinationSenders",
    "DestinationService",
    "DigestPages",
    "FeedKind",
    "FeedbackError",
    "ItemService",
    "MonitorAccessError",
    "MonitorCatalogue",
    "MonitorEntry",
    "MonitorFeedback",
    "MonitorFeeds",
    "MonitorNotFoundError",
    "MonitorParts",
    "MonitorRunner",
    "MonitorRuns",
    "MonitorScheduler",
    "MonitorService",
    "MonitorSettings",
    "MonitorSharing",
    "MonitorView",
    "PageKind",
    "PipelineFunction",
    "ReaderRuleService",
    "RunRecorder",
    "RunSummary",
    "Schedule",
    "ScheduleError",
    "ServiceStorage",
    "SharedMonitor",
    "SourceResolver",
    "SubscribeOffer",
    "acknowledgment",
    "chat_label",
    "create_imported",
    "due_monitor_ids",
    "effective_timezone",
    "export_monitors",
    "feed_path",
    "item_of_record",
    "monitor_view",
    "normalise_topic",
    "parse_schedule",
    "plan_import",
    "read_import_file",
    "read_monitor_file",
    "split_source_specs",
    "story_buttons",
]

_SUBMODULES = {
    "alerts": ["MAX_ALERTS_PER_CHAT", "AlertService"],
    "briefings": ["BriefingService"],
    "catalogue": ["MonitorCatalogue", "split_source_specs"],
    "chats": ["ChatService"],
    "delivery": ["DeliveryWorker"],
    "destination_send": ["DestinationSenders"],
    "destinations": ["DestinationError", "DestinationService"],
    "portability": [
        "MAX_IMPORT_BYTES",
        "MAX_IMPORT_MONITORS",
        "MonitorEntry",
        "create_imported",
        "export_monitors",
        "plan_import",
        "read_import_file",
        "read_monitor_file",
    ],
    "reader_rules": ["ReaderRuleService"],
    "recorder": ["RunRecorder"],
    "runner": ["MonitorRunner", "PipelineFunction", "SourceResolver", "item_of_record"],
    "runs": ["MonitorRuns"],
    "schedule": ["Schedule", "ScheduleError", "parse_schedule"],
    "pages": ["DigestPages", "PageKind"],
    "feedback": ["FeedbackError", "MonitorFeedback", "acknowledgment", "story_buttons"],
    "feeds": ["FeedKind", "MonitorFeeds", "feed_path"],
    "items": ["ItemService"],
    "scheduler": ["MonitorScheduler", "due_monitor_ids"],
    "service": ["MonitorParts", "MonitorService"],
    "service_base": ["ServiceStorage"],
    "sharing": ["BROWSE_LIMIT", "MonitorSharing", "SharedMonitor", "SubscribeOffer", "chat_label", "normalise_topic"],
    "views": [
        "MonitorAccessError",
        "MonitorNotFoundError",
        "MonitorSettings",
        "MonitorView",
        "RunSummary",
        "effective_timezone",
        "monitor_view",
    ],
}
"""Which names each submodule defines; `tests/test_startup.py` checks it against the imports above."""

__getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_SUBMODULES)
