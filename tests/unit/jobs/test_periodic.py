"""When a periodic job fires, across daylight-saving changes, and what a fire does."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bodega.jobs.periodic import (
    MAX_PENDING,
    Action,
    Periodic,
    due,
    next_fire,
    on_fire,
    release_pending,
    run_name,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0,
        second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def fires(schedule: Periodic, start: float, end: float) -> list[float]:
    """Its fires in [start, end)."""
    found, at = [], start - 0.001
    while (at := next_fire(schedule, at)) < end:
        found.append(at)
    return found


# In 2026 Paris's clocks jump 02:00 -> 03:00 on 29 March and fall 03:00 -> 02:00 on 25 October.
PARIS = "Europe/Paris"


def test_a_time_the_spring_night_skips_fires_once_at_the_jump() -> None:
    daily = Periodic(cron="30 2 * * *", time_zone=PARIS)
    assert fires(daily, utc(2026, 3, 28, 12), utc(2026, 3, 30, 12)) == [
        utc(2026, 3, 29, 1, 0),  # 03:00 CEST: 02:30 never happened that night
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST the next day
    ]


def test_a_time_the_autumn_night_repeats_fires_once_the_first_time() -> None:
    daily = Periodic(cron="30 2 * * *", time_zone=PARIS)
    assert fires(daily, utc(2026, 10, 24, 12), utc(2026, 10, 26, 12)) == [
        utc(2026, 10, 25, 0, 30),  # 02:30 CEST; not again at 02:30 CET an hour later
        utc(2026, 10, 26, 1, 30),
    ]
    # Read again from just after the first 02:30: the second 02:30 is still not a fire.
    assert next_fire(daily, utc(2026, 10, 25, 0, 31)) == utc(2026, 10, 26, 1, 30)


@pytest.mark.parametrize("night", [(2026, 3, 29), (2026, 10, 25)])
def test_an_hourly_job_runs_every_real_hour_on_both_nights(night: tuple[int, int, int]) -> None:
    hourly = Periodic(cron="0 * * * *", time_zone=PARIS)
    start = utc(*night) - 6 * 3600
    found = fires(hourly, start, start + 24 * 3600)
    assert len(found) == 24
    assert all(b - a == 3600 for a, b in pairwise(found))


ZONES = ["Europe/Paris", "America/New_York", "Australia/Sydney", "America/Santiago",
         "Asia/Kolkata", "UTC"]


@settings(max_examples=60, deadline=None)
@given(zone=st.sampled_from(ZONES), hour=st.integers(0, 23), minute=st.sampled_from([0, 30, 59]),
       year=st.sampled_from([2025, 2026]))
def test_a_daily_job_runs_once_on_every_local_day_of_a_year(zone: str, hour: int, minute: int,
                                                            year: int) -> None:
    daily = Periodic(cron=f"{minute} {hour} * * *", time_zone=zone)
    tz = ZoneInfo(zone)
    start = datetime(year, 1, 1, tzinfo=tz).timestamp()
    end = datetime(year + 1, 1, 1, tzinfo=tz).timestamp()
    days = [datetime.fromtimestamp(at, tz).date() for at in fires(daily, start, end)]
    first = date(year, 1, 1)
    assert days == [first + timedelta(days=i) for i in range((date(year + 1, 1, 1) - first).days)]


def test_missed_fires_launch_the_latest_once_and_count_the_rest() -> None:
    every_10 = Periodic(cron="*/10 * * * *")
    assert due(every_10, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 9)).fire is None
    on_time = due(every_10, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 10, 1))
    assert (on_time.fire, on_time.missed, on_time.next_at) == \
        (utc(2026, 1, 1, 0, 10), 0, utc(2026, 1, 1, 0, 20))
    late = due(every_10, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 0, 45))
    assert (late.fire, late.missed, late.next_at) == \
        (utc(2026, 1, 1, 0, 40), 3, utc(2026, 1, 1, 0, 50))


def test_a_clock_years_ahead_jumps_rather_than_walks_every_fire() -> None:
    every_minute = Periodic(cron="* * * * *")
    far = due(every_minute, utc(2026, 1, 1), utc(2030, 1, 1, 0, 0, 30))
    assert far.fire == utc(2030, 1, 1, 0, 0, 30)
    assert far.next_at == utc(2030, 1, 1, 0, 1)


def test_overlap_decides_what_a_fire_does_while_the_last_run_goes() -> None:
    assert on_fire("skip", False, 0) is Action.LAUNCH
    assert on_fire("skip", True, 0) is Action.SKIP
    assert on_fire("queue", True, 0) is Action.QUEUE
    assert on_fire("queue", True, MAX_PENDING) is Action.SKIP
    assert on_fire("cancel", True, 0) is Action.REPLACE
    assert release_pending(1, last_running=False)
    assert not release_pending(1, last_running=True)
    assert not release_pending(0, last_running=False)


def test_a_run_is_named_for_the_utc_minute_it_fired_for() -> None:
    assert run_name("backup", utc(2026, 3, 29, 1, 0)) == "backup-20260329T0100Z"


@pytest.mark.parametrize(("fields", "words"), [
    ({"cron": "61 * * * *"}, "cron '61 * * * *'"),
    ({"cron": "every day"}, "cron 'every day'"),
    ({"cron": "0 3 * * *", "time_zone": "Mars/Olympus"}, "time zone 'Mars/Olympus' is not known"),
    ({"cron": "0 3 * * *", "overlap": "allow"}, "overlap"),
])
def test_a_bad_schedule_is_refused_naming_what(fields: dict[str, str], words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("*", r"\*")):
        Periodic.model_validate(fields)
