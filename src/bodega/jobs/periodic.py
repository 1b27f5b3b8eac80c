"""Periodic jobs: when a schedule fires, and what a run that finds the last one going does.

A periodic job is a template: its home launches a run of it (a job of its own, named
``<name>-<UTC time of the fire>``) each time its cron expression fires in its time zone.
Pure: the home's upkeep feeds it the scheduler's clock and the last run's state.

**Daylight-saving changes** are read as Debian's cron reads them (``cronsim`` computes the
instants): a time that does not exist that night (02:30 when clocks jump from 02:00 to
03:00) fires once, at the jump; a time that happens twice (02:30 when clocks fall back from
03:00 to 02:00) fires once, the first time; expressions with a wildcard hour fire by the
clock the zone shows, so an hourly job runs every real hour on both nights. Neither night
skips a run nor doubles one (Nomad #5410).

**Missed fires** (the home was down, or its clock jumped) are not run one by one: the
latest missed one is launched, the rest are counted as skipped, as cron does for a machine
that was off.

**Overlap**: a fire that finds the last run unfinished ``skip``s (counted), ``queue``s (run
when the last one ends; at most ``MAX_PENDING`` waiting, the rest skipped) or ``cancel``s
the last run and starts the new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_PENDING = 10  # queued fires waiting for the last run to end; past it they are skipped
NAME_ROOM = 15  # "-" and the UTC minute it fired for (YYYYmmddTHHMMZ): what a run adds


class Overlap(StrEnum):
    SKIP = "skip"
    QUEUE = "queue"
    CANCEL = "cancel"


class Schedule(BaseModel):
    """When a job fires: a five-field cron expression (or ``@hourly``, ``@daily``...) read in
    ``time_zone`` (an IANA name), and what a fire does when the last run still goes. A
    submit's ``periodic``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str = Field(min_length=1, max_length=200)
    time_zone: str = "UTC"
    overlap: Literal["skip", "queue", "cancel"] = "skip"

    @field_validator("cron")
    @classmethod
    def _cron(cls, cron: str) -> str:
        return check_cron(cron)

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, name: str) -> str:
        zone(name)
        return name


class Periodic(Schedule):
    """A job's schedule as its home keeps it, with each run's deadline."""

    run_seconds: float | None = Field(default=None, gt=0)  # each run's deadline, from launch


# The nicknames cron takes for the usual schedules.
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
             "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
             "@hourly": "0 * * * *"}


def expression(cron: str) -> str:
    """Five fields, a nickname spelled out."""
    return NICKNAMES.get(cron.strip().lower(), cron)


def check_cron(cron: str) -> str:
    try:
        CronSim(expression(cron), datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(f"cron {cron!r}: {exc} (five fields: minute hour day-of-month "
                         "month day-of-week, or @hourly, @daily, @weekly...)") from None
    return cron


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"time zone {name!r} is not known: use an IANA name such as "
                         "Europe/Paris, America/New_York or UTC") from None


def next_fire(schedule: Periodic, after: float) -> float:
    """The first instant strictly after ``after`` (epoch seconds) at which ``schedule``
    fires."""
    tz = zone(schedule.time_zone)
    start = datetime.fromtimestamp(after, UTC).astimezone(tz)
    for fire in CronSim(expression(schedule.cron), start):
        if fire.timestamp() > after:
            return fire.timestamp()
    raise ValueError(f"cron {schedule.cron!r} never fires")  # pragma: no cover: cronsim raises


def run_name(job: str, fire: float) -> str:
    """A run's name: its job's and the UTC minute it fired for (one run per fire, so a
    launch tried twice is found, not made twice)."""
    return f"{job}-{datetime.fromtimestamp(fire, UTC):%Y%m%dT%H%MZ}"


@dataclass(frozen=True)
class Due:
    """What the schedule asks at ``now``: ``fire`` to run (None: nothing yet), ``missed``
    fires passed over for it, and the ``next_at`` to wait for after."""

    fire: float | None
    missed: int
    next_at: float


MISSED_COUNTED = 1000  # missed fires counted one by one at most; a clock years off stops here


def due(schedule: Periodic, next_at: float, now: float) -> Due:
    """Fires at or before ``now`` starting from ``next_at``: the latest is launched, the
    earlier ones are missed."""
    if now < next_at:
        return Due(None, 0, next_at)
    fire, missed = next_at, 0
    following = next_fire(schedule, fire)
    while following <= now and missed < MISSED_COUNTED:
        fire, missed = following, missed + 1
        following = next_fire(schedule, fire)
    if following <= now:  # far behind: jump to now rather than walk every fire
        fire, following = now, next_fire(schedule, now)
    return Due(fire, missed, following)


class Action(StrEnum):
    LAUNCH = "launch"  # start a run now
    SKIP = "skip"  # the last run still goes: count it skipped
    QUEUE = "queue"  # the last run still goes: launch when it ends
    REPLACE = "replace"  # cancel the last run, then launch


def on_fire(overlap: str, last_running: bool, pending: int) -> Action:
    """What a fire does, given whether the last run is unfinished and how many fires wait."""
    if not last_running:
        return Action.LAUNCH
    if overlap == Overlap.QUEUE:
        return Action.QUEUE if pending < MAX_PENDING else Action.SKIP
    if overlap == Overlap.CANCEL:
        return Action.REPLACE
    return Action.SKIP


def release_pending(pending: int, last_running: bool) -> bool:
    """Whether a queued fire starts now: one waits, and the last run has ended."""
    return pending > 0 and not last_running
