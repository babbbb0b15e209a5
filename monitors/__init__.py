"""Standing monitors: schedule grammar, scheduler, runs, subscriptions and the delivery outbox."""

from monitors.collections import store_collection
from monitors.delivery import (
    Attachment,
    ChatGone,
    ChatMoved,
    ChatSender,
    DeliveryError,
    DeliveryReport,
    DeliveryWorker,
    OutgoingDigest,
    RetryLater,
    mark_chat_gone,
    move_chat,
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
from monitors.service import UNCHANGED, MonitorService, effective_timezone, split_source_specs
from monitors.views import MonitorAccessError, MonitorNotFoundError, MonitorSettings, MonitorView, RunSummary

__all__ = [
    "DEFAULT_SCHEDULE_TEXT",
    "UNCHANGED",
    "Attachment",
    "ChatGone",
    "ChatMoved",
    "ChatSender",
    "DeliveryError",
    "DeliveryReport",
    "DeliveryWorker",
    "MonitorAccessError",
    "MonitorNotFoundError",
    "MonitorScheduler",
    "MonitorService",
    "MonitorSettings",
    "MonitorView",
    "OutgoingDigest",
    "RetryLater",
    "RunSummary",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "SourceResolver",
    "effective_timezone",
    "mark_chat_gone",
    "move_chat",
    "parse_schedule",
    "seconds_in_words",
    "split_source_specs",
    "store_collection",
]
