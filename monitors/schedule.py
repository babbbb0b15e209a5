"""Schedule grammar for standing monitors: parse phrases like "daily at 08:30", build triggers, render back."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from enum import StrEnum
from functools import cache, lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_SCHEDULE_TEXT = "daily at 09:00"
"""The schedule a monitor gets when the person names none."""

# Interval schedules count from this fixed anchor (a Monday), never from "now", so a restart cannot
# shift their phase: elapsed-time intervals are multiples of the interval after ANCHOR_INSTANT, and
# "every N days" fires on local dates a multiple of N days after ANCHOR_DATE.
ANCHOR_DATE = date(1970, 1, 5)
ANCHOR_INSTANT = datetime(1970, 1, 5, tzinfo=UTC)
MAX_INTERVAL_DAYS = 366
# A cron's shortest gap is measured over this many fires from a fixed instant (so the answer never
# depends on the day it is asked), starting in a common year so a "28th then 1st" pattern is met early.
CRON_GAP_SAMPLE_FIRES = 200
CRON_GAP_REFERENCE = datetime(2023, 1, 1, tzinfo=UTC)
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
_CRON_EXAMPLE = 'cron "0 9 * * 1-5"'
_APS_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class ScheduleError(ValueError):
    """A schedule phrase was refused; the message is one sentence meant for the person in the chat."""


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
            _compile_cron(self.cron)
        return self

    def trigger(self, *, jitter_seconds: int | None = None) -> BaseTrigger:
        """An APScheduler 3 trigger firing at exactly the times `next_run` gives (plus optional jitter)."""
        zone = ZoneInfo(self.timezone)
        if self.kind is ScheduleKind.INTERVAL:
            return _interval_trigger(self._minutes(), zone, jitter_seconds)
        if self.kind is ScheduleKind.CRON:
            spec = _compile_cron(self._cron_text())
            inner = _cron_trigger(spec, zone)
            return (
                _OncePerWallTime(inner, zone, jitter_seconds) if spec.fixed_hours else _jittered(inner, jitter_seconds)
            )
        at = self._at()
        if self.kind is ScheduleKind.EVERY_DAYS:
            return _EveryNDaysTrigger(every_days=self.every_days or 2, at=at, zone=zone, jitter=jitter_seconds)
        day_of_week = {ScheduleKind.DAILY: "*", ScheduleKind.WEEKDAYS: "mon-fri"}.get(
            self.kind, _APS_WEEKDAYS[self.weekday or 0]
        )
        cron = CronTrigger(day_of_week=day_of_week, hour=at.hour, minute=at.minute, timezone=zone)
        return _OncePerWallTime(cron, zone, jitter_seconds)

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
            gap = _cron_min_gap_seconds(self._cron_text())
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


def _quoted(fragment: str) -> str:
    return f'"{fragment[:30]}…"' if len(fragment) > 30 else f'"{fragment}"'


@cache
def _timezones_by_lower_name() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()} | {"utc": "UTC"}


def _canonical_timezone(name: str) -> str:
    canonical = _timezones_by_lower_name().get(name.strip().lower())
    if canonical is None:
        raise ScheduleError(f"{_quoted(name)} is not a timezone I know; use an IANA name like Europe/Berlin or UTC.")
    try:
        ZoneInfo(canonical)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"The timezone {_quoted(name)} cannot be loaded here; try another IANA name.") from None
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
            raise ScheduleError(f"Write a cron schedule as {_CRON_EXAMPLE} (minute hour day month weekday).")
        _compile_cron(expr)
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
        f'I don\'t understand the schedule {_quoted(body)}; try "daily at 08:30", "every 6 hours", '
        f'"weekdays at 09:00", "weekly on monday at 10:00" or {_CRON_EXAMPLE}.'
    )


def _interval_schedule(count_text: str | None, unit_word: str, rest: str, zone_name: str) -> Schedule:
    unit = _UNIT_WORDS.get(unit_word)
    if unit is None:
        raise ScheduleError(
            f'{_quoted(unit_word)} is not a unit I know; say "every 30 minutes", "every 6 hours" or "every 2 days".'
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
                raise ScheduleError(f"{_quoted(day_word)} is not a day of the week; use a name like monday or mon.")
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
        f"{_quoted(word)} is not a time of day I understand; use HH:MM like 08:30 or 20:30, or 8am / 8:30pm."
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


# --- cron -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CronSpec:
    """A crontab expression expanded to value sets, with standard (Vixie) semantics."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # Python numbering: 0 is Monday
    either_day: bool  # both day fields restricted: cron fires when EITHER matches
    fixed_hours: bool  # the hour field lists wall-clock hours (no "*"), so each fires once a day


_MONTH_NAMES = tuple(name.lower() for name in calendar.month_abbr[1:])
_CRON_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_CRON_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTH_NAMES),
    ("day-of-week", 0, 7, _CRON_DAY_NAMES),
)


@lru_cache(maxsize=512)
def _compile_cron(expr: str) -> _CronSpec:
    fields = expr.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"A cron expression needs 5 fields (minute hour day month weekday), not {len(fields)}; try {_CRON_EXAMPLE}."
        )
    sets = [_expand_cron_field(field, *spec) for field, spec in zip(fields, _CRON_FIELDS, strict=True)]
    minutes, hours, days, months, cron_weekdays = sets
    weekdays = frozenset((number - 1) % 7 for number in cron_weekdays)
    day_restricted, weekday_restricted = not fields[2].startswith("*"), not fields[4].startswith("*")
    if not (day_restricted and weekday_restricted) and not any(
        day <= calendar.monthrange(2024, month)[1] for month in months for day in days
    ):
        raise ScheduleError(f"The cron expression {_quoted(expr)} never runs, because that date does not exist.")
    spec = _CronSpec(
        minutes, hours, days, months, weekdays, day_restricted and weekday_restricted, "*" not in fields[1]
    )
    try:
        _cron_trigger(spec, ZoneInfo("UTC"))
    except ValueError as error:  # APScheduler has the last word on what it accepts
        raise ScheduleError(
            f"The cron expression {_quoted(expr)} is not valid ({error}); try {_CRON_EXAMPLE}."
        ) from None
    return spec


def _expand_cron_field(field: str, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    def value(token: str) -> int:
        if token in names:
            return names.index(token) + (1 if name == "month" else 0)
        if not token.isdigit() or len(token) > 4 or not low <= int(token) <= high:
            raise ScheduleError(
                f"In the cron {name} field, {_quoted(token)} is not a value from {low} to {high}; try {_CRON_EXAMPLE}."
            )
        return int(token)

    values: set[int] = set()
    for item in field.split(","):
        match = re.fullmatch(r"(?P<base>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>[0-9]{1,4}))?", item)
        if match is None:
            raise ScheduleError(f"In the cron {name} field, {_quoted(item)} is not understood; try {_CRON_EXAMPLE}.")
        step = int(match["step"] or 1)
        if step < 1:
            raise ScheduleError(f"In the cron {name} field, a step must be at least 1; try {_CRON_EXAMPLE}.")
        first_text, _, last_text = match["base"].partition("-")
        if first_text == "*":
            first, last = low, high
        else:
            first = value(first_text)
            last = value(last_text) if last_text else (high if match["step"] else first)
        if first > last:
            raise ScheduleError(
                f"In the cron {name} field, the range {_quoted(item)} runs backwards; try {_CRON_EXAMPLE}."
            )
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _cron_trigger(spec: _CronSpec, zone: tzinfo) -> BaseTrigger:
    def listed(values: frozenset[int], full: range) -> str:
        return "*" if values == frozenset(full) else ",".join(str(v) for v in sorted(values))

    weekdays = "*" if len(spec.weekdays) == 7 else ",".join(_APS_WEEKDAYS[d] for d in sorted(spec.weekdays))
    head = f"{listed(spec.minutes, range(60))} {listed(spec.hours, range(24))}"
    days, months = listed(spec.days, range(1, 32)), listed(spec.months, range(1, 13))
    if spec.either_day:  # Vixie cron ORs the two day fields when both are restricted; APScheduler ANDs them
        return OrTrigger(
            [
                CronTrigger.from_crontab(f"{head} {days} {months} *", timezone=zone),
                CronTrigger.from_crontab(f"{head} * {months} {weekdays}", timezone=zone),
            ]
        )
    return CronTrigger.from_crontab(f"{head} {days} {months} {weekdays}", timezone=zone)


@lru_cache(maxsize=512)
def _cron_min_gap_seconds(expr: str) -> int | None:
    # Measured in UTC so the answer is the cron's own cadence, the same whatever day it is asked on.
    trigger = _cron_trigger(_compile_cron(expr), ZoneInfo("UTC"))
    smallest: int | None = None
    fire = trigger.get_next_fire_time(None, CRON_GAP_REFERENCE)
    for _ in range(CRON_GAP_SAMPLE_FIRES):
        following = None if fire is None else trigger.get_next_fire_time(fire, fire)
        if fire is None or following is None:
            break
        gap = int((following - fire).total_seconds())
        smallest = gap if smallest is None else min(smallest, gap)
        fire = following
    return smallest


# --- triggers ---------------------------------------------------------------------------------------


def _interval_trigger(minutes: int, zone: tzinfo, jitter: int | None) -> BaseTrigger:
    # Intervals that divide an hour or a day follow the local clock (every 6 hours: 00, 06, 12, 18);
    # others count elapsed time from ANCHOR_INSTANT.
    if minutes < 60 and 60 % minutes == 0:
        return CronTrigger(minute=f"*/{minutes}", timezone=zone, jitter=jitter)
    hours, remainder = divmod(minutes, 60)
    if remainder == 0 and 24 % hours == 0:
        hour = "*" if hours == 1 else ("0" if hours == 24 else f"*/{hours}")
        return CronTrigger(hour=hour, minute=0, timezone=zone, jitter=jitter)
    return IntervalTrigger(minutes=minutes, start_date=ANCHOR_INSTANT, timezone=zone, jitter=jitter)


def _jittered(trigger: BaseTrigger, jitter: int | None) -> BaseTrigger:
    trigger.jitter = jitter
    return trigger


def _is_repeated_wall_time(local: datetime) -> bool:
    """True for the second occurrence of a wall-clock time that a DST fall-back repeats."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


class _OncePerWallTime(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no type hints
    """Wraps a trigger so a wall-clock time repeated by a DST fall-back fires only at its first occurrence."""

    __slots__ = ("inner", "jitter", "timezone")

    def __init__(self, inner: BaseTrigger, zone: tzinfo, jitter: int | None) -> None:
        self.inner, self.timezone, self.jitter = inner, zone, jitter

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        fire: datetime | None = self.inner.get_next_fire_time(previous_fire_time, now)
        while fire is not None and _is_repeated_wall_time(fire.astimezone(self.timezone)):
            fire = self.inner.get_next_fire_time(fire, fire)
        jittered: datetime | None = self._apply_jitter(fire, self.jitter, now)
        return jittered

    def __str__(self) -> str:
        return f"once-per-wall-time[{self.inner}]"


class _EveryNDaysTrigger(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no type hints
    """Fires at a local time on every N-th local date counted from ANCHOR_DATE.

    A time skipped by a DST spring-forward fires after the gap (02:30 becomes 03:30); a time repeated
    by a fall-back fires at its first occurrence only."""

    __slots__ = ("at", "every_days", "jitter", "timezone")

    def __init__(self, *, every_days: int, at: time, zone: tzinfo, jitter: int | None) -> None:
        self.every_days, self.at, self.timezone, self.jitter = every_days, at, zone, jitter

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        start = (previous_fire_time + timedelta(microseconds=1) if previous_fire_time else now).astimezone(UTC)
        day = start.astimezone(self.timezone).date()
        day += timedelta(days=-(day - ANCHOR_DATE).days % self.every_days)
        while True:
            # fold=0: the first of two repeated times, and the pre-transition offset for a skipped one
            fire = datetime.combine(day, self.at, tzinfo=self.timezone).astimezone(UTC)
            if fire >= start:
                jittered: datetime = self._apply_jitter(fire.astimezone(self.timezone), self.jitter, now)
                return jittered
            day += timedelta(days=self.every_days)

    def __str__(self) -> str:
        return f"every-{self.every_days}-days[{self.at:%H:%M}]"
