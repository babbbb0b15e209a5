"""Standing monitors: schedule grammar, scheduler, runs, subscriptions and the delivery outbox."""

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
from monitors.schedule import (
    DEFAULT_SCHEDULE_TEXT,
    Schedule,
    ScheduleError,
    ScheduleKind,
    parse_schedule,
    seconds_in_words,
)
from monitors.scheduler import MonitorScheduler
from monitors.service import UNCHANGED, MonitorService
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
    "mark_chat_gone",
    "move_chat",
    "parse_schedule",
    "seconds_in_words",
]
