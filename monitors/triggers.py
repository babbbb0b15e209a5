"""Trigger machinery for schedules: crontab with standard semantics, fixed-phase intervals, DST-safe wrappers."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

# Interval schedules count from this fixed anchor (a Monday), never from "now", so a restart cannot
# shift their phase: elapsed-time intervals are multiples of the interval after ANCHOR_INSTANT, and
# "every N days" fires on local dates a multiple of N days after ANCHOR_DATE.
ANCHOR_DATE = date(1970, 1, 5)
ANCHOR_INSTANT = datetime(1970, 1, 5, tzinfo=UTC)
# A cron's shortest gap is measured over this many fires from a fixed instant (so the answer never
# depends on the day it is asked), starting in a common year so a "28th then 1st" pattern is met early.
CRON_GAP_SAMPLE_FIRES = 200
CRON_GAP_REFERENCE = datetime(2023, 1, 1, tzinfo=UTC)
CRON_EXAMPLE = 'cron "0 9 * * 1-5"'
APS_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class ScheduleError(ValueError):
    """A schedule phrase was refused; the message is one sentence meant for the person in the chat."""


def quoted(fragment: str) -> str:
    """A fragment of the person's text, quoted and cut short, for error messages."""
    return f'"{fragment[:30]}…"' if len(fragment) > 30 else f'"{fragment}"'


# --- cron -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CronSpec:
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
def compile_cron(expr: str) -> CronSpec:
    fields = expr.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"A cron expression needs 5 fields (minute hour day month weekday), not {len(fields)}; try {CRON_EXAMPLE}."
        )
    sets = [_expand_cron_field(field, *spec) for field, spec in zip(fields, _CRON_FIELDS, strict=True)]
    minutes, hours, days, months, cron_weekdays = sets
    weekdays = frozenset((number - 1) % 7 for number in cron_weekdays)
    day_restricted, weekday_restricted = not fields[2].startswith("*"), not fields[4].startswith("*")
    if not (day_restricted and weekday_restricted) and not any(
        day <= calendar.monthrange(2024, month)[1] for month in months for day in days
    ):
        raise ScheduleError(f"The cron expression {quoted(expr)} never runs, because that date does not exist.")
    spec = CronSpec(minutes, hours, days, months, weekdays, day_restricted and weekday_restricted, "*" not in fields[1])
    try:
        cron_trigger(spec, ZoneInfo("UTC"))
    except ValueError as error:  # APScheduler has the last word on what it accepts
        raise ScheduleError(f"The cron expression {quoted(expr)} is not valid ({error}); try {CRON_EXAMPLE}.") from None
    return spec


def _expand_cron_field(field: str, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    def value(token: str) -> int:
        if token in names:
            return names.index(token) + (1 if name == "month" else 0)
        if not token.isdigit() or len(token) > 4 or not low <= int(token) <= high:
            raise ScheduleError(
                f"In the cron {name} field, {quoted(token)} is not a value from {low} to {high}; try {CRON_EXAMPLE}."
            )
        return int(token)

    values: set[int] = set()
    for item in field.split(","):
        match = re.fullmatch(r"(?P<base>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>[0-9]{1,4}))?", item)
        if match is None:
            raise ScheduleError(f"In the cron {name} field, {quoted(item)} is not understood; try {CRON_EXAMPLE}.")
        step = int(match["step"] or 1)
        if step < 1:
            raise ScheduleError(f"In the cron {name} field, a step must be at least 1; try {CRON_EXAMPLE}.")
        first_text, _, last_text = match["base"].partition("-")
        if first_text == "*":
            first, last = low, high
        else:
            first = value(first_text)
            last = value(last_text) if last_text else (high if match["step"] else first)
        if first > last:
            raise ScheduleError(
                f"In the cron {name} field, the range {quoted(item)} runs backwards; try {CRON_EXAMPLE}."
            )
        values.update(range(first, last + 1, step))
    return frozenset(values)


def cron_trigger(spec: CronSpec, zone: tzinfo) -> BaseTrigger:
    def listed(values: frozenset[int], full: range) -> str:
        return "*" if values == frozenset(full) else ",".join(str(v) for v in sorted(values))

    weekdays = "*" if len(spec.weekdays) == 7 else ",".join(APS_WEEKDAYS[d] for d in sorted(spec.weekdays))
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
def cron_min_gap_seconds(expr: str) -> int | None:
    # Measured in UTC so the answer is the cron's own cadence, the same whatever day it is asked on.
    trigger = cron_trigger(compile_cron(expr), ZoneInfo("UTC"))
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


def interval_trigger(minutes: int, zone: tzinfo, jitter: int | None) -> BaseTrigger:
    # Intervals that divide an hour or a day follow the local clock (every 6 hours: 00, 06, 12, 18);
    # others count elapsed time from ANCHOR_INSTANT.
    if minutes < 60 and 60 % minutes == 0:
        return CronTrigger(minute=f"*/{minutes}", timezone=zone, jitter=jitter)
    hours, remainder = divmod(minutes, 60)
    if remainder == 0 and 24 % hours == 0:
        hour = "*" if hours == 1 else ("0" if hours == 24 else f"*/{hours}")
        return CronTrigger(hour=hour, minute=0, timezone=zone, jitter=jitter)
    return IntervalTrigger(minutes=minutes, start_date=ANCHOR_INSTANT, timezone=zone, jitter=jitter)


def jittered(trigger: BaseTrigger, jitter: int | None) -> BaseTrigger:
    trigger.jitter = jitter
    return trigger


def _is_repeated_wall_time(local: datetime) -> bool:
    """True for the second occurrence of a wall-clock time that a DST fall-back repeats."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


class OncePerWallTime(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no type hints
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


class EveryNDaysTrigger(BaseTrigger):  # type: ignore[misc]  # apscheduler ships no type hints
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
