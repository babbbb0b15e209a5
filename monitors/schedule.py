"""Schedule grammar for standing monitors: parse phrases like "daily at 08:30", build triggers, render back."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, model_validator

from monitors.triggers import (
    APS_WEEKDAYS,
    CRON_EXAMPLE,
    EveryNDaysTrigger,
    OncePerWallTime,
    ScheduleError,
    compile_cron,
    cron_min_gap_seconds,
    cron_trigger,
    interval_trigger,
    jittered,
    quoted,
)

__all__ = [
    "DEFAULT_SCHEDULE_TEXT",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "latest_due_time",
    "parse_schedule",
    "seconds_in_words",
]

DEFAULT_SCHEDULE_TEXT = "daily at 09:00"
"""The schedule a monitor gets when the person names none."""

MAX_INTERVAL_DAYS = 366
MAX_TEXT_LENGTH = 200

WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_WORDS: dict[str, int] = {name: number for number, name in enumerate(WEEKDAY_NAMES)} | {
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3, "thurs": 3,
    "fri": 4, "sat": 5, "sun": 6,
}  # fmt: skip
_UNIT_WORDS: dict[str, str] = (
    dict.fromkeys(("minute", "minutes", "min", "mins", "m"), "minutes")
    | dict.fromkeys(("hour", "hours", "hr", "hrs", "h"), "hours")
    | dict.fromkeys(("day", "days", "d"), "days")
)
_TIME_RE = re.compile(r"(?P<hour>[0-9]{1,2})(?::(?P<minute>[0-9]{2}))?(?P<half>am|pm)?")
_EVERY_RE = re.compile(r"every ?(?P<count>[0-9]+)? ?(?P<unit>[a-z]+)(?P<rest>(?: .*)?)")


class ScheduleKind(StrEnum):
    """Which form of the grammar a schedule uses."""

    INTERVAL = "interval"
    EVERY_DAYS = "every_days"
    DAILY = "daily"
    WEEKDAYS = "weekdays"
    WEEKLY = "weekly"
    CRON = "cron"


_FIELDS_BY_KIND: dict[ScheduleKind, frozenset[str]] = {
    ScheduleKind.INTERVAL: frozenset({"every_minutes"}),
    ScheduleKind.EVERY_DAYS: frozenset({"every_days", "at"}),
    ScheduleKind.DAILY: frozenset({"at"}),
    ScheduleKind.WEEKDAYS: frozenset({"at"}),
    ScheduleKind.WEEKLY: frozenset({"at", "weekday"}),
    ScheduleKind.CRON: frozenset({"cron"}),
}


class Schedule(BaseModel):
    """When a monitor runs: the parsed form of a schedule phrase. Build it with `parse_schedule`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    kind: ScheduleKind
    """Which form of the grammar this is; it decides which of the other fields are set."""
    timezone: str
    """Canonical IANA timezone name the times of day (and cron fields) are read in."""
    every_minutes: int | None = Field(default=None, ge=1, le=MAX_INTERVAL_DAYS * 24 * 60)
    """INTERVAL only: minutes between runs ("every 6 hours" is 360)."""
    every_days: int | None = Field(default=None, ge=2, le=MAX_INTERVAL_DAYS)
    """EVERY_DAYS only: days between runs (one day is DAILY)."""
    at: time | None = None
    """Local time of day (whole minutes) for EVERY_DAYS, DAILY, WEEKDAYS and WEEKLY."""
    weekday: int | None = Field(default=None, ge=0, le=6)
    """WEEKLY only: 0 is Monday … 6 is Sunday."""
    cron: str | None = None
    """CRON only: the 5-field crontab expression with standard meaning (day of week 0 and 7 are Sunday)."""

    @model_validator(mode="after")
    def _check_shape(self) -> Schedule:
        wanted = _FIELDS_BY_KIND[self.kind]
        for name in ("every_minutes", "every_days", "at", "weekday", "cron"):
            if (getattr(self, name) is not None) != (name in wanted):
                raise ValueError(f"a {self.kind} schedule {'needs' if name in wanted else 'takes no'} {name}")
        if self.at is not None and (self.at.second or self.at.microsecond or self.at.tzinfo is not None):
            raise ValueError("at must be a naive time in whole minutes")
        if _canonical_timezone(self.timezone) != self.timezone:
            raise ValueError(f"timezone must be the canonical IANA name, not {self.timezone!r}")
        if self.cron is not None:
            compile_cron(self.cron)
        return self

    def trigger(self, *, jitter_seconds: int | None = None) -> BaseTrigger:
        """An APScheduler 3 trigger firing at exactly the times `next_run` gives (plus optional jitter)."""
        zone = ZoneInfo(self.timezone)
        if self.kind is ScheduleKind.INTERVAL:
            return interval_trigger(self._minutes(), zone, jitter_seconds)
        if self.kind is ScheduleKind.CRON:
            spec = compile_cron(self._cron_text())
            inner = cron_trigger(spec, zone)
            return OncePerWallTime(inner, zone, jitter_seconds) if spec.fixed_hours else jittered(inner, jitter_seconds)
        at = self._at()
        if self.kind is ScheduleKind.EVERY_DAYS:
            return EveryNDaysTrigger(every_days=self.every_days or 2, at=at, zone=zone, jitter=jitter_seconds)
        day_of_week = {ScheduleKind.DAILY: "*", ScheduleKind.WEEKDAYS: "mon-fri"}.get(
            self.kind, APS_WEEKDAYS[self.weekday or 0]
        )
        cron = CronTrigger(day_of_week=day_of_week, hour=at.hour, minute=at.minute, timezone=zone)
        return OncePerWallTime(cron, zone, jitter_seconds)

    def next_run(self, after: datetime) -> datetime:
        """The first run strictly after `after` (an aware datetime), as an aware UTC datetime."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("next_run needs a timezone-aware datetime")
        start = after.astimezone(UTC) + timedelta(microseconds=1)
        fire = self.trigger().get_next_fire_time(None, start)
        if fire is None:
            raise ScheduleError("This schedule has no more runs.")
        result: datetime = fire.astimezone(UTC)
        return result

    def min_gap_seconds(self) -> int:
        """The shortest time between two runs, in seconds, ignoring the hour DST adds or removes."""
        if self.kind is ScheduleKind.INTERVAL:
            return self._minutes() * 60
        if self.kind is ScheduleKind.CRON:
            gap = cron_min_gap_seconds(self._cron_text())
            return gap if gap is not None else MAX_INTERVAL_DAYS * 86400
        if self.kind is ScheduleKind.EVERY_DAYS:
            return (self.every_days or 2) * 86400
        return 7 * 86400 if self.kind is ScheduleKind.WEEKLY else 86400

    def describe(self) -> str:
        """The schedule in words for a chat: "every day at 08:30 (Asia/Shanghai)", "every 6 hours"."""
        if self.kind is ScheduleKind.INTERVAL:
            minutes = self._minutes()
            if minutes % 60 == 0:
                return "every hour" if minutes == 60 else f"every {minutes // 60} hours"
            return "every minute" if minutes == 1 else f"every {minutes} minutes"
        if self.kind is ScheduleKind.CRON:
            return f"cron {self._cron_text()} ({self.timezone})"
        when = {
            ScheduleKind.EVERY_DAYS: f"every {self.every_days} days",
            ScheduleKind.DAILY: "every day",
            ScheduleKind.WEEKDAYS: "weekdays",
        }.get(self.kind, f"every {WEEKDAY_NAMES[self.weekday or 0].capitalize()}")
        return f"{when} at {self._at():%H:%M} ({self.timezone})"

    def body_text(self) -> str:
        """`to_text()` without its closing "in <zone>": the schedule to read in a timezone given apart."""
        return self.to_text().rsplit(" in ", 1)[0]

    def to_text(self) -> str:
        """Canonical grammar text (stored in the database): `parse_schedule(s.to_text(), ...) == s`."""
        if self.kind is ScheduleKind.INTERVAL:
            minutes = self._minutes()
            if minutes == 60:
                body = "hourly"
            elif minutes % 60 == 0:
                body = f"every {minutes // 60} hours"
            else:
                body = f"every {minutes} minutes"
        elif self.kind is ScheduleKind.CRON:
            body = f'cron "{self._cron_text()}"'
        else:
            body = {
                ScheduleKind.EVERY_DAYS: f"every {self.every_days} days",
                ScheduleKind.DAILY: "daily",
                ScheduleKind.WEEKDAYS: "weekdays",
            }.get(self.kind, f"weekly on {WEEKDAY_NAMES[self.weekday or 0]}")
            body = f"{body} at {self._at():%H:%M}"
        return f"{body} in {self.timezone}"

    def _minutes(self) -> int:
        assert self.every_minutes is not None  # guaranteed by _check_shape for INTERVAL
        return self.every_minutes

    def _at(self) -> time:
        assert self.at is not None  # guaranteed by _check_shape for the time-of-day kinds
        return self.at

    def _cron_text(self) -> str:
        assert self.cron is not None  # guaranteed by _check_shape for CRON
        return self.cron


def parse_schedule(text: str, *, timezone: str, min_interval_seconds: int) -> Schedule:
    """Parse a schedule phrase (empty means `DEFAULT_SCHEDULE_TEXT`); a trailing "in <IANA zone>" overrides
    `timezone`. Raises ScheduleError for anything unknown, impossible or more frequent than the minimum."""
    zone_name = _canonical_timezone(timezone)
    if len(text) > MAX_TEXT_LENGTH:
        raise ScheduleError(f'That schedule is too long; try something like "{DEFAULT_SCHEDULE_TEXT}".')
    normalized = " ".join(re.sub("[\u201c\u201d\u201e\u201f\u00ab\u00bb\u2018\u2019']", '"', text).lower().split())
    body, zone_override = _split_timezone(normalized or DEFAULT_SCHEDULE_TEXT)
    if zone_override is not None:
        zone_name = _canonical_timezone(zone_override)
    schedule = _parse_body(body or DEFAULT_SCHEDULE_TEXT, zone_name)
    if schedule.min_gap_seconds() < min_interval_seconds:
        raise ScheduleError(
            f"That runs too often: a monitor may run at most once every {seconds_in_words(min_interval_seconds)}"
            f"{_example_at_least(min_interval_seconds)}."
        )
    return schedule


def seconds_in_words(seconds: int) -> str:
    """A duration for people: 900 → "15 minutes", 5400 → "1 hour and 30 minutes"."""
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    if not parts:
        return "0 seconds"
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _example_at_least(min_seconds: int) -> str:
    examples = [f"every {m} minutes" for m in (5, 10, 15, 20, 30)] + ["hourly"]
    examples += [f"every {h} hours" for h in (2, 3, 4, 6, 8, 12)] + ["daily at 09:00", "weekly on monday at 09:00"]
    gaps = [5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720, 1440, 10080]
    fitting = [example for example, gap in zip(examples, gaps, strict=True) if gap * 60 >= min_seconds]
    return f', e.g. "{fitting[0]}"' if fitting else ""


@cache
def _timezones_by_lower_name() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()} | {"utc": "UTC"}


def _canonical_timezone(name: str) -> str:
    canonical = _timezones_by_lower_name().get(name.strip().lower())
    if canonical is None:
        raise ScheduleError(f"{quoted(name)} is not a timezone I know; use an IANA name like Europe/Berlin or UTC.")
    try:
        ZoneInfo(canonical)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"The timezone {quoted(name)} cannot be loaded here; try another IANA name.") from None
    return canonical


def _split_timezone(text: str) -> tuple[str, str | None]:
    if match := re.fullmatch(r"(?P<body>.*?) ?\((?P<zone>[^()]*)\)", text):
        return match["body"], match["zone"]
    if match := re.fullmatch(r"(?P<body>(?:.* )?)in (?P<zone>\S+)", text):
        return match["body"].strip(), match["zone"]
    return text, None


def _parse_body(body: str, zone_name: str) -> Schedule:
    if match := re.fullmatch(r"cron(?: (?P<expr>.*))?", body):
        expr = " ".join((match["expr"] or "").strip('"').split())
        if '"' in expr or not expr:
            raise ScheduleError(f"Write a cron schedule as {CRON_EXAMPLE} (minute hour day month weekday).")
        compile_cron(expr)
        return Schedule(kind=ScheduleKind.CRON, timezone=zone_name, cron=expr)
    if body == "hourly":
        return Schedule(kind=ScheduleKind.INTERVAL, timezone=zone_name, every_minutes=60)
    if match := re.fullmatch(r"(?:daily|every day|each day)(?P<rest>(?: .*)?)", body):
        return _at_schedule(ScheduleKind.DAILY, match["rest"], zone_name)
    if match := re.fullmatch(r"(?:on )?(?:weekdays|every weekday|each weekday)(?P<rest>(?: .*)?)", body):
        return _at_schedule(ScheduleKind.WEEKDAYS, match["rest"], zone_name)
    if match := re.fullmatch(r"(?:weekly|every week|each week)(?P<rest>(?: .*)?)", body):
        return _at_schedule(ScheduleKind.WEEKLY, match["rest"], zone_name)
    match = re.fullmatch(r"(?:every|each|on) (?P<day>[a-z]+)(?P<rest>(?: .*)?)", body)
    if match and _day_number(match["day"]) is not None:
        return _at_schedule(ScheduleKind.WEEKLY, f" on {match['day']}{match['rest']}", zone_name)
    if match := _EVERY_RE.fullmatch(body):
        return _interval_schedule(match["count"], match["unit"], match["rest"], zone_name)
    if body.startswith("every"):
        raise ScheduleError('After "every" give a number and minutes, hours or days, like "every 6 hours".')
    # only with "at": a bare "5" or "noon" at the end of a /track topic ("GPT 5") must not become a schedule
    if re.fullmatch(r"at(?: .*)?", body):
        return _at_schedule(ScheduleKind.DAILY, f" {body}", zone_name)
    raise ScheduleError(
        f'I don\'t understand the schedule {quoted(body)}; try "daily at 08:30", "every 6 hours", '
        f'"weekdays at 09:00", "weekly on monday at 10:00" or {CRON_EXAMPLE}.'
    )


def _interval_schedule(count_text: str | None, unit_word: str, rest: str, zone_name: str) -> Schedule:
    unit = _UNIT_WORDS.get(unit_word)
    if unit is None:
        raise ScheduleError(
            f'{quoted(unit_word)} is not a unit I know; say "every 30 minutes", "every 6 hours" or "every 2 days".'
        )
    count = 1 if count_text is None else int(count_text) if len(count_text) <= 9 else 10**9
    if count < 1:
        raise ScheduleError('An interval must be at least 1, like "every 6 hours".')
    if count * {"minutes": 60, "hours": 3600, "days": 86400}[unit] > MAX_INTERVAL_DAYS * 86400:
        raise ScheduleError(f"That interval is too long; the longest is {MAX_INTERVAL_DAYS} days.")
    if unit == "days":
        kind = ScheduleKind.DAILY if count == 1 else ScheduleKind.EVERY_DAYS
        return _at_schedule(kind, rest, zone_name, every_days=None if count == 1 else count)
    if rest.strip():
        raise ScheduleError(
            'An interval like "every 6 hours" takes no time or day; for a fixed time say "daily at 08:30".'
        )
    return Schedule(
        kind=ScheduleKind.INTERVAL, timezone=zone_name, every_minutes=count * (60 if unit == "hours" else 1)
    )


def _at_schedule(kind: ScheduleKind, rest: str, zone_name: str, *, every_days: int | None = None) -> Schedule:
    takes_day = kind is ScheduleKind.WEEKLY
    weekday: int | None = None
    at: time | None = None
    words = rest.split()
    while words:
        word = words.pop(0)
        if word in ("on", "every") or _day_number(word) is not None:
            day_word = words.pop(0) if word in ("on", "every") and words else word
            if not takes_day:
                raise ScheduleError('Only weekly schedules take a day, like "weekly on monday at 09:00".')
            number = _day_number(day_word)
            if number is None or day_word in ("on", "every"):
                raise ScheduleError(f"{quoted(day_word)} is not a day of the week; use a name like monday or mon.")
            if weekday is not None:
                raise ScheduleError('Give one day for a weekly schedule, like "weekly on friday at 17:00".')
            weekday = number
            continue
        if word == "at":
            if not words:
                raise ScheduleError('Say the time after "at", like "daily at 08:30".')
            word = words.pop(0)
        if words and words[0] in ("am", "pm", "a.m.", "p.m."):
            word += words.pop(0)
        if at is not None:
            raise ScheduleError('Give one time of day, like "daily at 08:30".')
        at = _parse_time(word)
    return Schedule(
        kind=kind,
        timezone=zone_name,
        at=at or time(9, 0),
        weekday=(0 if weekday is None else weekday) if takes_day else None,
        every_days=every_days,
    )


def _day_number(word: str) -> int | None:
    number = _DAY_WORDS.get(word)
    if number is None and word.endswith("s"):
        number = _DAY_WORDS.get(word[:-1])
    return number


def _parse_time(word: str) -> time:
    named = {"noon": time(12, 0), "midday": time(12, 0), "midnight": time(0, 0)}.get(word)
    if named is not None:
        return named
    match = _TIME_RE.fullmatch(word.replace(".", "") if word.endswith("m.") else word)
    problem = ScheduleError(
        f"{quoted(word)} is not a time of day I understand; use HH:MM like 08:30 or 20:30, or 8am / 8:30pm."
    )
    if match is None:
        raise problem
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    if match["half"]:
        if not 1 <= hour <= 12:
            raise problem
        hour = hour % 12 + (12 if match["half"] == "pm" else 0)
    if hour > 23 or minute > 59:
        raise problem
    return time(hour, minute)


LATEST_DUE_WINDOW = timedelta(days=8)
"""How far back `latest_due_time` walks the schedule to find the most recent missed time."""


def latest_due_time(schedule: Schedule, first_due: datetime, now: datetime) -> datetime:
    """The most recent scheduled time at or before `now`, not before `first_due` (itself at or before `now`)."""
    latest = first_due
    cursor = max(first_due, now - LATEST_DUE_WINDOW)
    while True:
        try:
            following = schedule.next_run(cursor)
        except ScheduleError:
            return latest
        if following > now:
            return latest
        latest = cursor = following
