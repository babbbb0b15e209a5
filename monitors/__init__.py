"""Standing monitors: schedule grammar, scheduler, runs, subscriptions and the delivery outbox."""

from monitors.schedule import (
    DEFAULT_SCHEDULE_TEXT,
    Schedule,
    ScheduleError,
    ScheduleKind,
    parse_schedule,
    seconds_in_words,
)

__all__ = [
    "DEFAULT_SCHEDULE_TEXT",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "parse_schedule",
    "seconds_in_words",
]
