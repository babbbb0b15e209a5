"""Schedule grammar: every form, round trips, refusals with readable reasons, timezones and DST."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from monitors.schedule import (
    DEFAULT_SCHEDULE_TEXT,
    Schedule,
    ScheduleError,
    ScheduleKind,
    parse_schedule,
    seconds_in_words,
)
from monitors.triggers import ANCHOR_INSTANT

MIN_15 = 900


def parse(text: str, timezone: str = "UTC", min_interval_seconds: int = MIN_15) -> Schedule:
    return parse_schedule(text, timezone=timezone, min_interval_seconds=min_interval_seconds)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def runs(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """`count` consecutive runs after `after`, chained through next_run."""
    result = []
    for _ in range(count):
        after = schedule.next_run(after)
        result.append(after)
    return result


def fires(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """`count` consecutive fire times as APScheduler computes them (previous fire time fed back)."""
    trigger = schedule.trigger()
    fire = trigger.get_next_fire_time(None, after + timedelta(microseconds=1))
    result = []
    for _ in range(count):
        result.append(fire.astimezone(UTC))
        fire = trigger.get_next_fire_time(fire, fire)
    return result


# Every form: text, timezone, canonical text, description, and the first two runs after Sat 2026-11-21 10:00 UTC.
SATURDAY = utc(2026, 11, 21, 10, 0)
FORMS = [
    ("hourly", "UTC", "hourly in UTC", "every hour", [utc(2026, 11, 21, 11), utc(2026, 11, 21, 12)]),
    ("Every Hour", "UTC", "hourly in UTC", "every hour", [utc(2026, 11, 21, 11), utc(2026, 11, 21, 12)]),
    ("every 6 hours", "UTC", "every 6 hours in UTC", "every 6 hours", [utc(2026, 11, 21, 12), utc(2026, 11, 21, 18)]),
    ("every 2h", "UTC", "every 2 hours in UTC", "every 2 hours", [utc(2026, 11, 21, 12), utc(2026, 11, 21, 14)]),
    (
        "every 30m",
        "UTC",
        "every 30 minutes in UTC",
        "every 30 minutes",
        [utc(2026, 11, 21, 10, 30), utc(2026, 11, 21, 11)],
    ),
    (
        "every  15   minutes",
        "UTC",
        "every 15 minutes in UTC",
        "every 15 minutes",
        [utc(2026, 11, 21, 10, 15), utc(2026, 11, 21, 10, 30)],
    ),
    (
        "every 120 minutes",
        "UTC",
        "every 2 hours in UTC",
        "every 2 hours",
        [utc(2026, 11, 21, 12), utc(2026, 11, 21, 14)],
    ),
    (
        "daily",
        "UTC",
        "daily at 09:00 in UTC",
        "every day at 09:00 (UTC)",
        [utc(2026, 11, 22, 9), utc(2026, 11, 23, 9)],
    ),
    (
        "DAILY AT 8:30",
        "Asia/Shanghai",
        "daily at 08:30 in Asia/Shanghai",
        "every day at 08:30 (Asia/Shanghai)",
        [utc(2026, 11, 22, 0, 30), utc(2026, 11, 23, 0, 30)],
    ),
    (
        "every day at 8pm",
        "UTC",
        "daily at 20:00 in UTC",
        "every day at 20:00 (UTC)",
        [utc(2026, 11, 21, 20), utc(2026, 11, 22, 20)],
    ),
    (
        "daily at 8:30 pm",
        "UTC",
        "daily at 20:30 in UTC",
        "every day at 20:30 (UTC)",
        [utc(2026, 11, 21, 20, 30), utc(2026, 11, 22, 20, 30)],
    ),
    (
        "daily at 12am",
        "UTC",
        "daily at 00:00 in UTC",
        "every day at 00:00 (UTC)",
        [utc(2026, 11, 22), utc(2026, 11, 23)],
    ),
    (
        "at 20:30",
        "UTC",
        "daily at 20:30 in UTC",
        "every day at 20:30 (UTC)",
        [utc(2026, 11, 21, 20, 30), utc(2026, 11, 22, 20, 30)],
    ),
    (
        "weekdays at 09:00",
        "Europe/Berlin",
        "weekdays at 09:00 in Europe/Berlin",
        "weekdays at 09:00 (Europe/Berlin)",
        [utc(2026, 11, 23, 8), utc(2026, 11, 24, 8)],
    ),
    (
        "weekly",
        "UTC",
        "weekly on monday at 09:00 in UTC",
        "every Monday at 09:00 (UTC)",
        [utc(2026, 11, 23, 9), utc(2026, 11, 30, 9)],
    ),
    (
        "weekly on fri at 17:00",
        "UTC",
        "weekly on friday at 17:00 in UTC",
        "every Friday at 17:00 (UTC)",
        [utc(2026, 11, 27, 17), utc(2026, 12, 4, 17)],
    ),
    (
        "weekly at 7am on Sunday",
        "UTC",
        "weekly on sunday at 07:00 in UTC",
        "every Sunday at 07:00 (UTC)",
        [utc(2026, 11, 22, 7), utc(2026, 11, 29, 7)],
    ),
    (
        "every tuesday at 10:15",
        "UTC",
        "weekly on tuesday at 10:15 in UTC",
        "every Tuesday at 10:15 (UTC)",
        [utc(2026, 11, 24, 10, 15), utc(2026, 12, 1, 10, 15)],
    ),
    (
        "every 3 days at 06:00",
        "UTC",
        "every 3 days at 06:00 in UTC",
        "every 3 days at 06:00 (UTC)",
        # 2026-11-22 is 20775 days after the anchor Monday 1970-01-05, a multiple of 3
        [utc(2026, 11, 22, 6), utc(2026, 11, 25, 6)],
    ),
    (
        'cron "0 */4 * * *"',
        "UTC",
        'cron "0 */4 * * *" in UTC',
        "cron 0 */4 * * * (UTC)",
        [utc(2026, 11, 21, 12), utc(2026, 11, 21, 16)],
    ),
    (
        "cron “30 9 * * 1-5”",  # quotes as phones type them
        "America/New_York",
        'cron "30 9 * * 1-5" in America/New_York',
        "cron 30 9 * * 1-5 (America/New_York)",
        [utc(2026, 11, 23, 14, 30), utc(2026, 11, 24, 14, 30)],
    ),
    (
        "daily at 07:00 in asia/tokyo",
        "UTC",
        "daily at 07:00 in Asia/Tokyo",
        "every day at 07:00 (Asia/Tokyo)",
        [utc(2026, 11, 21, 22), utc(2026, 11, 22, 22)],
    ),
    (
        "every day at 08:30 (Asia/Shanghai)",
        "UTC",
        "daily at 08:30 in Asia/Shanghai",
        "every day at 08:30 (Asia/Shanghai)",
        [utc(2026, 11, 22, 0, 30), utc(2026, 11, 23, 0, 30)],
    ),
]


@pytest.mark.parametrize(("text", "timezone", "canonical", "words", "expected_runs"), FORMS)
def test_every_form_parses_renders_and_runs(
    text: str, timezone: str, canonical: str, words: str, expected_runs: list[datetime]
) -> None:
    schedule = parse(text, timezone)
    assert schedule.to_text() == canonical
    assert schedule.describe() == words
    assert runs(schedule, SATURDAY, 2) == expected_runs
    assert fires(schedule, SATURDAY, 2) == expected_runs


@pytest.mark.parametrize(("text", "timezone"), [(form[0], form[1]) for form in FORMS])
def test_every_form_round_trips_through_its_canonical_text(text: str, timezone: str) -> None:
    schedule = parse(text, timezone)
    # the canonical text carries its timezone, so the zone passed when re-reading it does not matter
    assert parse(schedule.to_text(), "Pacific/Auckland") == schedule


def test_the_parsed_fields_are_what_the_phrase_said() -> None:
    assert parse("weekly on wed at 7:05pm", "Europe/Berlin") == Schedule(
        kind=ScheduleKind.WEEKLY, timezone="Europe/Berlin", weekday=2, at=time(19, 5)
    )
    assert parse("every 90 minutes") == Schedule(kind=ScheduleKind.INTERVAL, timezone="UTC", every_minutes=90)
    assert parse("every 2 days") == Schedule(kind=ScheduleKind.EVERY_DAYS, timezone="UTC", every_days=2, at=time(9))
    assert parse("every 1 day") == parse("daily")


def test_no_schedule_means_daily_at_nine_in_the_chat_timezone() -> None:
    assert parse("", "Europe/Berlin") == parse(DEFAULT_SCHEDULE_TEXT, "Europe/Berlin")
    assert parse("   ", "Europe/Berlin").describe() == "every day at 09:00 (Europe/Berlin)"


def test_triggers_are_apscheduler_triggers_of_the_expected_type() -> None:
    assert isinstance(parse("every 30 minutes").trigger(), CronTrigger)  # divides the hour: follows the clock
    assert isinstance(parse("every 6 hours").trigger(), CronTrigger)  # divides the day: follows the clock
    assert isinstance(parse("every 90 minutes").trigger(), IntervalTrigger)
    # fixed times of day are wrapped so a DST fall-back does not run them twice
    assert not isinstance(parse('cron "0 9 * * *"').trigger(), CronTrigger)
    assert not isinstance(parse("daily").trigger(), CronTrigger)
    assert isinstance(parse('cron "*/20 * * * *"').trigger(), CronTrigger)


def test_interval_phase_is_fixed_by_the_anchor_not_by_when_it_is_asked() -> None:
    schedule = parse("every 90 minutes")
    first = schedule.next_run(utc(2026, 11, 21, 10, 7))
    later = schedule.next_run(utc(2026, 11, 21, 10, 29))
    assert first == later
    assert (first - ANCHOR_INSTANT).total_seconds() % 5400 == 0
    assert runs(schedule, first, 3) == [first + timedelta(minutes=90 * n) for n in (1, 2, 3)]


def test_hour_intervals_follow_the_local_clock() -> None:
    # Asia/Kolkata is UTC+05:30: every 6 hours means 00:00, 06:00, 12:00, 18:00 there
    schedule = parse("every 6 hours", "Asia/Kolkata")
    assert runs(schedule, utc(2026, 11, 21, 0, 0), 2) == [utc(2026, 11, 21, 0, 30), utc(2026, 11, 21, 6, 30)]


def test_next_run_is_strictly_after_and_needs_an_aware_time() -> None:
    schedule = parse("daily at 09:00")
    assert schedule.next_run(utc(2026, 11, 21, 9)) == utc(2026, 11, 22, 9)
    assert schedule.next_run(utc(2026, 11, 21, 8, 59, 59, 999999)) == utc(2026, 11, 21, 9)
    with pytest.raises(ValueError, match="timezone-aware"):
        schedule.next_run(datetime(2026, 11, 21, 9))
    shanghai = datetime(2026, 11, 21, 8, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert parse("daily at 08:30", "Asia/Shanghai").next_run(shanghai) == utc(2026, 11, 21, 0, 30)


def test_min_gap_seconds() -> None:
    assert parse("every 20 minutes").min_gap_seconds() == 1200
    assert parse("hourly").min_gap_seconds() == 3600
    assert parse("every 2 days").min_gap_seconds() == 2 * 86400
    assert parse("weekdays").min_gap_seconds() == 86400
    assert parse("weekly").min_gap_seconds() == 7 * 86400
    assert parse('cron "0 9,17 * * *"').min_gap_seconds() == 8 * 3600
    assert parse('cron "0 9 * * 1"').min_gap_seconds() == 7 * 86400


# --- timezones and DST ------------------------------------------------------------------------------


def test_shanghai_morning_is_the_previous_evening_in_utc() -> None:
    assert parse("daily at 08:30", "Asia/Shanghai").next_run(utc(2026, 6, 1, 12)) == utc(2026, 6, 2, 0, 30)


def test_berlin_daily_nine_across_both_dst_changes() -> None:
    schedule = parse("daily at 09:00", "Europe/Berlin")
    # clocks go forward on Sunday 2026-03-29: 09:00 CET is 08:00 UTC, 09:00 CEST is 07:00 UTC
    march = [utc(2026, 3, 28, 8), utc(2026, 3, 29, 7), utc(2026, 3, 30, 7)]
    assert runs(schedule, utc(2026, 3, 27, 12), 3) == march
    assert fires(schedule, utc(2026, 3, 27, 12), 3) == march
    # clocks go back on Sunday 2026-10-25
    october = [utc(2026, 10, 24, 7), utc(2026, 10, 25, 8), utc(2026, 10, 26, 8)]
    assert runs(schedule, utc(2026, 10, 23, 12), 3) == october
    assert fires(schedule, utc(2026, 10, 23, 12), 3) == october


# "every 11 days" counted from the anchor Monday 1970-01-05 lands on 2026-03-29
@pytest.mark.parametrize("text", ["daily at 02:30", "every 11 days at 02:30", "weekly on sunday at 02:30"])
def test_a_time_skipped_by_spring_forward_runs_once_right_after_the_gap(text: str) -> None:
    # 02:30 does not exist in Berlin on 2026-03-29; the run happens at 03:30 CEST (01:30 UTC), once
    schedule = parse(text, "Europe/Berlin")
    assert schedule.next_run(utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 1, 30)
    assert fires(schedule, utc(2026, 3, 28, 12), 1) == [utc(2026, 3, 29, 1, 30)]


@pytest.mark.parametrize(
    ("text", "change_day"),
    [
        ("daily at 02:30", 25),
        ('cron "30 2 * * *"', 25),
        ("weekly on sunday at 02:30", 25),
        ("every 2 days at 02:30", 31),  # lands on Sunday 2027-10-31, that year's change
    ],
)
def test_a_time_repeated_by_fall_back_runs_once_at_its_first_occurrence(text: str, change_day: int) -> None:
    # 02:30 happens twice in Berlin on the change day (00:30 UTC in CEST, 01:30 UTC in CET);
    # APScheduler's bare CronTrigger would fire at both
    year = 2026 if change_day == 25 else 2027
    schedule = parse(text, "Europe/Berlin")
    first = schedule.next_run(utc(year, 10, change_day - 1, 12))
    assert first == utc(year, 10, change_day, 0, 30)
    assert schedule.next_run(first) > first + timedelta(hours=12)
    assert fires(schedule, utc(year, 10, change_day - 1, 12), 2)[1] > first + timedelta(hours=12)


def test_every_n_days_keeps_the_local_time_across_dst() -> None:
    schedule = parse("every 2 days at 09:00", "Europe/Berlin")
    local_hours = [run.astimezone(ZoneInfo("Europe/Berlin")).hour for run in runs(schedule, utc(2026, 3, 20), 6)]
    assert local_hours == [9] * 6
    assert {run.hour for run in runs(schedule, utc(2026, 3, 20), 6)} == {7, 8}


def test_weekly_on_monday_and_weekdays_skip_the_weekend() -> None:
    monday = parse("weekly on monday at 09:00", "Europe/Berlin")
    assert [run.weekday() for run in runs(monday, SATURDAY, 4)] == [0, 0, 0, 0]
    weekdays = parse("weekdays at 09:00", "Europe/Berlin")
    friday_noon = utc(2026, 11, 27, 11)
    assert runs(weekdays, friday_noon, 2) == [utc(2026, 11, 30, 8), utc(2026, 12, 1, 8)]
    assert {run.weekday() for run in runs(weekdays, SATURDAY, 15)} == {0, 1, 2, 3, 4}


def test_cron_uses_the_timezone_and_standard_weekday_numbers() -> None:
    # standard crontab: 1-5 is Monday to Friday, 0 and 7 are Sunday (APScheduler 3 alone reads 0 as Monday)
    weekdays = parse('cron "0 9 * * 1-5"', "America/New_York")
    assert {run.weekday() for run in runs(weekdays, SATURDAY, 10)} == {0, 1, 2, 3, 4}
    assert runs(weekdays, SATURDAY, 1) == [utc(2026, 11, 23, 14)]
    for sunday in ("0", "7", "sun"):
        assert parse(f'cron "0 9 * * {sunday}"').next_run(SATURDAY) == utc(2026, 11, 22, 9)


def test_cron_with_both_day_fields_runs_when_either_matches() -> None:
    # the 13th of any month, and every Friday (Vixie cron semantics)
    runs_after = runs(parse('cron "0 9 13 * 5"'), utc(2026, 11, 1), 4)
    assert runs_after == [utc(2026, 11, 6, 9), utc(2026, 11, 13, 9), utc(2026, 11, 20, 9), utc(2026, 11, 27, 9)]
    assert parse('cron "0 9 1 * *"').next_run(utc(2026, 11, 2)) == utc(2026, 12, 1, 9)


# --- refusals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("daily at 25:00", ['"25:00" is not a time of day', "08:30"]),
        ("daily at 8:61", ['"8:61" is not a time of day']),
        ("daily at 13pm", ['"13pm" is not a time of day']),
        ("at", ['after "at"']),
        # a bare time is not a schedule, so "/track GPT 5" keeps its topic
        ("5", ["don't understand"]),
        ("8:30", ["don't understand"]),
        ("noon", ["don't understand"]),
        ("every 0 hours", ["at least 1", '"every 6 hours"']),
        ("every 400 days", ["too long", "366 days"]),
        ("every 99999999999999 minutes", ["too long"]),
        ("every fortnight", ['"fortnight" is not a unit', "every 6 hours"]),
        ("every", ['After "every"']),
        ("weekly on Funday", ['"funday" is not a day of the week', "monday"]),
        ("weekly on", ['"on" is not a day of the week']),
        ("weekly on monday on friday", ["one day"]),
        ("daily at 8 at 9", ["one time of day"]),
        ("daily on monday", ["Only weekly schedules take a day"]),
        ("every 6 hours at 09:00", ["takes no time", "daily at 08:30"]),
        ("sometimes", ["don't understand", '"sometimes"', "daily at 08:30", "every 6 hours"]),
        ("daily at 9 in Mars/Olympus", ['"mars/olympus" is not a timezone', "Europe/Berlin"]),
        ("cron", ['cron "0 9 * * 1-5"']),
        ('cron "0 9 * *"', ["5 fields", "not 4"]),
        ('cron "61 * * * *"', ["minute field", '"61"', "0 to 59"]),
        ('cron "0 24 * * *"', ["hour field", '"24"']),
        ('cron "0 9 * * 8"', ["day-of-week field", '"8"']),
        ('cron "0 9 * foo *"', ["month field", '"foo"']),
        ('cron "0 9 * * 5-1"', ["runs backwards"]),
        ('cron "*/0 * * * *"', ["step must be at least 1"]),
        ('cron "0 9 ? * *"', ['"?" is not understood']),
        ('cron "0 0 30 2 *"', ["never runs"]),
        ("x" * 300, ["too long"]),
    ],
)
def test_bad_forms_are_refused_with_a_reason(text: str, fragments: list[str]) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse(text)
    message = str(refused.value)
    for fragment in fragments:
        assert fragment in message
    assert len(message) < 240 and "\n" not in message


def test_unknown_chat_timezone_is_refused() -> None:
    with pytest.raises(ScheduleError, match="not a timezone"):
        parse("daily", "Europe/Atlantis")
    assert parse("daily", "europe/berlin").timezone == "Europe/Berlin"


@pytest.mark.parametrize(
    ("text", "minimum", "words", "example"),
    [
        ("every 5 minutes", 900, "15 minutes", '"every 15 minutes"'),
        ("every 14 minutes", 900, "15 minutes", '"every 15 minutes"'),
        ('cron "*/5 * * * *"', 900, "15 minutes", '"every 15 minutes"'),
        # only two runs a day, but ten minutes apart
        ('cron "0,10 9 * * *"', 900, "15 minutes", '"every 15 minutes"'),
        # one hour apart only from the 28th of February to the 1st of March
        ('cron "0 0,23 28,1 * *"', 7200, "2 hours", '"every 2 hours"'),
        ("hourly", 5400, "1 hour and 30 minutes", '"every 2 hours"'),
        ("weekdays", 2 * 86400, "2 days", '"weekly on monday at 09:00"'),
    ],
)
def test_too_frequent_schedules_are_refused_with_the_minimum_in_words(
    text: str, minimum: int, words: str, example: str
) -> None:
    with pytest.raises(ScheduleError) as refused:
        parse(text, min_interval_seconds=minimum)
    assert f"at most once every {words}" in str(refused.value)
    assert example in str(refused.value)
    suggested = example.strip('"')
    assert parse(suggested, min_interval_seconds=minimum).min_gap_seconds() >= minimum


def test_exactly_the_minimum_is_allowed() -> None:
    assert parse("every 15 minutes", min_interval_seconds=900).min_gap_seconds() == 900


def test_seconds_in_words() -> None:
    assert seconds_in_words(900) == "15 minutes"
    assert seconds_in_words(3600) == "1 hour"
    assert seconds_in_words(86400 + 7200 + 60) == "1 day, 2 hours and 1 minute"
    assert seconds_in_words(45) == "45 seconds"


def test_a_schedule_with_inconsistent_fields_cannot_be_built() -> None:
    with pytest.raises(ValidationError):
        Schedule(kind=ScheduleKind.DAILY, timezone="UTC")
    with pytest.raises(ValidationError):
        Schedule(kind=ScheduleKind.INTERVAL, timezone="UTC", every_minutes=60, at=time(9))
    with pytest.raises(ValidationError):
        Schedule(kind=ScheduleKind.DAILY, timezone="europe/berlin", at=time(9))
    with pytest.raises(ValidationError):
        Schedule(kind=ScheduleKind.CRON, timezone="UTC", cron="not a cron")


# --- APScheduler accepts the triggers ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["every 3 days at 09:00", "weekdays at 09:00", 'cron "0 9 13 * 5"', "every 90 minutes"]
)
async def test_apscheduler_schedules_jobs_at_next_run(text: str) -> None:
    schedule = parse(text, "Europe/Berlin")
    scheduler = AsyncIOScheduler(timezone="UTC")
    scheduler.start(paused=True)
    try:
        before = datetime.now(UTC)
        job = scheduler.add_job(lambda: None, trigger=schedule.trigger())
        assert job.next_run_time.astimezone(UTC) == schedule.next_run(before)
    finally:
        scheduler.shutdown(wait=False)


def test_jitter_delays_within_the_bound() -> None:
    for text in ("daily at 09:00", "every 3 days", 'cron "0 9 * * *"', 'cron "*/30 * * * *"', "every 90 minutes"):
        schedule = parse(text)
        expected = schedule.next_run(SATURDAY)
        fire = schedule.trigger(jitter_seconds=30).get_next_fire_time(None, SATURDAY + timedelta(microseconds=1))
        fire = fire.astimezone(UTC)
        assert expected <= fire <= expected + timedelta(seconds=30)


# --- properties -------------------------------------------------------------------------------------

ZONES = st.sampled_from(
    ["UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]
)
TIMES = st.builds(time, st.integers(0, 23), st.integers(0, 59))
CRONS = st.builds(
    " ".join,
    st.tuples(
        st.sampled_from(["0", "*/15", "5,35", "10-40/10", "*"]),
        st.sampled_from(["*", "9", "*/4", "8-18", "1,13", "2/3"]),
        st.sampled_from(["*", "1", "1,15", "*/2", "28", "10-20"]),
        st.sampled_from(["*", "1-6", "jan", "mar-may", "*/3"]),
        st.sampled_from(["*", "1-5", "0", "sun", "mon-fri", "7", "*/2", "6,0"]),
    ),
)
SCHEDULES = st.one_of(
    st.builds(Schedule, kind=st.just(ScheduleKind.INTERVAL), timezone=ZONES, every_minutes=st.integers(1, 366 * 1440)),
    st.builds(
        Schedule, kind=st.just(ScheduleKind.EVERY_DAYS), timezone=ZONES, every_days=st.integers(2, 366), at=TIMES
    ),
    st.builds(Schedule, kind=st.sampled_from([ScheduleKind.DAILY, ScheduleKind.WEEKDAYS]), timezone=ZONES, at=TIMES),
    st.builds(Schedule, kind=st.just(ScheduleKind.WEEKLY), timezone=ZONES, at=TIMES, weekday=st.integers(0, 6)),
    st.builds(Schedule, kind=st.just(ScheduleKind.CRON), timezone=ZONES, cron=CRONS),
)


@given(SCHEDULES)
@settings(max_examples=150, deadline=None)
def test_any_schedule_round_trips_through_its_text(schedule: Schedule) -> None:
    assert parse_schedule(schedule.to_text(), timezone="UTC", min_interval_seconds=0) == schedule


@given(SCHEDULES, st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)))
@settings(max_examples=100, deadline=None)
def test_next_run_is_after_and_matches_the_trigger(schedule: Schedule, after: datetime) -> None:
    run = schedule.next_run(after)
    assert run > after and run.tzinfo is UTC
    assert fires(schedule, after, 1) == [run]


WORDS = st.sampled_from(
    ["every", "daily", "weekly", "weekdays", "hourly", "at", "on", "in", "cron", "monday", "mon", "8am", "8:30pm",
     "25:00", "0", "6", "hours", "h", "m", "days", '"', "(utc)", "europe/berlin", "*", "*/5", "1-5", "am", "pm",
     "noon", "9", "-1", "7", "sun-sat", "/", ",", "", " ", "“"]
)  # fmt: skip


@given(st.one_of(st.text(max_size=80), st.lists(WORDS, max_size=9).map(" ".join)))
@settings(max_examples=400, deadline=None)
def test_arbitrary_text_only_ever_raises_schedule_error(text: str) -> None:
    try:
        schedule = parse(text)
    except ScheduleError as refused:
        assert str(refused)
    else:
        assert parse(schedule.to_text()) == schedule
