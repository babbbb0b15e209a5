"""Standing monitors: schedule grammar, scheduler, runs, subscriptions and the delivery outbox."""

from monitors.collections import store_collection
from monitors.delivery import DELIVERY_LEASE, DeliveryReport, DeliveryWorker, mark_chat_gone, move_chat
from monitors.error_ids import new_error_id
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
    "CALLBACK_DATA_MAX_BYTES",
    "DEFAULT_SCHEDULE_TEXT",
    "DELIVERY_LEASE",
    "UNCHANGED",
    "Attachment",
    "AttachmentKind",
    "Button",
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
    "ProgressSink",
    "ProgressUpdate",
    "Purpose",
    "Reply",
    "RetryLater",
    "RunSummary",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "SourceResolver",
    "effective_timezone",
    "mark_chat_gone",
    "move_chat",
    "new_error_id",
    "parse_schedule",
    "seconds_in_words",
    "split_source_specs",
    "store_collection",
]
