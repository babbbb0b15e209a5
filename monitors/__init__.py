"""Standing monitors: schedule grammar, scheduler, runs, subscriptions, briefings and the delivery outbox."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names load on first use (`__getattr__`), so importing the package stays cheap
    from monitors.briefings import BriefingService, QueuedBriefing
    from monitors.collections import store_collection
    from monitors.delivery import DELIVERY_LEASE, DeliveryReport, DeliveryWorker, mark_chat_gone, move_chat
    from monitors.error_ids import new_error_id
    from monitors.notices import BRIEFING_KIND, NOTICE_KIND
    from monitors.outbound import (
        CALLBACK_DATA_MAX_BYTES,
        Attachment,
        AttachmentKind,
        Button,
        ChatGone,
        ChatMoved,
        ChatSender,
        DeliveryError,
        ProgressSink,
        ProgressUpdate,
        Purpose,
        Reply,
        RetryLater,
    )
    from monitors.portability import (
        MAX_IMPORT_BYTES,
        MAX_IMPORT_MONITORS,
        MAX_SOURCES_PER_MONITOR,
        ExportedMonitors,
        ImportPlan,
        ImportResult,
        MonitorEntry,
        Refused,
        create_imported,
        export_monitors,
        plan_import,
        read_monitor_file,
    )
    from monitors.runner import SourceResolver
    from monitors.schedule import (
        DEFAULT_SCHEDULE_TEXT,
        Schedule,
        ScheduleError,
        ScheduleKind,
        parse_schedule,
        seconds_in_words,
    )
    from monitors.scheduler import MonitorScheduler
    from monitors.service import UNCHANGED, MonitorService, split_source_specs
    from monitors.sharing import (
        BROWSE_LIMIT,
        MonitorSharing,
        NotSubscribedError,
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
        in_briefing,
        monitor_view,
    )

__all__ = [
    "BRIEFING_KIND",
    "BROWSE_LIMIT",
    "CALLBACK_DATA_MAX_BYTES",
    "DEFAULT_SCHEDULE_TEXT",
    "DELIVERY_LEASE",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_MONITORS",
    "MAX_SOURCES_PER_MONITOR",
    "NOTICE_KIND",
    "UNCHANGED",
    "Attachment",
    "AttachmentKind",
    "BriefingService",
    "Button",
    "ChatGone",
    "ChatMoved",
    "ChatSender",
    "DeliveryError",
    "DeliveryReport",
    "DeliveryWorker",
    "ExportedMonitors",
    "ImportPlan",
    "ImportResult",
    "MonitorAccessError",
    "MonitorEntry",
    "MonitorNotFoundError",
    "MonitorScheduler",
    "MonitorService",
    "MonitorSettings",
    "MonitorSharing",
    "MonitorView",
    "NotSubscribedError",
    "ProgressSink",
    "ProgressUpdate",
    "Purpose",
    "QueuedBriefing",
    "Refused",
    "Reply",
    "RetryLater",
    "RunSummary",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "SharedMonitor",
    "SourceResolver",
    "SubscribeOffer",
    "chat_label",
    "create_imported",
    "effective_timezone",
    "export_monitors",
    "in_briefing",
    "mark_chat_gone",
    "monitor_view",
    "move_chat",
    "new_error_id",
    "normalise_topic",
    "parse_schedule",
    "plan_import",
    "read_monitor_file",
    "seconds_in_words",
    "split_source_specs",
    "store_collection",
]

_SUBMODULE_OF = {
    "BriefingService": "briefings",
    "QueuedBriefing": "briefings",
    "store_collection": "collections",
    "DELIVERY_LEASE": "delivery",
    "DeliveryReport": "delivery",
    "DeliveryWorker": "delivery",
    "mark_chat_gone": "delivery",
    "move_chat": "delivery",
    "new_error_id": "error_ids",
    "BRIEFING_KIND": "notices",
    "NOTICE_KIND": "notices",
    "CALLBACK_DATA_MAX_BYTES": "outbound",
    "Attachment": "outbound",
    "AttachmentKind": "outbound",
    "Button": "outbound",
    "ChatGone": "outbound",
    "ChatMoved": "outbound",
    "ChatSender": "outbound",
    "DeliveryError": "outbound",
    "ProgressSink": "outbound",
    "ProgressUpdate": "outbound",
    "Purpose": "outbound",
    "Reply": "outbound",
    "RetryLater": "outbound",
    "MAX_IMPORT_BYTES": "portability",
    "MAX_IMPORT_MONITORS": "portability",
    "MAX_SOURCES_PER_MONITOR": "portability",
    "ExportedMonitors": "portability",
    "ImportPlan": "portability",
    "ImportResult": "portability",
    "MonitorEntry": "portability",
    "Refused": "portability",
    "create_imported": "portability",
    "export_monitors": "portability",
    "plan_import": "portability",
    "read_monitor_file": "portability",
    "SourceResolver": "runner",
    "DEFAULT_SCHEDULE_TEXT": "schedule",
    "Schedule": "schedule",
    "ScheduleError": "schedule",
    "ScheduleKind": "schedule",
    "parse_schedule": "schedule",
    "seconds_in_words": "schedule",
    "MonitorScheduler": "scheduler",
    "UNCHANGED": "service",
    "MonitorService": "service",
    "split_source_specs": "service",
    "BROWSE_LIMIT": "sharing",
    "MonitorSharing": "sharing",
    "NotSubscribedError": "sharing",
    "SharedMonitor": "sharing",
    "SubscribeOffer": "sharing",
    "chat_label": "sharing",
    "normalise_topic": "sharing",
    "MonitorAccessError": "views",
    "MonitorNotFoundError": "views",
    "MonitorSettings": "views",
    "MonitorView": "views",
    "RunSummary": "views",
    "effective_timezone": "views",
    "in_briefing": "views",
    "monitor_view": "views",
}
"""Where each exported name is defined; `tests/test_startup.py` checks it against the imports above."""


def __getattr__(name: str) -> object:
    submodule = _SUBMODULE_OF.get(name)
    if submodule is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{submodule}"), name)
    globals()[name] = value
    return value
