"""A one-task job started at its submit in a warm slot of its home (``bodega.jobs.seats``)."""

from __future__ import annotations

from bodega.jobs.periodic import Periodic
from bodega.jobs.seats import Seat, at_submit, free_seat
from bodega.jobs.slots import SHORT
from bodega.jobs.spec import JobSpec
from bodega.model.machine_config import MachineConfig

NOW = 1_000.0


def spec(**changes: object) -> JobSpec:
    base = JobSpec(app="a", name="j", command=["true"], config=MachineConfig(image="x"))
    return base.model_copy(update=changes)


def seat(key: str = "k", *, up: bool = True, held: int = 0, retiring: bool = False,
         idle_since: float = 0.0, began: float = 0.0) -> Seat:
    return Seat(key=key, up=up, held=held, retiring=retiring, idle_since=idle_since,
                began=began)


def test_only_a_one_task_job_of_bodegas_pool_that_waits_for_nothing_starts_at_its_submit() -> None:
    assert at_submit(spec(), NOW)
    assert not at_submit(spec(count=2), NOW)  # its tasks are spread by probes
    assert not at_submit(spec(pool="batch"), NOW)  # external workers claim it
    assert not at_submit(spec(after=("extract",)), NOW)  # it waits
    assert not at_submit(spec(periodic=Periodic(cron="@daily")), NOW)  # a template
    assert not at_submit(spec(deadline_at=NOW), NOW)  # its deadline has passed
    assert at_submit(spec(deadline_at=NOW + 1), NOW)


def test_a_free_seat_is_an_idle_slot_of_the_jobs_shape_that_is_up_and_stays() -> None:
    assert free_seat([], "k") is None
    assert free_seat([seat("other")], "k") is None  # another shape
    assert free_seat([seat(up=False)], "k") is None  # its machine is not up yet
    assert free_seat([seat(held=1)], "k") is None  # it runs a task
    assert free_seat([seat(retiring=True)], "k") is None  # it is being stopped
    assert free_seat([seat("other"), seat(held=1), seat()], "k") == 2


def test_of_the_free_seats_the_one_idle_the_shortest_is_taken() -> None:
    # The others are the first to go when idle past their linger: a trickle keeps few warm.
    seats = [seat(idle_since=5.0), seat(idle_since=9.0), seat(idle_since=7.0)]
    assert free_seat(seats, "k") == 1


def test_with_every_slot_busy_a_job_of_a_short_shape_is_written_behind_the_task_begun_first(
        ) -> None:
    busy = [seat(held=1, began=NOW - 0.2), seat(held=1, began=NOW - 0.3),
            seat(held=1, began=NOW - 0.1)]
    assert free_seat(busy, "k", NOW) is None  # the shape's tasks are not known short
    assert free_seat(busy, "k", NOW, short=True) == 1  # the likeliest to end first
    assert free_seat([*busy, seat()], "k", NOW, short=True) == 3  # an idle one comes first


def test_a_job_is_written_behind_one_task_of_its_shape_begun_under_short_ago_and_no_other(
        ) -> None:
    def behind(*seats: Seat) -> int | None:
        return free_seat(seats, "k", NOW, short=True)

    assert behind(seat(held=1, began=NOW - SHORT)) is None  # running long: it may not end
    assert behind(seat(held=2, began=NOW)) is None  # a run is written behind it already
    assert behind(seat("other", held=1, began=NOW)) is None  # another shape
    assert behind(seat(held=1, began=NOW, retiring=True)) is None  # being stopped
    assert behind(seat(held=1, began=NOW, up=False)) is None  # its lines cannot be written
    assert behind(seat(held=1, began=NOW - SHORT / 2)) == 0
