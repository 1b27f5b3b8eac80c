"""A one-task job started at its submit in a warm slot of its home (``bodega.jobs.seats``)."""

from __future__ import annotations

from bodega.jobs.periodic import Periodic
from bodega.jobs.seats import Seat, at_submit, free_seat
from bodega.jobs.spec import JobSpec
from bodega.model.machine_config import MachineConfig

NOW = 1_000.0


def spec(**changes: object) -> JobSpec:
    base = JobSpec(app="a", name="j", command=["true"], config=MachineConfig(image="x"))
    return base.model_copy(update=changes)


def seat(key: str = "k", *, up: bool = True, held: int = 0, retiring: bool = False,
         idle_since: float = 0.0) -> Seat:
    return Seat(key=key, up=up, held=held, retiring=retiring, idle_since=idle_since)


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
